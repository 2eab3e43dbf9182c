#include "sim/metrics/hdf5_writer.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <array>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sim/metrics/output_files.hpp"

namespace rocesim::metrics {
namespace {

constexpr size_t kName = 48;   // names and labels
constexpr size_t kShort = 16;  // node kinds and roles
constexpr hsize_t kChunkRows = 1 << 14;

[[noreturn]] void h5_fail(const std::string& what) {
  // With HDF5's own word for it: the description of the innermost error on its stack.
  std::string why;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
        if (n == 0 && e->desc != nullptr) *static_cast<std::string*>(out) = e->desc;
        return 0;
      },
      &why);
  throw std::runtime_error(why.empty() ? fmt::format("HDF5: cannot {}", what)
                                       : fmt::format("HDF5: cannot {} ({})", what, why));
}

hid_t check(hid_t id, const std::string& what) {
  if (id < 0) h5_fail(what);
  return id;
}
void check(herr_t e, const std::string& what) {
  if (e < 0) h5_fail(what);
}

/// Owns an HDF5 identifier and closes it with the right function.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  operator hid_t() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

Handle string_type(size_t n) {
  Handle t(check(H5Tcopy(H5T_C_S1), "copy string type"), H5Tclose);
  check(H5Tset_size(t, n), "size string type");
  check(H5Tset_strpad(t, H5T_STR_NULLTERM), "pad string type");
  return Handle(H5Tcopy(t), H5Tclose);
}

template <size_t N>
void copy_name(char (&dst)[N], std::string_view src) {
  std::memset(dst, 0, N);
  std::memcpy(dst, src.data(), std::min(src.size(), N - 1));
}

Handle group(hid_t parent, const char* name, bool large_attributes = false) {
  Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose);
  check(H5Pset_obj_track_times(gcpl, false), "disable group times");
  // An attribute in an object's header holds at most 64 KiB; in dense storage (a heap beside
  // the header, HDF5 1.8's format) it has no such limit: /meta's scenario and study texts.
  if (large_attributes) check(H5Pset_attr_phase_change(gcpl, 0, 0), "dense attributes");
  return Handle(check(H5Gcreate2(parent, name, H5P_DEFAULT, gcpl, H5P_DEFAULT), name), H5Gclose);
}

/// A file's access properties: HDF5 1.8's format at least (dense attribute storage, group()).
Handle file_access() {
  Handle fapl(check(H5Pcreate(H5P_FILE_ACCESS), "file access"), H5Pclose);
  check(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST), "file format");
  return Handle(check(H5Pcopy(fapl), "file access"), H5Pclose);
}

/// Writes `rows` as a 1-D dataset of `mem_type` (chunked and compressed when large).
struct Writer {
  int deflate = 0;
};

Handle create_table(const Writer& w, hid_t parent, const char* name, hid_t type, size_t n) {
  const hsize_t dims[1] = {n};
  Handle space(check(H5Screate_simple(1, dims, nullptr), "create dataspace"), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  check(H5Pset_obj_track_times(dcpl, false), "disable dataset times");
  if (n > 0 && w.deflate > 0) {
    const hsize_t chunk[1] = {std::min<hsize_t>(n, kChunkRows)};
    check(H5Pset_chunk(dcpl, 1, chunk), "chunk dataset");
    check(H5Pset_shuffle(dcpl), "shuffle filter");
    check(H5Pset_deflate(dcpl, static_cast<unsigned>(w.deflate)), "deflate filter");
  }
  return Handle(check(H5Dcreate2(parent, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), name),
                H5Dclose);
}

/// Writes rows [first, first + count) of a 1-D dataset.
void write_block(hid_t ds, hid_t type, size_t first, size_t count, const void* rows) {
  const hsize_t start[1] = {first}, size[1] = {count};
  Handle file_space(check(H5Dget_space(ds), "dataset space"), H5Sclose);
  check(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, size, nullptr),
        "select rows");
  Handle mem_space(check(H5Screate_simple(1, size, nullptr), "block space"), H5Sclose);
  check(H5Dwrite(ds, type, mem_space, file_space, H5P_DEFAULT, rows), "write rows");
}

/// A whole table from a contiguous array.
void write_table(const Writer& w, hid_t parent, const char* name, hid_t type, const void* rows,
                 size_t n) {
  Handle ds = create_table(w, parent, name, type, n);
  if (n > 0) check(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows), name);
}

/// A large table filled row by row (`fill(i, row)`) through a small reused buffer, so that
/// writing a million flows does not first copy them all.
template <typename Row, typename Fill>
void write_rows(const Writer& w, hid_t parent, const char* name, hid_t type, size_t n,
                Fill&& fill) {
  constexpr size_t kBlock = 4096;
  Handle ds = create_table(w, parent, name, type, n);
  std::vector<Row> block(std::min(n, kBlock));
  for (size_t first = 0; first < n; first += kBlock) {
    const size_t count = std::min(kBlock, n - first);
    for (size_t i = 0; i < count; ++i) {
      block[i] = Row{};
      fill(first + i, block[i]);
    }
    write_block(ds, type, first, count, block.data());
  }
}

