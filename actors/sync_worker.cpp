// sync_worker: see sync_worker.hpp for its role.
#include "actors/sync_worker.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <map>
#include <optional>

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

std::uint64_t pieces_of(std::uint64_t bytes) {
  return (bytes + write_back_piece - 1) / write_back_piece;
}

// A paced walk over files, a write-back piece at a time, the steps spread evenly over a
// span from `started`: what a sync phase (which adds one fsync step per file) and the
// write-back sweep share.
struct file_walk {
  std::vector<storage::file_tag> files;
  std::vector<std::uint64_t> bytes; // of each file when the walk began
  std::size_t next = 0;             // the file being walked
  std::uint64_t offset = 0;         // its next piece
  std::uint64_t steps = 0;          // planned, all files
  std::uint64_t steps_done = 0;
  caf::actor_clock::time_point started; // the actor clock: tests advance it by hand

  void add(const storage::file_tag& tag, std::uint64_t file_bytes, std::uint64_t extra_steps) {
    files.push_back(tag);
    bytes.push_back(file_bytes);
    steps += pieces_of(file_bytes) + extra_steps;
  }
  bool done() const { return next == files.size(); }
  bool piece_left() const { return offset < bytes[next]; }
  void next_file() {
    ++next;
    offset = 0;
  }
  /// When the next step is due.
  caf::actor_clock::time_point due(std::chrono::milliseconds span) const {
    return started + span * steps_done / steps;
  }
};

struct sync_phase {
  std::uint64_t cycle = 0;
  file_walk walk; // the due files: their pieces, then each one's fsync
  std::chrono::milliseconds pace{0};
  bool hurried = false; // unpaced from now on, and no more write-back pieces
  caf::typed_response_promise<sync_phase_done> promise;
  sync_phase_done result;
};

// A doublewrite chunk waiting for fsyncs of its files that begin after its request (D2).
struct notification {
  std::size_t files_left = 0;
  caf::typed_response_promise<files_synced> promise;
};

struct sync_worker_state {
  context* ctx = nullptr;
  storage::sync_table table;
  std::optional<sync_phase> phase;
  file_walk sweep; // the write-back sweep (settings::write_back_sweep): one pass over the
                   // files pending at its start
  std::map<storage::file_tag, std::vector<std::uint32_t>> waiting; // file -> chunks
  std::map<std::uint32_t, notification> notifications;             // chunk -> what is left
  static inline const char* name = "sync_worker";
};

using sync_worker_pointer = sync_worker_actor::stateful_pointer<sync_worker_state>;

void trace(context& e, role from, role to, const char* type, std::uint64_t a = 0,
           std::uint64_t b = 0, std::uint64_t c = 0) {
  if (e.trace)
    e.trace->record(from, to, type, a, b, c);
}

// Every notification registered for `tag` was registered before this fsync began: one
// fewer file to wait for.
void notify_synced(sync_worker_pointer self, const storage::file_tag& tag) {
  auto& st = self->state;
  auto found = st.waiting.find(tag);
  if (found == st.waiting.end())
    return;
  for (std::uint32_t chunk : found->second) {
    notification& n = st.notifications[chunk];
    if (--n.files_left == 0) {
      trace(*st.ctx, role::sync_worker, role::dw_batcher, "files_synced", chunk);
      n.promise.deliver(files_synced{chunk});
      st.notifications.erase(chunk);
    }
  }
  st.waiting.erase(found);
}

void fail_notifications(sync_worker_pointer self) {
  auto& st = self->state;
  auto error = caf::make_error(caf::sec::runtime_error, "fsync failed: " + st.ctx->failure());
  for (auto& [chunk, n] : st.notifications)
    n.promise.deliver(error);
  st.notifications.clear();
  st.waiting.clear();
}

// Marks the engine failed for a failed fsync or write-back of `tag` (W3: never retried).
void fail_file(sync_worker_pointer self, const storage::file_tag& tag, const char* what,
               const std::exception& error) {
  context& e = *self->state.ctx;
  e.fail(std::string(what) + " failed: " + error.what());
  trace(e, role::sync_worker, role::checkpointer, "fsync_failed", tag.segment.rel,
        tag.segment.segno, static_cast<std::uint64_t>(tag.kind));
  fail_notifications(self);
}

