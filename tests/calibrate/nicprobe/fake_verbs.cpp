// A fake libibverbs for testing rocesim-nicprobe without an RDMA device: linked instead of
// libibverbs into rocesim-nicprobe-fake, it provides the verbs entry points the tool calls and
// emulates two devices:
//
//   mlx5_0  ConnectX-7, one 400GbE (RoCE) port: NDR x 4X, MTU 4096, GIDs 0..3 (link-local and
//           ::ffff:10.0.0.1, each RoCE v1 and v2) on interface index 1
//   mlx5_1  ConnectX-6, two InfiniBand ports: port 1 HDR x 4X, LID 7; port 2 DOWN
//
// RDMA WRITEs are carried out at post time (a memcpy into the remote registered region, checked
// against its rkey and bounds). The emulation is strict where the tool could go wrong: QP state
// transitions need the attribute masks the kernel requires, an RTR address must lead back to the
// port (its own GID on RoCE, its own LID on InfiniBand), the send queue holds at most
// max_send_wr writes until a later signalled completion is polled, a CQ must not overflow, and
// objects must be released in an order verbs accepts (EBUSY otherwise). Anything wrong, and any
// object or list still alive at exit, is reported on stderr as "fake verbs: ...", which the tests
// look for.
//
// Environment, to steer it:
//   FAKE_VERBS_DEVICES=0        ibv_get_device_list returns an empty list
//   FAKE_VERBS_FAIL=CALL        that verbs call fails (ENOMEM), e.g. ibv_create_qp
//   FAKE_VERBS_WC_ERROR=N       the Nth RDMA WRITE completes with IBV_WC_RETRY_EXC_ERR
//   FAKE_VERBS_NO_INLINE=1      QPs with inline data are refused (EINVAL)
//   FAKE_VERBS_NO_GID_TABLE=1   _ibv_query_gid_table returns -EOPNOTSUPP
//
// The stand-in NIC of the calibration loop (tests/calibrate/standin/README.md): with
// ROCESIM_STANDIN_SCENARIO set (and ROCESIM_STANDIN_TRUTH, _NOISE, _SEED, standin_truth.hpp), the
// active ports are the ground truth's NIC, the NIC of the job's first GPU in that scenario with
// the hidden values applied, and the writes take the time rocesim's model gives it:
//
//   * the ports report its line rate (active_speed x active_width);
//   * a write of S bytes occupies the NIC for S / B x exp(sigma z_k), B = the payload rate of its
//     narrowest link in the model: the NIC's port (line rate less the framing, times
//     nic_efficiency) or its PCIe path;
//   * its data lands, and its completion is queued, L after the NIC is through with it, where
//     L = twice the one-way PCIe latency: a loopback write crosses the GPU-NIC path's PCIe out
//     of host memory and back in.
//
// Time is virtual: the process's CLOCK_MONOTONIC (which std::chrono::steady_clock reads) is
// this emulation's clock, so the tool times the modelled NIC exactly, however loaded the machine
// running the test. A poll of a completion queue finds what is due; when nothing is, the clock
// moves to the next event in flight (the CPU would have spun until then); with nothing in
// flight it stands still (a tool waiting then would wait forever: none does). Posting takes no
// time. Without the variable, writes land when posted and the clock is the system's.
#include <infiniband/verbs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "tests/calibrate/standin/standin_truth.hpp"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

