// The checkpoint's write phase against its schedule (C4), on the deterministic scheduler's
// clock: the written fraction after each step, against the schedule's fraction at that
// moment and against the schedule's formula (a write window of 0.8 × completion_target of
// checkpoint_timeout, or of the WAL budget max_wal_size / (1 + completion_target), whichever
// is further along), when time drives it, when WAL drives it (a step behind the schedule
// catches up at once), and for a checkpoint too small to spread.
#include "checkpoint_fixture.hpp"

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <vector>

namespace tidemark {
namespace {

using messages::checkpoint_event;
using messages::checkpoint_phase;
using messages::checkpoint_reason;
using messages::trace_type;
using std::chrono::milliseconds;

constexpr milliseconds step_interval{100}; // the checkpointer's nap between write steps

// Every event a checkpointer publishes, in order, and the write steps among them.
struct schedule_observer {
  std::vector<checkpoint_event> events;
  caf::actor observer;

  explicit schedule_observer(test::checkpoint_fixture& f) {
    auto actor = f.system.spawn([this]() -> messages::checkpoint_observer_actor::behavior_type {
      return {[this](const checkpoint_event& e) { events.push_back(e); }};
    });
    caf::anon_send(f.checkpointer, messages::subscribe_atom::value, actor);
    observer = caf::actor_cast<caf::actor>(actor);
    f.run();
  }
  ~schedule_observer() { caf::anon_send_exit(observer, caf::exit_reason::user_shutdown); }