void attr_string(hid_t obj, const char* name, const std::string& value) {
  Handle t = string_type(std::max<size_t>(value.size(), 1) + 1);
  Handle space(check(H5Screate(H5S_SCALAR), "scalar space"), H5Sclose);
  const std::string what = fmt::format("write the attribute '{}' ({} bytes)", name, value.size());
  Handle a(check(H5Acreate2(obj, name, t, space, H5P_DEFAULT, H5P_DEFAULT), what), H5Aclose);
  std::vector<char> buf(value.size() + 2, '\0');
  std::memcpy(buf.data(), value.data(), value.size());
  check(H5Awrite(a, t, buf.data()), what);
}

template <typename T>
void attr_scalar(hid_t obj, const char* name, hid_t type, T value) {
  Handle space(check(H5Screate(H5S_SCALAR), "scalar space"), H5Sclose);
  Handle a(check(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), name), H5Aclose);
  check(H5Awrite(a, type, &value), name);
}

// ---- row layouts ----
// Packed, so that the file type is the memory type: no conversion on write, no padding bytes
// (whose contents would make files differ between runs).
#pragma pack(push, 1)

struct NodeRow {
  uint32_t id, server, local, zone;
  uint8_t tier;
  char kind[kShort], role[kShort], name[kName];
};
struct LinkRow {
  uint32_t id, src, dst;
  uint16_t link_class;
  int64_t capacity_bps, latency_ps, bytes;
  double utilization;
  uint32_t qps;
};
struct FlowRow {
  uint64_t id;
  uint32_t workload, src_rank, dst_rank, qp, path, legs;
  int64_t bytes, start_ps, bandwidth_end_ps, delivered_ps;
  double fct_s;
};
struct QpRow {
  uint32_t qp, src_rank, dst_rank, src_ip, dst_ip;
  uint16_t src_port, dst_port;
  uint32_t dst_qpn, path;
};
struct WorkloadRow {
  uint32_t id;
  char name[kName], type[kName];
  int64_t start_ps, end_ps;
  double duration_s;
  uint64_t flows;
  int64_t bytes;
  double throughput_gbps, mean_fct_s, max_fct_s;
};
struct FigureRow {
  uint32_t workload;
  char name[kName];
  double value;
};
struct NoteRow {
  uint32_t workload;
  char name[kName];
  char text[kName];
};
struct TierRow {
  char link_class[kName];
  uint64_t links;
  double capacity_bps, mean_utilization, max_utilization, mean_qps;
  uint32_t max_qps;
  double mmr;
  double p50_utilization, p90_utilization, p99_utilization;
  uint64_t busy_links;
  double busy_mmr;
};
struct LinkEventRow {
  uint32_t id;
  char what[kName];
  int64_t at_ps;
  uint8_t applied;
  int64_t converged_ps;  // -1: routing never reflected it (a speed change, or after the end)
  uint32_t links;
  uint64_t qps_rerouted, flows_rerouted, qps_unroutable;
};
struct CongestionTierRow {
  char link_class[kName];
  uint64_t links;
  double paused_fraction;
  uint64_t pauses;
  double max_queue_bytes, ecn_marks, drop_bytes;
};
struct CongestionLinkRow {
  uint32_t link;
  uint64_t pauses;
  double paused_s, max_queue_bytes, ecn_marks, drop_bytes;
};
struct SeriesRow {
  uint32_t id;
  int64_t t_ps;
  double value;
};

#pragma pack(pop)