// One fsync with W3 handling; returns false (engine failed) on error.
bool fsync_file(sync_worker_pointer self, const storage::file_tag& tag, std::uint64_t* micros) {
  context& e = *self->state.ctx;
  auto start = steady_clock::now();
  try {
    e.sync_file(tag);
  } catch (const std::exception& error) {
    fail_file(self, tag, "fsync", error);
    return false;
  }
  *micros = static_cast<std::uint64_t>(
    std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - start).count());
  e.syncs.fsyncs.fetch_add(1, std::memory_order_relaxed);
  trace(e, role::sync_worker, role::sync_worker, "fsync", tag.segment.rel, tag.segment.segno,
        static_cast<std::uint64_t>(tag.kind));
  notify_synced(self, tag);
  return true;
}

// Writes back one piece of `tag` from `offset`; false (engine failed, W3) on error.
bool write_back_piece_of(sync_worker_pointer self, const storage::file_tag& tag,
                         std::uint64_t offset) {
  context& e = *self->state.ctx;
  try {
    e.write_back_file(tag, offset, write_back_piece);
  } catch (const std::exception& error) {
    fail_file(self, tag, "write-back", error);
    return false;
  }
  trace(e, role::sync_worker, role::sync_worker, "write_back", tag.segment.rel, tag.segment.segno,
        offset);
  return true;
}

void fail_phase(sync_worker_pointer self) {
  auto& st = self->state;
  st.phase->promise.deliver(caf::make_error(caf::sec::runtime_error, st.ctx->failure()));
  st.phase.reset();
}

