// Selecting GPUs in a scenario ("ranks"). A selection is one of
//   all              every GPU of the fabric, in rank order (server-major)
//   "0-127"          a range of ranks, inclusive; "0-127:8" takes every 8th
//   [0, 5, 9]        a list of ranks (whole numbers) or GPU names ("node3/gpu2")
// and gives the GPUs in the order written. Over the fabric, ranks are global GPU indices (GPU g
// of server s is rank s * gpus_per_server + g); over a job (Ranks with job = true), rank r is
// the job's r-th GPU (its placement) and a GPU name must be one of the job's.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/config.hpp"
#include "sim/fabric/fabric.hpp"

namespace rocesim::fabric {

/// A rank space: the GPUs that ranks 0, 1, ... name.
class Ranks {
 public:
  Ranks(const Fabric& f, std::span<const NodeId> gpus, bool job = false);
  /// One rank or GPU name.
  NodeId gpu(const ConfigNode& value) const;
  /// The GPU of a rank written as a plain whole number in range, else kNone (a name, or anything
  /// gpu() would reject): the fast path of readers of many values, which fall back on gpu().
  NodeId rank(std::string_view text) const;
  /// A selection ('all', a range, a list).
  std::vector<NodeId> select(const ConfigNode& selection) const;
  std::span<const NodeId> gpus() const { return gpus_; }

 private:
  const Fabric& f_;
  std::span<const NodeId> gpus_;
  bool job_;
};

/// Over every GPU of the fabric.
std::vector<NodeId> select_gpus(const ConfigNode& selection, const Fabric& f);
/// One GPU by rank or name.
NodeId select_gpu(const ConfigNode& value, const Fabric& f);
/// One switch by name (for path waypoints).
NodeId select_switch(const ConfigNode& value, const Fabric& f);
/// The fabric switch of that name, else kNone.
NodeId find_switch(std::string_view name, const Fabric& f);
/// For an error naming a node that is not one `ok` accepts: the name of the first node it
/// accepts (an example), and " (did you mean 'X'?)" for the one the user most likely meant
/// (one whose name ends with "/given", else the nearest within two edits), or "".
std::string example_node(const Fabric& f, const std::function<bool(const Node&)>& ok);
std::string did_you_mean(const Fabric& f, std::string_view given,
                         const std::function<bool(const Node&)>& ok);

}  // namespace rocesim::fabric