namespace {

struct FakePort {
  ibv_port_attr attr{};
  std::vector<ibv_gid_entry> gids;  // the table, zero entries included
};

struct FakeDevice {
  ibv_device device{};
  ibv_device_attr attr{};
  uint64_t guid = 0;
  std::vector<FakePort> ports;
};

struct SqEntry {
  uint64_t wr_id;
  bool signaled;
};

struct FakeQp {
  ibv_qp qp{};
  uint32_t max_send_wr = 0;
  uint32_t max_inline = 0;
  uint8_t port = 0;
  bool sig_all = false;
  std::deque<SqEntry> sq;  // posted, not yet retired by a polled completion
};

struct FakeCq {
  ibv_cq cq{};
  std::deque<ibv_wc> entries;
  int in_flight = 0;  // completions queued for later (timed mode)
};

/// The ground truth's NIC (timed mode, see the header comment).
struct Timing {
  double line_gbps = 0;     // the port's rate
  double bytes_per_ns = 0;  // B
  double latency_ns = 0;    // L
};

/// A write in flight (timed mode): at `due`, its data lands and its completion, if any, is
/// queued.
struct InFlight {
  double due = 0;  // ns of the virtual clock
  uint64_t order = 0;
  void* dst = nullptr;
  const void* src = nullptr;
  std::vector<uint8_t> inline_data;  // an inline write's data, taken at post time
  size_t length = 0;
  ibv_cq* cq = nullptr;  // where its completion goes; null: unsignalled
  ibv_wc wc{};
  bool operator>(const InFlight& o) const { return due != o.due ? due > o.due : order > o.order; }
};

struct State {
  std::vector<std::unique_ptr<FakeDevice>> devices;
  int open_lists = 0;
  std::map<ibv_context*, std::unique_ptr<ibv_context>> contexts;
  std::map<ibv_pd*, std::unique_ptr<ibv_pd>> pds;
  std::map<ibv_mr*, std::unique_ptr<ibv_mr>> mrs;
  std::map<ibv_cq*, std::unique_ptr<FakeCq>> cqs;
  std::map<ibv_qp*, std::unique_ptr<FakeQp>> qps;
  uint32_t next_key = 0x1000;
  uint32_t next_qpn = 0x100;
  uint64_t writes = 0;
  // Timed mode.
  std::optional<Timing> timing;
  double clock_ns = 0;     // the virtual CLOCK_MONOTONIC
  double nic_free_ns = 0;  // when the NIC is through with the writes posted so far
  std::priority_queue<InFlight, std::vector<InFlight>, std::greater<>> in_flight;

  ~State() {
    if (open_lists != 0)
      std::fprintf(stderr, "fake verbs: %d device lists not freed\n", open_lists);
    if (!contexts.empty() || !pds.empty() || !mrs.empty() || !cqs.empty() || !qps.empty()) {
      std::fprintf(stderr,
                   "fake verbs: leaked at exit: %zu contexts, %zu PDs, %zu MRs, %zu CQs, %zu QPs\n",
                   contexts.size(), pds.size(), mrs.size(), cqs.size(), qps.size());
    }
  }
};

State& state() {
  static State s;
  return s;
}

void misuse(const char* what) {
  std::fprintf(stderr, "fake verbs: %s\n", what);
}

bool fail(const char* call) {
  const char* f = std::getenv("FAKE_VERBS_FAIL");
  if (f != nullptr && std::strcmp(f, call) == 0) {
    errno = ENOMEM;
    return true;
  }
  return false;
}

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "0") != 0;
}

ibv_gid_entry gid(uint32_t index, uint32_t port, ibv_gid_type type, const uint8_t (&raw)[16],
                  uint32_t ifindex) {
  ibv_gid_entry e{};
  std::memcpy(e.gid.raw, raw, 16);
  e.gid_index = index;
  e.port_num = port;
  e.gid_type = type;
  e.ndev_ifindex = ifindex;
  return e;
}

std::unique_ptr<FakeDevice> make_device(const char* name, uint32_t part, uint64_t guid) {
  auto d = std::make_unique<FakeDevice>();
  d->device.node_type = IBV_NODE_CA;
  d->device.transport_type = IBV_TRANSPORT_IB;
  std::snprintf(d->device.name, sizeof(d->device.name), "%s", name);
  d->guid = guid;
  std::snprintf(d->attr.fw_ver, sizeof(d->attr.fw_ver), "%s", "28.39.1002");
  d->attr.vendor_id = 0x02c9;
  d->attr.vendor_part_id = part;
  d->attr.max_mr_size = ~uint64_t{0};
  d->attr.page_size_cap = 0xfffffffffffff000;
  d->attr.max_qp = 131072;
  d->attr.max_qp_wr = 32768;
  d->attr.max_sge = 30;
  d->attr.max_cq = 16777216;
  d->attr.max_cqe = 4194303;
  d->attr.max_mr = 16777216;
  d->attr.max_pd = 8388608;
  d->attr.max_qp_rd_atom = 16;
  d->attr.max_qp_init_rd_atom = 16;
  d->attr.max_pkeys = 128;
  d->attr.local_ca_ack_delay = 16;
  return d;
}