#define FIELD(type, row, field, h5) \
  check(H5Tinsert(type, #field, offsetof(row, field), h5), "compound " #field)

void write_all(const Writer& out, hid_t file, const Recorder& rec, const ResultsMeta& meta) {
  const engine::Simulation& sim = rec.simulation();
  const fabric::Fabric& f = sim.fabric();
  Handle name_t = string_type(kName);
  Handle short_t = string_type(kShort);

  {
    Handle g = group(file, "meta", true);
    attr_string(g, "version", meta.version);
    attr_string(g, "scenario_name", meta.scenario_name);
    attr_string(g, "scenario_file", meta.scenario_file);
    attr_string(g, "scenario", meta.effective_scenario);
    attr_string(g, "calibration", meta.calibration);
    attr_string(g, "fabric", f.description());
    attr_scalar(g, "seed", H5T_NATIVE_UINT64, meta.seed);
    attr_scalar(g, "end_ps", H5T_NATIVE_INT64, sim.end_time().count_ps());
    attr_scalar(g, "events", H5T_NATIVE_UINT64, sim.events());
    attr_scalar(g, "flows_total", H5T_NATIVE_UINT64, rec.flows_seen());
    attr_scalar(g, "flows_truncated", H5T_NATIVE_UINT8,
                static_cast<uint8_t>(rec.flows_truncated()));
    attr_string(g, "routing_scheme", std::string(sim.router().scheme()));
    attr_scalar(g, "flowlets", H5T_NATIVE_UINT64, sim.flowlets());
    attr_scalar(g, "flowlet_moves", H5T_NATIVE_UINT64, sim.flowlet_moves());
    attr_scalar(g, "flowlet_reorders", H5T_NATIVE_UINT64, sim.flowlet_reorders());
    attr_scalar(g, "te_computations", H5T_NATIVE_UINT64, sim.recomputations());
    attr_scalar(g, "te_moved_qps", H5T_NATIVE_UINT64, sim.recompute_qps());
  }
  {
    Handle t(H5Tcreate(H5T_COMPOUND, sizeof(NodeRow)), H5Tclose);
    FIELD(t, NodeRow, id, H5T_NATIVE_UINT32);
    FIELD(t, NodeRow, name, name_t);
    FIELD(t, NodeRow, kind, short_t);
    FIELD(t, NodeRow, role, short_t);
    FIELD(t, NodeRow, tier, H5T_NATIVE_UINT8);
    FIELD(t, NodeRow, server, H5T_NATIVE_UINT32);
    FIELD(t, NodeRow, local, H5T_NATIVE_UINT32);
    FIELD(t, NodeRow, zone, H5T_NATIVE_UINT32);
    write_rows<NodeRow>(out, file, "nodes", t, f.node_count(), [&](size_t n, NodeRow& r) {
      const fabric::Node& node = f.node(static_cast<fabric::NodeId>(n));
      r.id = static_cast<uint32_t>(n);
      r.server = node.server;
      r.local = node.local;
      r.zone = node.zone;
      r.tier = node.tier;
      copy_name(r.kind, fabric::kind_name(node.kind));
      copy_name(r.role, fabric::role_name(node.role));
      copy_name(r.name, node.name);
    });
  }
  {
    Handle t(H5Tcreate(H5T_COMPOUND, sizeof(LinkRow)), H5Tclose);
    FIELD(t, LinkRow, id, H5T_NATIVE_UINT32);
    FIELD(t, LinkRow, src, H5T_NATIVE_UINT32);
    FIELD(t, LinkRow, dst, H5T_NATIVE_UINT32);
    FIELD(t, LinkRow, link_class, H5T_NATIVE_UINT16);
    FIELD(t, LinkRow, capacity_bps, H5T_NATIVE_INT64);
    FIELD(t, LinkRow, latency_ps, H5T_NATIVE_INT64);
    FIELD(t, LinkRow, bytes, H5T_NATIVE_INT64);
    FIELD(t, LinkRow, utilization, H5T_NATIVE_DOUBLE);
    FIELD(t, LinkRow, qps, H5T_NATIVE_UINT32);
    write_rows<LinkRow>(out, file, "links", t, f.link_count(), [&](size_t i, LinkRow& r) {
      const auto l = static_cast<fabric::LinkId>(i);
      const fabric::Link& link = f.link(l);
      r = LinkRow{l,
                  link.src,
                  link.dst,
                  link.link_class,
                  link.capacity.bits_per_second(),
                  link.latency.count_ps(),
                  rec.links()[l].bytes,
                  rec.links()[l].utilization,
                  rec.links()[l].qps};
    });

    std::vector<std::array<char, kName>> classes(f.link_classes().size());
    for (size_t c = 0; c < classes.size(); ++c) {
      classes[c].fill('\0');
      const std::string& s = f.link_classes()[c];
      std::memcpy(classes[c].data(), s.data(), std::min(s.size(), kName - 1));
    }
    write_table(out, file, "link_classes", name_t, classes.data(), classes.size());
  }
  {
    Handle t(H5Tcreate(H5T_COMPOUND, sizeof(FlowRow)), H5Tclose);
    FIELD(t, FlowRow, id, H5T_NATIVE_UINT64);
    FIELD(t, FlowRow, workload, H5T_NATIVE_UINT32);
    FIELD(t, FlowRow, src_rank, H5T_NATIVE_UINT32);
    FIELD(t, FlowRow, dst_rank, H5T_NATIVE_UINT32);
    FIELD(t, FlowRow, qp, H5T_NATIVE_UINT32);
    FIELD(t, FlowRow, path, H5T_NATIVE_UINT32);
    FIELD(t, FlowRow, legs, H5T_NATIVE_UINT32);
    FIELD(t, FlowRow, bytes, H5T_NATIVE_INT64);
    FIELD(t, FlowRow, start_ps, H5T_NATIVE_INT64);
    FIELD(t, FlowRow, bandwidth_end_ps, H5T_NATIVE_INT64);
    FIELD(t, FlowRow, delivered_ps, H5T_NATIVE_INT64);
    FIELD(t, FlowRow, fct_s, H5T_NATIVE_DOUBLE);
    write_rows<FlowRow>(out, file, "flows", t, rec.flows().size(), [&](size_t i, FlowRow& r) {
      const engine::FlowRecord& fr = rec.flows()[i];
      r = FlowRow{fr.id,
                  fr.workload,
                  f.rank_of(fr.src),
                  f.rank_of(fr.dst),
                  fr.qp,
                  fr.path,
                  fr.legs,
                  fr.bytes.count(),
                  fr.start.count_ps(),
                  fr.bandwidth_end.count_ps(),
                  fr.delivered.count_ps(),
                  (fr.delivered - fr.start).in_seconds()};
    });
  }
  {
    Handle t(H5Tcreate(H5T_COMPOUND, sizeof(QpRow)), H5Tclose);
    FIELD(t, QpRow, qp, H5T_NATIVE_UINT32);
    FIELD(t, QpRow, src_rank, H5T_NATIVE_UINT32);
    FIELD(t, QpRow, dst_rank, H5T_NATIVE_UINT32);
    FIELD(t, QpRow, src_ip, H5T_NATIVE_UINT32);
    FIELD(t, QpRow, dst_ip, H5T_NATIVE_UINT32);
    FIELD(t, QpRow, src_port, H5T_NATIVE_UINT16);
    FIELD(t, QpRow, dst_port, H5T_NATIVE_UINT16);
    FIELD(t, QpRow, dst_qpn, H5T_NATIVE_UINT32);
    FIELD(t, QpRow, path, H5T_NATIVE_UINT32);
    write_rows<QpRow>(out, file, "qps", t, sim.qps().size(), [&](size_t q, QpRow& r) {
      const engine::QpInfo& qi = sim.qps()[q];
      r.qp = static_cast<uint32_t>(q);
      r.src_ip = qi.key.src_ip;
      r.dst_ip = qi.key.dst_ip;
      r.src_port = qi.key.src_port;
      r.dst_port = qi.key.dst_port;
      r.dst_qpn = qi.key.dst_qpn;
      r.path = qi.path;
      const auto [src, dst] = sim.connection_endpoints(qi.connection);
      r.src_rank = f.rank_of(src);
      r.dst_rank = f.rank_of(dst);
    });
  }
  {
    Handle g = group(file, "paths");
    const routing::PathTable& paths = sim.paths();
    std::vector<uint32_t> links;
    std::vector<uint64_t> offsets{0};
    std::vector<int64_t> latency;
    std::vector<double> weights;
    std::vector<uint8_t> unions;
    for (routing::PathId p = 0; p < paths.size(); ++p) {
      const std::span<const double> w = paths.weights(p);
      unions.push_back(w.empty() ? 0 : 1);
      for (size_t i = 0; i < paths.links(p).size(); ++i) {
        links.push_back(paths.links(p)[i]);
        weights.push_back(w.empty() ? 1.0 : w[i]);
      }
      offsets.push_back(links.size());
      latency.push_back(paths.latency(p).count_ps());
    }
    write_table(out, g, "links", H5T_NATIVE_UINT32, links.data(), links.size());
    write_table(out, g, "offsets", H5T_NATIVE_UINT64, offsets.data(), offsets.size());
    write_table(out, g, "latency_ps", H5T_NATIVE_INT64, latency.data(), latency.size());
    write_table(out, g, "weights", H5T_NATIVE_DOUBLE, weights.data(), weights.size());
    write_table(out, g, "union", H5T_NATIVE_UINT8, unions.data(), unions.size());
  }
  {
    std::vector<WorkloadRow> rows;
    std::vector<FigureRow> figures;
    std::vector<NoteRow> notes;
    for (size_t i = 0; i < rec.workloads().size(); ++i) {
      const WorkloadResult& w = rec.workloads()[i];
      WorkloadRow r{};
      r.id = static_cast<uint32_t>(i);
      copy_name(r.name, w.name);
      copy_name(r.type, w.type);
      r.start_ps = w.start.count_ps();
      r.end_ps = w.end.count_ps();
      r.duration_s = (w.end - w.start).in_seconds();
      r.flows = w.flows;
      r.bytes = w.bytes;
      r.throughput_gbps = w.throughput_gbps;
      r.mean_fct_s = w.mean_fct_s;
      r.max_fct_s = w.max_fct_s;
      rows.push_back(r);
      for (const auto& [name, value] : w.figures.values) {
        FigureRow fr{};
        fr.workload = r.id;
        copy_name(fr.name, name);
        fr.value = value;
        figures.push_back(fr);
      }
      for (const auto& [name, text] : w.figures.notes) {
        NoteRow nr{};
        nr.workload = r.id;
        copy_name(nr.name, name);
        copy_name(nr.text, text);
        notes.push_back(nr);
      }
    }
    Handle t(H5Tcreate(H5T_COMPOUND, sizeof(WorkloadRow)), H5Tclose);
    FIELD(t, WorkloadRow, id, H5T_NATIVE_UINT32);
    FIELD(t, WorkloadRow, name, name_t);
    FIELD(t, WorkloadRow, type, name_t);
    FIELD(t, WorkloadRow, start_ps, H5T_NATIVE_INT64);
    FIELD(t, WorkloadRow, end_ps, H5T_NATIVE_INT64);
    FIELD(t, WorkloadRow, duration_s, H5T_NATIVE_DOUBLE);
    FIELD(t, WorkloadRow, flows, H5T_NATIVE_UINT64);
    FIELD(t, WorkloadRow, bytes, H5T_NATIVE_INT64);
    FIELD(t, WorkloadRow, throughput_gbps, H5T_NATIVE_DOUBLE);
    FIELD(t, WorkloadRow, mean_fct_s, H5T_NATIVE_DOUBLE);
    FIELD(t, WorkloadRow, max_fct_s, H5T_NATIVE_DOUBLE);
    write_table(out, file, "workloads", t, rows.data(), rows.size());

    Handle ft(H5Tcreate(H5T_COMPOUND, sizeof(FigureRow)), H5Tclose);
    FIELD(ft, FigureRow, workload, H5T_NATIVE_UINT32);
    FIELD(ft, FigureRow, name, name_t);
    FIELD(ft, FigureRow, value, H5T_NATIVE_DOUBLE);
    write_table(out, file, "workload_figures", ft, figures.data(), figures.size());

    Handle nt(H5Tcreate(H5T_COMPOUND, sizeof(NoteRow)), H5Tclose);
    FIELD(nt, NoteRow, workload, H5T_NATIVE_UINT32);
    FIELD(nt, NoteRow, name, name_t);
    FIELD(nt, NoteRow, text, name_t);
    write_table(out, file, "workload_notes", nt, notes.data(), notes.size());
  }
  {
    std::vector<TierRow> rows;
    for (const TierResult& tr : rec.tiers()) {
      TierRow r{};
      copy_name(r.link_class, tr.link_class);
      r.links = tr.links;
      r.capacity_bps = tr.capacity_bps;
      r.mean_utilization = tr.mean_utilization;
      r.max_utilization = tr.max_utilization;
      r.mean_qps = tr.mean_qps;
      r.max_qps = tr.max_qps;
      r.mmr = tr.mmr;
      r.p50_utilization = tr.p50_utilization;
      r.p90_utilization = tr.p90_utilization;
      r.p99_utilization = tr.p99_utilization;
      r.busy_links = tr.busy_links;
      r.busy_mmr = tr.busy_mmr;
      rows.push_back(r);
    }
    Handle t(H5Tcreate(H5T_COMPOUND, sizeof(TierRow)), H5Tclose);
    FIELD(t, TierRow, link_class, name_t);
    FIELD(t, TierRow, links, H5T_NATIVE_UINT64);
    FIELD(t, TierRow, capacity_bps, H5T_NATIVE_DOUBLE);
    FIELD(t, TierRow, mean_utilization, H5T_NATIVE_DOUBLE);
    FIELD(t, TierRow, max_utilization, H5T_NATIVE_DOUBLE);
    FIELD(t, TierRow, mean_qps, H5T_NATIVE_DOUBLE);
    FIELD(t, TierRow, max_qps, H5T_NATIVE_UINT32);
    FIELD(t, TierRow, mmr, H5T_NATIVE_DOUBLE);
    FIELD(t, TierRow, p50_utilization, H5T_NATIVE_DOUBLE);
    FIELD(t, TierRow, p90_utilization, H5T_NATIVE_DOUBLE);
    FIELD(t, TierRow, p99_utilization, H5T_NATIVE_DOUBLE);
    FIELD(t, TierRow, busy_links, H5T_NATIVE_UINT64);
    FIELD(t, TierRow, busy_mmr, H5T_NATIVE_DOUBLE);
    write_table(out, file, "tiers", t, rows.data(), rows.size());
  }
  if (const std::span<const engine::LinkEvent> events = rec.simulation().link_events();
      !events.empty()) {
    std::vector<LinkEventRow> rows;
    for (size_t i = 0; i < events.size(); ++i) {
      const engine::LinkEvent& e = events[i];
      LinkEventRow r{};
      r.id = static_cast<uint32_t>(i);
      copy_name(r.what, e.what);
      r.at_ps = e.at.count_ps();
      r.applied = e.applied ? 1 : 0;
      r.converged_ps = e.converged.is_infinite() ? -1 : e.converged.count_ps();
      r.links = static_cast<uint32_t>(e.links.size());
      r.qps_rerouted = e.qps_rerouted;
      r.flows_rerouted = e.flows_rerouted;
      r.qps_unroutable = e.qps_unroutable;
      rows.push_back(r);
    }
    Handle t(H5Tcreate(H5T_COMPOUND, sizeof(LinkEventRow)), H5Tclose);
    FIELD(t, LinkEventRow, id, H5T_NATIVE_UINT32);
    FIELD(t, LinkEventRow, what, name_t);
    FIELD(t, LinkEventRow, at_ps, H5T_NATIVE_INT64);
    FIELD(t, LinkEventRow, applied, H5T_NATIVE_UINT8);
    FIELD(t, LinkEventRow, converged_ps, H5T_NATIVE_INT64);
    FIELD(t, LinkEventRow, links, H5T_NATIVE_UINT32);
    FIELD(t, LinkEventRow, qps_rerouted, H5T_NATIVE_UINT64);
    FIELD(t, LinkEventRow, flows_rerouted, H5T_NATIVE_UINT64);
    FIELD(t, LinkEventRow, qps_unroutable, H5T_NATIVE_UINT64);
    write_table(out, file, "link_events", t, rows.data(), rows.size());
  }
  const CongestionRecorder& cr = rec.congestion();
  if (cr.any()) {
    Handle g = group(file, "congestion");
    attr_scalar(g, "cnps", H5T_NATIVE_DOUBLE, cr.cnps());
    std::vector<CongestionTierRow> tiers;
    for (const TierCongestion& tc : cr.tiers()) {
      CongestionTierRow r{};
      copy_name(r.link_class, tc.link_class);
      r.links = tc.links;
      r.paused_fraction = tc.paused_fraction;
      r.pauses = tc.pauses;
      r.max_queue_bytes = tc.max_queue;
      r.ecn_marks = tc.ecn_marks;
      r.drop_bytes = tc.drops;
      tiers.push_back(r);
    }
    Handle tt(H5Tcreate(H5T_COMPOUND, sizeof(CongestionTierRow)), H5Tclose);
    FIELD(tt, CongestionTierRow, link_class, name_t);
    FIELD(tt, CongestionTierRow, links, H5T_NATIVE_UINT64);
    FIELD(tt, CongestionTierRow, paused_fraction, H5T_NATIVE_DOUBLE);
    FIELD(tt, CongestionTierRow, pauses, H5T_NATIVE_UINT64);
    FIELD(tt, CongestionTierRow, max_queue_bytes, H5T_NATIVE_DOUBLE);
    FIELD(tt, CongestionTierRow, ecn_marks, H5T_NATIVE_DOUBLE);
    FIELD(tt, CongestionTierRow, drop_bytes, H5T_NATIVE_DOUBLE);
    write_table(out, g, "tiers", tt, tiers.data(), tiers.size());

    Handle lt(H5Tcreate(H5T_COMPOUND, sizeof(CongestionLinkRow)), H5Tclose);
    FIELD(lt, CongestionLinkRow, link, H5T_NATIVE_UINT32);
    FIELD(lt, CongestionLinkRow, pauses, H5T_NATIVE_UINT64);
    FIELD(lt, CongestionLinkRow, paused_s, H5T_NATIVE_DOUBLE);
    FIELD(lt, CongestionLinkRow, max_queue_bytes, H5T_NATIVE_DOUBLE);
    FIELD(lt, CongestionLinkRow, ecn_marks, H5T_NATIVE_DOUBLE);
    FIELD(lt, CongestionLinkRow, drop_bytes, H5T_NATIVE_DOUBLE);
    write_rows<CongestionLinkRow>(
        out, g, "links", lt, cr.links().size(), [&](size_t i, CongestionLinkRow& r) {
          const LinkCongestion& x = cr.links()[i];
          r = CongestionLinkRow{
              static_cast<uint32_t>(i), x.pauses, x.paused_s, x.max_queue, x.ecn_marks, x.drops};
        });

    Handle st(H5Tcreate(H5T_COMPOUND, sizeof(SeriesRow)), H5Tclose);
    FIELD(st, SeriesRow, id, H5T_NATIVE_UINT32);
    FIELD(st, SeriesRow, t_ps, H5T_NATIVE_INT64);
    FIELD(st, SeriesRow, value, H5T_NATIVE_DOUBLE);
    auto series_rows = [](const auto& by_id) {
      std::vector<SeriesRow> rows;
      for (const auto& [id, series] : by_id) {
        for (const Sample& s : series.samples())
          rows.push_back({static_cast<uint32_t>(id), s.t_ps, s.value});
      }
      return rows;
    };
    const std::vector<SeriesRow> queues = series_rows(cr.queue_series());
    write_table(out, g, "queue_series", st, queues.data(), queues.size());
    const std::vector<SeriesRow> rates = series_rows(cr.rate_series());
    write_table(out, g, "rate_series", st, rates.data(), rates.size());
  }
}

#undef FIELD

void write_tables(const Writer& out, hid_t file, const std::vector<Table>& tables) {
  if (tables.empty()) return;
  Handle all = group(file, "tables");
  for (const Table& t : tables) {
    const size_t n = t.rows();
    Handle g = group(all, t.name().c_str());
    attr_string(g, "description", t.description());
    std::string order;
    for (const Column& c : t.columns())
      order += (order.empty() ? "" : ",") + c.name;
    attr_string(g, "columns", order);
    for (const Column& c : t.columns()) {
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::vector<double>>) {
              Handle ds = create_table(out, g, c.name.c_str(), H5T_NATIVE_DOUBLE, n);
              if (n > 0) write_block(ds, H5T_NATIVE_DOUBLE, 0, n, v.data());
              attr_string(ds, "unit", c.unit);
            } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
              Handle ds = create_table(out, g, c.name.c_str(), H5T_NATIVE_INT64, n);
              if (n > 0) write_block(ds, H5T_NATIVE_INT64, 0, n, v.data());
              attr_string(ds, "unit", c.unit);
            } else {
              // Fixed-width strings, as wide as the longest value (NUL-padded: no stray bytes).
              size_t width = 1;
              for (const std::string& x : v)
                width = std::max(width, x.size() + 1);
              std::vector<char> buf(n * width, '\0');
              for (size_t i = 0; i < n; ++i)
                std::memcpy(buf.data() + i * width, v[i].data(), v[i].size());
              Handle st = string_type(width);
              Handle ds = create_table(out, g, c.name.c_str(), st, n);
              if (n > 0) write_block(ds, st, 0, n, buf.data());
              attr_string(ds, "unit", c.unit);
            }
          },
          c.values);
    }
  }
}

}  // namespace

