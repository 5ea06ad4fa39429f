// The public statistics (include/tidemark/statistics.hpp): latency distributions over the
// storage layer's logarithmic buckets, and a snapshot of the engine's counters.
#include "runtime/api_statistics.hpp"

#include "storage/latency_buckets.hpp"

#include <cmath>

namespace tidemark {

static_assert(latency_distribution::bucket_count == storage::latency_buckets::count,
              "the public distribution uses the storage layer's buckets");

double latency_distribution::upper_us(std::size_t bucket) {
  return storage::latency_buckets::upper_us(bucket);
}

latency_distribution::latency_distribution() : buckets_(bucket_count, 0) {}

latency_distribution latency_distribution::of_buckets(std::vector<std::uint64_t> counts) {
  latency_distribution d;
  d.buckets_ = std::move(counts);
  d.buckets_.resize(bucket_count);
  d.sum_known_ = false;
  for (std::size_t b = 0; b < bucket_count; ++b) {
    d.count_ += d.buckets_[b];
    if (d.buckets_[b] > 0)
      d.max_us_ = static_cast<std::uint64_t>(upper_us(b));
  }
  return d;
}

void latency_distribution::record(std::uint64_t microseconds) {
  ++buckets_[storage::latency_buckets::bucket_of(microseconds)];
  ++count_;
  sum_us_ += microseconds;
  if (microseconds > max_us_)
    max_us_ = microseconds;
}

void latency_distribution::merge(const latency_distribution& other) {
  for (std::size_t b = 0; b < bucket_count; ++b)
    buckets_[b] += other.buckets_[b];
  count_ += other.count_;
  sum_us_ += other.sum_us_;
  sum_known_ = sum_known_ && other.sum_known_;
  if (other.max_us_ > max_us_)
    max_us_ = other.max_us_;
}

latency_distribution latency_distribution::since(const latency_distribution& earlier) const {
  latency_distribution d = *this;
  for (std::size_t b = 0; b < bucket_count; ++b)
    d.buckets_[b] -= earlier.buckets_[b];
  d.count_ -= earlier.count_;
  d.sum_us_ -= earlier.sum_us_;
  d.sum_known_ = sum_known_ && earlier.sum_known_;
  if (!d.sum_known_) { // the top bucket that gained, as of_buckets would say
    d.max_us_ = 0;
    for (std::size_t b = 0; b < bucket_count; ++b)
      if (d.buckets_[b] > 0)
        d.max_us_ = static_cast<std::uint64_t>(upper_us(b));
  }
  return d;
}

double latency_distribution::quantile_ms(double q) const {
  if (count_ == 0)
    return 0;
  auto rank = static_cast<std::uint64_t>(std::ceil(q * double(count_)));
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < bucket_count; ++b) {
    seen += buckets_[b];
    if (seen >= rank && seen > 0)
      return std::fmin(upper_us(b), double(max_us_)) / 1000.0;
  }
  return double(max_us_) / 1000.0;
}

double latency_distribution::average_ms() const {
  return count_ == 0 || !sum_known_ ? 0 : double(sum_us_) / double(count_) / 1000.0;
}

statistics collect_statistics(runtime::engine& e) {
  using storage::write_source;
  statistics s;
  if (e.store.wal) { // none when open read-only
    const auto& wal = e.store.wal->counters();
    s.wal.bytes = wal.bytes.load();
    s.wal.records = wal.records.load();
    s.wal.full_page_images = wal.fpi.load();
    s.wal.fsyncs = wal.fsyncs.load();
    s.wal.fsync_micros = wal.fsync_micros.load();
    s.wal.fsync_latency = latency_distribution::of_buckets(wal.fsync_latency.snapshot());
  }
  s.buffers.pool_size = e.store.pool->size();
  for (storage::buffer_id b = 0; b < e.store.pool->size(); ++b)
    s.buffers.dirty += e.store.pool->is_dirty(b);
  s.buffers.allocated = e.store.pool->counters().allocations.load();
  s.buffers.from_supply = e.store.pool->counters().supplied.load();
  s.buffers.supply_alarms = e.store.pool->counters().supply_low.load();
  if (e.store.writer) {
    s.buffers.written_by_sessions = e.store.writer->written(write_source::backend);
    s.buffers.written_by_bgwriter = e.store.writer->written(write_source::bgwriter);
    s.buffers.written_by_checkpointer = e.store.writer->written(write_source::checkpointer);
  }
  s.buffers.bgwriter_maxwritten_clean = e.counters.bgwriter.maxwritten_clean.load();
  s.checkpoints.phase = e.counters.checkpoints.phase.load();
  s.checkpoints.timed = e.counters.checkpoints.timed.load();
  s.checkpoints.requested = e.counters.checkpoints.requested.load();
  s.checkpoints.write_ms = e.counters.checkpoints.write_ms.load();
  s.checkpoints.sync_ms = e.counters.checkpoints.sync_ms.load();
  s.syncs.requests = e.counters.syncs.requests.load();
  s.syncs.absorbed = e.counters.syncs.absorbed.load();
  s.syncs.fsyncs = e.counters.syncs.fsyncs.load();
  if (e.store.ring) {
    auto& dw = e.store.ring->counters();
    s.doublewrite.ring_pages = e.store.ring->ring_pages();
    s.doublewrite.batches = dw.batches.load();
    s.doublewrite.pages = dw.pages.load();
    s.doublewrite.bytes = dw.bytes.load();
    s.doublewrite.fsyncs = dw.fsyncs.load();
    s.doublewrite.slot_waits = dw.slot_waits.load();
    s.doublewrite.ring_full_waits = dw.ring_full.load();
    s.doublewrite.fsync_latency = latency_distribution::of_buckets(dw.fsync_latency.snapshot());
  }
  if (e.faults != nullptr)
    s.fault_writes_issued = e.faults->writes_issued();
  s.failed = e.failed();
  if (s.failed)
    s.failure = e.failure();
  return s;
}

} // namespace tidemark
