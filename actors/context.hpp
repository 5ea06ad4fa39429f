// The context: what the actors of one open data directory share with each other and with
// the runtime's sessions: the storage mechanisms (buffer pool, WAL, relation files,
// commit-status log, page writer, doublewrite ring, pending syncs), the settings, the
// counters, and the failure state. The runtime builds it (runtime::engine is a context
// plus what only the runtime uses) and hands each actor a reference; it outlives them all.
//
// Invariants:
//  - Once failed() is true it stays true (W3): no new transaction is accepted, no
//    checkpoint is completed, and the control file keeps saying recovery is needed.
//  - next_xid is larger than every xid in WAL or on disk.
#pragma once

#include "actors/settings.hpp"
#include "messages/interfaces.hpp"
#include "messages/trace.hpp"
#include "storage/buffer_pool.hpp"
#include "storage/commit_log.hpp"
#include "storage/control_file.hpp"
#include "storage/doublewrite_ring.hpp"
#include "storage/page_writer.hpp"
#include "storage/position_waiters.hpp"
#include "storage/relation_files.hpp"
#include "storage/wal_log.hpp"

#include <caf/error.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace tidemark::actors {

struct checkpoint_counters {
  std::atomic<messages::checkpoint_phase> phase{messages::checkpoint_phase::idle};
  std::atomic<std::uint64_t> timed{0};
  std::atomic<std::uint64_t> requested{0};
  std::atomic<std::uint64_t> restartpoints{0}; // a standby's
  std::atomic<std::uint64_t> write_ms{0};
  std::atomic<std::uint64_t> sync_ms{0};
  std::atomic<std::uint64_t> buffers_written{0};
};

struct bgwriter_counters {
  std::atomic<std::uint64_t> maxwritten_clean{0}; // rounds stopped by bgwriter_lru_maxpages
  std::unique_ptr<storage::allocation_listener> listener; // wakes it from hibernation
};

/// The actor role of a page writer, for traces and messages, and back.
messages::actor_role role_of(storage::write_source source);
storage::write_source source_of(messages::actor_role role);

struct sync_counters {
  std::atomic<std::uint64_t> requests{0}; // files registered, counting repeats
  std::atomic<std::uint64_t> absorbed{0}; // registrations of files already pending
  std::atomic<std::uint64_t> fsyncs{0};   // fsyncs the sync worker performed
};

/// Sync registrations as messages to the sync worker (W2): one sync_register per batch of
/// written files, sent before the writer reports its buffers clean.
class actor_sync_registry final : public storage::sync_registry {
public:
  void attach(messages::sync_worker_actor worker, messages::trace_sink* trace) {
    worker_ = std::move(worker);
    trace_ = trace;
  }
  void register_files(const storage::file_write* files, std::size_t count,
                      storage::write_source source) override;

private:
  messages::sync_worker_actor worker_;
  messages::trace_sink* trace_ = nullptr;
};

/// The text of an error an actor replied with: our actors make their errors with one
/// string in the context (their own words, without CAF's rendering); anything else is
/// described by its code.
/// Names the calling thread ("tm-bgwriter") as top -H, perf and gdb show it; the runtime
/// gives each actor that runs on a thread of its own the name of its role.
void name_this_thread(const char* name);

std::string error_text(const caf::error& error);