FakePort port(ibv_port_state st, uint8_t link_layer, uint8_t speed, uint8_t width, uint16_t lid,
              uint32_t max_msg) {
  FakePort p;
  p.attr.state = st;
  p.attr.phys_state = st == IBV_PORT_ACTIVE ? 5 : 2;
  p.attr.link_layer = link_layer;
  p.attr.active_speed = speed;
  p.attr.active_width = width;
  p.attr.max_mtu = IBV_MTU_4096;
  p.attr.active_mtu = IBV_MTU_4096;
  p.attr.lid = lid;
  p.attr.sm_lid = link_layer == IBV_LINK_LAYER_INFINIBAND ? 1 : 0;
  p.attr.max_msg_sz = max_msg;
  return p;
}

/// The ground truth's NIC, when ROCESIM_STANDIN_SCENARIO names the stand-in cluster; exits with
/// 2 when it cannot be read.
std::optional<Timing> ground_truth_nic() {
  const char* path = std::getenv("ROCESIM_STANDIN_SCENARIO");
  if (path == nullptr || *path == '\0') return std::nullopt;
  try {
    rocesim::scenario::Overrides o = rocesim::standin::truth();
    o.skip_workloads = true;
    const auto run = rocesim::scenario::load_scenario(path, o);
    const rocesim::fabric::Fabric& f = run->fabric;
    const rocesim::fabric::NodeId gpu = run->job_ranks.at(0);
    const rocesim::fabric::NodeId nic = f.nic_of_gpu(gpu);
    Timing t;
    double pcie = 0, port = 0;
    for (const rocesim::fabric::LinkId l : f.out_links(gpu)) {
      if (f.link(l).dst != nic) continue;
      pcie = f.link(l).capacity.bytes_per_second();
      t.latency_ns = 2 * f.link(l).latency.in_us() * 1e3;
    }
    for (const rocesim::fabric::LinkId l : f.out_links(nic)) {
      if (f.node(f.link(l).dst).kind != rocesim::fabric::NodeKind::Switch) continue;
      port = f.link(l).capacity.bytes_per_second();
      t.line_gbps = f.link(l).line_rate.in_gbps();
    }
    if (pcie <= 0 || port <= 0) throw std::runtime_error("the job's first GPU has no NIC port");
    t.bytes_per_ns = std::min(pcie, port) * 1e-9;
    return t;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake verbs: the ground truth (ROCESIM_STANDIN_SCENARIO %s): %s\n", path,
                 e.what());
    std::exit(2);
  }
}

/// Sets `p`'s rate as verbs encodes it: a speed code (IBTA SDR to NDR: XDR needs active_speed_ex,
/// which Debian 12's rdma-core lacks) and a width (4X, 1X, 2X, 8X, 12X) with lanes x lane rate =
/// `gbps`; exits with 2 when none does.
void set_rate(ibv_port_attr& p, double gbps) {
  const std::pair<uint8_t, double> speeds[] = {{1, 2.5}, {2, 5},   {4, 10},
                                               {32, 25}, {64, 50}, {128, 100}};
  const std::pair<uint8_t, int> widths[] = {{2, 4}, {1, 1}, {16, 2}, {4, 8}, {8, 12}};
  for (const auto& [width, lanes] : widths) {
    for (const auto& [speed, lane] : speeds) {
      if (std::abs(lanes * lane - gbps) > 1e-6 * gbps) continue;
      p.active_width = width;
      p.active_speed = speed;
      return;
    }
  }
  std::fprintf(stderr, "fake verbs: no InfiniBand speed and width make %g Gb/s\n", gbps);
  std::exit(2);
}

