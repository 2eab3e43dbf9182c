#include "sim/network/registry.hpp"

#include <string>

#include "sim/core/error.hpp"
#include "sim/network/fluid_network.hpp"
#include "sim/network/maxmin_network.hpp"

namespace rocesim::network {

std::span<const NetworkModelType> network_models() {
  static const NetworkModelType models[] = {
      {"maxmin", &maxmin_table(), &make_maxmin},
      {"fluid", &fluid_table(), &make_fluid},
  };
  return models;
}

std::unique_ptr<NetworkModel> make_network(const ParamReader& parent, std::string_view key,
                                           const fabric::Fabric& f, const ModelOptions& options) {
  std::string name{kModelParam.fallback};
  if (parent.has(key)) {
    const ConfigNode& section = parent.node(key);
    if (const ConfigNode* m = section.is_map() ? section.find("model") : nullptr) {
      if (m->is_scalar()) name = m->value();
    }
  }
  for (const NetworkModelType& t : network_models()) {
    if (t.name == name) return t.make(parent.section(key, *t.table), f, options);
  }
  // Not a known model: the model's own reader reports it, located, with the choices.
  (void)parent.section(key, *network_models().front().table).choice("model");
  throw InternalError("an unknown network model was accepted");
}

}  // namespace rocesim::network
