// sync_worker: see sync_worker.hpp for its role.
#include "actors/sync_worker.hpp"
#include "storage/check.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tidemark::actors {

namespace {

using namespace messages;
using std::chrono::steady_clock;
using role = actor_role;

storage::file_tag to_tag(const file_ref& f) {
  return {static_cast<storage::file_kind>(f.kind), {f.rel, f.segno}};
}

// Dirty data a sync phase writes back per step before a file's fsync. One fsync of a
// segment the bgwriter has filled for a whole checkpoint cycle puts hundreds of megabytes
// in front of every commit's fdatasync (measured: a 440 ms fsync, commits stalled for up
// to 240 ms); written back a piece at a time, waiting for each, a commit waits behind one
// piece at most, and the fsync that follows has little left to write.
constexpr std::uint64_t write_back_piece = 1ull << 20;

// The slowest a sync phase goes: written data at this rate, however long its budget. Two
// small files are fsynced at once rather than minutes apart (the seed's objection to
// stretching a few fsyncs over the whole budget), while the data of a whole checkpoint cycle
// still spreads over the budget the checkpointer gave.
constexpr double slowest_sync_bytes_per_second = 8.0 * (1u << 20);

// A paced walk over files' written ranges, a write-back piece at a time, what a sync phase
// (which adds each file's fsync after its pieces) and the write-back sweep share. The pace
// follows what was written, not file length: a step is due when the share of `span` since
// `started` reaches the share of the walk's written bytes the steps before it covered. A
// piece covers its share of the file's written bytes; a file without write-back pieces (a
// commit-log segment) covers its bytes with its fsync. A re-plan restarts the clock for
// what is left.
struct file_walk {
  std::vector<storage::file_write> files; // as registered when the walk began
  std::size_t next = 0;                   // the file being walked
  std::uint64_t offset = 0;               // its next piece
  double bytes_total = 0;
  double bytes_done = 0;
  double bytes_at_start = 0;            // bytes_done when the clock last (re)started
  caf::actor_clock::time_point started; // the actor clock: tests advance it by hand
  caf::actor_clock::duration_type span{0};