void build_devices(State& s) {
  if (!s.devices.empty()) return;
  // mlx5_0: RoCE.
  auto roce = make_device("mlx5_0", 4129, 0x946dae0300f21a3c);
  FakePort eth = port(IBV_PORT_ACTIVE, IBV_LINK_LAYER_ETHERNET, 128, 2, 0, 1u << 30);
  const uint8_t ll[16] = {0xfe, 0x80, 0,    0,    0,    0,    0,    0,
                          0x96, 0x6d, 0xae, 0xff, 0xfe, 0xf2, 0x1a, 0x3c};
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  eth.gids = {gid(0, 1, IBV_GID_TYPE_ROCE_V1, ll, 1), gid(1, 1, IBV_GID_TYPE_ROCE_V2, ll, 1),
              gid(2, 1, IBV_GID_TYPE_ROCE_V1, v4, 1), gid(3, 1, IBV_GID_TYPE_ROCE_V2, v4, 1)};
  eth.gids.resize(16);  // the rest of the table: empty entries
  eth.attr.gid_tbl_len = 16;
  roce->ports.push_back(eth);
  roce->attr.phys_port_cnt = 1;
  s.devices.push_back(std::move(roce));

  // mlx5_1: InfiniBand, port 2 down; largest message 1 MiB.
  auto ib = make_device("mlx5_1", 4123, 0x0c42a1030065a1b2);
  FakePort p1 = port(IBV_PORT_ACTIVE, IBV_LINK_LAYER_INFINIBAND, 64, 2, 7, 1u << 20);
  FakePort p2 = port(IBV_PORT_DOWN, IBV_LINK_LAYER_INFINIBAND, 0, 0, 0xffff, 1u << 20);
  const uint8_t g1[16] = {0xfe, 0x80, 0,    0,    0, 0,    0,    0,
                          0x0c, 0x42, 0xa1, 0x03, 0, 0x65, 0xa1, 0xb2};
  const uint8_t g2[16] = {0xfe, 0x80, 0,    0,    0, 0,    0,    0,
                          0x0c, 0x42, 0xa1, 0x03, 0, 0x65, 0xa1, 0xb3};
  p1.gids = {gid(0, 1, IBV_GID_TYPE_IB, g1, 0)};
  p2.gids = {gid(0, 2, IBV_GID_TYPE_IB, g2, 0)};
  p1.gids.resize(8);
  p2.gids.resize(8);
  p1.attr.gid_tbl_len = p2.attr.gid_tbl_len = 8;
  ib->ports.push_back(p1);
  ib->ports.push_back(p2);
  ib->attr.phys_port_cnt = 2;
  s.devices.push_back(std::move(ib));

  s.timing = ground_truth_nic();
  if (s.timing) {
    timespec now{};
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &now);
    s.clock_ns = static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
    s.nic_free_ns = s.clock_ns;
    for (auto& d : s.devices) {
      for (FakePort& p : d->ports) {
        if (p.attr.state == IBV_PORT_ACTIVE) set_rate(p.attr, s.timing->line_gbps);
      }
    }
  }
}

/// Timed mode: lands every write due by the clock, in order.
void land_due(State& s) {
  while (!s.in_flight.empty() && s.in_flight.top().due <= s.clock_ns) {
    const InFlight& w = s.in_flight.top();
    if (w.dst != nullptr) {
      std::memmove(w.dst, w.inline_data.empty() ? w.src : w.inline_data.data(), w.length);
    }
    if (w.cq != nullptr) {
      FakeCq& cq = *s.cqs.at(w.cq);
      --cq.in_flight;
      cq.entries.push_back(w.wc);
    }
    s.in_flight.pop();
  }
}

FakeDevice* device_of(ibv_context* ctx) {
  for (auto& d : state().devices) {
    if (&d->device == ctx->device) return d.get();
  }
  return nullptr;
}

FakePort* port_of(ibv_context* ctx, uint8_t port_num) {
  FakeDevice* d = device_of(ctx);
  if (d == nullptr || port_num < 1 || port_num > d->ports.size()) return nullptr;
  return &d->ports[port_num - 1];
}

bool is_zero(const ibv_gid& g) {
  return std::all_of(std::begin(g.raw), std::end(g.raw), [](uint8_t b) { return b == 0; });
}

