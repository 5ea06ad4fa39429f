// wal_writer on the deterministic scheduler: flush requests queued together share one
// fdatasync (group commit, W4), and a failed fsync fails every waiter and every later
// request, never retried (W3).
#include "actors/wal_writer.hpp"

#include "deterministic_fixture.hpp"

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include <filesystem>
#include <vector>

namespace tidemark {
namespace {

struct wal_fixture : test::deterministic_fixture {
  std::string dir;
  runtime::engine engine;

  wal_fixture() {
    char pattern[] = "/tmp/tidemark-walwriter-XXXXXX";
    dir = mkdtemp(pattern);
    auto io = std::make_unique<storage::fault_engine>(storage::make_io_engine(storage::io_method::sync),
                                                      storage::fault_config{});
    engine.faults = io.get();
    engine.io = std::move(io);
    engine.wal = std::make_unique<storage::wal_log>(*engine.io, storage::wal_options{dir, 1 << 20, 1 << 20},
                                                    0, 0);
  }
  ~wal_fixture() { std::filesystem::remove_all(dir); }

  storage::lsn_t insert_record(storage::xid_t xid) {
    storage::record_builder record;
    record.reset(storage::record_type::transaction, xid);
    record.finish();
    return engine.wal->insert(record, engine.wal->redo_lsn())->end;
  }

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
  std::uint64_t fsyncs_before = f.engine.wal->counters().fsyncs.load();
  for (storage::lsn_t end : ends)
    f.ask(writer, end, answers, errors);
  f.run();
  CHECK(errors == 0);
  REQUIRE(answers.size() == 5);
  for (std::uint64_t flushed : answers)
    CHECK(flushed >= ends.back());
  CHECK(f.engine.wal->counters().fsyncs.load() - fsyncs_before == 1);
  // Already durable: answered without another fsync.
  f.ask(writer, ends.front(), answers, errors);
  f.run();
  CHECK(answers.size() == 6);
  CHECK(f.engine.wal->counters().fsyncs.load() - fsyncs_before == 1);
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
  f.ask(writer, b, answers, errors);                       // and nothing is retried
  f.run();
  CHECK(errors == 3);
  CHECK(answers.empty());
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  f.run();
}

} // namespace
} // namespace tidemark
