// wal_log: insert positions and counters, the redo-point check, write-out when the ring is
// full, the fsync-failure rule (W3), segment creation, recycling and the open-for-append
// cleanup.
#include "wal_test_support.hpp"

#include "tests/storage/delegating_engine.hpp"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <sys/stat.h>
#include <thread>

using namespace tidemark::storage;
using namespace tidemark::storage::wal_test;

namespace {

// Delegates to a real engine; sync() fails with EIO once `fail_syncs` is set.
class failing_sync_engine final : public test::delegating_engine {
public:
  using delegating_engine::delegating_engine;
  bool fail_syncs = false;

  std::string name() const override { return "failing_sync"; }
  void sync(int fd, sync_kind kind) override {
    if (fail_syncs)
      throw io_error("fdatasync " + path_of(fd) + ": injected failure", EIO, true);
    delegating_engine::sync(fd, kind);
  }
};

lsn_range insert_one(wal_log& wal, record_builder& builder, xid_t xid, std::size_t main_length,
                     bool with_image = false) {
  build_record(builder, xid, main_length, with_image);
  std::optional<lsn_range> range = wal.insert(builder, wal.redo_lsn());
  REQUIRE(range.has_value());
  return *range;
}

// Inserts records until the log reaches `lsn`, and flushes them.
void fill_past(wal_log& wal, record_builder& builder, lsn_t lsn) {
  while (wal.inserted_lsn() < lsn)
    insert_one(wal, builder, 1, 5000);
  wal.flush(wal.inserted_lsn());
}

} // namespace

TEST_CASE("wal_log: inserts get consecutive aligned positions and one fsync per flush") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  record_builder builder;
  lsn_t expected = 0;
  for (xid_t xid = 1; xid <= 10; ++xid) {
    lsn_range range = insert_one(wal, builder, xid, xid * 3);
    CHECK(range.start == expected);
    CHECK(range.end == range.start + builder.size());
    expected = aligned_record_size(range.end);
  }
  CHECK(wal.inserted_lsn() == expected);
  CHECK(wal.flushed_lsn() == 0);
  CHECK(wal.flush(expected) == expected);
  CHECK(wal.flushed_lsn() == expected);
  CHECK(wal.flush(expected) == expected); // nothing new: no second fsync
  CHECK(wal.counters().records == 10);
  CHECK(wal.counters().bytes == expected);
  CHECK(wal.counters().fsyncs == 1);
  CHECK(wal.counters().fpi == 0);
  insert_one(wal, builder, 11, 10, true);
  CHECK(wal.counters().fpi == 1);
}

TEST_CASE("wal_log: insert returns nothing after begin_redo_point moved the redo point") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  wal.set_redo_lsn(0);
  record_builder builder;
  build_record(builder, 1, 16);
  REQUIRE(wal.insert(builder, 0));
  lsn_t redo = wal.begin_redo_point();
  CHECK(redo == wal.inserted_lsn());
  CHECK(wal.redo_lsn() == redo);
  build_record(builder, 2, 16);
  CHECK_FALSE(wal.insert(builder, 0));
  CHECK(wal.inserted_lsn() == redo);
  CHECK(wal.insert(builder, redo));
}

TEST_CASE("wal_log: a full insert buffer is written out without waiting for a flush") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path(), small_segment, 64u << 10), 0, 0);
  record_builder builder;
  for (xid_t xid = 1; xid <= 100; ++xid)
    insert_one(wal, builder, xid, 3000);
  CHECK(wal.counters().writes > 0);
  CHECK(wal.counters().fsyncs == 0);
  CHECK(wal.flushed_lsn() == 0);
  wal.flush(wal.inserted_lsn());
  read_result read = read_all(*io, dir.path(), small_segment, 0);
  CHECK(read.lsns.size() == 100);
  CHECK(read.end_lsn == wal.inserted_lsn());
}

TEST_CASE("wal_log: faulting the insert buffer in ahead, round the ring and past it, changes "
          "no record") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path(), small_segment, 64u << 10), 0, 0);
  record_builder builder;
  // 300 KB through a 64 KiB ring; fault-ins from the middle of the ring, of all of it (so
  // it wraps) or of a part.
  for (xid_t xid = 1; xid <= 100; ++xid) {
    if (xid >= 5)
      wal.fault_in_ahead(xid % 3 == 0 ? 1u << 30 : 5000);
    insert_one(wal, builder, xid, 3000);
  }
  wal.flush(wal.inserted_lsn());
  read_result read = read_all(*io, dir.path(), small_segment, 0);
  CHECK(read.lsns.size() == 100); // each record's contents checked by read_all
  CHECK(read.end_lsn == wal.inserted_lsn());
}