/// The registered region with `rkey` (or `lkey`) that holds [addr, addr + len), if any.
ibv_mr* region(uint32_t key, bool remote, uint64_t addr, uint64_t len) {
  for (auto& [p, mr] : state().mrs) {
    if ((remote ? mr->rkey : mr->lkey) != key) continue;
    const auto start = reinterpret_cast<uintptr_t>(mr->addr);
    if (addr >= start && addr + len <= start + mr->length) return mr.get();
  }
  return nullptr;
}

int fake_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  State& s = state();
  const auto it = s.qps.find(qp);
  if (it == s.qps.end()) {
    misuse("ibv_post_send on an unknown QP");
    return EINVAL;
  }
  FakeQp& q = *it->second;
  for (; wr != nullptr; wr = wr->next) {
    *bad = wr;
    if (q.qp.state != IBV_QPS_RTS && q.qp.state != IBV_QPS_ERR) return EINVAL;
    if (q.sq.size() >= q.max_send_wr) {
      misuse("send queue overflow: more writes posted than max_send_wr before completions");
      return ENOMEM;
    }
    if (wr->opcode != IBV_WR_RDMA_WRITE || wr->num_sge != 1) return EINVAL;
    const ibv_sge& sge = wr->sg_list[0];
    const bool is_inline = (wr->send_flags & IBV_SEND_INLINE) != 0;
    if (is_inline && sge.length > q.max_inline) return EINVAL;
    if (!is_inline && region(sge.lkey, false, sge.addr, sge.length) == nullptr) {
      misuse("RDMA WRITE from memory outside the lkey's region");
      return EINVAL;
    }
    ibv_wc wc{};
    wc.wr_id = wr->wr_id;
    wc.opcode = IBV_WC_RDMA_WRITE;
    wc.qp_num = q.qp.qp_num;
    wc.status = IBV_WC_SUCCESS;
    ++s.writes;
    const char* wc_error = std::getenv("FAKE_VERBS_WC_ERROR");
    ibv_mr* dst = region(wr->wr.rdma.rkey, true, wr->wr.rdma.remote_addr, sge.length);
    if (q.qp.state == IBV_QPS_ERR) {
      wc.status = IBV_WC_WR_FLUSH_ERR;  // a QP in error flushes what is posted to it
    } else if (wc_error != nullptr && s.writes == std::strtoull(wc_error, nullptr, 10)) {
      wc.status = IBV_WC_RETRY_EXC_ERR;
      wc.vendor_err = 0x81;
    } else if (dst == nullptr) {
      misuse("RDMA WRITE to memory outside the rkey's region");
      wc.status = IBV_WC_REM_ACCESS_ERR;
    }
    auto* to = reinterpret_cast<void*>(static_cast<uintptr_t>(wr->wr.rdma.remote_addr));
    const auto* from = reinterpret_cast<const void*>(static_cast<uintptr_t>(sge.addr));
    const bool lands = wc.status == IBV_WC_SUCCESS;
    const bool signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0 || q.sig_all;
    q.sq.push_back({wr->wr_id, signaled});
    const bool completes = signaled || wc.status != IBV_WC_SUCCESS;
    FakeCq& cq = *s.cqs.at(q.qp.send_cq);
    if (completes &&
        cq.entries.size() + static_cast<size_t>(cq.in_flight) >= static_cast<size_t>(cq.cq.cqe)) {
      misuse("completion queue overrun");
      return ENOMEM;
    }
    if (s.timing) {
      // The NIC takes the write once it is through with the earlier ones.
      InFlight w;
      const double busy = static_cast<double>(sge.length) / s.timing->bytes_per_ns *
                          rocesim::standin::noise_factor(s.writes);
      s.nic_free_ns = std::max(s.nic_free_ns, s.clock_ns) + busy;
      w.due = s.nic_free_ns + s.timing->latency_ns;
      w.order = s.writes;
      if (lands) {
        w.dst = to;
        w.src = from;
        w.length = sge.length;
        if (is_inline) {
          const auto* b = static_cast<const uint8_t*>(from);
          w.inline_data.assign(b, b + sge.length);
        }
      }
      if (completes) {
        w.cq = q.qp.send_cq;
        w.wc = wc;
        ++cq.in_flight;
      }
      s.in_flight.push(std::move(w));
    } else {
      if (lands) std::memmove(to, from, sge.length);
      if (completes) cq.entries.push_back(wc);
    }
    if (wc.status != IBV_WC_SUCCESS) q.qp.state = IBV_QPS_ERR;
  }
  *bad = nullptr;
  return 0;
}

