// The bgwriter's arithmetic: see bgwriter_estimator.hpp (PostgreSQL's BgBufferSync steps).
#include "actors/bgwriter_estimator.hpp"

#include <algorithm>

namespace tidemark::actors {

cleaning_plan bgwriter_estimator::plan(const clock_reading& now) {
  cleaning_plan p;
  std::int64_t strategy_delta = 0;
  std::uint32_t bufs_to_lap;
  bool first = !saved_;
  if (!first) {
    strategy_delta = std::int64_t(now.hand) - std::int64_t(previous_.hand) +
                     std::int64_t(now.passes - previous_.passes) * buffers_;
    if (next_passes_ > now.passes) { // a lap ahead of the hand
      bufs_to_lap = now.hand - next_to_clean_;
    } else if (next_passes_ == now.passes && next_to_clean_ >= now.hand) {
      bufs_to_lap = buffers_ - (next_to_clean_ - now.hand);
    } else { // the hand passed the cleaner: restart at the hand
      next_to_clean_ = now.hand;
      next_passes_ = now.passes;
      bufs_to_lap = buffers_;
    }
  } else {
    next_to_clean_ = now.hand;
    next_passes_ = now.passes;
    bufs_to_lap = buffers_;
    saved_ = true;
  }
  p.recent_allocations = first ? 0 : now.allocations - previous_.allocations;
  previous_ = now;
  double recent = double(p.recent_allocations);
  if (strategy_delta > 0 && recent > 0)
    smoothed_density_ += (double(strategy_delta) / recent - smoothed_density_) / smoothing_samples;
  std::uint32_t bufs_ahead = buffers_ - bufs_to_lap;
  p.reusable_estimate = double(bufs_ahead) / smoothed_density_;
  if (recent >= smoothed_alloc_)
    smoothed_alloc_ = recent; // fast attack
  else
    smoothed_alloc_ += (recent - smoothed_alloc_) / smoothing_samples; // slow decline
  double upcoming = smoothed_alloc_ * multiplier_;
  if (static_cast<std::int64_t>(upcoming) == 0)
    smoothed_alloc_ = 0;
  double min_scan = double(buffers_) / (scan_whole_pool_ms / delay_ms_);
  p.target = std::max(upcoming, 0.0);
  if (p.target < min_scan + p.reusable_estimate)
    p.target = min_scan + p.reusable_estimate;
  p.start = next_to_clean_;
  p.to_scan = bufs_to_lap;
  idle_ = bufs_to_lap == 0 && p.recent_allocations == 0; // lapped the hand, nothing allocated
  return p;
}

void bgwriter_estimator::finished(const cleaning_plan& plan, std::uint32_t scanned,
                                  std::uint32_t next_to_clean, std::uint64_t next_passes,
                                  double reusable_found) {
  next_to_clean_ = next_to_clean;
  next_passes_ = next_passes;
  double found = reusable_found - plan.reusable_estimate;
  if (scanned > 0 && found > 0)
    smoothed_density_ += (double(scanned) / found - smoothed_density_) / smoothing_samples;
}

} // namespace tidemark::actors