TEST_CASE("wal_log: a failed fsync makes the log unusable") {
  temp_dir dir;
  failing_sync_engine io(make_io_engine(io_method::sync));
  wal_log wal(io, small_options(dir.path()), 0, 0);
  record_builder builder;
  lsn_range range = insert_one(wal, builder, 1, 100);
  io.fail_syncs = true;
  bool reported = false;
  try {
    wal.flush(range.end);
  } catch (const io_error& e) {
    reported = e.fsync_failed();
  }
  CHECK(reported);
  CHECK(wal.flushed_lsn() == 0);
  io.fail_syncs = false; // even a working disk must not make the log usable again (W3)
  build_record(builder, 2, 10);
  CHECK_THROWS_AS(wal.insert(builder, wal.redo_lsn()), io_error);
  CHECK_THROWS_WITH_AS(wal.flush(range.end), doctest::Contains("unusable after a failed fsync"),
                       io_error);
  // Whoever reports the failure (another syncer may see "unusable" first) names its cause.
  CHECK_THROWS_WITH_AS(wal.flush(range.end), doctest::Contains("injected failure"), io_error);
}

TEST_CASE("wal_log: segment sizes must be multiples of 64 KiB") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  CHECK_THROWS_AS(wal_log(*io, small_options(dir.path(), 100000), 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(wal_log(*io, small_options(dir.path(), 0), 0, 0), std::invalid_argument);
}

TEST_CASE("wal_log: segments are created full-size and named by their start lsn") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  CHECK(wal_log::segment_name(0x1A0000) == "00000000001A0000");
  record_builder builder;
  while (wal.inserted_lsn() < 3 * small_segment + 100)
    insert_one(wal, builder, 1, 5000);
  wal.flush(wal.inserted_lsn());
  std::vector<lsn_t> segments = wal_log::list_segments(dir.path());
  CHECK(segments == std::vector<lsn_t>{0, small_segment, 2 * small_segment, 3 * small_segment});
  for (lsn_t start : segments)
    CHECK(std::filesystem::file_size(segment_file(dir.path(), small_segment, start)) ==
          small_segment);
  CHECK(wal.counters().fsyncs == 4); // one flush: one fdatasync per segment it wrote to
}

TEST_CASE("wal_log: remove_segments_before recycles at least four future segments, up to "
          "recycle_through, and unlinks the rest") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  record_builder builder;
  fill_past(wal, builder, 7 * small_segment + 100);
  REQUIRE(wal_log::list_segments(dir.path()).size() == 8);
  std::vector<lsn_t> expected;

  SUBCASE("at least four") {
    wal.remove_segments_before(3 * small_segment + 10);
    for (lsn_t i = 3; i <= 10; ++i)
      expected.push_back(i * small_segment); // 0, 1, 2 renamed to 8, 9, 10
    CHECK(wal_log::list_segments(dir.path()) == expected);

    wal.remove_segments_before(6 * small_segment);
    expected = {6 * small_segment,  7 * small_segment, 8 * small_segment, 9 * small_segment,
                10 * small_segment, 11 * small_segment}; // 3 recycled as 11; 4 and 5 unlinked
    CHECK(wal_log::list_segments(dir.path()) == expected);

    // Never past the flushed position, whatever the caller asks.
    insert_one(wal, builder, 1, 10);
    wal.remove_segments_before(wal.inserted_lsn() + 10 * small_segment);
    CHECK(wal_log::list_segments(dir.path()).front() == 7 * small_segment);
  }
  SUBCASE("up to recycle_through") {
    // Segments 0..6 go; recycled names may end at 15 segments: 8..14 (seven future ones).
    wal.remove_segments_before(7 * small_segment, 15 * small_segment);
    for (lsn_t i = 7; i <= 14; ++i)
      expected.push_back(i * small_segment);
    CHECK(wal_log::list_segments(dir.path()) == expected);

    // A recycled segment is written into as it is: the same file, not a new zero-filled one.
    auto inode_of = [&](lsn_t start) {
      struct stat st {};
      REQUIRE(::stat(segment_file(dir.path(), small_segment, start).c_str(), &st) == 0);
      return st.st_ino;
    };
    ino_t recycled = inode_of(8 * small_segment);
    fill_past(wal, builder, 9 * small_segment + 100);
    CHECK(wal_log::list_segments(dir.path()) == expected);
    CHECK(inode_of(8 * small_segment) == recycled);
  }
}

