// checkpointer: see checkpointer.hpp for its role, phases and invariants.
#include "actors/checkpointer.hpp"

#include "actors/page_sinks.hpp"
#include "actors/write_allowance.hpp"
#include "storage/check.hpp"
#include "storage/page.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <vector>

namespace tidemark::actors {

namespace {

using namespace messages;
using std::chrono::steady_clock;

constexpr auto tick_interval = std::chrono::milliseconds(100);
constexpr auto nap_interval = std::chrono::milliseconds(100);
constexpr double write_share = 0.8; // of the completion target; the sync phase gets the rest
constexpr std::size_t wal_segments_ahead = 2;

double ms_between(steady_clock::time_point from, steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// One checkpoint in progress.
struct checkpoint_run {
  checkpoint_reason reason = checkpoint_reason::time;
  bool immediate = false;
  bool hurried = false; // paced until an immediate request or too much WAL arrived
  steady_clock::time_point started;
  storage::lsn_t redo = 0;
  storage::lsn_t previous_redo = 0;
  standby_state::replayed_checkpoint restart_at; // a restartpoint's replayed checkpoint record
  std::vector<std::pair<storage::page_id, storage::buffer_id>> to_write;
  write_allowance allowance; // background_write_limit, for its paced steps
  std::size_t next = 0;
  std::uint64_t written = 0;
  double write_ms = 0;
  std::vector<caf::typed_response_promise<checkpoint_done>> waiters;
};

struct checkpointer_state {
  context* ctx = nullptr;
  settings config; // the engine's at the start; reloadable ones replaced by settings_reload
  sync_worker_actor sync_worker;
  std::unique_ptr<buffer_sink> sink;
  std::optional<checkpoint_run> run;
  // Requests that arrived while a checkpoint ran: merged into the next one.
  std::vector<caf::typed_response_promise<checkpoint_done>> queued;
  checkpoint_reason queued_reason = checkpoint_reason::requested;
  bool queued_immediate = false;
  steady_clock::time_point last_start; // set from the actor's clock at its start
  storage::lsn_t idle_lsn = 0;         // insert position right after the last checkpoint
  std::vector<checkpoint_observer_actor> subscribers;
  static inline const char* name = "checkpointer";
};

using checkpointer_pointer = checkpointer_actor::stateful_pointer<checkpointer_state>;

// Time comes from the actor's clock (the steady clock when running, a clock the tests
// advance by hand on the deterministic scheduler), so that the schedule can be tested.
steady_clock::time_point now(checkpointer_pointer self) { return self->clock().now(); }

// The run a write step, the sync phase or the finish works on: one exists from
// begin_checkpoint until finish_checkpoint or fail_run.
checkpoint_run& current_run(checkpointer_state& st) {
  TIDEMARK_CHECK(st.run.has_value(), "a checkpoint step runs only inside a checkpoint run");
  return *st.run;
}

void trace(context& ctx, actor_role to, trace_type type, std::uint64_t a = 0, std::uint64_t b = 0,
           std::uint64_t c = 0) {
  ctx.trace(actor_role::checkpointer, to, type, a, b, c);
}

// ---- schedule (C4) -----------------------------------------------------------------------

double wal_budget(const settings& config) {
  return double(config.max_wal_size) / (1.0 + config.checkpoint_completion_target);
}

/// Where the schedule says the write phase should be: the larger of the elapsed share of
/// the write window in time and in WAL.
double write_schedule(const checkpointer_state& st, const checkpoint_run& run,
                      steady_clock::time_point at) {
  const settings& config = st.config;
  double window = config.checkpoint_completion_target * write_share;
  if (window <= 0)
    return 1.0;
  double by_time = ms_between(run.started, at) / double(config.checkpoint_timeout.count());
  double by_wal = double(st.ctx->store.wal->inserted_lsn() - run.redo) / wal_budget(config);
  return std::max(by_time, by_wal) / window;
}

double write_progress(const checkpoint_run& run) {
  return run.to_write.empty() ? 1.0 : double(run.next) / double(run.to_write.size());
}

/// Time left for the sync phase (0: unpaced): until completion_target of the interval, or
/// sooner if WAL, at the rate it has been consumed since the redo point, would reach
/// completion_target of the WAL trigger's budget first (C4).
std::uint64_t sync_pace_ms(const checkpointer_state& st, const checkpoint_run& run,
                           steady_clock::time_point at) {
  if (run.immediate || run.hurried)
    return 0;
  double target = st.config.checkpoint_completion_target;
  double elapsed = ms_between(run.started, at);
  double left = target * double(st.config.checkpoint_timeout.count()) - elapsed;
  double used = double(st.ctx->store.wal->inserted_lsn() - run.redo);
  double wal_left = target * wal_budget(st.config) - used;
  if (left <= 0 || wal_left <= 0)
    return 0;
  if (used > 0 && elapsed > 0)
    left = std::min(left, wal_left / (used / elapsed));
  return static_cast<std::uint64_t>(left);
}

// ---- events --------------------------------------------------------------------------------

void publish(checkpointer_pointer self, checkpoint_phase phase, bool napping = false) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  ctx.counters.checkpoints.phase.store(phase);
  if (st.subscribers.empty() || !st.run)
    return;
  const checkpoint_run& run = current_run(st);
  checkpoint_event event;
  event.phase = static_cast<std::uint8_t>(phase);
  event.reason = static_cast<std::uint8_t>(run.reason);
  event.buffers_total = run.to_write.size();
  event.buffers_written = run.written;
  event.progress = write_progress(run);
  event.schedule = phase == checkpoint_phase::write ? write_schedule(st, run, now(self)) : 0;
  event.napping = napping;
  for (const checkpoint_observer_actor& subscriber : st.subscribers)
    self->send(subscriber, event);
}

// ---- BEGIN ---------------------------------------------------------------------------------

void begin_checkpoint(checkpointer_pointer self, checkpoint_reason reason, bool immediate,
                      std::vector<caf::typed_response_promise<checkpoint_done>> waiters) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  checkpoint_run run;
  run.reason = reason;
  run.immediate = immediate;
  run.started = now(self);
  run.previous_redo = ctx.control().redo_lsn;
  run.waiters = std::move(waiters);
  if (reason == checkpoint_reason::restartpoint) { // at the newest checkpoint redo replayed
    run.restart_at = ctx.standby.last_replayed_checkpoint();
    run.redo = run.restart_at.redo_lsn;
  } else {
    // Returns once every commit whose record precedes the redo point has marked its pages
    // dirty and set its status (storage rule 4): the scan below and the commit-status
    // log's write in the sync phase find them.
    run.redo = ctx.store.wal->begin_redo_point();
  }
  storage::buffer_pool& pool = *ctx.store.pool;
  for (storage::buffer_id b = 0; b < pool.size(); ++b)
    if (pool.is_dirty(b))
      run.to_write.emplace_back(pool.tag(b), b);
  std::sort(run.to_write.begin(), run.to_write.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  st.last_start = run.started;
  trace(ctx, actor_role::checkpointer, trace_type::checkpoint_begin, run.redo, run.to_write.size(),
        static_cast<std::uint64_t>(reason));
  st.run = std::move(run);
  publish(self, checkpoint_phase::write);
  self->send(self, write_step_atom::value);
}

// ---- WRITE ---------------------------------------------------------------------------------

// Stages `buffer` in the sink. Someone else's write of a buffer dirty at BEGIN must
// complete (and register its file) before the sync phase: wait for it rather than skip it
// (storage rule 6). Returns whether this checkpoint wrote the buffer. Before it waits, the
// sink's flush lets go of its staged pages and its ring chunk: the writer waited for (redo or a
// session writing a victim) may itself be waiting for a chunk, and in doublewrite mode
// there are only a few chunks of staging memory.
bool write_or_await(context& ctx, buffer_sink& sink, storage::buffer_id buffer) {
  while (!sink.add(buffer, false)) {
    if (!ctx.store.pool->write_in_progress(buffer))
      return false;
    sink.flush();
    trace(ctx, actor_role::checkpointer, trace_type::checkpoint_awaits_write, buffer);
    ctx.store.pool->wait_for_write(buffer);
  }
  return true;
}

void write_due(checkpointer_state& st, std::size_t due) {
  checkpoint_run& run = current_run(st);
  TIDEMARK_CHECK(due <= run.to_write.size(),
                 "a write step stops at the end of the checkpoint's list");
  while (run.next < due)
    run.written += write_or_await(*st.ctx, *st.sink, run.to_write[run.next++].second);
  st.sink->flush();
}

void fail_run(checkpointer_pointer self, const std::string& why);
void start_sync_phase(checkpointer_pointer self);

// Writes what the schedule asks for by now (everything, when hurrying), in batches, then
// naps 100 ms if buffers are left: the writes follow the schedule in small steps.
void write_step(checkpointer_pointer self) {
  auto& st = self->state;
  checkpoint_run& run = current_run(st);
  context& ctx = *st.ctx;
  bool hurry = run.immediate || run.hurried || ctx.failed();
  std::size_t total = run.to_write.size();
  std::size_t due = hurry ? total
                          : std::min(total, static_cast<std::size_t>(std::ceil(
                                              write_schedule(st, run, now(self)) * double(total))));
  due = std::min(total, std::max(due, run.next + 1)); // at least one buffer per step
  if (!hurry) { // background_write_limit caps a paced step, whatever the schedule says
    std::size_t allowed =
      run.allowance.available(st.config.background_write_limit, ctx.config.page_size, now(self));
    due = std::min(due, run.next + std::min(allowed, total - run.next));
  }
  const std::size_t first = run.next;
  try {
    write_due(st, due);
  } catch (const std::exception& error) {
    fail_run(self, std::string("checkpoint write failed: ") + error.what());
    return;
  }
  run.allowance.spend(run.next - first);
  if (run.next >= total) {
    run.write_ms = ms_between(run.started, now(self));
    start_sync_phase(self);
    return;
  }
  publish(self, checkpoint_phase::write, true);
  self->delayed_send(self, nap_interval, write_step_atom::value); // ahead of schedule: nap
}

// ---- SYNC and FINISH -------------------------------------------------------------------------

// C2: only after the control file moved on, and not what a standby still needs. Segments
// are recycled up to max_wal_size past the redo point (as PostgreSQL does), so the WAL of
// the next cycle is written into recycled files rather than freshly zero-filled ones.
void remove_old_wal(context& ctx, storage::lsn_t redo) {
  ctx.store.wal->remove_segments_before(std::min(redo, ctx.sender.keep_from.load()),
                                        redo + ctx.config.max_wal_size);
  trace(ctx, actor_role::checkpointer, trace_type::wal_recycled, redo);
}

storage::lsn_t write_checkpoint_record(context& ctx, const checkpoint_run& run) {
  storage::checkpoint_payload payload{};
  payload.redo_lsn = run.redo;
  payload.next_xid = ctx.next_xid.load();
  payload.time_unix_ms =
    static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count());
  storage::record_builder record;
  record.reset(storage::record_type::checkpoint, 0);
  record.set_main_data(&payload, sizeof payload);
  record.finish();
  auto position = ctx.store.wal->insert(record, ctx.store.wal->redo_lsn());
  TIDEMARK_CHECK(position.has_value(), "only the checkpointer moves the redo point");
  ctx.store.wal->flush(position->end);
  storage::control_data control = ctx.control();
  control.state = static_cast<std::uint32_t>(run.reason == checkpoint_reason::shutdown
                                               ? storage::cluster_state::shut_down
                                               : storage::cluster_state::in_production);
  control.checkpoint_lsn = position->start;
  control.redo_lsn = run.redo;
  control.next_xid = payload.next_xid;
  control.checkpoint_time_unix_ms = payload.time_unix_ms;
  if (run.reason == checkpoint_reason::end_of_recovery && ctx.standby.promoting.exchange(false))
    ++control.generation; // a promoted standby's history goes on apart from its old primary's
  storage::write_control_file(*ctx.store.io, ctx.data_dir, control);
  ctx.set_control(control);
  trace(ctx, actor_role::checkpointer, trace_type::control_file_written, position->start, run.redo);
  remove_old_wal(ctx, run.redo);
  return position->start;
}

// A standby's FINISH: no record of its own (its WAL is the primary's); the control file
// points at the replayed checkpoint record, so that a restart replays from its redo point.
storage::lsn_t write_restartpoint(context& ctx, const checkpoint_run& run) {
  storage::control_data control = ctx.control();
  control.state = static_cast<std::uint32_t>(storage::cluster_state::in_recovery);
  control.checkpoint_lsn = run.restart_at.checkpoint_lsn;
  control.redo_lsn = run.redo;
  control.next_xid = std::max<std::uint64_t>(control.next_xid, run.restart_at.next_xid);
  control.checkpoint_time_unix_ms = run.restart_at.time_unix_ms;
  storage::write_control_file(*ctx.store.io, ctx.data_dir, control);
  ctx.set_control(control);
  ctx.standby.restart_redo.store(run.redo);
  trace(ctx, actor_role::checkpointer, trace_type::control_file_written, control.checkpoint_lsn,
        run.redo);
  remove_old_wal(ctx, run.redo);
  return control.checkpoint_lsn;
}

void log_checkpoint(const checkpointer_state& st, const checkpoint_run& run,
                    const sync_phase_done& sync, double total_ms) {
  context& ctx = *st.ctx;
  if (!st.config.log_checkpoints)
    return;
  double share = 100.0 * double(run.written) / double(ctx.store.pool->size());
  double sync_s = double(sync.total_us) / 1e6;
  char line[512];
  std::snprintf(line, sizeof line,
                "LOG:  %s complete (%s): wrote %llu buffers (%.1f%%); write=%.3f s, "
                "sync=%.3f s, total=%.3f s; sync files=%llu, longest=%.3f s, average=%.3f s; "
                "distance=%llu kB",
                run.reason == checkpoint_reason::restartpoint ? "restartpoint" : "checkpoint",
                to_string(run.reason), static_cast<unsigned long long>(run.written), share,
                run.write_ms / 1000, sync_s, total_ms / 1000,
                static_cast<unsigned long long>(sync.files), double(sync.longest_us) / 1e6,
                sync.files ? sync_s / double(sync.files) : 0.0,
                static_cast<unsigned long long>((run.redo - run.previous_redo) / 1024));
  ctx.log(line);
}

void start_next_if_queued(checkpointer_pointer self) {
  auto& st = self->state;
  if (st.queued.empty())
    return;
  auto waiters = std::move(st.queued);
  st.queued.clear();
  bool immediate = st.queued_immediate;
  st.queued_immediate = false;
  begin_checkpoint(self, st.queued_reason, immediate, std::move(waiters));
}

void finish_checkpoint(checkpointer_pointer self, const sync_phase_done& sync) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  checkpoint_run& run = current_run(st);
  publish(self, checkpoint_phase::finish);
  storage::lsn_t checkpoint_lsn;
  try {
    checkpoint_lsn = run.reason == checkpoint_reason::restartpoint
                       ? write_restartpoint(ctx, run)
                       : write_checkpoint_record(ctx, run);
  } catch (const std::exception& error) {
    fail_run(self, std::string("checkpoint record failed: ") + error.what());
    return;
  }
  trace(ctx, actor_role::checkpointer, trace_type::checkpoint_record, checkpoint_lsn, run.redo);
  auto& counters = ctx.counters.checkpoints;
  (run.reason == checkpoint_reason::time           ? counters.timed
   : run.reason == checkpoint_reason::restartpoint ? counters.restartpoints
                                                   : counters.requested)
    .fetch_add(1);
  counters.write_ms.fetch_add(static_cast<std::uint64_t>(run.write_ms));
  counters.sync_ms.fetch_add(sync.total_us / 1000);
  counters.buffers_written.fetch_add(run.written);
  log_checkpoint(st, run, sync, ms_between(run.started, now(self)));
  publish(self, checkpoint_phase::idle);
  st.idle_lsn = ctx.store.wal->inserted_lsn();
  checkpoint_done done{checkpoint_lsn, run.redo, run.written};
  for (auto& waiter : run.waiters)
    waiter.deliver(done);
  st.run.reset();
  start_next_if_queued(self);
}