namespace {

/// Creates `path` through a temporary file (output_files.hpp): `fill` writes the contents, then
/// the file is renamed into place; on any failure or signal nothing is left behind.
template <typename Fill>
void write_atomically(const std::string& path, Fill&& fill) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become exceptions, not stderr noise
  TemporaryFile tmp(path);
  try {
    Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
    check(H5Pset_obj_track_times(fcpl, false), "disable root times");
    {
      Handle file(H5Fcreate(tmp.path().c_str(), H5F_ACC_TRUNC, fcpl, file_access()), H5Fclose);
      if (file < 0) {
        throw std::runtime_error(
            "cannot create the file (does the directory exist and is it "
            "writable?)");
      }
      fill(static_cast<hid_t>(file));
      check(H5Fflush(file, H5F_SCOPE_GLOBAL), "flush file");
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(write_failure(path, e.what()));
  }
  tmp.commit();
}

}  // namespace

void write_results_h5(const std::string& path, const Recorder& rec, const ResultsMeta& meta,
                      int deflate_level) {
  const Writer w{deflate_level};
  write_atomically(path, [&](hid_t file) {
    write_all(w, file, rec, meta);
    write_tables(w, file, meta.tables);
  });
}

namespace {

std::string read_string_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return {};
  Handle a(check(H5Aopen(obj, name, H5P_DEFAULT), name), H5Aclose);
  Handle t(check(H5Aget_type(a), "attribute type"), H5Tclose);
  const size_t n = H5Tget_size(t);
  std::string s(n, '\0');
  Handle mem = string_type(n);
  check(H5Aread(a, mem, s.data()), name);
  s.resize(std::strlen(s.c_str()));
  return s;
}

}  // namespace

