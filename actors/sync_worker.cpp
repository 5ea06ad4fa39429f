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

struct sync_phase {
  std::uint64_t cycle = 0;
  std::vector<storage::file_tag> due;
  std::size_t next = 0;
  steady_clock::time_point started;
  std::chrono::milliseconds pace{0};
  caf::typed_response_promise<sync_phase_done> promise;
  sync_phase_done result;
};

// A doublewrite chunk waiting for fsyncs of its files that begin after its request (D2).
struct notification {
  std::size_t files_left = 0;
  caf::typed_response_promise<files_synced> promise;
};

struct sync_worker_state {
  runtime::engine* engine = nullptr;
  storage::sync_table table;
  std::optional<sync_phase> phase;
  std::map<storage::file_tag, std::vector<std::uint32_t>> waiting; // file -> chunks
  std::map<std::uint32_t, notification> notifications;             // chunk -> what is left
  static inline const char* name = "sync_worker";
};

using sync_worker_pointer = sync_worker_actor::stateful_pointer<sync_worker_state>;

void trace(runtime::engine& e, role from, role to, const char* type, std::uint64_t a = 0,
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
      trace(*st.engine, role::sync_worker, role::dw_batcher, "files_synced", chunk);
      n.promise.deliver(files_synced{chunk});
      st.notifications.erase(chunk);
    }
  }
  st.waiting.erase(found);
}

void fail_notifications(sync_worker_pointer self) {
  auto& st = self->state;
  auto error = caf::make_error(caf::sec::runtime_error, "fsync failed: " + st.engine->failure());
  for (auto& [chunk, n] : st.notifications)
    n.promise.deliver(error);
  st.notifications.clear();
  st.waiting.clear();
}

// One fsync with W3 handling; returns false (engine failed) on error.
bool fsync_file(sync_worker_pointer self, const storage::file_tag& tag, std::uint64_t* micros) {
  runtime::engine& e = *self->state.engine;
  auto start = steady_clock::now();
  try {
    e.sync_file(tag);
  } catch (const std::exception& error) {
    e.fail(std::string("fsync failed: ") + error.what());
    trace(e, role::sync_worker, role::checkpointer, "fsync_failed", tag.segment.rel,
          tag.segment.segno, static_cast<std::uint64_t>(tag.kind));
    fail_notifications(self);
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

// Fsyncs the next due file, unless the schedule says to wait first.
void sync_step(sync_worker_pointer self) {
  auto& st = self->state;
  runtime::engine& e = *st.engine;
  sync_phase& phase = *st.phase;
  if (phase.next < phase.due.size() && phase.pace.count() > 0) {
    auto due_at = phase.started + phase.pace * phase.next / phase.due.size();
    auto now = steady_clock::now();
    if (now < due_at) {
      self->delayed_send(self, due_at - now, step_atom::value);
      return;
    }
  }
  if (phase.next == phase.due.size()) {
    trace(e, role::sync_worker, role::checkpointer, "sync_phase_done", phase.result.files);
    phase.promise.deliver(phase.result);
    st.phase.reset();
    return;
  }
  const storage::file_tag tag = phase.due[phase.next++];
  std::uint64_t us = 0;
  if (!fsync_file(self, tag, &us)) {
    phase.promise.deliver(caf::make_error(caf::sec::runtime_error, e.failure()));
    st.phase.reset();
    return;
  }
  st.table.synced(tag, phase.cycle);
  phase.result.files++;
  phase.result.total_us += us;
  phase.result.longest_us = std::max(phase.result.longest_us, us);
  self->send(self, step_atom::value); // behind registrations already queued: they are absorbed
}

sync_worker_actor::behavior_type sync_worker(sync_worker_pointer self, runtime::engine* engine) {
  self->state.engine = engine;
  return {
    [=](const sync_register& request) {
      runtime::engine& e = *self->state.engine;
      e.syncs.requests.fetch_add(request.files.size(), std::memory_order_relaxed);
      for (const file_ref& f : request.files)
        if (!self->state.table.remember(to_tag(f)))
          e.syncs.absorbed.fetch_add(1, std::memory_order_relaxed);
    },
    [=](const sync_forget& request) { self->state.table.forget(to_tag(request.file)); },
    [=](const sync_phase_request& request) -> caf::result<sync_phase_done> {
      auto& st = self->state;
      if (st.engine->failed())
        return caf::make_error(caf::sec::runtime_error, "engine failed: " + st.engine->failure());
      if (st.phase)
        return caf::make_error(caf::sec::runtime_error, "a sync phase is already running");
      sync_phase phase;
      phase.cycle = st.table.begin_cycle();
      phase.due = st.table.due(phase.cycle);
      phase.started = steady_clock::now();
      phase.pace = std::chrono::milliseconds(request.pace_ms);
      phase.promise = self->make_response_promise<sync_phase_done>();
      auto promise = phase.promise;
      trace(*st.engine, role::sync_worker, role::sync_worker, "sync_phase_begin", phase.cycle,
            phase.due.size());
      st.phase = std::move(phase);
      sync_step(self);
      return promise;
    },
    [=](step_atom) {
      if (self->state.phase)
        sync_step(self);
    },
    [=](const sync_notify_request& request) -> caf::result<files_synced> {
      auto& st = self->state;
      if (st.engine->failed())
        return caf::make_error(caf::sec::runtime_error, "engine failed: " + st.engine->failure());
      trace(*st.engine, role::dw_batcher, role::sync_worker, "sync_notify_request", request.chunk,
            request.files.size());
      notification& n = st.notifications[request.chunk];
      n.promise = self->make_response_promise<files_synced>();
      n.files_left = request.files.size();
      for (const file_ref& f : request.files) {
        st.waiting[to_tag(f)].push_back(request.chunk);
        trace(*st.engine, role::dw_batcher, role::sync_worker, "notify_file", request.chunk, f.rel,
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
        if (st.engine->failed() || !fsync_file(self, to_tag(f), &us))
          return;
        st.table.synced_now(to_tag(f));
      }
    },
  };
}

} // namespace

sync_worker_actor spawn_sync_worker(caf::actor_system& system, runtime::engine& engine, bool detached) {
  if (detached)
    return system.spawn<caf::detached>(sync_worker, &engine);
  return system.spawn(sync_worker, &engine);
}

} // namespace tidemark::actors
