// What a network model with queues reports, gathered for the summary and results.h5: per link,
// pauses, paused time, deepest queue, ECN marks and drops; per link class (tier) the same summed;
// CNPs per QP; and bounded, down-sampled time series of queue depth per link and of rate per QP.
// It observes the model (network::NetworkObserver); the model never writes metrics itself.
//
// Definitions:
//  * paused time of a link: time its sender was paused (PFC, lossless class);
//  * paused fraction of a tier: paused time summed over its links / (links x run time);
//  * a series keeps at most `points` samples: when full, every two neighbours become one (the
//    later time, the larger value), so a series of any length stays within its bound and keeps
//    its peaks.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "sim/fabric/fabric.hpp"
#include "sim/network/network_model.hpp"

namespace rocesim::metrics {

struct LinkCongestion {
  uint64_t pauses = 0;
  double paused_s = 0;
  double max_queue = 0;  // bytes, all classes
  double ecn_marks = 0;  // packets
  double drops = 0;      // bytes
};

struct TierCongestion {
  std::string link_class;
  size_t links = 0;
  double paused_fraction = 0;
  uint64_t pauses = 0;
  double max_queue = 0;
  double ecn_marks = 0;
  double drops = 0;
};

struct Sample {
  int64_t t_ps;
  double value;
};

/// A down-sampled time series of at most `points` samples at a uniform spacing: each sample
/// is the largest of `stride` consecutive instants' values, stamped with the last instant's
/// time. When full, neighbours pair up (the later time, the larger value) and the stride
/// doubles, so its peaks survive, old and new samples cover as many instants, and its size is
/// bounded whatever the run's length. Closed, it ends with the last instant's own value (a
/// queue that drained ends at 0), one sample over the bound at most.
class Series {
 public:
  explicit Series(size_t points = 512) : points_(points) {}
  /// The value at the end of instant `t` (a later call at the same instant replaces it).
  void add(Time t, double value);
  /// Ends the series with the last instant's value where the last sample's largest is an
  /// earlier one's (which it then is stamped with).
  void close();
  const std::vector<Sample>& samples() const { return samples_; }

 private:
  size_t points_;
  std::vector<Sample> samples_;
  uint64_t stride_ = 1;  // instants a sample covers
  uint64_t filled_ = 0;  // instants the last sample covers so far
  // The largest value of the last sample's instants before its last one.
  double before_ = -std::numeric_limits<double>::infinity();
  int64_t last_t_ = 0, prev_t_ = 0;  // the last instant and the one before
  double last_ = 0;                  // the last instant's value
};

class CongestionRecorder final : public network::NetworkObserver {
 public:
  /// Keeps rate series for at most `qp_series` QPs (the first whose rate changes).
  explicit CongestionRecorder(const fabric::Fabric& f, size_t qp_series = 64);

  void on_queue(fabric::LinkId link, network::TrafficClass c, Time t, double bytes) override;
  void on_pause(fabric::LinkId link, network::TrafficClass c, Time t, bool paused) override;
  void on_ecn(fabric::LinkId link, Time t, double packets) override;
  void on_cnp(network::QpId qp, Time t, double cnps) override;
  void on_drop(fabric::LinkId link, network::TrafficClass c, Time t, double bytes) override;
  void on_rate(network::QpId qp, Time t, double bytes_per_second) override;

  /// The model reports congestion: its figures are results even if nothing congests (zeros).
  void expect_reports() { seen(); }
  /// Closes pauses still on at `end` and sums the tiers.
  void finalize(Time end);

  /// Whether there are congestion figures: the model reports them (expect_reports) or reported
  /// an event.
  bool any() const { return seen_; }
  const std::vector<LinkCongestion>& links() const { return links_; }
  const std::vector<TierCongestion>& tiers() const { return tiers_; }
  double cnps() const { return cnps_; }
  const std::map<fabric::LinkId, Series>& queue_series() const { return queue_series_; }
  const std::map<network::QpId, Series>& rate_series() const { return rate_series_; }

 private:
  /// Marks that the model reported something, and makes the per-link tables then.
  void seen();
  const fabric::Fabric& fabric_;
  size_t qp_series_;
  bool seen_ = false;
  std::vector<LinkCongestion> links_;
  std::vector<Time> paused_since_;  // Time::infinity() when not paused
  std::vector<TierCongestion> tiers_;
  double cnps_ = 0;
  std::map<fabric::LinkId, Series> queue_series_;
  std::map<network::QpId, Series> rate_series_;
  // Direct lookups of the series (the models report every step): a link's queue series once
  // made; a QP's rate series, or &refused_ when the table was full as it first reported (it
  // never shrinks).
  std::vector<Series*> queue_at_;
  std::vector<Series*> rate_at_;
  Series refused_;
  // The latest depth of each class's queue, per link.
  std::vector<std::array<double, network::kTrafficClasses>> depth_;
};

}  // namespace rocesim::metrics
