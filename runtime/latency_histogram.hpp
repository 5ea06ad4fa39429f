// Latency histogram with logarithmic buckets (5 % wide), exact count, sum and maximum.
// Backends keep one each and ship it to the stats actor in batches; merging is addition.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace tidemark::runtime {

struct latency_histogram {
  static constexpr std::size_t bucket_count = 400; // 5 % buckets reach ~ 2.7e8 us

  std::vector<std::uint64_t> buckets = std::vector<std::uint64_t>(bucket_count, 0);
  std::uint64_t count = 0;
  std::uint64_t sum_us = 0;
  std::uint64_t max_us = 0;

  static std::size_t bucket_of(std::uint64_t us) {
    std::size_t b = static_cast<std::size_t>(std::log1p(double(us)) / std::log(1.05));
    return b < bucket_count ? b : bucket_count - 1;
  }
  /// Upper edge of bucket b in microseconds.
  static double bucket_upper_us(std::size_t b) { return std::expm1(double(b + 1) * std::log(1.05)); }

  void record(std::uint64_t us) {
    ++buckets[bucket_of(us)];
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
        return std::fmin(bucket_upper_us(b), double(max_us)) / 1000.0;
    }
    return double(max_us) / 1000.0;
  }
  double average_ms() const { return count == 0 ? 0 : double(sum_us) / double(count) / 1000.0; }
};

} // namespace tidemark::runtime