namespace {

/// The groups of a sweep file's /runs, by name, with their `row` attribute.
std::vector<std::pair<std::string, std::string>> runs_and_rows(hid_t file) {
  std::vector<std::pair<std::string, std::string>> out;
  Handle runs(check(H5Gopen2(file, "runs", H5P_DEFAULT), "open /runs"), H5Gclose);
  H5G_info_t info;
  check(H5Gget_info(runs, &info), "list /runs");
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[32] = {};
    check(static_cast<herr_t>(H5Lget_name_by_idx(runs, ".", H5_INDEX_NAME, H5_ITER_INC, i, name,
                                                 sizeof(name), H5P_DEFAULT)),
          "name a run");
    Handle g(check(H5Gopen2(runs, name, H5P_DEFAULT), name), H5Gclose);
    out.emplace_back(name, read_string_attr(g, "row"));
  }
  return out;
}

}  // namespace

SweepFile::SweepFile(const std::string& path, const std::string& study_name,
                     const std::string& study_text, const std::string& version)
    : path_(path), tmp_(temporary_path(path)) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  remove_stale_temporaries(path);
  try {
    if (std::filesystem::exists(path)) {
      std::filesystem::copy_file(path, tmp_, std::filesystem::copy_options::overwrite_existing);
      file_ = H5Fopen(tmp_.c_str(), H5F_ACC_RDWR, file_access());
      if (file_ < 0) throw std::runtime_error("it exists but is not an HDF5 file");
      const std::string before =
          H5Lexists(file_, "meta", H5P_DEFAULT) > 0
              ? read_string_attr(Handle(H5Gopen2(file_, "meta", H5P_DEFAULT), H5Gclose), "study")
              : std::string();
      if (before != study_text) {
        throw std::runtime_error(
            "it holds another study (to resume, the study file must be unchanged; to start "
            "again, remove or rename it)");
      }
      for (auto& [name, row] : runs_and_rows(file_))
        resumed_[static_cast<uint32_t>(std::stoul(name))] = std::move(row);
      return;
    }
    Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
    check(H5Pset_obj_track_times(fcpl, false), "disable root times");
    file_ = H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, fcpl, file_access());
    if (file_ < 0) {
      throw std::runtime_error("cannot create it (does the directory exist and is it writable?)");
    }
    {
      Handle g = group(file_, "meta", true);
      attr_string(g, "version", version);
      attr_string(g, "study_name", study_name);
      attr_string(g, "study", study_text);
    }
    (void)group(file_, "runs");
  } catch (const std::exception& e) {
    if (file_ >= 0) H5Fclose(file_);
    file_ = -1;
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
    throw std::runtime_error(fmt::format("cannot write the sweep to '{}': {}", path, e.what()));
  }
}

