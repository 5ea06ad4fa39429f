// wal_log::wait_for_flush, the commit path's wait: a waiter returns at once when its WAL
// is durable, sleeps through syncs that do not cover it and wakes for the one that does;
// a failed sync or stop_waiters() wakes it with wal_not_durable (never "durable" for WAL
// that is not), while waits for WAL that was durable before still return.
#include "wal_test_support.hpp"

#include "tests/storage/gated_sync_engine.hpp"

#include <atomic>
#include <optional>
#include <string>
#include <thread>

using namespace tidemark::storage;
using namespace tidemark::storage::wal_test;

namespace {

lsn_t insert(wal_log& wal, record_builder& builder, xid_t xid) {
  build_record(builder, xid, 200);
  std::optional<lsn_range> range = wal.insert(builder, wal.redo_lsn());
  REQUIRE(range);
  return range->end;
}

// Waits for `lsn` on a thread of its own; outcome: "durable" or the error's text.
struct waiter {
  std::atomic<bool> done{false};
  std::string outcome;
  std::thread thread;

  waiter(wal_log& wal, lsn_t lsn)
    : thread([this, &wal, lsn] {
        try {
          wal.wait_for_flush(lsn);
          outcome = "durable";
        } catch (const wal_not_durable& error) {
          outcome = error.what();
        }
        done = true;
      }) {}
  ~waiter() {
    if (thread.joinable())
      thread.join();
  }
};

} // namespace

TEST_CASE("wal_log: a flush waiter wakes for the sync that covers it, not for an earlier one") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  record_builder builder;
  lsn_t first = insert(wal, builder, 1);
  wal.flush(first);
  wal.wait_for_flush(first); // durable already: returns at once

  lsn_t second = insert(wal, builder, 2);
  lsn_t second_target = wal.write_out();
  lsn_t third = insert(wal, builder, 3);
  waiter for_third(wal, third);
  wal.sync_through(second_target); // covers the second record, not the third
  CHECK(wal.flushed_lsn() >= second);
  CHECK(wal.flushed_lsn() < third);
  CHECK_FALSE(for_third.done.load()); // it may not be told "durable" for the third record
  wal.sync_through(wal.write_out());
  for_third.thread.join();
  CHECK(for_third.outcome == "durable");
  CHECK(wal.flushed_lsn() >= third);
}

TEST_CASE("wal_log: a failed sync wakes its waiters with wal_not_durable (W3)") {
  temp_dir dir;
  test::gated_sync_engine io(make_io_engine(io_method::sync));
  wal_log wal(io, small_options(dir.path()), 0, 0);
  record_builder builder;
  io.script({true}); // the first fdatasync fails
  lsn_t lsn = insert(wal, builder, 1);
  waiter waiting(wal, lsn);
  lsn_t target = wal.write_out();
  std::thread syncer([&] {
    try {
      wal.sync_through(target);
    } catch (const io_error&) {
    }
  });
  io.release_all();
  syncer.join();
  waiting.thread.join();
  CHECK(waiting.outcome.find("WAL sync failed") != std::string::npos);
  CHECK(wal.flushed_lsn() < lsn);
  CHECK_THROWS_AS(wal.wait_for_flush(lsn), wal_not_durable); // and every later wait
}

TEST_CASE("wal_log: stop_waiters wakes every waiter, and waits for durable WAL still return") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  record_builder builder;
  lsn_t durable = insert(wal, builder, 1);
  wal.flush(durable);
  lsn_t pending = insert(wal, builder, 2);
  waiter first(wal, pending);
  waiter second(wal, pending);
  wal.stop_waiters("the engine stopped after a failure: test");
  first.thread.join();
  second.thread.join();
  CHECK(first.outcome == "the engine stopped after a failure: test");
  CHECK(second.outcome == first.outcome);
  CHECK_THROWS_WITH_AS(wal.wait_for_flush(pending), "the engine stopped after a failure: test",
                       wal_not_durable);
  wal.wait_for_flush(durable); // nothing lost: it was durable before the stop
}