  static bool has_pieces(const storage::file_write& f) {
    return f.tag.kind == storage::file_kind::relation && f.end > f.begin;
  }
  void add(const storage::file_write& f) {
    if (files.empty())
      offset = f.begin;
    files.push_back(f);
    bytes_total += double(f.bytes);
  }
  bool done() const { return next == files.size(); }
  bool piece_left() const { return has_pieces(files[next]) && offset < files[next].end; }
  /// Takes the next piece of the current file: returns its offset.
  std::uint64_t take_piece() {
    const storage::file_write& f = files[next];
    std::uint64_t at = offset;
    offset = std::min(f.end, offset + write_back_piece);
    bytes_done += double(f.bytes) * double(offset - at) / double(f.end - f.begin);
    return at;
  }
  /// Ends the current file; a file without pieces covers its bytes now.
  void next_file() {
    if (!has_pieces(files[next]))
      bytes_done += double(files[next].bytes);
    ++next;
    offset = done() ? 0 : files[next].begin;
  }
  /// When the next step is due.
  caf::actor_clock::time_point due() const {
    double left = bytes_total - bytes_at_start;
    if (left <= 0)
      return started;
    auto share = std::chrono::duration<double>(span) * ((bytes_done - bytes_at_start) / left);
    return started + std::chrono::duration_cast<caf::actor_clock::duration_type>(share);
  }
  caf::actor_clock::time_point ends() const { return started + span; }
  /// Spreads what is left over `new_span` from `now`.
  void replan(caf::actor_clock::time_point now, caf::actor_clock::duration_type new_span) {
    started = now;
    span = new_span;
    bytes_at_start = bytes_done;
  }
  /// The span a sync phase asked to take `pace` gets: no slower than the slowest rate.
  static caf::actor_clock::duration_type capped(std::chrono::milliseconds pace, double bytes) {
    auto slowest = std::chrono::duration<double>(bytes / slowest_sync_bytes_per_second);
    return std::min<caf::actor_clock::duration_type>(
      pace, std::chrono::duration_cast<caf::actor_clock::duration_type>(slowest));
  }
};

struct sync_phase {
  std::uint64_t cycle = 0;
  file_walk walk;       // the due files: their pieces, then each one's fsync
  bool hurried = false; // unpaced from now on, and no more write-back pieces
  caf::typed_response_promise<sync_phase_done> promise;
  sync_phase_done result;
};

struct sync_worker_state {
  context* ctx = nullptr;
  settings config;       // the engine's at the start; reloadable ones replaced by settings_reload
  bool sweeping = false; // the write-back sweep's tick chain is alive
  storage::sync_table table;
  std::optional<sync_phase> phase;
  file_walk sweep; // the write-back sweep (settings::write_back_sweep): one pass over the
                   // files pending at its start
  // Doublewrite chunks waiting for fsyncs of their files that begin after their
  // sync_notify (D2): per file the chunks, per chunk how many files are left.
  std::map<storage::file_tag, std::vector<std::uint32_t>> waiting;
  std::map<std::uint32_t, std::size_t> files_left;
  std::vector<std::uint32_t> synced_chunks;                                // covered, not yet told
  std::optional<caf::typed_response_promise<chunks_synced>> synced_waiter; // the batcher's
  std::uint64_t step_generation = 0; // of the phase's one live step message; older ones are
                                     // stale (a re-plan or hurry sent a newer one)
  static inline const char* name = "sync_worker";
};

using sync_worker_pointer = sync_worker_actor::stateful_pointer<sync_worker_state>;

// Answers the batcher's outstanding synced_chunks_request with every chunk covered since
// the last answer, if it asked and there is one.
void tell_synced(sync_worker_pointer self) {
  auto& st = self->state;
  if (!st.synced_waiter || st.synced_chunks.empty())
    return;
  st.synced_waiter->deliver(chunks_synced{std::move(st.synced_chunks)});
  st.synced_waiter.reset();
  st.synced_chunks.clear();
}

// Every chunk registered for `tag` was registered before this fsync began: one fewer file
// to wait for.
void notify_synced(sync_worker_pointer self, const storage::file_tag& tag) {
  auto& st = self->state;
  auto found = st.waiting.find(tag);
  if (found == st.waiting.end())
    return;
  for (std::uint32_t chunk : found->second) {
    auto left = st.files_left.find(chunk);
    if (--left->second == 0) {
      st.ctx->trace(role::sync_worker, role::dw_batcher, trace_type::files_synced, chunk);
      st.synced_chunks.push_back(chunk);
      st.files_left.erase(left);
    }
  }
  st.waiting.erase(found);
  tell_synced(self);
}

void fail_notifications(sync_worker_pointer self) {
  auto& st = self->state;
  if (st.synced_waiter)
    st.synced_waiter->deliver(
      caf::make_error(caf::sec::runtime_error, "fsync failed: " + st.ctx->failure()));
  st.synced_waiter.reset();
  st.synced_chunks.clear();
  st.files_left.clear();
  st.waiting.clear();
}

// Marks the engine failed for a failed fsync or write-back of `tag` (W3: never retried).
void fail_file(sync_worker_pointer self, const storage::file_tag& tag, const char* what,
               const std::exception& error) {
  context& ctx = *self->state.ctx;
  ctx.fail(std::string(what) + " failed: " + error.what());
  ctx.trace(role::sync_worker, role::checkpointer, trace_type::fsync_failed, tag.segment.rel,
            tag.segment.segno, static_cast<std::uint64_t>(tag.kind));
  fail_notifications(self);
}

// One fsync with W3 handling; returns false (engine failed) on error.
bool fsync_file(sync_worker_pointer self, const storage::file_tag& tag, std::uint64_t* micros) {
  context& ctx = *self->state.ctx;
  auto start = steady_clock::now();
  try {
    ctx.sync_file(tag);
  } catch (const std::exception& error) {
    fail_file(self, tag, "fsync", error);
    return false;
  }
  *micros = static_cast<std::uint64_t>(
    std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - start).count());
  ctx.counters.syncs.fsyncs.fetch_add(1, std::memory_order_relaxed);
  ctx.trace(role::sync_worker, role::sync_worker, trace_type::fsync, tag.segment.rel,
            tag.segment.segno, static_cast<std::uint64_t>(tag.kind));
  notify_synced(self, tag);
  return true;
}

