// latency_buckets and atomic_latency_histogram: every value lands in the bucket whose upper
// edge is the first at or above it, and concurrent records are all counted.
#include "storage/latency_buckets.hpp"

#include <doctest/doctest.h>

#include <numeric>
#include <thread>
#include <vector>

using namespace tidemark::storage;

TEST_CASE("latency_buckets: a value's bucket is the first whose upper edge reaches it") {
  for (std::uint64_t us : {0ull, 1ull, 2ull, 19ull, 20ull, 21ull, 90ull, 250ull, 1000ull, 1999ull,
                           65536ull, 10'000'000ull}) {
    std::size_t b = latency_buckets::bucket_of(us);
    CHECK(latency_buckets::upper_us(b) >= double(us));
    if (b > 0)
      CHECK(latency_buckets::upper_us(b - 1) < double(us) * 1.0000001 + 1e-9);
  }
  CHECK(latency_buckets::bucket_of(~0ull) == latency_buckets::count - 1);
}

TEST_CASE("atomic_latency_histogram: records from several threads are all counted") {
  atomic_latency_histogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&h, t] {
      for (std::uint64_t i = 0; i < 10'000; ++i)
        h.record(t == 0 ? 100 : 5000);
    });
  for (auto& thread : threads)
    thread.join();
  std::vector<std::uint64_t> counts = h.snapshot();
  REQUIRE(counts.size() == latency_buckets::count);
  CHECK(std::accumulate(counts.begin(), counts.end(), std::uint64_t{0}) == 40'000);
  CHECK(counts[latency_buckets::bucket_of(100)] == 10'000);
  CHECK(counts[latency_buckets::bucket_of(5000)] == 30'000);
}
