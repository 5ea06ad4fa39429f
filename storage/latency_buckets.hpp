// Logarithmic latency buckets (5 % wide, 400 of them reaching ~2.7e8 µs) and an atomic
// histogram over them that any thread may record into without a lock. The WAL and the
// doublewrite ring keep one each for their fdatasyncs; the public latency_distribution
// (tidemark/statistics.hpp) reads them with its quantile code.
//
// Invariants:
//  - bucket_of(us) is the first bucket whose upper edge is at or above us (last bucket for
//    anything larger), so a quantile read from the buckets overstates by at most 5 %.
//  - record() only increments; a snapshot taken while others record is a valid histogram
//    of some subset of the recorded values (each counter is read once).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tidemark::storage {

struct latency_buckets {
  static constexpr std::size_t count = 400;

  static std::size_t bucket_of(std::uint64_t us) {
    std::size_t b = static_cast<std::size_t>(std::log1p(double(us)) / std::log(1.05));
    return b < count ? b : count - 1;
  }
  /// Upper edge of bucket b in microseconds.
  static double upper_us(std::size_t b) { return std::expm1(double(b + 1) * std::log(1.05)); }
};

class atomic_latency_histogram {
public:
  void record(std::uint64_t us) {
    buckets_[latency_buckets::bucket_of(us)].fetch_add(1, std::memory_order_relaxed);
  }
  /// Records the time since `started` (a call just timed); returns it in microseconds.
  std::uint64_t record_since(std::chrono::steady_clock::time_point started) {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::steady_clock::now() - started)
                .count();
    record(static_cast<std::uint64_t>(us));
    return static_cast<std::uint64_t>(us);
  }
  /// The count in each bucket, as of some moment during the call.
  std::vector<std::uint64_t> snapshot() const {
    std::vector<std::uint64_t> counts(latency_buckets::count);
    for (std::size_t b = 0; b < latency_buckets::count; ++b)
      counts[b] = buckets_[b].load(std::memory_order_relaxed);
    return counts;
  }

private:
  std::array<std::atomic<std::uint64_t>, latency_buckets::count> buckets_{};
};

} // namespace tidemark::storage
