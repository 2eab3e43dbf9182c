// Parameter tables: every scenario mistake is an InputError located at the offending YAML text,
// defaults come from the table, and the effective configuration is the written tree plus every
// default (nested sections and list items included).
#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"

#include <string>

#include "sim/core/params.hpp"
#include "sim/scenario/yaml_source.hpp"

namespace rocesim {
namespace {

using test::contains;
using test::input_error;

constexpr Param kInnerParams[] = {
    {.key = "depth",
     .type = ParamType::Integer,
     .fallback = "3",
     .help = "levels",
     .check = Check::NonNegative},
    {.key = "rate",
     .type = ParamType::Bandwidth,
     .fallback = "100Gbps",
     .help = "line rate",
     .check = Check::Positive},
};
const ParamTable kInnerTable{"test.inner", "An optional nested section.", kInnerParams};

constexpr Param kOuterParams[] = {
    {.key = "count", .type = ParamType::Integer, .help = "items", .check = Check::Positive},
    {.key = "offset",
     .type = ParamType::Integer,
     .fallback = "0",
     .help = "first index",
     .check = Check::NonNegative},
    {.key = "ratio",
     .type = ParamType::Number,
     .fallback = "0.5",
     .help = "share",
     .check = Check::Fraction},
    {.key = "enabled", .type = ParamType::Boolean, .fallback = "true", .help = "switch"},
    {.key = "label", .type = ParamType::String, .help = "free text", .optional = true},
    {.key = "mode",
     .type = ParamType::Choice,
     .fallback = "fast",
     .help = "speed",
     .choices = "fast|slow"},
    {.key = "size",
     .type = ParamType::Bytes,
     .fallback = "4MiB",
     .help = "buffer",
     .check = Check::Positive},
    {.key = "delay",
     .type = ParamType::Time,
     .fallback = "1us",
     .help = "wait",
     .check = Check::NonNegative},
    {.key = "speed",
     .type = ParamType::Bandwidth,
     .fallback = "400Gbps",
     .help = "rate",
     .check = Check::Positive},
    {.key = "inner",
     .type = ParamType::Section,
     .fallback = "{}",
     .help = "nested settings",
     .choices = "see test.inner"},
    {.key = "items", .type = ParamType::List, .help = "entries", .optional = true},
};
const ParamTable kOuterTable{"test", "The table under test.", kOuterParams};

ConfigNode yaml(const std::string& text) {
  return scenario::load_yaml_text(text, "params.yaml");
}

// ---- shape: unknown and missing keys ----

TEST(ParamReader, UnknownKeyIsLocatedAndSuggestsTheClosestKey) {
  const ConfigNode root = yaml("count: 4\nofset: 2\n");
  const InputError e = input_error([&] { ParamReader r(root, kOuterTable); });
  // The key itself is on line 2, column 1.
  ASSERT_TRUE(e.where().known());
  EXPECT_EQ(*e.where().file, "params.yaml");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.where().column, 1);
  EXPECT_EQ(e.key(), "ofset");
  const std::string msg = e.what();
  EXPECT_TRUE(contains(msg, "params.yaml:2:1: error:")) << msg;
  EXPECT_TRUE(contains(msg, "unknown key 'ofset'")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean 'offset'?")) << msg;
  // The legal keys are listed.
  EXPECT_TRUE(contains(msg, "count, offset, ratio")) << msg;
}

TEST(ParamReader, UnknownKeyFarFromEveryKeyHasNoSuggestion) {
  const ConfigNode root = yaml("count: 4\nwavelength: 2\n");
  const InputError e = input_error([&] { ParamReader r(root, kOuterTable); });
  EXPECT_TRUE(contains(e.what(), "unknown key 'wavelength'")) << e.what();
  EXPECT_FALSE(contains(e.what(), "did you mean")) << e.what();
}

TEST(ParamReader, UnknownKeyInANestedSectionCarriesItsPathAndPlace) {
  const ConfigNode root = yaml("count: 4\ninner:\n  dpeth: 2\n");
  const ParamReader r(root, kOuterTable);
  const InputError e = input_error([&] { (void)r.section("inner", kInnerTable); });
  EXPECT_EQ(e.key(), "inner.dpeth");
  EXPECT_EQ(e.where().line, 3);
  EXPECT_EQ(e.where().column, 3);
  EXPECT_TRUE(contains(e.what(), "params.yaml:3:3")) << e.what();
  EXPECT_TRUE(contains(e.what(), "did you mean 'depth'?")) << e.what();
}

TEST(ParamReader, MissingRequiredKeyIsReportedAtTheMapping) {
  const ConfigNode root = yaml("offset: 1\n");
  const InputError e = input_error([&] { ParamReader r(root, kOuterTable); });
  EXPECT_EQ(e.key(), "count");
  EXPECT_EQ(e.where().line, 1);
  EXPECT_TRUE(contains(e.what(), "required")) << e.what();
  EXPECT_TRUE(contains(e.what(), "missing")) << e.what();
}

TEST(ParamReader, ANonMappingIsRejected) {
  const ConfigNode root = yaml("- 1\n- 2\n");
  const InputError e = input_error([&] { ParamReader r(root, kOuterTable); });
  EXPECT_TRUE(contains(e.what(), "a mapping with keys count")) << e.what();
  EXPECT_TRUE(contains(e.what(), "a list of 2 items")) << e.what();
}

// ---- types ----

TEST(ParamReader, StringWhereIntegerExpected) {
  const ConfigNode root = yaml("count: four\n");
  const ParamReader r(root, kOuterTable);  // the shape is fine; the value is read lazily
  const InputError e = input_error([&] { (void)r.integer("count"); });
  EXPECT_EQ(e.key(), "count");
  EXPECT_EQ(e.where().line, 1);
  EXPECT_EQ(e.where().column, 8);  // the value, not the key
  EXPECT_TRUE(contains(e.what(), "expected a whole number, found 'four'")) << e.what();
}

TEST(ParamReader, OtherWrongTypes) {
  const ConfigNode root = yaml(
      "count: 2.5\noffset: [1, 2]\nratio: half\nenabled: yes\nmode: medium\nsize: 4096\n"
      "delay: 3\nspeed: 400Gbs\ninner: 5\n");
  const ParamReader r(root, kOuterTable);
  EXPECT_TRUE(contains(input_error([&] { (void)r.integer("count"); }).what(), "whole number"));
  const InputError list = input_error([&] { (void)r.integer("offset"); });
  EXPECT_EQ(list.where().line, 2);
  EXPECT_TRUE(contains(list.what(), "a list of 2 items")) << list.what();
  EXPECT_TRUE(contains(input_error([&] { (void)r.number("ratio"); }).what(), "a number"));
  EXPECT_TRUE(contains(input_error([&] { (void)r.boolean("enabled"); }).what(), "true or false"));
  EXPECT_TRUE(contains(input_error([&] { (void)r.choice("mode"); }).what(),
                       "one of 'fast', 'slow', found 'medium'"));
  // Values with units: the parser's reason is kept and the location added.
  const InputError size = input_error([&] { (void)r.bytes("size"); });
  EXPECT_EQ(size.where().line, 6);
  EXPECT_TRUE(contains(size.what(), "no unit")) << size.what();
  EXPECT_TRUE(contains(input_error([&] { (void)r.time("delay"); }).what(), "no unit"));
  EXPECT_TRUE(
      contains(input_error([&] { (void)r.bandwidth("speed"); }).what(), "unknown unit 'Gbs'"));
  // A section written as a scalar.
  const InputError inner = input_error([&] { (void)r.section("inner", kInnerTable); });
  EXPECT_EQ(inner.key(), "inner");
  EXPECT_TRUE(contains(inner.what(), "a mapping")) << inner.what();
}

TEST(ParamReader, ReadingAKeyWithTheWrongGetterIsAnInternalError) {
  const ConfigNode root = yaml("count: 2\n");
  const ParamReader r(root, kOuterTable);
  EXPECT_THROW((void)r.bytes("count"), InternalError);
  EXPECT_THROW((void)r.integer("not_declared"), InternalError);
}

// ---- range checks ----

TEST(ParamReader, PositiveRejectsZeroAndNegatives) {
  for (const char* v : {"0", "-1"}) {
    const ConfigNode root = yaml(std::string("count: ") + v + "\n");
    const ParamReader r(root, kOuterTable);
    const InputError e = input_error([&] { (void)r.integer("count"); });
    EXPECT_EQ(e.key(), "count");
    EXPECT_TRUE(contains(e.what(), "> 0")) << e.what();
  }
  const ConfigNode one = yaml("count: 1\n");
  EXPECT_EQ(ParamReader(one, kOuterTable).integer("count"), 1);
  // Positive on quantities: a zero-sized buffer, a zero rate.
  const ConfigNode root = yaml("count: 1\nsize: 0B\nspeed: 0Gbps\n");
  const ParamReader q(root, kOuterTable);
  EXPECT_THROW((void)q.bytes("size"), InputError);
  EXPECT_THROW((void)q.bandwidth("speed"), InputError);
}

TEST(ParamReader, NonNegativeAcceptsZeroRejectsNegatives) {
  {
    const ConfigNode root = yaml("count: 1\noffset: 0\ndelay: 0ns\n");
    const ParamReader r(root, kOuterTable);
    EXPECT_EQ(r.integer("offset"), 0);
    EXPECT_EQ(r.time("delay"), Time::zero());
  }
  const ConfigNode root = yaml("count: 1\noffset: -3\ndelay: -1us\n");
  const ParamReader r(root, kOuterTable);
  const InputError e = input_error([&] { (void)r.integer("offset"); });
  EXPECT_EQ(e.where().line, 2);
  EXPECT_TRUE(contains(e.what(), "integer >= 0 (first index), found '-3'")) << e.what();
  EXPECT_THROW((void)r.time("delay"), InputError);
}

TEST(ParamReader, FractionIsZeroExclusiveOneInclusive) {
  for (const char* bad : {"0", "1.5", "-0.1"}) {
    const ConfigNode root = yaml(std::string("count: 1\nratio: ") + bad + "\n");
    EXPECT_THROW((void)ParamReader(root, kOuterTable).number("ratio"), InputError) << bad;
  }
  const ConfigNode root = yaml("count: 1\nratio: 1\n");
  EXPECT_DOUBLE_EQ(ParamReader(root, kOuterTable).number("ratio"), 1.0);
}

// ---- defaults and optional keys ----

TEST(ParamReader, DefaultsAreAppliedForAbsentKeys) {
  const ConfigNode root = yaml("count: 2\n");
  const ParamReader r(root, kOuterTable);
  EXPECT_TRUE(r.has("count"));
  EXPECT_FALSE(r.has("offset"));
  EXPECT_EQ(r.integer("count"), 2);
  EXPECT_EQ(r.integer("offset"), 0);
  EXPECT_DOUBLE_EQ(r.number("ratio"), 0.5);
  EXPECT_TRUE(r.boolean("enabled"));
  EXPECT_EQ(r.choice("mode"), "fast");
  EXPECT_EQ(r.bytes("size").count(), 4 * 1024 * 1024);
  EXPECT_EQ(r.time("delay").count_ps(), 1'000'000);
  EXPECT_EQ(r.bandwidth("speed").bits_per_second(), 400'000'000'000);
  // An absent key is located at its mapping.
  EXPECT_EQ(r.where("offset").line, 1);
  EXPECT_EQ(r.path("offset"), "offset");
  // value() gives the default as a scalar without a file location.
  const ConfigNode v = r.value("mode");
  EXPECT_EQ(v.value(), "fast");
  EXPECT_FALSE(v.where().known());
}

TEST(ParamReader, WrittenValuesOverrideDefaults) {
  const ConfigNode root = yaml(
      "count: 2\noffset: 7\nratio: 0.25\nenabled: false\nmode: slow\nsize: 5MB\ndelay: 600ns\n"
      "speed: 200Gb/s\nlabel: hello\n");
  const ParamReader r(root, kOuterTable);
  EXPECT_EQ(r.integer("offset"), 7);
  EXPECT_DOUBLE_EQ(r.number("ratio"), 0.25);
  EXPECT_FALSE(r.boolean("enabled"));
  EXPECT_EQ(r.choice("mode"), "slow");
  EXPECT_EQ(r.bytes("size").count(), 5'000'000);
  EXPECT_EQ(r.time("delay").count_ps(), 600'000);
  EXPECT_EQ(r.bandwidth("speed").bits_per_second(), 200'000'000'000);
  EXPECT_EQ(r.string("label"), "hello");
  EXPECT_EQ(r.where("offset").line, 2);
}

TEST(ParamReader, AbsentOptionalKeyMustBeCheckedWithHas) {
  const ConfigNode root = yaml("count: 2\n");
  const ParamReader r(root, kOuterTable);
  EXPECT_FALSE(r.has("label"));
  EXPECT_THROW((void)r.string("label"), InternalError);
  EXPECT_THROW((void)r.node("items"), InternalError);
}

TEST(ParamReader, SectionWithEmptyFallbackMayBeAbsent) {
  {
    const ConfigNode root = yaml("count: 2\n");
    const ParamReader r(root, kOuterTable);
    const ParamReader inner = r.section("inner", kInnerTable);
    EXPECT_EQ(inner.integer("depth"), 3);
    EXPECT_EQ(inner.bandwidth("rate").bits_per_second(), 100'000'000'000);
    EXPECT_EQ(inner.self().path(), "inner");
    EXPECT_TRUE(inner.self().entries().empty());
  }
  const ConfigNode root = yaml("count: 2\ninner:\n  depth: 7\n");
  const ParamReader r(root, kOuterTable);
  const ParamReader inner = r.section("inner", kInnerTable);
  EXPECT_EQ(inner.integer("depth"), 7);
  EXPECT_EQ(inner.bandwidth("rate").bits_per_second(), 100'000'000'000);
  EXPECT_EQ(inner.path("depth"), "inner.depth");
  EXPECT_EQ(inner.where("depth").line, 3);
}

TEST(ParamReader, FailLocatesAMultiValueCheck) {
  const ConfigNode root = yaml("count: 3\noffset: 5\n");
  const ParamReader r(root, kOuterTable);
  const InputError e = input_error([&] { r.fail("offset", "an offset below count (3)", "5"); });
  EXPECT_EQ(e.key(), "offset");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_TRUE(contains(e.what(),
                       "params.yaml:2:9: error: 'offset': expected an offset below "
                       "count (3), found 5"))
      << e.what();
}

// ---- effective configuration ----

const ConfigNode& at(const ConfigNode& map, const std::string& key) {
  const ConfigNode* n = map.find(key);
  if (n == nullptr) throw std::runtime_error("no key " + key);
  return *n;
}

TEST(EffectiveConfig, WrittenValuesPlusDefaultsInTableOrder) {
  const ConfigNode root = yaml("count: 2\nmode: slow\ninner:\n  depth: 7\n");
  EffectiveConfig sink;
  const ParamReader r(root, kOuterTable, &sink);
  (void)r.section("inner", kInnerTable);
  const ConfigNode eff = sink.assemble(root);

  ASSERT_TRUE(eff.is_map());
  // Table order; absent optional keys without a default (label, items) do not appear.
  std::vector<std::string> keys;
  for (const ConfigNode::Entry& e : eff.entries())
    keys.push_back(e.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"count", "offset", "ratio", "enabled", "mode", "size",
                                            "delay", "speed", "inner"}));
  EXPECT_EQ(at(eff, "count").value(), "2");
  EXPECT_EQ(at(eff, "count").where().line, 1);  // written values keep their location
  EXPECT_EQ(at(eff, "mode").value(), "slow");
  EXPECT_EQ(at(eff, "offset").value(), "0");
  EXPECT_FALSE(at(eff, "offset").where().known());  // defaults have none
  EXPECT_EQ(at(eff, "size").value(), "4MiB");
  EXPECT_EQ(at(eff, "speed").value(), "400Gbps");
  const ConfigNode& inner = at(eff, "inner");
  ASSERT_TRUE(inner.is_map());
  EXPECT_EQ(at(inner, "depth").value(), "7");
  EXPECT_EQ(at(inner, "rate").value(), "100Gbps");
}

TEST(EffectiveConfig, AbsentSectionIsFilledWithItsDefaults) {
  const ConfigNode root = yaml("count: 2\n");
  EffectiveConfig sink;
  const ParamReader r(root, kOuterTable, &sink);
  (void)r.section("inner", kInnerTable);
  const ConfigNode eff = sink.assemble(root);
  const ConfigNode& inner = at(eff, "inner");
  ASSERT_TRUE(inner.is_map());
  EXPECT_EQ(at(inner, "depth").value(), "3");
  EXPECT_EQ(at(inner, "rate").value(), "100Gbps");
}

TEST(EffectiveConfig, ListItemsReadAsChildrenGetTheirDefaults) {
  const ConfigNode root = yaml("count: 2\nitems:\n  - depth: 1\n  - {}\n");
  EffectiveConfig sink;
  const ParamReader r(root, kOuterTable, &sink);
  for (const ConfigNode& item : r.node("items").items())
    (void)r.child(item, kInnerTable);
  const ConfigNode eff = sink.assemble(root);
  const ConfigNode& items = at(eff, "items");
  ASSERT_TRUE(items.is_sequence());
  ASSERT_EQ(items.items().size(), 2u);
  EXPECT_EQ(at(items.items()[0], "depth").value(), "1");
  EXPECT_EQ(at(items.items()[0], "rate").value(), "100Gbps");
  EXPECT_EQ(at(items.items()[1], "depth").value(), "3");
  EXPECT_EQ(items.items()[1].path(), "items[1]");
}

TEST(EffectiveConfig, UnreadMappingsAreEchoedAsWritten) {
  // Without a reader for `inner`, the effective tree carries it as written (no defaults).
  const ConfigNode root = yaml("count: 2\ninner:\n  depth: 7\n");
  EffectiveConfig sink;
  const ParamReader r(root, kOuterTable, &sink);
  const ConfigNode eff = sink.assemble(root);
  const ConfigNode& inner = at(eff, "inner");
  EXPECT_EQ(at(inner, "depth").value(), "7");
  EXPECT_EQ(inner.find("rate"), nullptr);
}

TEST(TableMarkdown, DescribesEveryKey) {
  const std::string md = table_markdown(kOuterTable);
  EXPECT_TRUE(contains(md, "### test")) << md;
  EXPECT_TRUE(contains(md, "| `count` | integer, > 0 | **required** | items |")) << md;
  EXPECT_TRUE(contains(md, "| `offset` | integer, >= 0 | `0` | first index |")) << md;
  EXPECT_TRUE(contains(md, "one of 'fast', 'slow'")) << md;
  EXPECT_TRUE(contains(md, "| `label` | string | (none) |")) << md;
}

}  // namespace
}  // namespace rocesim
