// checkpointer: see checkpointer.hpp for its role and the invariants it keeps.
#include "actors/checkpointer.hpp"

#include "storage/page.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tidemark::actors {

namespace {

using namespace messages;
using std::chrono::steady_clock;

constexpr auto tick_interval = std::chrono::milliseconds(100);
constexpr std::size_t write_batch_pages = 64;

struct aligned_pages {
  explicit aligned_pages(std::size_t bytes) {
    void* memory = nullptr;
    if (posix_memalign(&memory, 4096, bytes) != 0)
      throw std::bad_alloc();
    data = static_cast<unsigned char*>(memory);
  }
  ~aligned_pages() { std::free(data); }
  aligned_pages(const aligned_pages&) = delete;
  aligned_pages& operator=(const aligned_pages&) = delete;
  unsigned char* data;
};

struct checkpointer_state {
  runtime::engine* engine = nullptr;
  std::unique_ptr<aligned_pages> batch;
  std::vector<std::pair<storage::page_id, storage::buffer_id>> to_write; // reused
  std::vector<caf::typed_response_promise<checkpoint_done>> waiters;
  checkpoint_reason next_reason = checkpoint_reason::time;
  bool run_queued = false;
  steady_clock::time_point last_start = steady_clock::now();
  storage::lsn_t idle_lsn = 0; // insert position right after the last checkpoint
  static inline const char* name = "checkpointer";
};

using checkpointer_pointer = checkpointer_actor::stateful_pointer<checkpointer_state>;

struct write_phase_result {
  std::uint64_t written = 0;
};

void write_batch(runtime::engine& e, storage::page_copy* copies,
                 const storage::buffer_id* buffers, std::size_t count) {
  try {
    e.writer->write(copies, count);
  } catch (...) {
    for (std::size_t i = 0; i < count; ++i)
      e.pool->finish_write(buffers[i], false);
    throw;
  }
  for (std::size_t i = 0; i < count; ++i)
    e.pool->finish_write(buffers[i], true);
}

// Starts writing `buffer`, or, if another writer is writing it, waits for that write to
// complete (and its segment to be registered) and tries again.
bool start_or_await_write(storage::buffer_pool& pool, storage::buffer_id buffer,
                          storage::page_copy& copy) {
  while (!pool.start_write(buffer, copy.data, &copy.id, &copy.lsn)) {
    if (!pool.write_in_progress(buffer))
      return false;
    pool.wait_for_write(buffer);
  }
  return true;
}

// WRITE: every buffer dirty now, in file/block order (C5), in batches.
write_phase_result write_dirty_buffers(checkpointer_state& st) {
  runtime::engine& e = *st.engine;
  storage::buffer_pool& pool = *e.pool;
  st.to_write.clear();
  for (storage::buffer_id b = 0; b < pool.size(); ++b)
    if (pool.is_dirty(b))
      st.to_write.emplace_back(pool.tag(b), b);
  std::sort(st.to_write.begin(), st.to_write.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  storage::page_copy copies[write_batch_pages];
  storage::buffer_id buffers[write_batch_pages];
  std::size_t pending = 0;
  write_phase_result result;
  for (const auto& entry : st.to_write) {
    storage::page_copy& copy = copies[pending];
    copy.data = st.batch->data + pending * pool.page_size();
    if (!start_or_await_write(pool, entry.second, copy))
      continue; // cleaned by someone else meanwhile, and that write has completed
    buffers[pending++] = entry.second;
    if (pending == write_batch_pages) {
      write_batch(e, copies, buffers, pending);
      result.written += pending;
      pending = 0;
    }
  }
  if (pending > 0) {
    write_batch(e, copies, buffers, pending);
    result.written += pending;
  }
  return result;
}

struct sync_phase_result {
  std::uint64_t files = 0;
  double longest_ms = 0;
  double total_ms = 0;
};

// SYNC: every segment registered before now (C1), each once.
sync_phase_result sync_registered_segments(runtime::engine& e) {
  std::vector<storage::segment_id> segments = e.syncs.take_all();
  sync_phase_result result;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    auto start = steady_clock::now();
    try {
      e.files->sync_segment(segments[i]);
    } catch (...) {
      // W3: never retried; the segments stay registered only for the record.
      e.syncs.restore(std::vector<storage::segment_id>(segments.begin() + i, segments.end()));
      throw;
    }
    double ms = std::chrono::duration<double, std::milli>(steady_clock::now() - start).count();
    result.longest_ms = std::max(result.longest_ms, ms);
    result.total_ms += ms;
    ++result.files;
  }
  return result;
}

// FINISH: checkpoint record, control file, then WAL recycling (C2).
storage::lsn_t finish_checkpoint(runtime::engine& e, storage::lsn_t redo, checkpoint_reason reason) {
  storage::checkpoint_payload payload{};
  payload.redo_lsn = redo;
  payload.next_xid = e.next_xid.load();
  payload.time_unix_ms = static_cast<std::uint64_t>(
    std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch())
      .count());
  storage::record_builder record;
  record.reset(storage::record_type::checkpoint, 0);
  record.set_main_data(&payload, sizeof payload);
  record.finish();
  auto position = e.wal->insert(record, e.wal->redo_lsn());
  e.wal->flush(position->end);
  storage::control_data control = e.control;
  control.state = static_cast<std::uint32_t>(reason == checkpoint_reason::shutdown
                                               ? storage::cluster_state::shut_down
                                               : storage::cluster_state::in_production);
  control.checkpoint_lsn = position->start;
  control.redo_lsn = redo;
  control.next_xid = payload.next_xid;
  control.checkpoint_time_unix_ms = payload.time_unix_ms;
  storage::write_control_file(*e.io, e.data_dir, control);
  e.control = control;
  e.wal->remove_segments_before(redo);
  return position->start;
}