int fake_poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
  State& s = state();
  const auto it = s.cqs.find(cq);
  if (it == s.cqs.end()) {
    misuse("ibv_poll_cq on an unknown CQ");
    return -1;
  }
  if (s.timing) {
    // What is due lands; with nothing for this queue, the CPU spins until the next event in
    // flight.
    land_due(s);
    if (it->second->entries.empty() && !s.in_flight.empty()) {
      s.clock_ns = std::max(s.clock_ns, s.in_flight.top().due);
      land_due(s);
    }
  }
  int got = 0;
  while (got < n && !it->second->entries.empty()) {
    const ibv_wc c = it->second->entries.front();
    it->second->entries.pop_front();
    wc[got++] = c;
    // The completion retires its write and the unsignalled ones before it.
    for (auto& [p, q] : s.qps) {
      if (q->qp.qp_num != c.qp_num) continue;
      while (!q->sq.empty()) {
        const SqEntry e = q->sq.front();
        q->sq.pop_front();
        if (e.wr_id == c.wr_id) break;
      }
    }
  }
  return got;
}

}  // namespace

extern "C" {

// The process's clocks: CLOCK_MONOTONIC is the emulation's in timed mode (the header comment);
// everything else, and everything untimed, is the system's.
int clock_gettime(clockid_t id, timespec* ts) {
  const State& s = state();
  if (id != CLOCK_MONOTONIC || !s.timing) {
    return static_cast<int>(syscall(SYS_clock_gettime, id, ts));
  }
  const auto ns = static_cast<int64_t>(s.clock_ns);
  ts->tv_sec = ns / 1'000'000'000;
  ts->tv_nsec = ns % 1'000'000'000;
  return 0;
}

ibv_device** ibv_get_device_list(int* num_devices) {
  State& s = state();
  build_devices(s);
  const bool none = std::getenv("FAKE_VERBS_DEVICES") != nullptr &&
                    std::strcmp(std::getenv("FAKE_VERBS_DEVICES"), "0") == 0;
  const size_t n = none ? 0 : s.devices.size();
  auto** list = static_cast<ibv_device**>(std::calloc(n + 1, sizeof(ibv_device*)));
  for (size_t i = 0; i < n; ++i)
    list[i] = &s.devices[i]->device;
  if (num_devices != nullptr) *num_devices = static_cast<int>(n);
  ++s.open_lists;
  return list;
}

void ibv_free_device_list(ibv_device** list) {
  --state().open_lists;
  std::free(list);
}

const char* ibv_get_device_name(ibv_device* device) {
  return device->name;
}

__be64 ibv_get_device_guid(ibv_device* device) {
  for (auto& d : state().devices) {
    if (&d->device == device) return htobe64(d->guid);
  }
  return 0;
}

const char* ibv_node_type_str(ibv_node_type node_type) {
  return node_type == IBV_NODE_CA ? "InfiniBand channel adapter" : "unknown";
}

const char* ibv_wc_status_str(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS:
      return "success";
    case IBV_WC_REM_ACCESS_ERR:
      return "remote access error";
    case IBV_WC_RETRY_EXC_ERR:
      return "transport retry counter exceeded";
    case IBV_WC_WR_FLUSH_ERR:
      return "Work Request Flushed Error";
    default:
      return "unknown";
  }
}

ibv_context* ibv_open_device(ibv_device* device) {
  if (fail("ibv_open_device")) return nullptr;
  auto ctx = std::make_unique<ibv_context>();
  ctx->device = device;
  ctx->ops.post_send = fake_post_send;
  ctx->ops.poll_cq = fake_poll_cq;
  ctx->abi_compat = nullptr;  // not an extended context: verbs calls ibv_query_port()
  ibv_context* p = ctx.get();
  state().contexts[p] = std::move(ctx);
  return p;
}