void request_sync_phase(checkpointer_pointer self);

// In doublewrite mode the batcher finishes the writes this checkpoint handed over; the sync
// phase starts once they are written in place and registered.
void start_sync_phase(checkpointer_pointer self) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  publish(self, checkpoint_phase::sync);
  if (!ctx.doublewrite()) {
    request_sync_phase(self);
    return;
  }
  self->request(ctx.store.batcher, caf::infinite, dw_flush_request{})
    .then([=](const dw_flushed&) { request_sync_phase(self); },
          [=](const caf::error& error) { fail_run(self, error_text(error)); });
}

void request_sync_phase(checkpointer_pointer self) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  try {
    ctx.store.commit_log->write_dirty(storage::write_source::checkpointer);
  } catch (const std::exception& error) {
    fail_run(self, std::string("commit-status log write failed: ") + error.what());
    return;
  }
  sync_phase_request request{sync_pace_ms(st, current_run(st), now(self))};
  trace(ctx, actor_role::sync_worker, trace_type::sync_phase_request, request.pace_ms);
  self->request(st.sync_worker, caf::infinite, request)
    .then([=](const sync_phase_done& done) { finish_checkpoint(self, done); },
          [=](const caf::error& error) { fail_run(self, error_text(error)); });
}

void fail_run(checkpointer_pointer self, const std::string& why) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  ctx.fail(why);
  trace(ctx, actor_role::checkpointer, trace_type::checkpoint_failed);
  publish(self, checkpoint_phase::idle);
  auto error = caf::make_error(caf::sec::runtime_error, ctx.failure());
  for (auto& waiter : current_run(st).waiters)
    waiter.deliver(error);
  for (auto& waiter : st.queued)
    waiter.deliver(error);
  st.queued.clear();
  st.run.reset();
}

