// Network models are chosen by `network.model` from a registry, as topologies are by `type` and
// workloads by theirs. Each model reads the whole `network` section against its own parameter
// table (so `rocesim schema` documents every model's keys); the engine and the collectives only
// ever see the NetworkModel interface.
//   maxmin  fluid flows sharing links max-min fairly; no queues (maxmin_network.hpp)
//   fluid   queues, PFC, ECN and DCQCN, integrated in time steps (fluid_network.hpp)
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "sim/core/params.hpp"
#include "sim/fabric/fabric.hpp"
#include "sim/network/network_model.hpp"

namespace rocesim::network {

/// Settings that come from the command line rather than the scenario.
struct ModelOptions {
  int threads = 1;
};

struct NetworkModelType {
  std::string_view name;
  const ParamTable* table;  // the `network` section when model is this one
  std::unique_ptr<NetworkModel> (*make)(const ParamReader& section, const fabric::Fabric& f,
                                        const ModelOptions& options);
};

/// All models, in documentation order; the first is the default.
std::span<const NetworkModelType> network_models();

/// The `model` key, first in every model's table.
inline constexpr Param kModelParam{.key = "model",
                                   .type = ParamType::Choice,
                                   .fallback = "maxmin",
                                   .help = "rate model (see the tables of each model)",
                                   .choices = "maxmin|fluid"};

/// Builds the model that the section `key` of `parent` selects (its defaults when absent).
std::unique_ptr<NetworkModel> make_network(const ParamReader& parent, std::string_view key,
                                           const fabric::Fabric& f, const ModelOptions& options);

}  // namespace rocesim::network
