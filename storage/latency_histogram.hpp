// Latency histogram with logarithmic buckets (5 % wide, latency_buckets), exact count, sum
// and maximum. Benchmark clients keep one each and ship it to the stats actor in batches
// (messages::progress_report); merging is addition. Snapshots of an
// atomic_latency_histogram (WAL and ring fdatasyncs) are read through it too, so every
// latency is read with the same quantile code. Plain values, no actor system.
#pragma once

#include "storage/latency_buckets.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

namespace tidemark::storage {

struct latency_histogram {
  static constexpr std::size_t bucket_count = latency_buckets::count;

  std::vector<std::uint64_t> buckets = std::vector<std::uint64_t>(bucket_count, 0);
  std::uint64_t count = 0;
  std::uint64_t sum_us = 0;
  std::uint64_t max_us = 0;

  /// The histogram of bucket counts alone (from an atomic_latency_histogram snapshot): the
  /// sum is unknown and the maximum is taken as the top non-empty bucket's upper edge.
  static latency_histogram of_buckets(std::vector<std::uint64_t> counts) {
    latency_histogram h;
    h.buckets = std::move(counts);
    h.buckets.resize(bucket_count);
    for (std::size_t b = 0; b < bucket_count; ++b) {
      h.count += h.buckets[b];
      if (h.buckets[b] > 0)
        h.max_us = static_cast<std::uint64_t>(latency_buckets::upper_us(b));
    }
    return h;
  }

  void record(std::uint64_t us) {
    ++buckets[latency_buckets::bucket_of(us)];
    ++count;
    sum_us += us;
    if (us > max_us)
      max_us = us;
  }

  void merge(const latency_histogram& other) {
    for (std::size_t i = 0; i < bucket_count && i < other.buckets.size(); ++i)
      buckets[i] += other.buckets[i];
    count += other.count;
    sum_us += other.sum_us;
    if (other.max_us > max_us)
      max_us = other.max_us;
  }

  void clear() { *this = latency_histogram{}; }

  /// Latency at quantile q (0..1) in milliseconds; never above the observed maximum.
  double quantile_ms(double q) const {
    if (count == 0)
      return 0;
    std::uint64_t rank = static_cast<std::uint64_t>(std::ceil(q * double(count)));
    std::uint64_t seen = 0;
    for (std::size_t b = 0; b < bucket_count; ++b) {
      seen += buckets[b];
      if (seen >= rank && seen > 0)
        return std::fmin(latency_buckets::upper_us(b), double(max_us)) / 1000.0;
    }
    return double(max_us) / 1000.0;
  }
  double average_ms() const { return count == 0 ? 0 : double(sum_us) / double(count) / 1000.0; }
};

} // namespace tidemark::storage