// ---- triggers ------------------------------------------------------------------------------

// Finishes the running paced checkpoint unpaced: the write phase writes what is left at its
// next step (taken now), the sync phase's remaining fsyncs run one after another.
void hurry(checkpointer_pointer self, trace_type why) {
  auto& st = self->state;
  if (!st.run || st.run->immediate || st.run->hurried)
    return;
  context& ctx = *st.ctx;
  st.run->hurried = true;
  trace(ctx, actor_role::checkpointer, why);
  checkpoint_phase phase = ctx.counters.checkpoints.phase.load();
  if (phase == checkpoint_phase::write)
    self->send(self, write_step_atom::value); // the nap's own step finds the phase over, or writes
  else if (phase == checkpoint_phase::sync)
    self->send(st.sync_worker, hurry_atom::value); // ignored before its phase begins: that
                                                   // one is asked for unpaced (sync_pace_ms)
}

void on_request(checkpointer_pointer self, checkpoint_reason reason, bool immediate,
                caf::typed_response_promise<checkpoint_done> promise) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  trace(ctx, actor_role::checkpointer, trace_type::checkpoint_request,
        static_cast<std::uint64_t>(reason), immediate);
  if (ctx.failed()) {
    promise.deliver(caf::make_error(caf::sec::runtime_error, "engine failed: " + ctx.failure()));
    return;
  }
  if (ctx.recovering.load() && reason != checkpoint_reason::end_of_recovery) {
    // Until recovery has finished, a checkpoint would move the redo point past WAL that
    // redo has not applied yet (DESIGN §6).
    promise.deliver(caf::make_error(caf::sec::runtime_error,
                                    "recovery has not finished: only the end-of-recovery "
                                    "checkpoint may run"));
    return;
  }
  if (st.run) { // merged into the next checkpoint (C3)
    if (st.queued.empty() || reason != checkpoint_reason::time)
      st.queued_reason = reason;
    st.queued_immediate = st.queued_immediate || immediate;
    st.queued.push_back(std::move(promise));
    if (immediate)
      hurry(self, trace_type::checkpoint_hurried_by_request);
    return;
  }
  begin_checkpoint(self, reason, immediate, {std::move(promise)});
}

