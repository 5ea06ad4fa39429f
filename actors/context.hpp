// The context: what the actors of one open data directory share with each other and with
// the runtime's sessions. The runtime builds it (runtime::engine is a context plus what
// only the runtime uses) and hands each actor a reference; it outlives them all.
//
// Its parts, each with its writer (everyone may read):
//  - data_dir, config, commit_activity, log_sink: the runtime, at open, before any actor
//    starts; never replaced while one runs.
//  - store (storage_mechanisms): io, files, wal, pool, commit_log, registry, trace,
//    writer, victims, ring, batcher. The runtime, at open, before any actor starts (the
//    registry's worker and the batcher when it spawns those actors; it clears both once
//    they stopped); never replaced while an actor runs. Each mechanism keeps its own
//    invariants and locks (storage/README.md).
//  - the control file: the checkpointer (set_control at each checkpoint or restartpoint;
//    the runtime once at open), read and replaced whole under its lock.
//  - next_xid: sessions (fetch_add at begin), and the runtime at open and after redo.
//  - recovering: the runtime's startup, around redo.
//  - standby (standby_state): a standby's parts, one writer per field (standby_state.hpp).
//  - sender (wal_sender_published): the WAL sender. The runtime seeds keep_from from the
//    recorded slots at open, before the sender starts, installs the wake-up when it
//    spawns the sender and drops it once it stopped; stopping the acknowledgement waits
//    (fail(), the runtime's close) ends waits and publishes nothing.
//  - counters (activity_counters): syncs by the sync worker, checkpoints by the
//    checkpointer, bgwriter by the bgwriter (its allocation listener, installed when it
//    starts; the runtime drops it once it stopped). Atomic counters, read for statistics.
//  - the failure latch: anyone, through fail(); first error wins (failure_latch.hpp).
//
// Members are destroyed in reverse declaration order, and the storage mechanisms point at
// each other (files, WAL, commit log and ring at io; the writer and the commit log at the
// WAL and the registry; the pool at the files; the registry at the trace sink): keep their
// order inside `store`, and `store` ahead of the parts that follow it. The pool and the
// WAL point at the bgwriter's listener and the sender's wake-up, declared later: the
// runtime unhooks both once the actors stopped (instance::stop_actors), before either is
// destroyed.
//
// Invariants:
//  - Once failed() is true it stays true (W3): no new transaction is accepted, no
//    checkpoint is completed, and the control file keeps saying recovery is needed.
//  - next_xid is larger than every xid in WAL or on disk.
#pragma once

#include "actors/failure_latch.hpp"
#include "actors/settings.hpp"
#include "actors/standby_state.hpp"
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
  std::atomic<std::uint64_t> maxwritten_clean{0};         // rounds stopped by bgwriter_lru_maxpages
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

/// The actors' statistics: one writer per group, read whole by the runtime's statistics.
struct activity_counters {
  sync_counters syncs;             // the sync worker
  checkpoint_counters checkpoints; // the checkpointer
  bgwriter_counters bgwriter;      // the bgwriter
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

/// The storage mechanisms of one open data directory. The runtime builds them at open,
/// before any actor starts, and replaces none while an actor runs; each keeps its own
/// invariants and locks (storage/README.md). Keep the order of the members: they are
/// destroyed in reverse, and some point at others (see the header comment).
struct storage_mechanisms {
  std::unique_ptr<storage::io_engine> io;
  std::unique_ptr<storage::relation_files> files;
  std::unique_ptr<storage::wal_log> wal;
  std::unique_ptr<storage::buffer_pool> pool;
  std::unique_ptr<storage::commit_log> commit_log;
  actor_sync_registry registry;
  std::unique_ptr<messages::trace_sink> trace; // null unless tracing is on
  std::unique_ptr<storage::page_writer> writer;
  std::unique_ptr<storage::victim_writer> victims;
  std::unique_ptr<storage::doublewrite_ring> ring; // doublewrite mode only
  messages::dw_batcher_actor batcher;              // doublewrite mode only
};

/// What the WAL sender publishes for the checkpointer and the commits (wal_sender.hpp).
/// The runtime seeds keep_from at open and installs and drops the wake-up around the
/// sender's life.
struct wal_sender_published {
  /// WAL from here on is still needed by a standby or a base backup (the WAL sender sets
  /// it; all ones when none): checkpoints recycle only segments before both it and the
  /// redo point.
  std::atomic<storage::lsn_t> keep_from{~storage::lsn_t{0}};
  /// How far the synchronous standby has the WAL (written, flushed or replayed, as
  /// synchronous_standby says): commits wait on it; the WAL sender publishes it.
  storage::position_waiters acknowledged;
  /// The WAL sender's wake-up on each WAL flush (set while it runs).
  std::unique_ptr<storage::flush_listener> wakeup;
};

/// The text of an error an actor replied with: our actors make their errors with one
/// string in the context (their own words, without CAF's rendering); anything else is
/// described by its code.
/// Names the calling thread ("tm-bgwriter") as top -H, perf and gdb show it; the runtime
/// gives each actor that runs on a thread of its own the name of its role.
void name_this_thread(const char* name);

std::string error_text(const caf::error& error);

struct context {
  // ---- set by the runtime at open, then read-only --------------------------------------
  std::string data_dir;
  settings config;
  storage_mechanisms store;
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
  // ---- shared state, each with its writer (see the header comment) ----------------------
  std::atomic<storage::xid_t> next_xid{1};
  /// True while redo runs: no automatic checkpoint may move the redo point, and WAL the
  /// redo reader still needs must not be recycled (DESIGN §6: the redo point does not move
  /// until the end-of-recovery checkpoint completes).
  std::atomic<bool> recovering{false};
  /// A standby's state (standby_state.hpp says which part writes each field).
  standby_state standby;
  wal_sender_published sender;
  activity_counters counters;
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

  /// Records the first fatal error (W3) and stops the engine from accepting work: every
  /// wait that no progress will end any more is ended (writers waiting for a ring chunk,
  /// for a buffer's write, for WAL, for a standby).
  void fail(const std::string& why) {
    if (!failure_.trip(why))
      return;
    if (store.ring)
      store.ring->fail(); // writers waiting for a free chunk stop
    if (store.pool)       // the checkpointer waiting for a write the batcher was to finish
      store.pool->stop_waits();
    if (store.wal) // commits waiting for WAL no sync will cover any more
      store.wal->stop_waiters("the engine stopped after a failure: " + why);
    sender.acknowledged.stop("the engine stopped after a failure: " + why);
  }
  bool failed() const { return failure_.failed(); }
  std::string failure() const { return failure_.failure(); }

  /// Records one message flow in the trace, when tracing is on.
  void trace(messages::actor_role from, messages::actor_role to, messages::trace_type type,
             std::uint64_t a = 0, std::uint64_t b = 0, std::uint64_t c = 0) const {
    if (store.trace)
      store.trace->record(from, to, type, a, b, c);
  }

private:
  mutable std::mutex control_mutex_;
  storage::control_data control_;
  failure_latch failure_;
};

} // namespace tidemark::actors