// The next step of the sync phase: a piece of write-back or an fsync, unless the schedule
// says to wait first. Steps are spread evenly over the phase's pace.
void sync_step(sync_worker_pointer self) {
  auto& st = self->state;
  context& e = *st.ctx;
  sync_phase& phase = *st.phase;
  file_walk& walk = phase.walk;
  if (walk.steps_done < walk.steps && phase.pace.count() > 0) {
    auto due_at = walk.due(phase.pace);
    auto now = self->clock().now();
    if (now < due_at) {
      self->delayed_send(self, due_at - now, step_atom::value);
      return;
    }
  }
  if (walk.done()) {
    trace(e, role::sync_worker, role::checkpointer, "sync_phase_done", phase.result.files);
    phase.promise.deliver(phase.result);
    st.phase.reset();
    return;
  }
  if (e.failed()) { // meanwhile (a write-back of the sweep, or elsewhere): no checkpoint
    fail_phase(self);
    return;
  }
  const storage::file_tag tag = walk.files[walk.next];
  ++walk.steps_done;
  if (walk.piece_left() && !phase.hurried) {
    std::uint64_t offset = walk.offset;
    walk.offset += write_back_piece;
    if (!write_back_piece_of(self, tag, offset)) {
      fail_phase(self);
      return;
    }
    self->send(self, step_atom::value);
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
  self->send(self, step_atom::value); // behind registrations already queued: they are absorbed
}

// One piece of the write-back sweep, then the next tick at its place in the pass. A pass
// covers the relation files pending when it starts; with none, the sweep looks again a
// tenth of a pass later.
void sweep_step(sync_worker_pointer self) {
  auto& st = self->state;
  context& e = *st.ctx;
  file_walk& sweep = st.sweep;
  auto period = e.config.write_back_sweep;
  if (e.failed() || period.count() == 0)
    return;
  if (sweep.done()) {
    sweep = file_walk{};
    sweep.started = self->clock().now();
    for (const storage::file_tag& tag : st.table.pending())
      if (std::uint64_t bytes = e.write_back_bytes(tag); bytes > 0)
        sweep.add(tag, bytes, 0);
    if (sweep.done()) {
      self->delayed_send(self, period / 10, tick_atom::value);
      return;
    }
  }
  if (!write_back_piece_of(self, sweep.files[sweep.next], sweep.offset))
    return;
  sweep.offset += write_back_piece;
  ++sweep.steps_done;
  if (!sweep.piece_left())
    sweep.next_file();
  auto due_at = sweep.due(period);
  auto now = self->clock().now();
  if (due_at > now)
    self->delayed_send(self, due_at - now, tick_atom::value);
  else
    self->send(self, tick_atom::value); // behind what is queued: registrations, sync requests
}

sync_worker_actor::behavior_type sync_worker(sync_worker_pointer self, context* ctx) {
  self->state.ctx = ctx;
  if (ctx->config.write_back_sweep.count() > 0)
    self->send(self, tick_atom::value);
  return {
    [=](tick_atom) { sweep_step(self); },
    [=](const sync_register& request) {
      context& e = *self->state.ctx;
      e.syncs.requests.fetch_add(request.files.size(), std::memory_order_relaxed);
      for (const file_ref& f : request.files)
        if (!self->state.table.remember(to_tag(f)))
          e.syncs.absorbed.fetch_add(1, std::memory_order_relaxed);
    },
    [=](const sync_forget& request) { self->state.table.forget(to_tag(request.file)); },
    [=](const sync_phase_request& request) -> caf::result<sync_phase_done> {
      auto& st = self->state;
      if (st.ctx->failed())
        return caf::make_error(caf::sec::runtime_error, "engine failed: " + st.ctx->failure());
      if (st.phase)
        return caf::make_error(caf::sec::runtime_error, "a sync phase is already running");
      sync_phase phase;
      phase.cycle = st.table.begin_cycle();
      for (const storage::file_tag& tag : st.table.due(phase.cycle))
        phase.walk.add(tag, st.ctx->write_back_bytes(tag), 1); // its pieces, its fsync
      phase.walk.started = self->clock().now();
      phase.pace = std::chrono::milliseconds(request.pace_ms);
      phase.promise = self->make_response_promise<sync_phase_done>();
      auto promise = phase.promise;
      trace(*st.ctx, role::sync_worker, role::sync_worker, "sync_phase_begin", phase.cycle,
            phase.walk.files.size());
      st.phase = std::move(phase);
      sync_step(self);
      return promise;
    },
    [=](step_atom) {
      if (self->state.phase)
        sync_step(self);
    },
    [=](hurry_atom) {
      auto& st = self->state;
      if (!st.phase || st.phase->hurried)
        return;
      trace(*st.ctx, role::sync_worker, role::sync_worker, "sync_phase_hurried",
            st.phase->walk.steps_done, st.phase->walk.steps);
      st.phase->hurried = true;
      st.phase->pace = std::chrono::milliseconds(0);
      sync_step(self); // the paced step still pending finds the phase done, or takes a turn
    },
    [=](const sync_notify_request& request) -> caf::result<files_synced> {
      auto& st = self->state;
      if (st.ctx->failed())
        return caf::make_error(caf::sec::runtime_error, "engine failed: " + st.ctx->failure());
      trace(*st.ctx, role::dw_batcher, role::sync_worker, "sync_notify_request", request.chunk,
            request.files.size());
      notification& n = st.notifications[request.chunk];
      n.promise = self->make_response_promise<files_synced>();
      n.files_left = request.files.size();
      for (const file_ref& f : request.files) {
        st.waiting[to_tag(f)].push_back(request.chunk);
        trace(*st.ctx, role::dw_batcher, role::sync_worker, "notify_file", request.chunk, f.rel,
              f.segno);
      }
      return n.promise;
    },
    [=](const sync_now& request) {
      auto& st = self->state;
      for (const file_ref& f : request.files) {
        if (st.waiting.count(to_tag(f)) == 0)
          continue; // an fsync since the request already covered everyone waiting on it
        std::uint64_t us = 0;
        if (st.ctx->failed() || !fsync_file(self, to_tag(f), &us))
          return;
        st.table.synced_now(to_tag(f));
      }
    },
  };
}

} // namespace

sync_worker_actor spawn_sync_worker(caf::actor_system& system, context& ctx, bool detached) {
  if (detached)
    return system.spawn<caf::detached>(sync_worker, &ctx);
  return system.spawn(sync_worker, &ctx);
}

} // namespace tidemark::actors
