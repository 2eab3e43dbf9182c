#include "calibrate/nicprobe/loopback.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "calibrate/nicprobe/verbs.hpp"
#include "validation/lib/validate.hpp"

namespace rocesim::nicprobe {
namespace {

using calibrate::NicProbeDevice;
using calibrate::NicProbeLoopback;
using calibrate::NicProbePort;
using calibrate::NicProbeRow;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kInlineRequest = 220;  // perftest's default inline size for ib_write_lat
constexpr int kSignalEvery = 16;          // one signalled write per this many
constexpr std::chrono::seconds kStallLimit{10};

/// One queue pair with its completion queue and its registered buffer: the send half is
/// [0, max_size), the receive half [max_size, 2 max_size).
struct Side {
  HostBuffer buffer;
  Mr mr;
  Cq cq;
  Qp qp;
  size_t max_size = 0;
  // Writes are numbered from 1 (wr_id) over the whole run. Completions arrive in order and a
  // signalled one retires the unsignalled ones before it, so every write up to `completed` is
  // done and posted - completed are in the send queue.
  uint64_t posted = 0;
  uint64_t completed = 0;

  uint8_t* send() const { return buffer.data(); }
  uint8_t* recv() const { return buffer.data() + max_size; }
};

/// Polls `side`'s CQ once; every completion must be a success. Returns the number polled.
int poll(Side& side, const std::string& what) {
  std::array<ibv_wc, 16> wc{};
  const int n = ibv_poll_cq(side.cq.get(), static_cast<int>(wc.size()), wc.data());
  if (n < 0) throw DeviceError(fmt::format("ibv_poll_cq({}) failed: returned {}", what, n));
  for (int i = 0; i < n; ++i) {
    const ibv_wc& c = wc[static_cast<size_t>(i)];
    if (c.status != IBV_WC_SUCCESS) {
      throw DeviceError(fmt::format(
          "RDMA WRITE ({}) completed with an error: {} (ibv_wc_status {}, vendor error 0x{:x})",
          what, ibv_wc_status_str(c.status), static_cast<int>(c.status), c.vendor_err));
    }
    side.completed = std::max(side.completed, c.wr_id);
  }
  return n;
}

/// Throws when `since` is more than kStallLimit ago.
void check_stall(Clock::time_point since, const std::string& what) {
  if (Clock::now() - since > kStallLimit) {
    throw DeviceError(fmt::format(
        "the loopback test stalled: {} made no progress for {} s (is loopback traffic dropped, "
        "or the GID unreachable?)",
        what, kStallLimit.count()));
  }
}

class Loopback {
 public:
  Loopback(ibv_device* device, const NicProbeDevice& info, const NicProbePort& port,
           const LoopbackOptions& o, NicProbeLoopback& out)
      : name_(info.name), port_num_(static_cast<uint8_t>(port.port)), ctx_(open_device(device)) {
    // The port as it is now (the listing may be seconds old).
    ibv_port_attr pa{};
    check_rc(ibv_query_port(ctx_.get(), port_num_, &pa),
             fmt::format("ibv_query_port({} port {})", name_, port.port));
    if (pa.state != IBV_PORT_ACTIVE) {
      throw DeviceError(fmt::format("{} port {} is {}: the loopback test needs an ACTIVE port",
                                    name_, port.port, calibrate::port_state_name(pa.state)));
    }
    ethernet_ = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    path_mtu_ = pa.active_mtu;
    out.device = name_;
    out.port = port.port;
    out.link_layer = ethernet_ ? "Ethernet" : "InfiniBand";
    out.mtu = calibrate::decode_ib_mtu(pa.active_mtu).value_or(0);

    // Addressing: RoCE needs a GRH with a GID; InfiniBand uses the LID (and a GRH only when a GID
    // index is asked for).
    gid_index_ = o.gid_index;
    if (ethernet_ && !gid_index_) gid_index_ = choose_gid_index(port);
    if (ethernet_ && !gid_index_) {
      throw DeviceError(fmt::format(
          "{} port {} has no valid GID: a RoCE port needs an IP address on its interface", name_,
          port.port));
    }
    if (gid_index_) {
      if (*gid_index_ >= pa.gid_tbl_len) {
        throw DeviceError(
            fmt::format("--gid-index {} is outside the GID table of {} port {} ({} entries)",
                        *gid_index_, name_, port.port, pa.gid_tbl_len));
      }
      check_rc(ibv_query_gid(ctx_.get(), port_num_, *gid_index_, &gid_),
               fmt::format("ibv_query_gid({} port {} index {})", name_, port.port, *gid_index_));
      if (std::all_of(std::begin(gid_.raw), std::end(gid_.raw), [](uint8_t b) { return b == 0; }))
        throw DeviceError(
            fmt::format("GID index {} of {} port {} is empty", *gid_index_, name_, port.port));
      out.gid_index = *gid_index_;
      for (const calibrate::NicProbeGid& g : port.gids) {
        if (g.index == *gid_index_) out.gid_type = g.type;
      }
    }
    if (!ethernet_) {
      // InfiniBand routes by LID, with or without a GRH; 0 and 0xffff mean none assigned.
      if (pa.lid == 0 || pa.lid == 0xffff) {
        throw DeviceError(
            fmt::format("{} port {} has no LID (is a subnet manager running?)", name_, port.port));
      }
      lid_ = pa.lid;
      out.lid = pa.lid;
    }

    // Limits: the sizes must fit a message and a memory region, the depth the queues.
    const int64_t max_size = o.sizes.empty() ? 1 : o.sizes.back();
    if (static_cast<uint64_t>(max_size) > pa.max_msg_sz) {
      throw DeviceError(fmt::format("{} bytes is over the largest message of {} port {} ({} bytes)",
                                    max_size, name_, port.port, pa.max_msg_sz));
    }
    if (const auto mr_max = info.limit("max_mr_size");
        mr_max && static_cast<uint64_t>(2 * max_size) > *mr_max) {
      throw DeviceError(fmt::format("{} bytes is over the largest memory region of {} ({} bytes)",
                                    2 * max_size, name_, *mr_max));
    }
    tx_depth_ = o.tx_depth;
    if (const auto wr = info.limit("max_qp_wr"); wr && *wr > 0)
      tx_depth_ = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(tx_depth_), *wr));
    if (const auto cqe = info.limit("max_cqe"); cqe && *cqe > 1)
      tx_depth_ = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(tx_depth_), *cqe - 1));
    signal_every_ = std::min(kSignalEvery, tx_depth_);
    out.tx_depth = tx_depth_;

    pd_.reset(check_ptr(ibv_alloc_pd(ctx_.get()), fmt::format("ibv_alloc_pd({})", name_)));
    create_side(a_, static_cast<size_t>(max_size), "A");
    create_side(b_, static_cast<size_t>(max_size), "B");
    out.inline_bytes = static_cast<int>(inline_bytes_);
    connect(a_, b_, "A");
    connect(b_, a_, "B");
  }

  NicProbeRow measure(int64_t bytes, int iters, int warmup) {
    NicProbeRow r;
    r.bytes = bytes;
    const size_t size = static_cast<size_t>(bytes);
    if (warmup > 0) stream(size, warmup);
    const double ns = stream(size, iters);
    r.bw_gbps = 8.0 * static_cast<double>(bytes) * iters / ns;
    r.msg_rate_mpps = iters / ns * 1000.0;
    std::vector<double> lat = ping_pong(size, warmup + iters);
    lat.erase(lat.begin(), lat.begin() + warmup);
    r.lat_us_median = validation::percentile(lat, 0.5);
    r.lat_us_min = *std::min_element(lat.begin(), lat.end());
    r.lat_us_p99 = validation::percentile(lat, 0.99);
    return r;
  }

 private:
  void create_side(Side& s, size_t max_size, const char* which) {
    s.max_size = max_size;
    s.buffer = HostBuffer(2 * max_size);
    s.mr.reset(
        check_ptr(ibv_reg_mr(pd_.get(), s.buffer.data(), s.buffer.size(),
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
                  fmt::format("ibv_reg_mr({}, {} bytes, QP {})", name_, s.buffer.size(), which)));
    s.cq.reset(check_ptr(ibv_create_cq(ctx_.get(), tx_depth_ + 1, nullptr, nullptr, 0),
                         fmt::format("ibv_create_cq({}, {} entries)", name_, tx_depth_ + 1)));
    ibv_qp_init_attr init{};
    init.send_cq = s.cq.get();
    init.recv_cq = s.cq.get();
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 0;
    init.cap.max_send_wr = static_cast<uint32_t>(tx_depth_);
    init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = inline_request_;
    ibv_qp* qp = ibv_create_qp(pd_.get(), &init);
    if (qp == nullptr && inline_request_ > 0) {
      // Some devices (or their drivers) take no inline data: do without.
      inline_request_ = 0;
      init.cap.max_inline_data = 0;
      qp = ibv_create_qp(pd_.get(), &init);
    }
    s.qp.reset(check_ptr(
        qp, fmt::format("ibv_create_qp({}, RC, {} send WRs, QP {})", name_, tx_depth_, which)));
    inline_bytes_ = std::min(inline_bytes_, init.cap.max_inline_data);
  }

  /// RESET -> INIT -> RTR -> RTS of `s`, connected to `peer`.
  void connect(Side& s, const Side& peer, const char* which) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = port_num_;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    check_rc(ibv_modify_qp(s.qp.get(), &attr,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
             fmt::format("ibv_modify_qp({}, QP {}, INIT)", name_, which));

    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = path_mtu_;
    attr.dest_qp_num = peer.qp->qp_num;
    attr.rq_psn = 0;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.port_num = port_num_;
    attr.ah_attr.sl = 0;
    attr.ah_attr.src_path_bits = 0;
    attr.ah_attr.dlid = lid_;
    if (gid_index_) {
      attr.ah_attr.is_global = 1;
      attr.ah_attr.grh.dgid = gid_;
      attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(*gid_index_);
      attr.ah_attr.grh.hop_limit = 64;
      attr.ah_attr.grh.traffic_class = 0;
      attr.ah_attr.grh.flow_label = 0;
    }
    check_rc(ibv_modify_qp(s.qp.get(), &attr,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
             fmt::format("ibv_modify_qp({}, QP {}, RTR)", name_, which));

    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;  // 4.096 us x 2^14 = 67 ms per try
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.sq_psn = 0;
    attr.max_rd_atomic = 1;
    check_rc(ibv_modify_qp(s.qp.get(), &attr,
                           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
             fmt::format("ibv_modify_qp({}, QP {}, RTS)", name_, which));
  }

  /// Posts the next RDMA WRITE of `size` bytes from `from`'s send half into `to`'s receive half
  /// (inline when `allow_inline` and the size fits the QP's inline limit).
  void post_write(Side& from, const Side& to, size_t size, bool signaled, bool allow_inline,
                  const char* which) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(from.send());
    sge.length = static_cast<uint32_t>(size);
    sge.lkey = from.mr->lkey;
    ibv_send_wr wr{};
    wr.wr_id = from.posted + 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    unsigned flags = 0;
    if (signaled) flags |= IBV_SEND_SIGNALED;
    if (allow_inline && size <= inline_bytes_) flags |= IBV_SEND_INLINE;
    wr.send_flags = flags;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(to.recv());
    wr.wr.rdma.rkey = to.mr->rkey;
    ibv_send_wr* bad = nullptr;
    // In the timed loops: the message is formatted only on failure.
    if (const int rc = ibv_post_send(from.qp.get(), &wr, &bad); rc != 0) {
      // A QP that went to the error state may refuse new work: report the completion that put
      // it there, if it is waiting, rather than the refusal.
      poll(from, fmt::format("{} test, {} bytes", which, size));
      throw_verbs(fmt::format("ibv_post_send({}, RDMA WRITE of {} bytes, {})", name_, size, which),
                  rc > 0 ? rc : errno);
    }
    ++from.posted;
  }

  /// The bandwidth test: `iters` writes A -> B with tx_depth_ in flight; nanoseconds taken.
  double stream(size_t size, int iters) {
    const uint64_t first = a_.posted;  // every earlier write is completed
    const uint64_t last = first + static_cast<uint64_t>(iters);
    const auto depth = static_cast<uint64_t>(tx_depth_);
    const std::string what = fmt::format("bandwidth test, {} bytes", size);
    const Clock::time_point t0 = Clock::now();
    Clock::time_point progress = t0;
    uint64_t last_done = a_.completed;
    uint64_t idle_polls = 0;
    while (a_.completed < last) {
      while (a_.posted < last && a_.posted - a_.completed < depth) {
        const uint64_t k = a_.posted + 1 - first;
        const bool signaled = k % static_cast<uint64_t>(signal_every_) == 0 || k == last - first;
        post_write(a_, b_, size, signaled, false, "bandwidth");
      }
      poll(a_, what);
      if (a_.completed != last_done) {
        last_done = a_.completed;
        idle_polls = 0;
      } else if (++idle_polls % 4096 == 0) {
        // Reading the clock costs about as much as a poll: only now and then.
        if (idle_polls == 4096) progress = Clock::now();
        check_stall(progress, what);
      }
    }
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  }

  /// Spins until the byte at `flag` holds `value`; between spins, polls both CQs (an error
  /// completion ends the wait).
  void wait_for(uint8_t* flag, uint8_t value, const std::string& what) {
    const std::atomic_ref<uint8_t> byte(*flag);
    std::optional<Clock::time_point> since;  // the clock is read only once the wait is long
    for (uint64_t spins = 1; byte.load(std::memory_order_acquire) != value; ++spins) {
      if (spins % (1u << 16) == 0) {
        poll(a_, what);
        poll(b_, what);
        if (!since) {
          since = Clock::now();
        } else {
          check_stall(*since, what);
        }
      }
    }
  }

  /// The latency test: `count` round trips A -> B -> A; one-way microseconds of each.
  std::vector<double> ping_pong(size_t size, int count) {
    const std::string what = fmt::format("latency test, {} bytes", size);
    // Clear the bytes polled: the bandwidth test left data in B's receive half.
    std::atomic_ref<uint8_t>(a_.recv()[size - 1]).store(0, std::memory_order_release);
    std::atomic_ref<uint8_t>(b_.recv()[size - 1]).store(0, std::memory_order_release);
    std::vector<double> samples;
    samples.reserve(static_cast<size_t>(count));
    for (int k = 0; k < count; ++k) {
      const auto value = static_cast<uint8_t>(k % 255 + 1);  // never 0, never the last value
      const bool signaled = (k + 1) % signal_every_ == 0 || k + 1 == count;
      const Clock::time_point t0 = Clock::now();
      a_.send()[size - 1] = value;
      post_write(a_, b_, size, signaled, true, "latency ping");
      wait_for(b_.recv() + size - 1, value, what);
      b_.send()[size - 1] = value;
      post_write(b_, a_, size, signaled, true, "latency pong");
      wait_for(a_.recv() + size - 1, value, what);
      const Clock::time_point t1 = Clock::now();
      samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 2);
      if (signaled) {
        // Retire the writes up to these two, keeping the send queues from filling up.
        const Clock::time_point since = Clock::now();
        while (a_.completed < a_.posted || b_.completed < b_.posted) {
          poll(a_, what);
          poll(b_, what);
          check_stall(since, what);
        }
      }
    }
    return samples;
  }

  std::string name_;
  uint8_t port_num_ = 1;
  bool ethernet_ = false;
  ibv_mtu path_mtu_ = IBV_MTU_1024;
  std::optional<int> gid_index_;
  ibv_gid gid_{};
  uint16_t lid_ = 0;
  int tx_depth_ = 128;
  int signal_every_ = kSignalEvery;
  uint32_t inline_request_ = kInlineRequest;
  uint32_t inline_bytes_ = kInlineRequest;
  // Owners in creation order: destroyed in reverse (QPs, CQs, MRs and buffers, PD, context).
  Context ctx_;
  Pd pd_;
  Side a_, b_;
};

}  // namespace

std::optional<int> choose_gid_index(const NicProbePort& port) {
  std::optional<int> v2, any;
  for (const calibrate::NicProbeGid& g : port.gids) {
    if (g.type == "RoCEv2" && !g.ipv4.empty()) return g.index;
    if (g.type == "RoCEv2" && !v2) v2 = g.index;
    if (!any) any = g.index;
  }
  return v2 ? v2 : any;
}

NicProbeLoopback run_loopback(ibv_device* device, const NicProbeDevice& info,
                              const NicProbePort& port, const LoopbackOptions& options) {
  NicProbeLoopback out;
  out.iters = options.iters;
  out.warmup = options.warmup;
  Loopback test(device, info, port, options, out);
  for (const int64_t size : options.sizes)
    out.rows.push_back(test.measure(size, options.iters, options.warmup));
  return out;
}

}  // namespace rocesim::nicprobe
