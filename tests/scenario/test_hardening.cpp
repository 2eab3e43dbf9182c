// Malformed input classes (issue "Hardening"): documents that expand without bound through YAML
// aliases, informational sections that are never expanded, and text that is not UTF-8 or holds
// NUL characters. Each is a located InputError, found fast.
#include <gtest/gtest.h>

#include <fmt/format.h>

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
  // Well-formed UTF-8 of every length passes.
  EXPECT_EQ(load_yaml_text("name: \"r\xC3\xA9seau \xE2\x86\x92 \xF0\x9F\x9A\x80\"\n", "ok.yaml")
                .find("name")
                ->value(),
            "r\xC3\xA9seau \xE2\x86\x92 \xF0\x9F\x9A\x80");
}

}  // namespace
}  // namespace rocesim::scenario
