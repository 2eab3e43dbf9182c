#include "sim/metrics/congestion.hpp"

#include <algorithm>
#include <limits>

namespace rocesim::metrics {

void Series::add(Time t, double value) {
  if (!samples_.empty() && samples_.back().t_ps == t.count_ps()) {
    samples_.back().value = std::max(before_, value);  // the state at the end of the instant
    last_ = value;
    return;
  }
  prev_t_ = last_t_;
  last_t_ = t.count_ps();
  last_ = value;
  if (!samples_.empty() && filled_ == stride_ && samples_.size() == points_) {
    // Full: halve the resolution, keeping each pair's later time and larger value; an unpaired
    // last sample (an odd number of points) goes on filling up to the doubled stride.
    size_t out = 0;
    for (size_t i = 0; i + 1 < samples_.size(); i += 2) {
      samples_[out++] = {samples_[i + 1].t_ps, std::max(samples_[i].value, samples_[i + 1].value)};
    }
    const bool odd = samples_.size() % 2 == 1;
    if (odd) samples_[out++] = samples_.back();
    samples_.resize(out);
    filled_ = odd ? stride_ : 2 * stride_;
    stride_ *= 2;
  }
  if (!samples_.empty() && filled_ < stride_) {  // another instant of the last sample
    before_ = samples_.back().value;
    samples_.back() = {t.count_ps(), std::max(before_, value)};
    ++filled_;
    return;
  }
  samples_.push_back({t.count_ps(), value});
  before_ = -std::numeric_limits<double>::infinity();
  filled_ = 1;
}

void Series::close() {
  if (samples_.empty() || filled_ < 2 || samples_.back().value == last_) return;
  samples_.back().t_ps = prev_t_;  // its largest came before the last instant
  samples_.push_back({last_t_, last_});
  filled_ = stride_;
}

CongestionRecorder::CongestionRecorder(const fabric::Fabric& f, size_t qp_series)
    : fabric_(f), qp_series_(qp_series) {}

void CongestionRecorder::seen() {
  // The per-link tables are made at the first event: a model without queues reports none, and
  // a fabric of 65,536 hosts would otherwise fill 28 MB of them with zeros.
  if (seen_) return;
  seen_ = true;
  links_.resize(fabric_.link_count());
  paused_since_.assign(fabric_.link_count(), Time::infinity());
  depth_.resize(fabric_.link_count());
  queue_at_.assign(fabric_.link_count(), nullptr);
}

void CongestionRecorder::on_queue(fabric::LinkId link, network::TrafficClass c, Time t,
                                  double bytes) {
  seen();
  depth_[link][static_cast<size_t>(c)] = bytes;
  double depth = 0;
  for (const double d : depth_[link])
    depth += d;
  links_[link].max_queue = std::max(links_[link].max_queue, depth);
  Series*& series = queue_at_[link];
  if (series == nullptr) series = &queue_series_.try_emplace(link).first->second;
  series->add(t, depth);
}

void CongestionRecorder::on_pause(fabric::LinkId link, network::TrafficClass, Time t, bool paused) {
  seen();
  if (paused) {
    ++links_[link].pauses;
    paused_since_[link] = t;
  } else if (!paused_since_[link].is_infinite()) {
    links_[link].paused_s += (t - paused_since_[link]).in_seconds();
    paused_since_[link] = Time::infinity();
  }
}

void CongestionRecorder::on_ecn(fabric::LinkId link, Time, double packets) {
  seen();
  links_[link].ecn_marks += packets;
}

void CongestionRecorder::on_cnp(network::QpId, Time, double cnps) {
  seen();
  cnps_ += cnps;
}

void CongestionRecorder::on_drop(fabric::LinkId link, network::TrafficClass, Time, double bytes) {
  seen();
  links_[link].drops += bytes;
}

void CongestionRecorder::on_rate(network::QpId qp, Time t, double bytes_per_second) {
  seen();
  if (qp >= rate_at_.size()) rate_at_.resize(qp + 1, nullptr);
  Series*& series = rate_at_[qp];
  if (series == &refused_) return;
  if (series == nullptr) {
    if (rate_series_.size() >= qp_series_) {
      series = &refused_;
      return;
    }
    series = &rate_series_.try_emplace(qp).first->second;
  }
  series->add(t, bytes_per_second);
}

void CongestionRecorder::finalize(Time end) {
  for (auto& [link, series] : queue_series_)
    series.close();
  for (auto& [qp, series] : rate_series_)
    series.close();
  for (fabric::LinkId l = 0; l < links_.size(); ++l) {
    if (!paused_since_[l].is_infinite()) {
      links_[l].paused_s += (end - paused_since_[l]).in_seconds();
      paused_since_[l] = end;
    }
  }
  tiers_.assign(fabric_.link_classes().size(), TierCongestion{});
  for (size_t c = 0; c < tiers_.size(); ++c)
    tiers_[c].link_class = fabric_.link_classes()[c];
  for (fabric::LinkId l = 0; l < fabric_.link_count(); ++l) {
    TierCongestion& t = tiers_[fabric_.link(l).link_class];
    ++t.links;
    if (links_.empty()) continue;  // nothing was reported
    const LinkCongestion& x = links_[l];
    t.paused_fraction += x.paused_s;
    t.pauses += x.pauses;
    t.max_queue = std::max(t.max_queue, x.max_queue);
    t.ecn_marks += x.ecn_marks;
    t.drops += x.drops;
  }
  const double horizon = end.in_seconds();
  for (TierCongestion& t : tiers_) {
    t.paused_fraction = horizon > 0 && t.links > 0
                            ? t.paused_fraction / (horizon * static_cast<double>(t.links))
                            : 0;
  }
}

}  // namespace rocesim::metrics
