// A redo point never overtakes a commit (storage rule 4): a commit sets its status in the
// commit-status log only after inserting its record, and a checkpoint whose redo point
// lies past that record — redo from there will not replay it — must still write the
// status. wal_log::begin_redo_point() waits for the commit_hold a commit takes with its
// record; these tests hold commits at the exact point between record and status with
// events (a commit-status read parked in the I/O engine, the log's own counters), never
// with timing.
#include "delegating_engine.hpp"
#include "storage/commit_log.hpp"
#include "storage/page_transaction.hpp"
#include "storage/wal_log.hpp"
#include "test_support.hpp"
#include "wal_test_support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace tidemark::storage {
namespace {

using test::page_size;
constexpr xid_t ids_per_status_page = 4 * page_size; // two bits per transaction

// Until release(), a read of the commit-status log beyond its first page waits here (the
// reader holds the commit log's lock meanwhile, as any status look-up that misses its
// buffered pages does).
class parked_status_reads final : public test::delegating_engine {
public:
  using delegating_engine::delegating_engine;

  std::size_t read(int fd, void* data, std::size_t length, std::uint64_t offset) override {
    if (offset >= page_size && path_of(fd).find("/xact/") != std::string::npos) {
      std::unique_lock lock(mutex_);
      parked_ = true;
      changed_.notify_all();
      changed_.wait(lock, [&] { return released_; });
    }
    return delegating_engine::read(fd, data, length, offset);
  }
  void wait_parked() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return parked_; });
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool parked_ = false;
  bool released_ = false;
};

struct no_sync_registry final : sync_registry {
  void register_files(const file_write*, std::size_t, write_source) override {}
};

// Polls an event another thread makes happen (the outcome never depends on how long
// that takes).
template <class Condition>
void wait_until(Condition condition) {
  while (!condition())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST_CASE("commit hold: a checkpoint whose redo point passes a commit record writes its status") {
  test::temp_dir dir;
  auto owned = std::make_unique<parked_status_reads>(make_io_engine(io_method::sync));
  parked_status_reads& io = *owned;
  relation_files files(io, dir.path(), page_size, 16 * page_size);
  wal_log wal(io, wal_options{dir.path(), 256 * 1024, 1 << 20}, 0, 0);
  buffer_pool pool(64, files, true);
  append_tails tails(files);
  no_sync_registry registry;
  commit_log statuses(io, dir.path() + "/xact", page_size, wal, registry);

  page_transaction first(pool, &wal, tails, true, &statuses);
  first.begin(1);
  first.add_i64({1, 0}, 64, 1);
  first.commit(); // status page 0 is buffered from here on

  // A look-up of a status on page 1 reads that page with the commit log's lock held, and
  // stays parked in the read: the next commit's status must wait for it.
  std::thread reader([&] { (void)statuses.get(ids_per_status_page); });
  io.wait_parked();

  const xid_t xid = 2;
  const lsn_t before = wal.inserted_lsn();
  lsn_range record;
  std::thread session([&] {
    page_transaction txn(pool, &wal, tails, true, &statuses);
    txn.begin(xid);
    txn.add_i64({1, 0}, 64, 10);
    record = txn.commit();
  });
  wait_until([&] { return wal.inserted_lsn() > before; }); // logged; its status must wait

  // The checkpoint: a redo point (past the record, which redo will therefore not replay),
  // then the commit-status log's write.
  std::atomic<bool> redo_taken{false};
  lsn_t redo = 0;
  std::thread checkpointer([&] {
    redo = wal.begin_redo_point();
    redo_taken = true;
    statuses.write_dirty(write_source::checkpointer);
  });
  wait_until([&] { return redo_taken.load() || wal.counters().redo_point_waits.load() > 0; });
  const bool overtook = redo_taken.load();
  CHECK_MESSAGE(!overtook, "the redo point was taken past transaction 2's commit record while "
                           "its status was not in the commit log yet");

  io.release();
  reader.join();
  session.join();
  checkpointer.join();
  CHECK(redo >= record.end);
  CHECK(wal.counters().redo_point_waits.load() == (overtook ? 0 : 1));
  // What the checkpoint wrote holds the status that redo from its redo point cannot rebuild.
  CHECK(read_recorded_status(io, dir.path() + "/xact", page_size, xid) == xact_status::committed);
  // And the page the commit changed was dirty when the redo point was taken: nothing
  // wrote it since, so the checkpoint that follows would find it.
  buffer_id b = pool.pin({1, 0});
  CHECK(pool.is_dirty(b));
  pool.unpin(b);
}

TEST_CASE("commit hold: begin_redo_point waits for holds taken before it, not for later ones") {
  using namespace wal_test;
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  record_builder builder;

  build_record(builder, 1, 40);
  wal_log::commit_hold early;
  REQUIRE(wal.insert(builder, wal.redo_lsn(), &early).has_value());
  CHECK(early.held());

  std::atomic<bool> first_done{false};
  lsn_t first_redo = 0;
  std::thread first([&] {
    first_redo = wal.begin_redo_point();
    first_done = true;
  });
  wait_until([&] { return wal.counters().redo_point_waits.load() == 1; });
  // The redo point is taken (a record built against the old one is refused), and a
  // commit after it takes a hold of the next generation: it does not prolong the wait.
  build_record(builder, 2, 40);
  wal_log::commit_hold refused;
  CHECK(!wal.insert(builder, 0, &refused).has_value());
  CHECK(!refused.held());
  wal_log::commit_hold late;
  wait_until([&] { return wal.redo_lsn() != 0; });
  REQUIRE(wal.insert(builder, wal.redo_lsn(), &late).has_value());
  CHECK(!first_done.load());
  early.release();
  CHECK(!early.held());
  first.join();
  CHECK(first_done.load());
  CHECK(first_redo == wal.redo_lsn());

  // The next redo point waits for the late commit in turn; a moved hold releases once.
  wal_log::commit_hold moved(std::move(late));
  CHECK(!late.held());
  std::thread second([&] { (void)wal.begin_redo_point(); });
  wait_until([&] { return wal.counters().redo_point_waits.load() == 2; });
  moved.release();
  second.join();
  // With no commit in flight a redo point does not wait.
  (void)wal.begin_redo_point();
  CHECK(wal.counters().redo_point_waits.load() == 2);
}

} // namespace
} // namespace tidemark::storage
