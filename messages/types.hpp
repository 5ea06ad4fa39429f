// Every message that crosses an actor boundary in Tidemark, as plain structs with an
// inspect() that names each field (CAF 0.17 style). Registered once in type_ids.hpp.
//
// Pages never travel in messages: the buffer pool is shared memory. Messages carry the
// write path's control flow: flush up to an LSN, run a checkpoint, report progress.
#pragma once

#include <tidemark/types.hpp>

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tidemark::messages {

// ---- wal_writer ----------------------------------------------------------------------------

/// Someone asks for WAL to be durable up to `lsn` and is answered with flush_done.
struct flush_request {
  std::uint64_t lsn = 0;
};

/// A committing session wants WAL durable up to `lsn` (the end of its commit record). No
/// answer: the session waits on the WAL itself (wal_log::wait_for_flush), which every
/// completed sync wakes; this message only makes sure a sync covering `lsn` starts.
struct flush_wanted {
  std::uint64_t lsn = 0;
};

/// WAL is durable up to `flushed_lsn` (>= the requested lsn).
struct flush_done {
  std::uint64_t flushed_lsn = 0;
};

/// The wal_writer hands one of its syncers WAL it has written out through `target`; the
/// syncer answers flush_done once an fdatasync made it durable.
struct wal_sync_request {
  std::uint64_t target = 0;
};

// ---- checkpointer --------------------------------------------------------------------------

enum class checkpoint_reason : std::uint8_t {
  time = 1,            // checkpoint_timeout elapsed
  wal = 2,             // WAL since the redo point reached its share of max_wal_size
  requested = 3,       // explicit request (API, tests)
  shutdown = 4,        // clean shutdown
  end_of_recovery = 5, // crash recovery finished
  restartpoint = 6,    // a standby's checkpoint: at a checkpoint record redo replayed
};

const char* to_string(checkpoint_reason reason);

struct checkpoint_request {
  std::uint8_t reason = static_cast<std::uint8_t>(checkpoint_reason::requested);
  bool immediate = true;
};

struct checkpoint_done {
  std::uint64_t checkpoint_lsn = 0;
  std::uint64_t redo_lsn = 0;
  std::uint64_t buffers_written = 0;
};

// ---- sync_worker --------------------------------------------------------------------------

/// A file with writes that need an fsync: kind (storage::file_kind), relation, segment.
struct file_ref {
  std::uint8_t kind = 1;
  std::uint32_t rel = 0;
  std::uint32_t segno = 0;
};

/// Completed writes to one file (storage::file_write): how many bytes, and the byte range
/// of the file they lie in — what the sync worker paces its write-back and fsyncs by.
struct file_written {
  file_ref file;
  std::uint64_t bytes = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

/// Writers register the files their completed writes touched (W2). `source` is the
/// writer's actor_role, for the trace.
struct sync_register {
  std::vector<file_written> files;
  std::uint8_t source = 0;
};

/// A file was truncated or dropped: its pending fsync is cancelled.
struct sync_forget {
  file_ref file;
};

/// The checkpoint's sync phase: fsync every file registered before now, spreading the
/// fsyncs over `pace_ms` (0: as fast as possible).
struct sync_phase_request {
  std::uint64_t pace_ms = 0;
};

/// The checkpointer's re-plan of a running sync phase: it must be over within `ms_left`
/// (WAL consumed faster than the phase's time budget foresaw). Only ever shortens it.
struct sync_deadline {
  std::uint64_t ms_left = 0;
};

/// Settings a running engine takes without a restart (database::reload()): the actors that
/// use them (checkpointer, bgwriter, sync worker, doublewrite batcher) each keep their own
/// copy and replace it when this arrives; their next decision uses the new values.
struct settings_reload {
  std::uint64_t checkpoint_timeout_ms = 0;
  double checkpoint_completion_target = 0;
  std::uint64_t max_wal_size = 0; // bytes
  bool log_checkpoints = false;
  std::uint64_t bgwriter_delay_ms = 0;
  std::uint32_t bgwriter_lru_maxpages = 0;
  double bgwriter_lru_multiplier = 0;
  std::uint64_t write_back_sweep_ms = 0;
  std::uint64_t doublewrite_flush_delay_ms = 0;
  std::uint64_t background_write_limit = 0; // bytes a second; 0: none
};

struct sync_phase_done {
  std::uint64_t files = 0;
  std::uint64_t longest_us = 0;
  std::uint64_t total_us = 0;
};

/// The doublewrite batcher asks to be told when every listed file has had an fsync that
/// began after this message arrived (D2): the chunk is then among the next chunks_synced.
struct sync_notify {
  std::vector<file_ref> files;
  std::uint32_t chunk = 0;
};

/// The batcher's one outstanding question: which chunks of its sync_notify messages are
/// covered now? Answered with chunks_synced once at least one is, so one fsync that covers
/// thousands of chunks costs one message, not one each.
struct synced_chunks_request {};

struct chunks_synced {
  std::vector<std::uint32_t> chunks;
};

/// Fsync these files now, outside a checkpoint (the batcher retiring its oldest batches).
struct sync_now {
  std::vector<file_ref> files;
};

// ---- dw_batcher ----------------------------------------------------------------------------

/// A writer filled chunk `chunk` of the doublewrite ring with `count` pages.
struct dw_batch_ready {
  std::uint32_t chunk = 0;
  std::uint32_t count = 0;
  std::uint8_t source = 0; // the writer's actor_role, for the trace
};

/// Answered once every batch handed over before it is DATA_WRITTEN: its pages written in
/// place, their files registered for sync, their buffers clean.
struct dw_flush_request {};

struct dw_flushed {
  std::uint64_t batches = 0;
};

// ---- checkpointer events -------------------------------------------------------------------

/// The phase a checkpoint is in (DESIGN §4 "Checkpoint"); BEGIN is part of write.
using tidemark::checkpoint_phase; // the public vocabulary (tidemark/types.hpp)

/// A checkpoint phase change or write progress, sent to subscribers.
struct checkpoint_event {
  std::uint8_t phase = 0;            // checkpoint_phase
  std::uint8_t reason = 0;           // checkpoint_reason
  std::uint64_t buffers_total = 0;   // dirty at BEGIN
  std::uint64_t buffers_written = 0; // so far
  double progress = 0;               // written fraction of the work
  double schedule = 0;               // where the schedule says it should be (C4)
  bool napping = false;              // ahead of schedule: sleeping
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, flush_request& x) {
  return f(caf::meta::type_name("flush_request"), x.lsn);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, flush_wanted& x) {
  return f(caf::meta::type_name("flush_wanted"), x.lsn);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, flush_done& x) {
  return f(caf::meta::type_name("flush_done"), x.flushed_lsn);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wal_sync_request& x) {
  return f(caf::meta::type_name("wal_sync_request"), x.target);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_request& x) {
  return f(caf::meta::type_name("checkpoint_request"), x.reason, x.immediate);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_done& x) {
  return f(caf::meta::type_name("checkpoint_done"), x.checkpoint_lsn, x.redo_lsn,
           x.buffers_written);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_ref& x) {
  return f(caf::meta::type_name("file_ref"), x.kind, x.rel, x.segno);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_written& x) {
  return f(caf::meta::type_name("file_written"), x.file, x.bytes, x.begin, x.end);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, settings_reload& x) {
  return f(caf::meta::type_name("settings_reload"), x.checkpoint_timeout_ms,
           x.checkpoint_completion_target, x.max_wal_size, x.log_checkpoints, x.bgwriter_delay_ms,
           x.bgwriter_lru_maxpages, x.bgwriter_lru_multiplier, x.write_back_sweep_ms,
           x.doublewrite_flush_delay_ms, x.background_write_limit);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_deadline& x) {
  return f(caf::meta::type_name("sync_deadline"), x.ms_left);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_register& x) {
  return f(caf::meta::type_name("sync_register"), x.files, x.source);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_forget& x) {
  return f(caf::meta::type_name("sync_forget"), x.file);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_phase_request& x) {
  return f(caf::meta::type_name("sync_phase_request"), x.pace_ms);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_phase_done& x) {
  return f(caf::meta::type_name("sync_phase_done"), x.files, x.longest_us, x.total_us);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_notify& x) {
  return f(caf::meta::type_name("sync_notify"), x.files, x.chunk);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, synced_chunks_request&) {
  return f(caf::meta::type_name("synced_chunks_request"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, chunks_synced& x) {
  return f(caf::meta::type_name("chunks_synced"), x.chunks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_now& x) {
  return f(caf::meta::type_name("sync_now"), x.files);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dw_batch_ready& x) {
  return f(caf::meta::type_name("dw_batch_ready"), x.chunk, x.count, x.source);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dw_flush_request&) {
  return f(caf::meta::type_name("dw_flush_request"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, dw_flushed& x) {
  return f(caf::meta::type_name("dw_flushed"), x.batches);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_event& x) {
  return f(caf::meta::type_name("checkpoint_event"), x.phase, x.reason, x.buffers_total,
           x.buffers_written, x.progress, x.schedule, x.napping);
}

} // namespace tidemark::messages
