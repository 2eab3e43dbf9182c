#include "sim/fabric/gpu_selection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <unordered_map>

#include "sim/core/params.hpp"

namespace rocesim::fabric {
namespace {

bool parse_u64(std::string_view s, uint64_t& out) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

std::string rank_help(size_t n, bool job) {
  const size_t last = n == 0 ? 0 : n - 1;
  return job ? fmt::format("a rank of the job from 0 to {} or the name of one of its GPUs", last)
             : fmt::format("a rank from 0 to {} or a GPU name such as 'node0/gpu0'", last);
}

}  // namespace

Ranks::Ranks(const Fabric& f, std::span<const NodeId> gpus, bool job)
    : f_(f), gpus_(gpus), job_(job) {}

NodeId Ranks::rank(std::string_view text) const {
  uint64_t r = 0;
  return parse_u64(text, r) && r < gpus_.size() ? gpus_[r] : kNone;
}

NodeId Ranks::gpu(const ConfigNode& v) const {
  const size_t n = gpus_.size();
  if (!v.is_scalar()) throw InputError(v.where(), v.path(), rank_help(n, job_), v.describe());
  if (const NodeId g = rank(v.value()); g != kNone) return g;
  if (uint64_t r = 0; parse_u64(v.value(), r)) {  // a rank, out of range
    throw InputError(v.where(), v.path(), rank_help(n, job_),
                     fmt::format("rank {}, but the {} has {} GPUs", r, job_ ? "job" : "fabric", n));
  }
  const NodeId g = f_.find(v.value());
  if (g == kNone || f_.node(g).kind != NodeKind::Gpu) {
    const auto is_gpu = [](const Node& x) { return x.kind == NodeKind::Gpu; };
    throw InputError(v.where(), v.path(), rank_help(n, job_),
                     fmt::format("'{}', which is not a GPU of this fabric{}", v.value(),
                                 did_you_mean(f_, v.value(), is_gpu)));
  }
  if (job_ && std::find(gpus_.begin(), gpus_.end(), g) == gpus_.end()) {
    throw InputError(v.where(), v.path(), rank_help(n, job_),
                     fmt::format("'{}', a GPU the job was not given", v.value()));
  }
  return g;
}

NodeId select_gpu(const ConfigNode& v, const Fabric& f) {
  return Ranks(f, f.gpus()).gpu(v);
}

NodeId find_switch(std::string_view name, const Fabric& f) {
  const NodeId n = f.find(name);
  return n != kNone && is_network_switch(f.node(n)) ? n : kNone;
}

std::string example_node(const Fabric& f, const std::function<bool(const Node&)>& ok) {
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (ok(f.node(n))) return f.node(n).name;
  }
  return {};
}

std::string did_you_mean(const Fabric& f, std::string_view given,
                         const std::function<bool(const Node&)>& ok) {
  const std::string tail = fmt::format("/{}", given);
  NearestName meant(given);
  for (NodeId n = 0; n < f.node_count(); ++n) {
    const Node& x = f.node(n);
    if (!ok(x)) continue;
    if (x.name.ends_with(tail)) return fmt::format(" (did you mean '{}'?)", x.name);
    meant.offer(x.name);
  }
  return meant.best().empty() ? std::string{} : fmt::format(" (did you mean '{}'?)", meant.best());
}

NodeId select_switch(const ConfigNode& v, const Fabric& f) {
  const NodeId n = v.is_scalar() ? find_switch(v.value(), f) : kNone;
  if (n == kNone) {
    const auto is_switch = [](const Node& x) { return is_network_switch(x); };
    throw InputError(
        v.where(), v.path(),
        fmt::format("the name of a fabric switch, such as '{}'", example_node(f, is_switch)),
        v.is_scalar() ? fmt::format("'{}', which is not a fabric switch{}", v.value(),
                                    did_you_mean(f, v.value(), is_switch))
                      : v.describe());
  }
  return n;
}

std::vector<NodeId> Ranks::select(const ConfigNode& sel) const {
  std::vector<NodeId> out;
  if (sel.is_sequence()) {
    out.reserve(sel.items().size());
    std::unordered_map<NodeId, size_t> first_item;  // GPU -> where the list names it first
    for (size_t i = 0; i < sel.items().size(); ++i) {
      const ConfigNode& item = sel.items()[i];
      const NodeId g = gpu(item);
      const auto [it, fresh] = first_item.emplace(g, i);
      if (!fresh) {
        throw InputError(
            item.where(), item.path(), "each GPU at most once",
            fmt::format("{}, which is already item {} of the list", item.describe(), it->second));
      }
      out.push_back(g);
    }
    return out;
  } else if (sel.is_scalar() && sel.value() == "all") {
    out.assign(gpus_.begin(), gpus_.end());
  } else if (sel.is_scalar()) {
    const std::string& s = sel.value();
    const size_t dash = s.find('-');
    const size_t colon = s.find(':');
    uint64_t first = 0, last = 0, stride = 1;
    const bool ok = dash != std::string::npos && parse_u64(s.substr(0, dash), first) &&
                    parse_u64(s.substr(dash + 1, colon == std::string::npos ? std::string::npos
                                                                            : colon - dash - 1),
                              last) &&
                    (colon == std::string::npos || parse_u64(s.substr(colon + 1), stride)) &&
                    stride > 0 && first <= last;
    if (!ok) {
      throw InputError(sel.where(), sel.path(),
                       "a GPU selection: 'all', a range 'first-last[:stride]' or a list of ranks",
                       sel.describe());
    }
    if (last >= gpus_.size()) {
      throw InputError(sel.where(), sel.path(), rank_help(gpus_.size(), job_),
                       fmt::format("the range ends at rank {}, but the {} has {} GPUs", last,
                                   job_ ? "job" : "fabric", gpus_.size()));
    }
    for (uint64_t r = first; r <= last; r += stride)
      out.push_back(gpus_[r]);
  } else {
    throw InputError(sel.where(), sel.path(),
                     "a GPU selection: 'all', a range 'first-last[:stride]' or a list of ranks",
                     sel.describe());
  }
  return out;  // a range or 'all' names each GPU once
}

std::vector<NodeId> select_gpus(const ConfigNode& sel, const Fabric& f) {
  return Ranks(f, f.gpus()).select(sel);
}

}  // namespace rocesim::fabric
