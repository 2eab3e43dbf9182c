#include "sim/scenario/events.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/fabric/gpu_selection.hpp"

namespace rocesim::scenario {
namespace {

constexpr Param kEventParams[] = {
    {.key = "at",
     .type = ParamType::Time,
     .help = "when it happens, from the start of the run",
     .check = Check::NonNegative},
    {.key = "action",
     .type = ParamType::Choice,
     .help = "down: the links stop (their flows stall until routing moves them); up: they come "
             "back; speed: they run at `speed`; flap: `count` times down then up, every `period`",
     .choices = "down|up|speed|flap"},
    {.key = "link",
     .type = ParamType::Any,
     .help = "the cables between two nodes, both directions (switches, or a NIC and its switch)",
     .choices = "[NODE, NODE], e.g. [leaf0, spine1] or [node3/nic0, leaf0]",
     .optional = true},
    {.key = "switch",
     .type = ParamType::Any,
     .help = "a fabric switch: every cable of it",
     .choices = "switch name, e.g. spine3",
     .optional = true},
    {.key = "speed",
     .type = ParamType::Bandwidth,
     .help = "action speed: the line rate the links run at (at most their nominal rate)",
     .check = Check::Positive,
     .optional = true},
    {.key = "period",
     .type = ParamType::Time,
     .help = "action flap: time from one down to the next",
     .check = Check::Positive,
     .optional = true},
    {.key = "down_for",
     .type = ParamType::Time,
     .help = "action flap: how long each down lasts (default: half the period)",
     .check = Check::Positive,
     .optional = true},
    {.key = "count",
     .type = ParamType::Integer,
     .help = "action flap: how many times the links go down (default 1)",
     .check = Check::Positive,
     .optional = true},
};
const ParamTable kEventTable{
    "events item",
    "A change of the fabric during the run. Give `link` or `switch`. The network model sees it "
    "at `at`; routing after its `reconvergence` delay (see routing).",
    kEventParams};

/// A node of the fabric that a cable may end at: a fabric switch or a NIC.
fabric::NodeId cable_end(const ConfigNode& v, const fabric::Fabric& f) {
  const fabric::NodeId n = v.is_scalar() ? f.find(v.value()) : fabric::kNone;
  const auto end = [](const fabric::Node& x) {
    return fabric::is_network_switch(x) || x.kind == fabric::NodeKind::Nic;
  };
  if (n == fabric::kNone || !end(f.node(n))) {
    throw InputError(v.where(), v.path(),
                     fmt::format("the name of a fabric switch or a NIC, such as '{}'",
                                 fabric::example_node(f, end)),
                     v.is_scalar() ? fmt::format("'{}', which is not one{}", v.value(),
                                                 fabric::did_you_mean(f, v.value(), end))
                                   : v.describe());
  }
  return n;
}

}  // namespace

const ParamTable& event_table() {
  return kEventTable;
}

void read_events(const ParamReader& parent, const ConfigNode& list, engine::Simulation& sim) {
  const fabric::Fabric& f = sim.fabric();
  for (const ConfigNode& item : list.items()) {
    if (!item.is_map()) {
      throw InputError(item.where(), item.path(), "an event mapping with 'at' and 'action'",
                       item.describe());
    }
    const ParamReader r = parent.child(item, kEventTable);
    const std::string action = r.choice("action");
    engine::LinkEvent e;
    e.at = r.time("at");
    e.where = r.where("action");
    e.key = r.path("action");
    std::string target;
    if (r.has("link") == r.has("switch")) {
      r.fail(r.has("link") ? "switch" : "link", "exactly one of 'link' and 'switch'",
             r.has("link") ? "both" : "neither");
    }
    if (r.has("link")) {
      const ConfigNode& l = r.node("link");
      if (!l.is_sequence() || l.items().size() != 2) {
        r.fail("link", "a list of the two nodes at the ends, e.g. [leaf0, spine1]", l.describe());
      }
      const fabric::NodeId a = cable_end(l.items()[0], f);
      const fabric::NodeId b = cable_end(l.items()[1], f);
      for (const fabric::LinkId id : f.out_links(a)) {
        if (f.link(id).dst != b) continue;
        e.links.push_back(id);
        if (f.link(id).reverse != fabric::kNone) e.links.push_back(f.link(id).reverse);
      }
      if (e.links.empty()) {
        r.fail("link", "two nodes joined by a cable",
               fmt::format("{} and {}, which are not", f.node(a).name, f.node(b).name));
      }
      target = fmt::format("{}-{}", f.node(a).name, f.node(b).name);
    } else {
      const fabric::NodeId s = fabric::select_switch(r.node("switch"), f);
      for (const fabric::LinkId id : f.out_links(s)) {
        e.links.push_back(id);
        if (f.link(id).reverse != fabric::kNone) e.links.push_back(f.link(id).reverse);
      }
      target = f.node(s).name;
    }
    std::sort(e.links.begin(), e.links.end());
    e.links.erase(std::unique(e.links.begin(), e.links.end()), e.links.end());

    const bool flap = action == "flap";
    for (const char* key : {"period", "down_for", "count"}) {
      if (!flap && r.has(key)) r.fail(key, "no such key unless action is flap", "the key");
    }
    if (action == "speed") {
      if (!r.has("speed")) r.fail("speed", "the line rate to run at, e.g. 200Gbps", "none");
      const double bps = static_cast<double>(r.bandwidth("speed").bits_per_second());
      double fraction = 0;
      for (const fabric::LinkId id : e.links) {
        const double nominal = static_cast<double>(f.link(id).line_rate.bits_per_second());
        if (bps > nominal * (1 + 1e-12)) {
          r.fail("speed", fmt::format("at most the links' nominal rate ({} Gb/s)", nominal / 1e9),
                 fmt::format("{} Gb/s", bps / 1e9));
        }
        fraction = bps / nominal;
      }
      // Cables between two nodes run at one nominal rate; a switch's may differ: each link
      // keeps its own fraction only when they agree.
      for (const fabric::LinkId id : e.links) {
        const double nominal = static_cast<double>(f.link(id).line_rate.bits_per_second());
        if (std::abs(bps / nominal - fraction) > 1e-9) {
          r.fail("speed", "links of one nominal rate (give the cables one by one)",
                 fmt::format("{} with ports of several rates", target));
        }
      }
      e.action = engine::LinkAction::Speed;
      e.speed = fraction;
      e.what = fmt::format("speed {} {} Gb/s", target, bps / 1e9);
      sim.add_link_event(std::move(e));
      continue;
    }
    if (r.has("speed")) r.fail("speed", "no such key unless action is speed", "the key");
    if (!flap) {
      e.action = action == "down" ? engine::LinkAction::Down : engine::LinkAction::Up;
      e.what = fmt::format("{} {}", action, target);
      sim.add_link_event(std::move(e));
      continue;
    }
    if (!r.has("period")) r.fail("period", "the time from one down to the next, e.g. 1ms", "none");
    const Time period = r.time("period");
    const Time down_for = r.has("down_for") ? r.time("down_for") : Time::ps(period.count_ps() / 2);
    if (down_for >= period) {
      r.fail("down_for", fmt::format("less than the period ({})", format_time(period)),
             format_time(down_for));
    }
    // (No fallback in the table: an event of another action has no count, in the effective
    // scenario too, which must load again.)
    const uint32_t count = r.has("count") ? r.integer_as<uint32_t>("count") : 1;
    if (count > 100000) r.fail("count", "at most 100000 flaps", std::to_string(count));
    for (uint32_t i = 0; i < count; ++i) {
      engine::LinkEvent down = e;
      down.at = e.at + period * static_cast<int64_t>(i);
      down.action = engine::LinkAction::Down;
      down.what = fmt::format("flap {} down {}/{}", target, i + 1, count);
      engine::LinkEvent up = down;
      up.at = down.at + down_for;
      up.action = engine::LinkAction::Up;
      up.what = fmt::format("flap {} up {}/{}", target, i + 1, count);
      sim.add_link_event(std::move(down));
      sim.add_link_event(std::move(up));
    }
  }
}

}  // namespace rocesim::scenario
