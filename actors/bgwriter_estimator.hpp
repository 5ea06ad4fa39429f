// The bgwriter's arithmetic (PostgreSQL's BgBufferSync, without the I/O): where the cleaner
// stands relative to the clock hand, the smoothed allocation and density estimates, and how
// many reusable buffers the next round should leave ahead of the hand. Pure, so it is
// unit-tested directly.
//
// Invariants:
//  - smoothed_alloc jumps to a higher observation at once and decays toward a lower one
//    with weight 1/16 (fast attack, slow decline).
//  - The cleaner never runs more than one lap ahead of the hand; when the hand passes it,
//    it restarts at the hand.
#pragma once

#include <cstdint>

namespace tidemark::actors {

struct clock_reading {
  std::uint32_t hand = 0;
  std::uint64_t passes = 0;
  std::uint64_t allocations = 0; // cumulative
};

struct cleaning_plan {
  std::uint32_t start = 0;      // buffer to clean first
  std::uint32_t to_scan = 0;    // buffers at most to look at (bufs_to_lap)
  double reusable_estimate = 0; // reusable buffers believed ahead already
  double target = 0;            // reusable buffers wanted ahead after this round
  std::uint64_t recent_allocations = 0;
};

class bgwriter_estimator {
public:
  static constexpr double smoothing_samples = 16;
  static constexpr double scan_whole_pool_ms = 120000;

  bgwriter_estimator(std::uint32_t buffers, double multiplier, double delay_ms)
    : buffers_(buffers), multiplier_(multiplier), delay_ms_(delay_ms) {}

  /// New bgwriter_lru_multiplier and bgwriter_delay (a reload): the smoothed history stays.
  void retune(double multiplier, double delay_ms) {
    multiplier_ = multiplier;
    delay_ms_ = delay_ms;
  }

  /// Plans this round from the clock's position.
  cleaning_plan plan(const clock_reading& now);
  /// Reports what the round did: scanned buffers, where it stopped, reusable buffers found.
  void finished(const cleaning_plan& plan, std::uint32_t scanned, std::uint32_t next_to_clean,
                std::uint64_t next_passes, double reusable_found);

  /// True when the last plan found nothing to do: the cleaner a full lap ahead of the hand
  /// and no allocations since the round before.
  bool idle() const { return idle_; }
  double smoothed_alloc() const { return smoothed_alloc_; }
  double smoothed_density() const { return smoothed_density_; }
  std::uint64_t next_passes() const { return next_passes_; }

private:
  std::uint32_t buffers_;
  double multiplier_;
  double delay_ms_;
  bool saved_ = false;
  clock_reading previous_;
  std::uint32_t next_to_clean_ = 0;
  std::uint64_t next_passes_ = 0;
  double smoothed_alloc_ = 0;
  double smoothed_density_ = 10.0;
  bool idle_ = false;
};

} // namespace tidemark::actors
