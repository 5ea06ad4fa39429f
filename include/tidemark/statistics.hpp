// What the engine has done since the database was opened: WAL, buffer writes by writer,
// checkpoints, syncs, the doublewrite buffer, and latency distributions. A snapshot is
// cheap (a few hundred atomic loads and one pass over the buffer headers); take two and
// subtract to measure an interval.
#pragma once

#include <tidemark/options.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tidemark {

/// Latencies in logarithmic buckets 5 % wide (bucket i reaches upper_us(i)), with an exact
/// count, and a sum and maximum where they are known. Quantiles overstate by at most 5 %.
/// Merging is addition; thread-compatible, not thread-safe.
class latency_distribution {
public:
  static constexpr std::size_t bucket_count = 400;
  static double upper_us(std::size_t bucket);

  latency_distribution();
  /// From bucket counts alone (the maximum is taken as the top non-empty bucket's edge).
  static latency_distribution of_buckets(std::vector<std::uint64_t> counts);

  void record(std::uint64_t microseconds);
  void merge(const latency_distribution& other);
  /// This one minus an earlier snapshot of the same series (the maximum stays this one's).
  latency_distribution since(const latency_distribution& earlier) const;

  std::uint64_t count() const { return count_; }
  double quantile_ms(double q) const; // 0..1; 1 gives the maximum
  double average_ms() const;          // 0 where the sum is unknown
  double max_ms() const { return double(max_us_) / 1000.0; }
  const std::vector<std::uint64_t>& buckets() const { return buckets_; }

private:
  std::vector<std::uint64_t> buckets_;
  std::uint64_t count_ = 0;
  std::uint64_t sum_us_ = 0;
  std::uint64_t max_us_ = 0;
  bool sum_known_ = true;
};

struct statistics {
  struct wal_counters {
    std::uint64_t bytes = 0, records = 0, full_page_images = 0;
    std::uint64_t fsyncs = 0, fsync_micros = 0;
    latency_distribution fsync_latency;
  } wal;
  struct buffer_counters {
    std::uint64_t pool_size = 0;           // buffers
    std::uint64_t dirty = 0;               // now
    std::uint64_t allocated = 0;           // buffers handed out for a page not in the pool
    std::uint64_t from_supply = 0;         // of which the bgwriter had cleaned and set aside
    std::uint64_t supply_alarms = 0;       // sessions found that supply low and woke the bgwriter
    std::uint64_t written_by_sessions = 0; // dirty victims a session wrote itself
    std::uint64_t written_by_bgwriter = 0;
    std::uint64_t written_by_checkpointer = 0;
    std::uint64_t bgwriter_maxwritten_clean = 0; // bgwriter rounds cut short by lru_maxpages
  } buffers;
  struct checkpoint_counters {
    checkpoint_phase phase = checkpoint_phase::idle; // now
    std::uint64_t timed = 0, requested = 0;
    std::uint64_t write_ms = 0, sync_ms = 0;
  } checkpoints;
  struct sync_counters {
    std::uint64_t requests = 0, absorbed = 0, fsyncs = 0;
  } syncs;
  struct doublewrite_counters {
    std::uint64_t ring_pages = 0; // 0 unless torn_page_protection=doublewrite
    std::uint64_t batches = 0, pages = 0, bytes = 0, fsyncs = 0;
    std::uint64_t slot_waits = 0, ring_full_waits = 0;
    latency_distribution fsync_latency;
  } doublewrite;
  std::uint64_t commits = 0;             // acknowledged (or, asynchronous, logged) commits
  std::uint64_t conflicts = 0;           // commits refused with conflict_error
  std::uint64_t fault_writes_issued = 0; // writes the fault-injecting engine saw (test hook)
  bool failed = false;                   // the engine stopped after a failure
  std::string failure;                   // why
};

} // namespace tidemark