// A standby's schedule, as a primary's (C3) but by WAL replayed: a restartpoint when
// checkpoint_timeout has passed or the WAL replayed since the last one reached the WAL
// budget, and redo has replayed a checkpoint record newer than the last restartpoint's.
void consider_restartpoint(checkpointer_pointer self) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  if (st.run)
    return;
  standby_state::replayed_checkpoint replayed = ctx.standby.last_replayed_checkpoint();
  const storage::control_data control = ctx.control();
  if (replayed.checkpoint_lsn <= control.checkpoint_lsn)
    return;
  bool timed = now(self) - st.last_start >= st.config.checkpoint_timeout;
  bool by_wal = double(ctx.standby.replayed.load() - control.redo_lsn) >= wal_budget(st.config);
  if (timed || by_wal)
    begin_checkpoint(self, checkpoint_reason::restartpoint, false, {});
}

void on_tick(checkpointer_pointer self) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  self->delayed_send(self, tick_interval, tick_atom::value);
  if (!ctx.failed() && ctx.recovering.load() && ctx.standby.restartpoints.load()) {
    consider_restartpoint(self);
    return;
  }
  if (ctx.failed() || ctx.recovering.load())
    return; // during redo the redo point stays put and its WAL must not be recycled
  try {
    ctx.store.wal->prepare_segments_ahead(wal_segments_ahead); // keeps segment creation off commits
  } catch (const std::exception& error) {
    ctx.fail(std::string("cannot create WAL segment: ") + error.what());
    return;
  }
  if (st.run) {
    if (double(ctx.store.wal->inserted_lsn() - st.run->redo) >= wal_budget(st.config))
      hurry(self, trace_type::checkpoint_hurried_by_wal); // the next checkpoint is due already
    else if (ctx.counters.checkpoints.phase.load() == checkpoint_phase::sync && !st.run->hurried &&
             !st.run->immediate)
      self->send(st.sync_worker,
                 sync_deadline{sync_pace_ms(st, *st.run, now(self))}); // re-plans if
                                                                       // WAL runs ahead
    return;
  }
  bool idle = ctx.store.wal->inserted_lsn() ==
              st.idle_lsn; // nothing logged since the last checkpoint
  if (now(self) - st.last_start >= st.config.checkpoint_timeout) {
    if (idle)
      st.last_start = now(self);
    else
      begin_checkpoint(self, checkpoint_reason::time, false, {});
  } else if (double(ctx.store.wal->inserted_lsn() - ctx.control().redo_lsn) >=
             wal_budget(st.config)) {
    begin_checkpoint(self, checkpoint_reason::wal, false, {});
  }
}

