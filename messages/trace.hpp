// Message tracing: a sink that records every message between the write-path actors (time,
// sender, receiver, type, key fields), cheap enough to leave on in tests, and writes Chrome
// trace-event JSON (one track per actor) that Perfetto and chrome://tracing open.
//
// Recording takes a short lock and appends to a preallocated buffer; when the buffer is
// full further events are counted as dropped, never allocated. Event types are the
// trace_type enum, whose one name table (TIDEMARK_TRACE_EVENTS) also names them in the JSON.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace tidemark::messages {

enum class actor_role : std::uint8_t {
  application = 0,
  backend,
  wal_writer,
  bgwriter,
  checkpointer,
  sync_worker,
  dw_batcher,
  startup,
};
constexpr std::size_t actor_role_count = 8;
const char* to_string(actor_role role);

// Every event the write path traces, with what it means: one name table for the enum and
// the names the trace shows (to_string). a, b, c are the event's key fields.
#define TIDEMARK_TRACE_EVENTS(X) \
  X(checkpoint_request)            /* a checkpoint was asked for (a = reason) */ \
  X(checkpoint_begin)              /* a checkpoint began (a = redo point, b = buffers to write) */ \
  X(checkpoint_awaits_write)       /* the write phase waits for a buffer's write in progress */ \
  X(checkpoint_hurried_by_request) /* an immediate request hurried the running checkpoint */ \
  X(checkpoint_hurried_by_wal)     /* too much WAL hurried the running checkpoint */ \
  X(sync_phase_request)            /* the checkpointer asked the sync worker for its sync phase */ \
  X(sync_phase_begin)              /* the sync phase began (a = cycle, b = files, c = span ms) */ \
  X(sync_phase_replanned)          /* the sync phase was shortened (a = ms left) */ \
  X(sync_phase_hurried)            /* the sync phase went on unpaced */ \
  X(sync_phase_done)               /* the sync phase ended (a = files fsynced) */ \
  X(checkpoint_record)    /* the checkpoint record was written (a = its LSN, b = redo point) */ \
  X(control_file_written) /* the control file points at the checkpoint */ \
  X(wal_recycled)         /* WAL before the redo point was recycled */ \
  X(checkpoint_failed)    /* a checkpoint failed */ \
  X(bgwriter_write)       /* the bgwriter wrote buffers (a = how many) */ \
  X(sync_register)        /* a written file was registered for fsync */ \
  X(fsync)             /* the sync worker fsynced a file (a = relation, b = segment, c = kind) */ \
  X(fsync_failed)      /* an fsync failed: the engine stops */ \
  X(write_back)        /* paced write-back of a file's dirty range */ \
  X(sync_notify)       /* the batcher asked to hear of fsyncs of a chunk's files */ \
  X(notify_file)       /* one file a chunk waits on */ \
  X(files_synced)      /* every file of a chunk was fsynced (D2) */ \
  X(sync_now)          /* the batcher asked for fsyncs now */ \
  X(dw_acquire)        /* FREE -> ALLOCATED: a writer took a ring chunk */ \
  X(dw_give_back)      /* a writer gave an unused chunk back */ \
  X(dw_slot_wait)      /* a writer waited for a free chunk */ \
  X(dw_batch_ready)    /* a batch was handed to the batcher */ \
  X(dw_written)        /* ALLOCATED -> WRITTEN: the batch is in the ring */ \
  X(dw_fsynced)        /* WRITTEN -> DWB_FSYNCED: the ring fdatasync covered it */ \
  X(dw_horizon_synced) /* the ring's retirement horizon was made durable */ \
  X(dw_inplace_write)  /* the batch's pages are being written in place */ \
  X(dw_data_written)   /* DWB_FSYNCED -> DATA_WRITTEN */ \
  X(dw_data_fsynced)   /* DATA_WRITTEN -> DATA_FSYNCED */ \
  X(dw_free)           /* DATA_FSYNCED -> FREE: the chunk may be reused */ \
  X(redo_begin)        /* redo began */ \
  X(redo_end)          /* redo ended */

enum class trace_type : std::uint8_t {
#define TIDEMARK_TRACE_ENUM(name) name,
  TIDEMARK_TRACE_EVENTS(TIDEMARK_TRACE_ENUM)
#undef TIDEMARK_TRACE_ENUM
};
const char* to_string(trace_type type);

struct trace_event {
  std::int64_t time_ns = 0; // since the sink was created
  actor_role sender = actor_role::application;
  actor_role receiver = actor_role::application;
  trace_type type = trace_type::checkpoint_request;
  std::uint64_t a = 0, b = 0,
                c = 0; // key fields; their meaning per type is where the event is recorded
};

class trace_sink {
public:
  /// Called for every event as it is recorded, on the recording thread, before it is
  /// stored (capacity 0 stores nothing: a sink only for its listener).
  using listener = std::function<void(const trace_event&)>;

  explicit trace_sink(std::size_t capacity = 1 << 20, listener on_event = nullptr);

  void record(actor_role sender, actor_role receiver, trace_type type, std::uint64_t a = 0,
              std::uint64_t b = 0, std::uint64_t c = 0);

  /// A copy of the events recorded so far, in recording order.
  std::vector<trace_event> events() const;
  std::uint64_t dropped() const { return dropped_.load(); }

  /// Chrome trace-event JSON: an instant event per message on the sender's track and a flow
  /// arrow to the receiver's track. io_error, naming the file, when it cannot be written.
  void write_chrome_json(const std::string& path) const;

private:
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  std::vector<trace_event> events_;
  std::size_t capacity_;
  std::atomic<std::uint64_t> dropped_{0};
  listener on_event_;
};

} // namespace tidemark::messages