// Writes back one piece of `tag` from `offset`; false (engine failed, W3) on error.
bool write_back_piece_of(sync_worker_pointer self, const storage::file_tag& tag,
                         std::uint64_t offset) {
  context& ctx = *self->state.ctx;
  try {
    ctx.write_back_file(tag, offset, write_back_piece);
  } catch (const std::exception& error) {
    fail_file(self, tag, "write-back", error);
    return false;
  }
  ctx.trace(role::sync_worker, role::sync_worker, trace_type::write_back, tag.segment.rel,
            tag.segment.segno, offset);
  return true;
}

void fail_phase(sync_worker_pointer self) {
  auto& st = self->state;
  st.phase->promise.deliver(caf::make_error(caf::sec::runtime_error, st.ctx->failure()));
  st.phase.reset();
}

// Sends the phase's next step message, after `delay`; every older one is stale from now on.
void schedule_step(sync_worker_pointer self, caf::actor_clock::duration_type delay) {
  auto generation = ++self->state.step_generation;
  if (delay.count() > 0)
    self->delayed_send(self, delay, sync_step_atom::value, generation);
  else
    self->send(self, sync_step_atom::value, generation); // behind what is queued: registrations
                                                         // already sent are absorbed first
}

// The next step of the sync phase: a piece of write-back or an fsync, unless the schedule
// says to wait first.
void sync_step(sync_worker_pointer self) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  sync_phase& phase = *st.phase;
  file_walk& walk = phase.walk;
  if (!walk.done() && !phase.hurried) {
    auto due_at = walk.due();
    auto now = self->clock().now();
    if (now < due_at) {
      schedule_step(self, due_at - now);
      return;
    }
  }
  if (walk.done()) {
    ctx.trace(role::sync_worker, role::checkpointer, trace_type::sync_phase_done,
              phase.result.files);
    phase.promise.deliver(phase.result);
    st.phase.reset();
    return;
  }
  if (ctx.failed()) { // meanwhile (a write-back of the sweep, or elsewhere): no checkpoint
    fail_phase(self);
    return;
  }
  const storage::file_tag tag = walk.files[walk.next].tag;
  if (walk.piece_left() && !phase.hurried) {
    if (!write_back_piece_of(self, tag, walk.take_piece())) {
      fail_phase(self);
      return;
    }
    schedule_step(self, {});
    return;
  }
  walk.next_file();
  std::uint64_t us = 0;
  if (!fsync_file(self, tag, &us)) {
    fail_phase(self);
    return;
  }
  st.table.synced(tag, phase.cycle);
  phase.result.files++;
  phase.result.total_us += us;
  phase.result.longest_us = std::max(phase.result.longest_us, us);
  schedule_step(self, {});
}