checkpointer_actor::behavior_type checkpointer(checkpointer_pointer self, context* ctx,
                                               sync_worker_actor sync_worker) {
  auto& st = self->state;
  st.ctx = ctx;
  st.config = ctx->config;
  st.sync_worker = std::move(sync_worker);
  st.sink = make_buffer_sink(*ctx, storage::write_source::checkpointer);
  st.idle_lsn = ctx->store.wal->inserted_lsn();
  st.last_start = now(self);
  self->delayed_send(self, tick_interval, tick_atom::value);
  return {
    [=](const checkpoint_request& request) -> caf::result<checkpoint_done> {
      auto promise = self->make_response_promise<checkpoint_done>();
      on_request(self, static_cast<checkpoint_reason>(request.reason), request.immediate, promise);
      return promise;
    },
    [=](write_step_atom) {
      if (self->state.run &&
          self->state.ctx->counters.checkpoints.phase.load() == checkpoint_phase::write)
        write_step(self);
    },
    [=](tick_atom) { on_tick(self); },
    [=](subscribe_atom, checkpoint_observer_actor subscriber) {
      self->state.subscribers.push_back(std::move(subscriber));
    },
    [=](const settings_reload& reload) { apply_reload(self->state.config, reload); },
  };
}

} // namespace

checkpointer_actor spawn_checkpointer(caf::actor_system& system, context& ctx,
                                      sync_worker_actor sync_worker, bool detached) {
  if (detached)
    return system.spawn<caf::detached>([&ctx, sync_worker](checkpointer_pointer self) {
      name_this_thread("tm-checkpointer");
      return checkpointer(self, &ctx, sync_worker);
    });
  return system.spawn(checkpointer, &ctx, std::move(sync_worker));
}

} // namespace tidemark::actors