  /// The written fraction after the newest write step.
  double progress() const {
    for (auto e = events.rbegin(); e != events.rend(); ++e)
      if (e->phase == std::uint8_t(checkpoint_phase::write) && e->napping)
        return e->progress;
    return 0;
  }
};

// After every write step the written fraction has reached the schedule's (no step ends
// behind it, however far the schedule jumped) and is past it by at most one buffer (the
// step writes what is due, not ahead), unless one buffer a step is more than the schedule.
void check_steps_follow_schedule(const schedule_observer& seen) {
  std::size_t steps = 0;
  for (const checkpoint_event& e : seen.events) {
    if (e.phase != std::uint8_t(checkpoint_phase::write) || !e.napping)
      continue;
    ++steps;
    double buffer = 1.0 / double(e.buffers_total);
    CHECK(e.progress + 1e-9 >= std::min(1.0, e.schedule));
    CHECK(e.progress <= std::max(e.schedule, double(steps) * buffer) + buffer + 1e-9);
  }
  CHECK(steps > 0);
}

// Dirties `buffers` pages and begins a paced timed checkpoint of them (its first step run).
void begin_paced(test::checkpoint_fixture& f, storage::block_id buffers,
                 test::checkpoint_fixture::answer& paced) {
  for (storage::block_id b = 0; b < buffers; ++b)
    f.touch(3, b);
  f.request(paced, checkpoint_reason::time, false);
  f.run();
}

TEST_CASE("checkpoint schedule: by time, the written share tracks the write window (C4)") {
  // completion_target 0.5 of a 100 s interval: the writes spread over 0.8 × 50 s = 40 s,
  // 2.5 of the 1 000 buffers a 100 ms step.
  test::checkpoint_fixture f({"checkpoint_timeout=100s", "checkpoint_completion_target=0.5",
                              "shared_buffers=16MB", "max_wal_size=1GB"});
  schedule_observer seen(f);
  test::checkpoint_fixture::answer paced;
  begin_paced(f, 1000, paced);
  const double window_ms = 40000;
  for (int quarter = 1; quarter <= 3; ++quarter) {
    for (double at = 0; at < window_ms / 4; at += double(step_interval.count()))
      f.advance(step_interval);
    double expected = 0.25 * quarter;
    CAPTURE(quarter);
    CHECK(seen.progress() >= expected - 1e-9);
    CHECK(seen.progress() <= expected + 0.0035 + 1e-9); // a step's 2.5 buffers, rounded up
    CHECK(f.engine.counters.checkpoints.phase.load() == checkpoint_phase::write);
  }
  check_steps_follow_schedule(seen);
  CHECK(f.events(trace_type::checkpoint_hurried_by_wal).empty());
}

// Logs WAL (a new block's full-page image per commit) until `bytes` lie past `from`.
void log_wal_past(test::checkpoint_fixture& f, storage::lsn_t from, double bytes,
                  storage::block_id& next_block) {
  while (double(f.engine.store.wal->inserted_lsn() - from) < bytes)
    f.touch(4, next_block++);
}

TEST_CASE("checkpoint schedule: by WAL, below the hurry budget, steps catch up at once (C4)") {
  // An hour's interval: time moves the schedule by 0.1 s / 0.8 h a step, nothing. The WAL
  // budget is 16 MB / 1.5; the writes spread over 0.8 × 0.5 of it (about 4.3 MB of WAL).
  test::checkpoint_fixture f({"checkpoint_timeout=3600s", "checkpoint_completion_target=0.5",
                              "shared_buffers=16MB", "wal_segment_size=256kB",
                              "max_wal_size=16MB"});
  schedule_observer seen(f);
  test::checkpoint_fixture::answer paced;
  begin_paced(f, 400, paced);
  const storage::lsn_t redo = f.engine.store.wal->redo_lsn();
  const double window_bytes = 0.4 * (16.0 * (1u << 20)) / 1.5;
  storage::block_id next_block = 0;
  double written_before = seen.progress();
  CHECK(written_before <= 1.0 / 400 + 1e-9); // the first step: one buffer
  // A quarter of the window's WAL, then half of it at once: each next step writes what is
  // due in one go, however far behind the schedule left it.
  for (double share : {0.25, 0.75}) {
    log_wal_past(f, redo, share * window_bytes, next_block);
    f.advance(step_interval);
    CAPTURE(share);
    CHECK(seen.progress() >= share - 1e-9);
    CHECK(seen.progress() <= share + 0.01); // a commit's WAL past the mark, rounded up
  }
  CHECK(f.engine.counters.checkpoints.phase.load() == checkpoint_phase::write);
  log_wal_past(f, redo, window_bytes, next_block);
  f.advance(step_interval);
  CHECK(f.engine.counters.checkpoints.phase.load() != checkpoint_phase::write);
  check_steps_follow_schedule(seen);
  CHECK(f.events(trace_type::checkpoint_hurried_by_wal).empty()); // on schedule, not hurried
}

TEST_CASE("checkpoint schedule: a checkpoint of a few buffers ends its writes early (C4)") {
  // One buffer a step at least: 5 buffers take 0.5 s of a 40 s write window.
  test::checkpoint_fixture f({"checkpoint_timeout=100s", "checkpoint_completion_target=0.5"});
  schedule_observer seen(f);
  test::checkpoint_fixture::answer paced;
  begin_paced(f, 5, paced);
  for (int step = 0; step < 4; ++step) {
    CHECK(f.engine.counters.checkpoints.phase.load() == checkpoint_phase::write);
    f.advance(step_interval);
  }
  CHECK(f.engine.counters.checkpoints.phase.load() != checkpoint_phase::write);
  check_steps_follow_schedule(seen);
}

TEST_CASE("checkpoint schedule: background_write_limit caps a paced checkpoint's writes, not an "
          "immediate one's") {
  // The schedule asks for 1 000 buffers over a 4 s window (250 a second); 1 MB/s of 8 kB
  // pages is 128 a second.
  test::checkpoint_fixture f({"checkpoint_timeout=10s", "checkpoint_completion_target=0.5",
                              "shared_buffers=16MB", "max_wal_size=1GB",
                              "background_write_limit=1MB"});
  schedule_observer seen(f);
  test::checkpoint_fixture::answer paced;
  begin_paced(f, 1000, paced);
  for (int step = 0; step < 30; ++step) // 3 s
    f.advance(step_interval);
  const double written = seen.progress() * 1000;
  CHECK(written <= 3 * 128 + 1);
  CHECK(written >= 3 * 128 - 13); // the limit's pace, a step's worth short at most
  test::checkpoint_fixture::answer immediate;
  f.request(immediate); // hurries the paced one: the rest at once, uncapped
  f.run();
  REQUIRE(paced.done);
  CHECK(paced.done->buffers_written == 1000);
}

} // namespace
} // namespace tidemark