int ibv_close_device(ibv_context* ctx) {
  State& s = state();
  for (auto& [p, pd] : s.pds) {
    if (pd->context == ctx) misuse("ibv_close_device with a PD still allocated");
  }
  for (auto& [p, cq] : s.cqs) {
    if (cq->cq.context == ctx) misuse("ibv_close_device with a CQ still alive");
  }
  return s.contexts.erase(ctx) == 1 ? 0 : EINVAL;
}

int ibv_query_device(ibv_context* ctx, ibv_device_attr* attr) {
  if (fail("ibv_query_device")) return ENOMEM;
  *attr = device_of(ctx)->attr;
  return 0;
}

int ibv_query_port(ibv_context* ctx, uint8_t port_num, _compat_ibv_port_attr* attr) {
  if (fail("ibv_query_port")) return ENOMEM;
  const FakePort* p = port_of(ctx, port_num);
  if (p == nullptr) return EINVAL;
  std::memcpy(static_cast<void*>(attr), &p->attr, sizeof(ibv_port_attr));
  return 0;
}

int ibv_query_gid(ibv_context* ctx, uint8_t port_num, int index, ibv_gid* g) {
  if (fail("ibv_query_gid")) return -1;
  const FakePort* p = port_of(ctx, port_num);
  if (p == nullptr || index < 0 || static_cast<size_t>(index) >= p->gids.size()) return EINVAL;
  *g = p->gids[static_cast<size_t>(index)].gid;
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* ctx, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
  if (env_on("FAKE_VERBS_NO_GID_TABLE")) return -EOPNOTSUPP;
  if (fail("ibv_query_gid_table")) return -ENOMEM;
  if (flags != 0 || entry_size != sizeof(ibv_gid_entry)) return -EINVAL;
  size_t n = 0;
  for (const FakePort& p : device_of(ctx)->ports) {
    for (const ibv_gid_entry& e : p.gids) {
      if (is_zero(e.gid)) continue;
      if (n == max_entries) return -EINVAL;
      entries[n++] = e;
    }
  }
  return static_cast<ssize_t>(n);
}

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  if (fail("ibv_alloc_pd")) return nullptr;
  auto pd = std::make_unique<ibv_pd>();
  pd->context = ctx;
  ibv_pd* p = pd.get();
  state().pds[p] = std::move(pd);
  return p;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  State& s = state();
  for (auto& [p, mr] : s.mrs) {
    if (mr->pd == pd) return EBUSY;
  }
  for (auto& [p, qp] : s.qps) {
    if (qp->qp.pd == pd) return EBUSY;
  }
  return s.pds.erase(pd) == 1 ? 0 : EINVAL;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  if (fail("ibv_reg_mr")) return nullptr;
  State& s = state();
  auto mr = std::make_unique<ibv_mr>();
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->lkey = s.next_key++;
  mr->rkey = (access & IBV_ACCESS_REMOTE_WRITE) != 0 ? s.next_key++ : 0;
  ibv_mr* p = mr.get();
  s.mrs[p] = std::move(mr);
  return p;
}

// Where the access flags are not a compile-time constant (unoptimised builds), verbs.h's
// ibv_reg_mr() calls this one.
ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
  if (iova != reinterpret_cast<uintptr_t>(addr)) {
    misuse("ibv_reg_mr_iova2 with an I/O address other than the buffer's");
    errno = EINVAL;
    return nullptr;
  }
  return ibv_reg_mr(pd, addr, length, static_cast<int>(access));
}

int ibv_dereg_mr(ibv_mr* mr) {
  return state().mrs.erase(mr) == 1 ? 0 : EINVAL;
}

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  if (fail("ibv_create_cq")) return nullptr;
  if (cqe < 1 || cqe > device_of(ctx)->attr.max_cqe || comp_vector != 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto cq = std::make_unique<FakeCq>();
  cq->cq.context = ctx;
  cq->cq.cq_context = cq_context;
  cq->cq.channel = channel;
  cq->cq.cqe = cqe;
  ibv_cq* p = &cq->cq;
  state().cqs[p] = std::move(cq);
  return p;
}