struct context {
  std::string data_dir;
  settings config;
  std::unique_ptr<storage::io_engine> io;
  /// The control file as last written (or read at open). The checkpointer replaces it at
  /// each checkpoint or restartpoint while others read it (a standby's redo, the runtime),
  /// so it is read and replaced whole, under a lock.
  storage::control_data control() const {
    std::lock_guard<std::mutex> lock(control_mutex_);
    return control_;
  }
  void set_control(const storage::control_data& c) {
    std::lock_guard<std::mutex> lock(control_mutex_);
    control_ = c;
  }
  std::unique_ptr<storage::relation_files> files;
  std::unique_ptr<storage::wal_log> wal;
  std::unique_ptr<storage::buffer_pool> pool;
  std::unique_ptr<storage::commit_log> commit_log;
  actor_sync_registry registry;
  sync_counters syncs;
  std::unique_ptr<messages::trace_sink> trace; // null unless tracing is on
  std::unique_ptr<storage::page_writer> writer;
  std::unique_ptr<storage::victim_writer> victims;
  std::unique_ptr<storage::doublewrite_ring> ring; // doublewrite mode only
  messages::dw_batcher_actor batcher;               // doublewrite mode only
  std::atomic<storage::xid_t> next_xid{1};
  /// True while redo runs: no automatic checkpoint may move the redo point, and WAL the
  /// redo reader still needs must not be recycled (DESIGN §6: the redo point does not move
  /// until the end-of-recovery checkpoint completes).
  std::atomic<bool> recovering{false};
  /// WAL from here on is still needed by a standby or a base backup (the WAL sender sets
  /// it; all ones when none): checkpoints recycle only segments before both it and the
  /// redo point.
  std::atomic<storage::lsn_t> standby_keep{~storage::lsn_t{0}};
  /// How far the synchronous standby has the WAL (written, flushed or replayed, as
  /// synchronous_standby says): commits wait on it; the WAL sender publishes it.
  storage::position_waiters standby_acknowledged;
  /// A standby's newest checkpoint record that redo replayed: where its checkpointer may
  /// make a restartpoint (the primary's redo point, so that every page's first change after
  /// it carries an image in full_page_writes mode, as on the primary).
  struct replayed_checkpoint {
    storage::lsn_t checkpoint_lsn = 0;
    storage::lsn_t redo_lsn = 0;
    storage::xid_t next_xid = 0;
    std::uint64_t time_unix_ms = 0;
  };
  /// True on a standby: the checkpointer makes restartpoints while redo runs.
  std::atomic<bool> restartpoints{false};
  /// A standby is being promoted: the next end-of-recovery checkpoint starts the next
  /// generation (the checkpointer owns the control file, so it makes the change).
  std::atomic<bool> promoting{false};
  void note_replayed_checkpoint(const replayed_checkpoint& c) {
    std::lock_guard<std::mutex> lock(replayed_mutex_);
    replayed_ = c;
  }
  replayed_checkpoint last_replayed_checkpoint() const {
    std::lock_guard<std::mutex> lock(replayed_mutex_);
    return replayed_;
  }
  /// A standby's view of its stream (the WAL receiver and redo update it).
  struct standby_stream {
    std::atomic<bool> connected{false};
    std::atomic<storage::lsn_t> primary_flushed{0}; // as the primary last said
    std::atomic<std::int64_t> primary_unix_micros{0}; // the primary's clock then
    std::atomic<storage::lsn_t> received{0};         // written here
    std::atomic<storage::lsn_t> flushed{0};          // fsynced here
    std::atomic<storage::lsn_t> replayed{0};         // applied by redo
    std::atomic<std::uint64_t> records{0};           // replayed
    std::atomic<storage::lsn_t> restart_redo{0};     // where a restart would replay from
    std::atomic<std::uint64_t> wal_rereads{0};       // WAL redo or its prefetch read again
    mutable std::mutex mutex;
    std::string error; // why streaming stopped or cannot start (guarded by mutex)
  } standby;
  /// The WAL sender's wake-up on each WAL flush (set while it runs).
  std::unique_ptr<storage::flush_listener> sender_wakeup;
  checkpoint_counters checkpoints;
  bgwriter_counters bgwriter;
  /// Called by the wal_writer for each commit that asks for a WAL sync, so the runtime's
  /// idle poller keeps CPUs awake for the wake-ups to come. Empty: nobody listens. It is
  /// on the commit path: it must be cheap and must not block.
  std::function<void()> commit_activity;
  /// Where log lines go (checkpoints, recovery): the application's callback, or stderr
  /// when it is empty. Called on the logging actor's thread.
  std::function<void(const std::string&)> log_sink;
  void log(const std::string& line) const;

  /// fsyncs one file the sync machinery knows (called by the sync worker).
  void sync_file(const storage::file_tag& tag);
  /// Writes back part of a relation segment before its fsync (pacing, not durability);
  /// nothing for commit-log segments (small, fsynced whole).
  void write_back_file(const storage::file_tag& tag, std::uint64_t offset, std::uint64_t length);

  bool full_page_writes() const {
    return config.protection == torn_page_protection::full_page_writes;
  }
  bool doublewrite() const { return config.protection == torn_page_protection::doublewrite; }

  /// Records the first fatal error (W3) and stops the engine from accepting work.
  void fail(const std::string& why) {
    {
      std::lock_guard<std::mutex> guard(failure_mutex_);
      if (failed_.load())
        return;
      failure_ = why;
      failed_.store(true, std::memory_order_release);
    }
    if (ring)
      ring->fail(); // writers waiting for a free chunk stop
    if (pool) // the checkpointer waiting for a write the batcher was to finish
      pool->stop_waits();
    if (wal) // commits waiting for WAL no sync will cover any more
      wal->stop_waiters("the engine stopped after a failure: " + why);
    standby_acknowledged.stop("the engine stopped after a failure: " + why);
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::string failure() const {
    std::lock_guard<std::mutex> guard(failure_mutex_);
    return failure_;
  }

private:
  mutable std::mutex control_mutex_;
  storage::control_data control_;
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mutex_;
  mutable std::mutex replayed_mutex_;
  replayed_checkpoint replayed_;
  std::string failure_;
};

} // namespace tidemark::actors
