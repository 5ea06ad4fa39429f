// A standby's state as its parts share it: the stream's positions, why streaming stopped,
// the newest checkpoint redo replayed (where a restartpoint may be made), and the flags
// that switch restartpoints and promotion on. Empty and unused on a primary.
//
// One writer per field:
//  - the WAL receiver: connected, primary_flushed, the primary's clock, received, flushed
//    (and the runtime's standby code once, before the receiver starts);
//  - redo (the standby's redo thread): replayed, records, wal_rereads, and the replayed
//    checkpoint;
//  - the checkpointer: restart_redo, at each restartpoint; it clears `promoting` when the
//    end-of-recovery checkpoint has started the next generation;
//  - the runtime's standby code (runtime/standby.cpp): restartpoints and promoting, and the
//    error when redo stops; the receiver sets the error when it cannot stream.
// Readers take the atomics as they are; the error, the peers, the primary's clock samples
// and the replayed checkpoint are read and replaced under the lock.
#pragma once

#include "messages/replication.hpp"
#include "storage/types.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tidemark::actors {

class standby_state {
public:
  /// A checkpoint record redo replayed: the primary's redo point, so that every page's
  /// first change after it carries an image in full_page_writes mode, as on the primary.
  struct replayed_checkpoint {
    storage::lsn_t checkpoint_lsn = 0;
    storage::lsn_t redo_lsn = 0;
    storage::xid_t next_xid = 0;
    std::uint64_t time_unix_ms = 0;
  };

  std::atomic<bool> connected{false};
  std::atomic<storage::lsn_t> primary_flushed{0}; // as the primary last said
  std::atomic<storage::lsn_t> received{0};        // written here
  std::atomic<storage::lsn_t> flushed{0};         // fsynced here
  std::atomic<storage::lsn_t> replayed{0};        // applied by redo
  std::atomic<std::uint64_t> records{0};          // replayed
  std::atomic<storage::lsn_t> restart_redo{0};    // where a restart would replay from
  std::atomic<std::uint64_t> wal_rereads{0};      // WAL redo or its prefetch read again
  /// True on a standby while redo runs: the checkpointer makes restartpoints.
  std::atomic<bool> restartpoints{false};
  /// Being promoted: the next end-of-recovery checkpoint starts the next generation (the
  /// checkpointer owns the control file, so it makes the change).
  std::atomic<bool> promoting{false};
  /// The primary refused this standby (another system, generation, or WAL it no longer
  /// has): streaming stopped for good; error() says why.
  std::atomic<bool> refused{false};
  /// What the synchronous standbys' quorum had confirmed, as the primary last said.
  std::atomic<storage::lsn_t> primary_acknowledged{0};

  void set_error(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = why;
  }
  /// Why streaming stopped or cannot start (empty while it streams).
  std::string error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }
  /// When the primary had WAL up to `flushed` durable (its clock, `unix_micros`), as it
  /// said: kept from the oldest WAL not yet replayed on, so replay_delay can say how long
  /// ago the primary wrote it.
  void note_primary_clock(storage::lsn_t flushed, std::int64_t unix_micros) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!clock_.empty() && clock_.back().first >= flushed)
      return; // nothing new was durable there
    const storage::lsn_t done = replayed.load();
    while (!clock_.empty() && (clock_.front().first <= done || clock_.size() >= clock_samples))
      clock_.pop_front(); // what remains still says when a later position was written
    clock_.emplace_back(flushed, unix_micros);
  }
  /// Seconds between the primary's writing the oldest WAL not yet replayed here (the first
  /// answer that said it was durable) and `now_micros`; 0 when replay has what the primary
  /// last said it had.
  double replay_delay(std::int64_t now_micros) const {
    const storage::lsn_t done = replayed.load();
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [flushed, written] : clock_)
      if (flushed > done)
        return std::max<double>(0, double(now_micros - written) / 1e6);
    return 0;
  }
  /// Every standby of the primary (this one too) as the primary last heard of it.
  void note_peers(std::vector<messages::standby_peer> peers) {
    std::lock_guard<std::mutex> lock(mutex_);
    peers_ = std::move(peers);
  }
  std::vector<messages::standby_peer> peers() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return peers_;
  }
  void note_replayed_checkpoint(const replayed_checkpoint& c) {
    std::lock_guard<std::mutex> lock(mutex_);
    replayed_ = c;
  }
  replayed_checkpoint last_replayed_checkpoint() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return replayed_;
  }

private:
  static constexpr std::size_t clock_samples = 4096; // older ones only overstate the delay
  mutable std::mutex mutex_;
  std::string error_;
  std::deque<std::pair<storage::lsn_t, std::int64_t>> clock_; // (flushed, primary's clock)
  std::vector<messages::standby_peer> peers_;
  replayed_checkpoint replayed_;
};

} // namespace tidemark::actors