int ibv_destroy_cq(ibv_cq* cq) {
  State& s = state();
  for (auto& [p, qp] : s.qps) {
    if (qp->qp.send_cq == cq || qp->qp.recv_cq == cq) return EBUSY;
  }
  return s.cqs.erase(cq) == 1 ? 0 : EINVAL;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (fail("ibv_create_qp")) return nullptr;
  State& s = state();
  const FakeDevice* d = device_of(pd->context);
  if (init->qp_type != IBV_QPT_RC || init->send_cq == nullptr || init->recv_cq == nullptr ||
      init->cap.max_send_wr > static_cast<uint32_t>(d->attr.max_qp_wr) ||
      init->cap.max_inline_data > 512 ||
      (env_on("FAKE_VERBS_NO_INLINE") && init->cap.max_inline_data > 0)) {
    errno = EINVAL;
    return nullptr;
  }
  auto q = std::make_unique<FakeQp>();
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = init->send_cq;
  q->qp.recv_cq = init->recv_cq;
  q->qp.qp_num = s.next_qpn++;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_type = IBV_QPT_RC;
  q->sig_all = init->sq_sig_all != 0;
  q->max_send_wr = init->cap.max_send_wr;
  // Like mlx5: the inline limit is rounded up to what the WQE layout gives.
  q->max_inline = init->cap.max_inline_data == 0 ? 0 : (init->cap.max_inline_data + 15) / 16 * 16;
  init->cap.max_inline_data = q->max_inline;
  ibv_qp* p = &q->qp;
  s.qps[p] = std::move(q);
  return p;
}

int ibv_destroy_qp(ibv_qp* qp) {
  return state().qps.erase(qp) == 1 ? 0 : EINVAL;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  if (fail("ibv_modify_qp")) return ENOMEM;
  State& s = state();
  const auto it = s.qps.find(qp);
  if (it == s.qps.end()) return EINVAL;
  FakeQp& q = *it->second;
  const auto needs = [&](int m) { return (mask & m) == m; };
  switch (attr->qp_state) {
    case IBV_QPS_INIT:
      if (q.qp.state != IBV_QPS_RESET ||
          !needs(IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) ||
          port_of(q.qp.context, attr->port_num) == nullptr) {
        return EINVAL;
      }
      q.port = attr->port_num;
      break;
    case IBV_QPS_RTR: {
      if (q.qp.state != IBV_QPS_INIT ||
          !needs(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        return EINVAL;
      }
      const FakePort* p = port_of(q.qp.context, q.port);
      if (attr->path_mtu > p->attr.active_mtu || attr->ah_attr.port_num != q.port) return EINVAL;
      bool peer = false;
      for (auto& [ptr, other] : s.qps)
        peer = peer || other->qp.qp_num == attr->dest_qp_num;
      if (!peer) return EINVAL;
      // RoCE needs a GRH; a GRH needs a valid source GID and, for a loopback, one of this port's
      // GIDs as the destination.
      if (p->attr.link_layer == IBV_LINK_LAYER_ETHERNET && attr->ah_attr.is_global == 0) {
        return EINVAL;
      }
      if (attr->ah_attr.is_global != 0) {
        const size_t sgid = attr->ah_attr.grh.sgid_index;
        if (sgid >= p->gids.size() || is_zero(p->gids[sgid].gid)) return EINVAL;
        const bool ours = std::any_of(p->gids.begin(), p->gids.end(), [&](const ibv_gid_entry& e) {
          return !is_zero(e.gid) &&
                 std::memcmp(e.gid.raw, attr->ah_attr.grh.dgid.raw, sizeof(e.gid.raw)) == 0;
        });
        if (!ours) {
          misuse("RTR with a destination GID that is not the port's own (not a loopback)");
          return EINVAL;
        }
      }
      if (p->attr.link_layer == IBV_LINK_LAYER_INFINIBAND && attr->ah_attr.dlid != p->attr.lid) {
        misuse("RTR with a destination LID that is not the port's own (not a loopback)");
        return EINVAL;
      }
      break;
    }
    case IBV_QPS_RTS:
      if (q.qp.state != IBV_QPS_RTR ||
          !needs(IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
        return EINVAL;
      }
      break;
    default:
      return EINVAL;
  }
  q.qp.state = attr->qp_state;
  return 0;
}

}  // extern "C"