// One piece of the write-back sweep, then the next tick at its place in the pass. A pass
// covers the written ranges of the relation files pending when it starts, paced by their
// written bytes over one write_back_sweep; with none, the sweep looks again a tenth of a
// pass later.
void sweep_step(sync_worker_pointer self) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  file_walk& sweep = st.sweep;
  auto period = st.config.write_back_sweep;
  if (ctx.failed() || period.count() == 0) {
    st.sweeping = false; // a reload turning the sweep on starts the chain again
    return;
  }
  if (sweep.done()) {
    sweep = file_walk{};
    sweep.replan(self->clock().now(), period);
    for (const storage::file_write& f : st.table.pending())
      if (file_walk::has_pieces(f))
        sweep.add(f);
    if (sweep.done()) {
      self->delayed_send(self, period / 10, tick_atom::value);
      return;
    }
  }
  const storage::file_tag tag = sweep.files[sweep.next].tag;
  if (!write_back_piece_of(self, tag, sweep.take_piece())) {
    st.sweeping = false; // the engine failed
    return;
  }
  if (!sweep.piece_left())
    sweep.next_file();
  auto due_at = sweep.due();
  auto now = self->clock().now();
  if (due_at > now)
    self->delayed_send(self, due_at - now, tick_atom::value);
  else
    self->send(self, tick_atom::value); // behind what is queued: registrations, sync requests
}

// Starts the write-back sweep's tick chain unless it is off or already alive. A new
// write_back_sweep (a reload) paces the next pass.
void start_sweep(sync_worker_pointer self) {
  auto& st = self->state;
  if (st.sweeping || st.config.write_back_sweep.count() == 0)
    return;
  st.sweeping = true;
  self->send(self, tick_atom::value);
}

// A file was written: remember it for the next fsync (absorbed when already pending).
void on_register(sync_worker_pointer self, const sync_register& request) {
  context& ctx = *self->state.ctx;
  ctx.counters.syncs.requests.fetch_add(request.files.size(), std::memory_order_relaxed);
  for (const file_written& f : request.files) {
    if (!self->state.table.remember({to_tag(f.file), f.bytes, f.begin, f.end}))
      ctx.counters.syncs.absorbed.fetch_add(1, std::memory_order_relaxed);
  }
}

// The checkpointer's sync phase: fsync every file due, paced over request.pace_ms.
caf::result<sync_phase_done> begin_sync_phase(sync_worker_pointer self,
                                              const sync_phase_request& request) {
  auto& st = self->state;
  if (st.ctx->failed())
    return caf::make_error(caf::sec::runtime_error, "engine failed: " + st.ctx->failure());
  if (st.phase)
    return caf::make_error(caf::sec::runtime_error, "a sync phase is already running");
  sync_phase phase;
  phase.cycle = st.table.begin_cycle();
  for (const storage::file_write& f : st.table.due(phase.cycle))
    phase.walk.add(f); // its pieces, its fsync
  phase.walk.replan(self->clock().now(),
                    file_walk::capped(std::chrono::milliseconds(request.pace_ms),
                                      phase.walk.bytes_total));
  phase.promise = self->make_response_promise<sync_phase_done>();
  auto promise = phase.promise;
  st.ctx->trace(role::sync_worker, role::sync_worker, trace_type::sync_phase_begin, phase.cycle,
                phase.walk.files.size(),
                static_cast<std::uint64_t>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(phase.walk.span).count()));
  st.phase = std::move(phase);
  sync_step(self);
  return promise;
}

// WAL runs ahead of the checkpoint's time budget: finish the sync phase sooner.
void on_deadline(sync_worker_pointer self, const sync_deadline& deadline) {
  auto& st = self->state;
  if (!st.phase || st.phase->hurried)
    return;
  file_walk& walk = st.phase->walk;
  auto now = self->clock().now();
  auto ends = now + std::chrono::milliseconds(deadline.ms_left);
  if (ends + (walk.ends() - now) / 8 >= walk.ends())
    return; // only ever sooner, and by enough to matter: the plan it has still holds
  walk.replan(now, ends - now);
  st.ctx->trace(role::sync_worker, role::sync_worker, trace_type::sync_phase_replanned,
                deadline.ms_left);
  sync_step(self); // due sooner now: the step waiting on the old plan is stale
}

