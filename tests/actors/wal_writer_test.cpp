// wal_writer on the deterministic scheduler: flush requests queued together share one
// fdatasync (group commit, W4), each commit waiting for a sync is reported to the
// context's commit_activity, and a failed fsync fails every waiter and every later
// request, never retried (W3).
#include "actors/wal_writer.hpp"

#include "wal_engine_fixture.hpp"

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include <vector>

namespace tidemark {
namespace {

struct wal_fixture : test::wal_engine_fixture {
  wal_fixture() : wal_engine_fixture(actors::settings{}.wal_sync_concurrency) {}

  // A client that asks for a flush and records the answer (or the error).
  void ask(const messages::wal_writer_actor& writer, storage::lsn_t lsn,
           std::vector<std::uint64_t>& answers, int& errors) {
    system.spawn([=, &answers, &errors](caf::event_based_actor* self) {
      self->request(writer, caf::infinite, messages::flush_request{lsn})
        .then([&answers](const messages::flush_done& done) { answers.push_back(done.flushed_lsn); },
              [&errors](const caf::error&) { ++errors; });
    });
  }
};

TEST_CASE("wal_writer: concurrent commits share one fdatasync") {
  wal_fixture f;
  auto writer = actors::spawn_wal_writer(f.system, f.engine, false);
  std::vector<std::uint64_t> answers;
  int errors = 0;
  std::vector<storage::lsn_t> ends;
  for (storage::xid_t xid = 1; xid <= 5; ++xid)
    ends.push_back(f.insert_record(xid));
  std::uint64_t fsyncs_before = f.engine.store.wal->counters().fsyncs.load();
  for (storage::lsn_t end : ends)
    f.ask(writer, end, answers, errors);
  f.run();
  CHECK(errors == 0);
  REQUIRE(answers.size() == 5);
  for (std::uint64_t flushed : answers)
    CHECK(flushed >= ends.back());
  CHECK(f.engine.store.wal->counters().fsyncs.load() - fsyncs_before == 1);
  // Already durable: answered without another fsync.
  f.ask(writer, ends.front(), answers, errors);
  f.run();
  CHECK(answers.size() == 6);
  CHECK(f.engine.store.wal->counters().fsyncs.load() - fsyncs_before == 1);
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  f.run();
}

TEST_CASE("wal_writer: each commit waiting for a sync is reported to commit_activity") {
  wal_fixture f;
  int reported = 0; // in the runtime, the idle poller listens here
  f.engine.commit_activity = [&reported] { ++reported; };
  auto writer = actors::spawn_wal_writer(f.system, f.engine, false);
  storage::lsn_t a = f.insert_record(1);
  storage::lsn_t b = f.insert_record(2);
  caf::anon_send(writer, messages::flush_wanted{a});
  caf::anon_send(writer, messages::flush_wanted{b});
  f.run();
  CHECK(reported == 2);
  CHECK(f.engine.store.wal->flushed_lsn() >= b);
  caf::anon_send(writer, messages::flush_wanted{a}); // durable already: nothing to wait for
  f.run();
  CHECK(reported == 2);
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  f.run();
}

TEST_CASE("wal_writer: a failed fsync fails every waiter and all later requests (W3)") {
  wal_fixture f;
  f.engine.faults->fail_syncs_from_now();
  auto writer = actors::spawn_wal_writer(f.system, f.engine, false);
  std::vector<std::uint64_t> answers;
  int errors = 0;
  storage::lsn_t a = f.insert_record(1);
  storage::lsn_t b = f.insert_record(2);
  f.ask(writer, a, answers, errors);
  f.ask(writer, b, answers, errors);
  f.run();
  CHECK(answers.empty());
  CHECK(errors == 2);
  CHECK(f.engine.failed());
  CHECK_THROWS_AS(f.insert_record(3), storage::io_error); // the WAL accepts nothing more
  f.ask(writer, b, answers, errors);                      // and nothing is retried
  f.run();
  CHECK(errors == 3);
  CHECK(answers.empty());
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  f.run();
}

} // namespace
} // namespace tidemark