void log_checkpoint(runtime::engine& e, checkpoint_reason reason, std::uint64_t written,
                    double write_ms, const sync_phase_result& sync, std::uint64_t distance) {
  if (!e.config.log_checkpoints)
    return;
  double share = 100.0 * double(written) / double(e.pool->size());
  std::fprintf(stderr,
               "LOG:  checkpoint complete (%s): wrote %llu buffers (%.1f%%); write=%.3f s, "
               "sync=%.3f s, total=%.3f s; sync files=%llu, longest=%.3f s, average=%.3f s; "
               "distance=%llu kB\n",
               to_string(reason), static_cast<unsigned long long>(written), share,
               write_ms / 1000, sync.total_ms / 1000, (write_ms + sync.total_ms) / 1000,
               static_cast<unsigned long long>(sync.files), sync.longest_ms / 1000,
               sync.files ? sync.total_ms / double(sync.files) / 1000 : 0.0,
               static_cast<unsigned long long>(distance / 1024));
}

checkpoint_done run_checkpoint(checkpointer_state& st, checkpoint_reason reason) {
  runtime::engine& e = *st.engine;
  auto start = steady_clock::now();
  st.last_start = start;
  storage::lsn_t previous_redo = e.control.redo_lsn;
  storage::lsn_t redo = e.wal->begin_redo_point();
  auto& phase = e.checkpoints.phase;
  phase.store(runtime::checkpoint_phase::write);
  write_phase_result written = write_dirty_buffers(st);
  double write_ms = std::chrono::duration<double, std::milli>(steady_clock::now() - start).count();
  phase.store(runtime::checkpoint_phase::sync);
  sync_phase_result synced = sync_registered_segments(e);
  phase.store(runtime::checkpoint_phase::finish);
  storage::lsn_t checkpoint_lsn = finish_checkpoint(e, redo, reason);
  phase.store(runtime::checkpoint_phase::idle);
  auto& counters = e.checkpoints;
  (reason == checkpoint_reason::time ? counters.timed : counters.requested).fetch_add(1);
  counters.write_ms.fetch_add(static_cast<std::uint64_t>(write_ms));
  counters.sync_ms.fetch_add(static_cast<std::uint64_t>(synced.total_ms));
  counters.buffers_written.fetch_add(written.written);
  counters.segments_synced.fetch_add(synced.files);
  log_checkpoint(e, reason, written.written, write_ms, synced, redo - previous_redo);
  st.idle_lsn = e.wal->inserted_lsn();
  return checkpoint_done{checkpoint_lsn, redo, written.written};
}

bool wal_trigger_reached(const runtime::engine& e) {
  double budget = double(e.config.max_wal_size) / (1.0 + e.config.checkpoint_completion_target);
  return double(e.wal->inserted_lsn() - e.control.redo_lsn) >= budget;
}

void queue_run(checkpointer_pointer self, checkpoint_reason reason) {
  auto& st = self->state;
  if (!st.run_queued || reason != checkpoint_reason::time)
    st.next_reason = reason;
  if (!st.run_queued) {
    st.run_queued = true;
    self->send(self, run_atom::value);
  }
}

checkpointer_actor::behavior_type checkpointer(checkpointer_pointer self, runtime::engine* engine) {
  self->state.engine = engine;
  self->state.batch = std::make_unique<aligned_pages>(write_batch_pages * engine->pool->page_size());
  self->state.idle_lsn = engine->wal->inserted_lsn();
  self->delayed_send(self, tick_interval, tick_atom::value);
  return {
    [=](checkpoint_request request) -> caf::result<checkpoint_done> {
      auto promise = self->make_response_promise<checkpoint_done>();
      self->state.waiters.push_back(promise);
      queue_run(self, static_cast<checkpoint_reason>(request.reason));
      return promise;
    },
    [=](run_atom) {
      auto& st = self->state;
      st.run_queued = false;
      auto waiters = std::move(st.waiters);
      st.waiters.clear();
      runtime::engine& e = *st.engine;
      if (e.failed()) {
        for (auto& w : waiters)
          w.deliver(caf::make_error(caf::sec::runtime_error, "engine failed: " + e.failure()));
        return;
      }
      try {
        checkpoint_done done = run_checkpoint(st, st.next_reason);
        for (auto& w : waiters)
          w.deliver(done);
      } catch (const std::exception& error) {
        e.fail(std::string("checkpoint failed: ") + error.what());
        for (auto& w : waiters)
          w.deliver(caf::make_error(caf::sec::runtime_error, e.failure()));
      }
    },
    [=](tick_atom) {
      auto& st = self->state;
      runtime::engine& e = *st.engine;
      if (!e.failed()) {
        bool idle = e.wal->inserted_lsn() == st.idle_lsn; // nothing logged since the last one
        if (steady_clock::now() - st.last_start >= e.config.checkpoint_timeout) {
          if (idle)
            st.last_start = steady_clock::now();
          else
            queue_run(self, checkpoint_reason::time);
        } else if (wal_trigger_reached(e)) {
          queue_run(self, checkpoint_reason::wal);
        }
      }
      self->delayed_send(self, tick_interval, tick_atom::value);
    },
  };
}

} // namespace

checkpointer_actor spawn_checkpointer(caf::actor_system& system, runtime::engine& engine,
                                      bool detached) {
  if (detached)
    return system.spawn<caf::detached>(checkpointer, &engine);
  return system.spawn(checkpointer, &engine);
}

} // namespace tidemark::actors
