// The `events:` list of a scenario: links and switches that go down, come back or change speed
// during the run (engine::LinkEvent). Each item is read against the `events item` table, names
// its links by the nodes at their ends, and becomes one or more link events of the simulation
// (a flapping link is a series of downs and ups).
#pragma once

#include "sim/core/params.hpp"
#include "sim/engine/simulation.hpp"

namespace rocesim::scenario {

const ParamTable& event_table();
/// Reads every item of `list` and schedules its link events on `sim`.
void read_events(const ParamReader& parent, const ConfigNode& list, engine::Simulation& sim);

}  // namespace rocesim::scenario