// An engine whose directory fsyncs wait while the test holds the gate closed.
class gated_directory_engine final : public test::delegating_engine {
public:
  using delegating_engine::delegating_engine;
  void sync_directory(const std::string& dir) override {
    {
      std::unique_lock lock(mutex_);
      ++waiting_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_; });
    }
    delegating_engine::sync_directory(dir);
  }
  bool wait_for_waiter() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(5), [&] { return waiting_ > 0; });
  }
  void set_gate(bool open) {
    std::lock_guard lock(mutex_);
    open_ = open;
    changed_.notify_all();
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool open_ = true;
};

TEST_CASE("wal_log: commits flush while segment recycling waits for its directory fsync") {
  temp_dir dir;
  gated_directory_engine io(make_io_engine(io_method::sync));
  wal_log wal(io, small_options(dir.path()), 0, 0);
  record_builder builder;
  while (wal.inserted_lsn() < 3 * small_segment + 100)
    insert_one(wal, builder, 1, 5000);
  wal.flush(wal.inserted_lsn());
  io.set_gate(false);
  std::thread recycler([&] { wal.remove_segments_before(2 * small_segment); });
  REQUIRE(io.wait_for_waiter()); // renamed, now in the directory fsync
  insert_one(wal, builder, 2, 100);
  lsn_t target = wal.inserted_lsn();
  auto flushed = std::async(std::launch::async, [&] { return wal.flush(target); });
  bool done = flushed.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  io.set_gate(true); // (a regression would have the flush wait for this)
  recycler.join();
  CHECK(done); // the flush did not wait behind the directory fsync
  CHECK(flushed.get() >= target);
  CHECK(wal_log::list_segments(dir.path()).front() == 2 * small_segment);
}

// An engine whose data fdatasyncs take at least 3 ms.
class slow_sync_engine final : public test::delegating_engine {
public:
  using delegating_engine::delegating_engine;
  void sync(int fd, sync_kind kind) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(3)); // the latency to be measured
    delegating_engine::sync(fd, kind);
  }
};

TEST_CASE("wal_log: each fdatasync's duration is recorded in the fsync latency histogram") {
  temp_dir dir;
  slow_sync_engine io(make_io_engine(io_method::sync));
  wal_log wal(io, small_options(dir.path()), 0, 0);
  record_builder builder;
  for (int flush = 0; flush < 3; ++flush) {
    insert_one(wal, builder, 1, 100);
    wal.flush(wal.inserted_lsn());
  }
  std::vector<std::uint64_t> counts = wal.counters().fsync_latency.snapshot();
  std::uint64_t recorded = 0, below_3ms = 0;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    recorded += counts[b];
    if (latency_buckets::upper_us(b) < 3000)
      below_3ms += counts[b];
  }
  CHECK(wal.counters().fsyncs == 3);
  CHECK(recorded == 3);
  CHECK(below_3ms == 0);
}

TEST_CASE("wal_log: opening for append zeroes the rest of the segment and drops later ones") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  lsn_t reopen_at = 0;
  lsn_t prev = 0;
  {
    wal_log wal(*io, small_options(dir.path()), 0, 0);
    record_builder builder;
    for (xid_t xid = 1; xid <= 5; ++xid)
      prev = insert_one(wal, builder, xid, 200).start;
    reopen_at = wal.inserted_lsn();
    while (wal.inserted_lsn() < 2 * small_segment + 100)
      insert_one(wal, builder, 100, 4000);
    wal.flush(wal.inserted_lsn());
  }
  REQUIRE(wal_log::list_segments(dir.path()).size() == 3);
  wal_log wal(*io, small_options(dir.path()), reopen_at, prev);
  CHECK(wal_log::list_segments(dir.path()) == std::vector<lsn_t>{0});
  read_result read = read_all(*io, dir.path(), small_segment, 0);
  CHECK(read.lsns.size() == 5);
  CHECK(read.end_lsn == reopen_at);
  CHECK(read.end_description.find("zero record length") != std::string::npos);
}
