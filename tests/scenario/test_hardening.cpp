// Malformed input classes (issue "Hardening"): documents that expand without bound through YAML
// aliases, informational sections that are never expanded, and text that is not UTF-8 or holds
// NUL characters. Each is a located InputError, found fast.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "sim/scenario/calibration.hpp"
#include "sim/scenario/yaml_source.hpp"
#include "tests/support/test_support.hpp"

namespace rocesim::scenario {
namespace {

/// "Billion laughs": `levels` anchors, each a list of ten aliases of the one before, under
/// `indent`: 10^levels values once expanded, in a few hundred bytes.
std::string bomb(int levels, const std::string& indent) {
  std::string out = indent + "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int k = 1; k < levels; ++k) {
    std::string items;
    for (int i = 0; i < 10; ++i)
      items += fmt::format("{}*l{}", i == 0 ? "" : ", ", k - 1);
    out += fmt::format("{}l{}: &l{} [{}]\n", indent, k, k, items);
  }
  return out;
}

TEST(Hardening, AnAliasBombIsRefusedWithItsLocation) {
  // 10^9 values: refused once 2,000,000 have been expanded, at the value where the bound is
  // reached, instead of exhausting memory.
  const std::string text = "name: bomb\n" + bomb(9, "");
  const InputError e = test::input_error([&] { load_yaml_text(text, "bomb.yaml"); });
  EXPECT_TRUE(test::contains(e.what(), "at most 2000000 values once its aliases are expanded"))
      << e.what();
  ASSERT_TRUE(e.where().known());
  EXPECT_EQ(*e.where().file, "bomb.yaml");
  EXPECT_GE(e.where().line, 2);
}

TEST(Hardening, ACalibrationFilesFitSectionIsNeverExpanded) {
  // `fit:` is informational (not read): a bomb there costs nothing and the parameters apply.
  const std::string dir = test::temp_dir("hardening-calibration");
  const std::string path = dir + "/calibration.yaml";
  std::ofstream(path) << "format: rocesim-calibration/1\n"
                         "parameters:\n  topology.node.nic_efficiency: 0.9\n"
                         "fit:\n"
                      << bomb(9, "  ");
  const std::vector<ParamOverride> p = read_calibration_file(path);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].path, "topology.node.nic_efficiency");
  EXPECT_EQ(p[0].value.value(), "0.9");
}

TEST(Hardening, TextMustBeUtf8WithoutNul) {
  // A NUL written as an escape, bytes that are not UTF-8 (a lone continuation byte, an overlong
  // form of '/', a surrogate), in a value and in a key: each an error at its line and column.
  for (const std::string& text :
       {std::string("name: \"a\\0b\"\n"), std::string("name: a\x80z\n"),
        std::string("name: a\xC0\xAFz\n"), std::string("name: a\xED\xA0\x80z\n"),
        std::string("n\xFFme: x\n")}) {
    SCOPED_TRACE(text);
    const InputError e = test::input_error([&] { load_yaml_text(text, "names.yaml"); });
    EXPECT_TRUE(test::contains(e.what(), "UTF-8 without NUL characters")) << e.what();
    EXPECT_EQ(e.where().line, 1);
  }
  // A raw NUL byte (not the escape), in a value and in a key: at its own line and column.
  for (const auto& [text, column] : {std::pair{std::string("seed: 1\nname: a\0b\n", 17), 8},
                                     std::pair{std::string("seed: 1\nse\0ed: 2\n", 17), 3}}) {
    const InputError e = test::input_error([&] { load_yaml_text(text, "nul.yaml"); });
    EXPECT_TRUE(test::contains(e.what(), "UTF-8 without NUL characters")) << e.what();
    EXPECT_EQ(e.where().line, 2);
    EXPECT_EQ(e.where().column, column);
  }
  // Well-formed UTF-8 of every length passes.
  EXPECT_EQ(load_yaml_text("name: \"r\xC3\xA9seau \xE2\x86\x92 \xF0\x9F\x9A\x80\"\n", "ok.yaml")
                .find("name")
                ->value(),
            "r\xC3\xA9seau \xE2\x86\x92 \xF0\x9F\x9A\x80");
}

using test::MemoryLimit;

std::string clos(int racks, int nodes_per_rack, const std::string& workload) {
  return test::clos_topology(racks, nodes_per_rack, 8, 16) + "workloads:\n  - " + workload + "\n";
}

TEST(Hardening, AFabricTooLargeForTheMachineIsRefusedWithItsEstimate) {
  // 65,536 racks of 1,024 servers of 8 GPUs: 1.1 billion nodes and 3.2 billion links, about
  // 1.8 TiB at 1 KiB a node and 256 B a link: refused at the topology before anything is
  // allocated, whatever the machine.
  const InputError e = test::input_error(
      [&] { test::scenario_from_yaml(clos(65536, 1024, "{type: permutation, bytes: 1MiB}")); });
  EXPECT_EQ(e.key(), "topology");
  EXPECT_TRUE(test::contains(e.what(), "1140917264 nodes and 3223355392 links, about 1.8 TiB"))
      << e.what();
  // The same fabric at 2 racks of 2 servers fits.
  EXPECT_NO_THROW(test::scenario_from_yaml(clos(2, 2, "{type: permutation, bytes: 1MiB}")));
}

TEST(Hardening, AnAllToAllTooLargeForTheMachineIsRefusedWithItsEstimate) {
  // 64 servers x 8 = 512 ranks: 261,632 connections at about 1 KiB each, 255.5 MiB, against
  // 200 MB available; 128 ranks (16,256 connections, 15.9 MiB) fit.
  const MemoryLimit limit("200000000");
  const InputError e = test::input_error(
      [&] { test::scenario_from_yaml(clos(16, 4, "{type: all_to_all, bytes: 1MiB}")); });
  EXPECT_EQ(e.key(), "workloads[0].ranks");
  EXPECT_TRUE(test::contains(e.what(), "512 ranks: 261632 connections, about 256 MiB")) << e.what();
  EXPECT_NO_THROW(test::scenario_from_yaml(clos(4, 4, "{type: all_to_all, bytes: 1MiB}")));
}

TEST(Hardening, CountsHaveDocumentedUpperBounds) {
  // qps_per_connection of 4,000,000,000 (NCCL's own limit is 128 QPs per connection) and a
  // k of a fat-tree of 2.5e14 hosts are errors at the value, with the bound.
  InputError e = test::input_error([&] {
    test::scenario_from_yaml(
        clos(2, 2, "{type: permutation, bytes: 1MiB, qps_per_connection: 4000000000}"));
  });
  EXPECT_TRUE(test::contains(e.what(), "an integer from 1 to 128")) << e.what();
  e = test::input_error([&] {
    test::scenario_from_yaml(
        "topology: {type: fat_tree, k: 100000}\nworkloads: [{type: permutation, bytes: 1MiB}]\n");
  });
  EXPECT_EQ(e.key(), "topology.k");
  EXPECT_TRUE(test::contains(e.what(), "from 1 to 512")) << e.what();
}

}  // namespace
}  // namespace rocesim::scenario
