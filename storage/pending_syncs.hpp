// The pending-sync table: segments with completed writes not yet covered by an fsync.
// Writers register segments (W2); the checkpoint's sync phase takes the whole set and
// fsyncs each segment once, however many writes registered it (absorption).
//
// Invariants:
//  - A segment is in the table from its registration until an fsync that started after
//    that registration has completed (take_all() hands the set over before the fsyncs).
//  - Registrations are deduplicated: the table holds each segment at most once.
#pragma once

#include "storage/page_writer.hpp"
#include "storage/spin.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace tidemark::storage {

class pending_syncs final : public sync_registry {
public:
  void register_segments(const segment_id* segments, std::size_t count) override {
    std::lock_guard<spin_lock> guard(lock_);
    requests_.fetch_add(count, std::memory_order_relaxed);
    for (std::size_t i = 0; i < count; ++i)
      if (std::find(pending_.begin(), pending_.end(), segments[i]) == pending_.end())
        pending_.push_back(segments[i]);
  }

  /// Hands over every registered segment, sorted, and empties the table.
  std::vector<segment_id> take_all() {
    std::vector<segment_id> taken;
    {
      std::lock_guard<spin_lock> guard(lock_);
      taken.swap(pending_);
    }
    std::sort(taken.begin(), taken.end());
    return taken;
  }

  /// Puts segments back after a failed sync phase (they still need their fsync).
  void restore(const std::vector<segment_id>& segments) {
    register_segments(segments.data(), segments.size());
  }

  std::uint64_t requests() const { return requests_.load(std::memory_order_relaxed); }

private:
  spin_lock lock_;
  std::vector<segment_id> pending_;
  std::atomic<std::uint64_t> requests_{0};
};

} // namespace tidemark::storage
