#include "sim/fabric/gpu_selection.hpp"

#include <fmt/format.h>

#include <charconv>
#include <unordered_map>

#include "sim/core/params.hpp"

namespace rocesim::fabric {
namespace {

bool parse_u64(std::string_view s, uint64_t& out) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

std::string rank_help(const Fabric& f) {
  return fmt::format("a rank from 0 to {} or a GPU name such as 'node0/gpu0'",
                     f.gpu_count() == 0 ? 0 : f.gpu_count() - 1);
}

}  // namespace

NodeId select_gpu(const ConfigNode& v, const Fabric& f) {
  if (!v.is_scalar()) throw InputError(v.where(), v.path(), rank_help(f), v.describe());
  uint64_t rank = 0;
  if (parse_u64(v.value(), rank)) {
    if (rank >= f.gpu_count()) {
      throw InputError(v.where(), v.path(), rank_help(f),
                       fmt::format("rank {}, but the fabric has {} GPUs", rank, f.gpu_count()));
    }
    return f.gpu(static_cast<uint32_t>(rank));
  }
  const NodeId n = f.find(v.value());
  if (n == kNone || f.node(n).kind != NodeKind::Gpu) {
    throw InputError(v.where(), v.path(), rank_help(f),
                     fmt::format("'{}', which is not a GPU of this fabric", v.value()));
  }
  return n;
}

NodeId select_switch(const ConfigNode& v, const Fabric& f) {
  const NodeId n = v.is_scalar() ? f.find(v.value()) : kNone;
  if (n == kNone || f.node(n).kind != NodeKind::Switch || f.node(n).role == SwitchRole::NvSwitch) {
    throw InputError(v.where(), v.path(), "the name of a fabric switch, such as 'spine3'",
                     v.is_scalar() ? fmt::format("'{}', which is not a fabric switch", v.value())
                                   : v.describe());
  }
  return n;
}

std::vector<NodeId> select_gpus(const ConfigNode& sel, const Fabric& f) {
  std::vector<NodeId> out;
  if (sel.is_sequence()) {
    out.reserve(sel.items().size());
    std::unordered_map<NodeId, size_t> first_item;  // GPU -> where the list names it first
    for (size_t i = 0; i < sel.items().size(); ++i) {
      const ConfigNode& item = sel.items()[i];
      const NodeId g = select_gpu(item, f);
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
    out.assign(f.gpus().begin(), f.gpus().end());
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
    if (last >= f.gpu_count()) {
      throw InputError(sel.where(), sel.path(), rank_help(f),
                       fmt::format("the range ends at rank {}, but the fabric has {} GPUs", last,
                                   f.gpu_count()));
    }
    for (uint64_t r = first; r <= last; r += stride)
      out.push_back(f.gpu(static_cast<uint32_t>(r)));
  } else {
    throw InputError(sel.where(), sel.path(),
                     "a GPU selection: 'all', a range 'first-last[:stride]' or a list of ranks",
                     sel.describe());
  }
  return out;  // a range or 'all' names each GPU once
}

}  // namespace rocesim::fabric