// An immediate checkpoint or a shutdown: the rest of the sync phase without pauses.
void on_hurry(sync_worker_pointer self) {
  auto& st = self->state;
  if (!st.phase || st.phase->hurried)
    return;
  st.ctx->trace(role::sync_worker, role::sync_worker, trace_type::sync_phase_hurried,
                st.phase->result.files, st.phase->walk.files.size());
  st.phase->hurried = true;
  sync_step(self); // the step waiting on the plan is stale
}

// A doublewrite chunk waits for fsyncs of these files that begin from now on.
void on_notify(sync_worker_pointer self, const sync_notify& request) {
  auto& st = self->state;
  if (st.ctx->failed())
    return; // the batcher's synced_chunks_request gets the error
  st.ctx->trace(role::dw_batcher, role::sync_worker, trace_type::sync_notify, request.chunk,
                request.files.size());
  TIDEMARK_CHECK_DETAIL(!request.files.empty() &&
                          st.files_left.emplace(request.chunk, request.files.size()).second,
                        "a doublewrite chunk is registered once, for at least one file",
                        "chunk " + std::to_string(request.chunk));
  for (const file_ref& f : request.files) {
    st.waiting[to_tag(f)].push_back(request.chunk);
    st.ctx->trace(role::dw_batcher, role::sync_worker, trace_type::notify_file, request.chunk,
                  f.rel, f.segno);
  }
}

// The batcher asks which chunks are covered by fsyncs: answered when some are.
caf::result<chunks_synced> on_synced_chunks_request(sync_worker_pointer self) {
  auto& st = self->state;
  if (st.ctx->failed())
    return caf::make_error(caf::sec::runtime_error, "engine failed: " + st.ctx->failure());
  TIDEMARK_CHECK(!st.synced_waiter, "one synced_chunks_request outstanding at a time");
  st.synced_waiter = self->make_response_promise<chunks_synced>();
  auto promise = *st.synced_waiter;
  tell_synced(self);
  return promise;
}

// The batcher retires its oldest batches: fsync now the files their chunks wait on.
void on_sync_now(sync_worker_pointer self, const sync_now& request) {
  auto& st = self->state;
  for (const file_ref& f : request.files) {
    if (st.waiting.count(to_tag(f)) == 0)
      continue; // an fsync since the request already covered everyone waiting on it
    std::uint64_t us = 0;
    if (st.ctx->failed() || !fsync_file(self, to_tag(f), &us))
      return;
    st.table.synced_now(to_tag(f));
  }
}

sync_worker_actor::behavior_type sync_worker(sync_worker_pointer self, context* ctx) {
  self->state.ctx = ctx;
  self->state.config = ctx->config;
  start_sweep(self);
  return {
    [=](tick_atom) { sweep_step(self); },
    [=](const sync_register& request) { on_register(self, request); },
    [=](const sync_forget& request) { self->state.table.forget(to_tag(request.file)); },
    [=](const sync_phase_request& request) -> caf::result<sync_phase_done> {
      return begin_sync_phase(self, request);
    },
    [=](sync_step_atom, std::uint64_t generation) {
      if (self->state.phase && generation == self->state.step_generation)
        sync_step(self);
    },
    [=](const sync_deadline& deadline) { on_deadline(self, deadline); },
    [=](hurry_atom) { on_hurry(self); },
    [=](const settings_reload& reload) {
      apply_reload(self->state.config, reload);
      start_sweep(self);
    },
    [=](const sync_notify& request) { on_notify(self, request); },
    [=](const synced_chunks_request&) -> caf::result<chunks_synced> {
      return on_synced_chunks_request(self);
    },
    [=](const sync_now& request) { on_sync_now(self, request); },
  };
}

} // namespace

sync_worker_actor spawn_sync_worker(caf::actor_system& system, context& ctx, bool detached) {
  if (detached)
    return system.spawn<caf::detached>([&ctx](sync_worker_pointer self) {
      name_this_thread("tm-sync-worker");
      return sync_worker(self, &ctx);
    });
  return system.spawn(sync_worker, &ctx);
}

} // namespace tidemark::actors