SweepFile::~SweepFile() {
  if (file_ >= 0) {
    H5Fclose(file_);
    std::error_code ec;
    std::filesystem::remove(tmp_, ec);
  }
}

void SweepFile::add_run(uint32_t id, const Recorder& rec, const ResultsMeta& meta,
                        const std::string& row, int deflate_level) {
  const Writer w{deflate_level};
  Handle runs(check(H5Gopen2(file_, "runs", H5P_DEFAULT), "open /runs"), H5Gclose);
  // Names sort in point order: zero-padded.
  Handle g = group(runs, fmt::format("{:07}", id).c_str());
  write_all(w, g, rec, meta);
  write_tables(w, g, meta.tables);
  attr_string(g, "row", row);
}

std::map<uint32_t, std::string> SweepFile::merge(const std::vector<std::string>& parts) {
  std::map<uint32_t, std::string> rows;
  std::vector<int64_t> files;
  auto close_all = [&]() {
    for (const int64_t f : files)
      H5Fclose(f);
    files.clear();
  };
  try {
    struct Source {
      size_t part;
      std::string name;
    };
    std::map<uint32_t, Source> order;
    for (size_t k = 0; k < parts.size(); ++k) {
      const hid_t f = H5Fopen(parts[k].c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      if (f < 0) throw std::runtime_error(fmt::format("cannot read the part '{}'", parts[k]));
      files.push_back(f);
      for (auto& [name, row] : runs_and_rows(f)) {
        const auto id = static_cast<uint32_t>(std::stoul(name));
        rows[id] = std::move(row);
        order[id] = Source{k, name};
      }
    }
    for (const auto& [id, src] : order) {
      const std::string path = "runs/" + src.name;
      check(H5Ocopy(files[src.part], path.c_str(), file_, path.c_str(), H5P_DEFAULT, H5P_DEFAULT),
            "copy a run");
    }
    close_all();
  } catch (const std::exception& e) {
    close_all();
    throw std::runtime_error(fmt::format("cannot merge the sweep into '{}': {}", path_, e.what()));
  }
  return rows;
}

void SweepFile::finish(const Table& points) {
  try {
    if (H5Lexists(file_, "points", H5P_DEFAULT) > 0) {
      check(H5Ldelete(file_, "points", H5P_DEFAULT), "replace /points");
    }
    // One compound row per point: numbers as float64, integers as int64, text as fixed strings.
    const size_t n = points.rows();
    std::vector<size_t> offset, width;
    size_t row = 0;
    for (const Column& c : points.columns()) {
      offset.push_back(row);
      size_t w = 8;
      if (const auto* t = std::get_if<std::vector<std::string>>(&c.values)) {
        w = 1;
        for (const std::string& s : *t)
          w = std::max(w, s.size() + 1);
      }
      width.push_back(w);
      row += w;
    }
    Handle type(check(H5Tcreate(H5T_COMPOUND, std::max<size_t>(row, 1)), "compound /points"),
                H5Tclose);
    std::vector<char> buf(n * row, '\0');
    for (size_t k = 0; k < points.columns().size(); ++k) {
      const Column& c = points.columns()[k];
      if (const auto* d = std::get_if<std::vector<double>>(&c.values)) {
        check(H5Tinsert(type, c.name.c_str(), offset[k], H5T_NATIVE_DOUBLE), c.name.c_str());
        for (size_t i = 0; i < n; ++i)
          std::memcpy(buf.data() + i * row + offset[k], &(*d)[i], 8);
      } else if (const auto* v = std::get_if<std::vector<int64_t>>(&c.values)) {
        check(H5Tinsert(type, c.name.c_str(), offset[k], H5T_NATIVE_INT64), c.name.c_str());
        for (size_t i = 0; i < n; ++i)
          std::memcpy(buf.data() + i * row + offset[k], &(*v)[i], 8);
      } else {
        const auto& t = std::get<std::vector<std::string>>(c.values);
        Handle st = string_type(width[k]);
        check(H5Tinsert(type, c.name.c_str(), offset[k], st), c.name.c_str());
        for (size_t i = 0; i < n; ++i)
          std::memcpy(buf.data() + i * row + offset[k], t[i].data(), t[i].size());
      }
    }
    write_table(Writer{}, file_, "points", type, buf.data(), n);
    check(H5Fflush(file_, H5F_SCOPE_GLOBAL), "flush file");
    check(H5Fclose(file_), "close file");
    file_ = -1;
    std::filesystem::rename(tmp_, path_);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("cannot write the sweep to '{}': {}", path_, e.what()));
  }
}

void write_tables_h5(const std::string& path, const ResultsMeta& meta) {
  const Writer w{0};
  write_atomically(path, [&](hid_t file) {
    {
      Handle g = group(file, "meta", true);
      attr_string(g, "version", meta.version);
      attr_string(g, "scenario_name", meta.scenario_name);
      attr_string(g, "scenario_file", meta.scenario_file);
      attr_string(g, "scenario", meta.effective_scenario);
      attr_string(g, "calibration", meta.calibration);
      attr_scalar(g, "seed", H5T_NATIVE_UINT64, meta.seed);
    }
    write_tables(w, file, meta.tables);
  });
}

}  // namespace rocesim::metrics
