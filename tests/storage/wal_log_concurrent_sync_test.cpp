// wal_log with several threads writing out and syncing at once (group commit keeps more
// than one fdatasync in flight, commit c91b9ef): flushed_lsn never moves back and covers
// every target a sync_through() returned for, syncs really overlap, a cached segment fd is
// never closed under a running sync (also while segments are crossed and recycled), and
// whatever sync_through()/flush() reported durable survives a simulated power loss.
// The real-engine tests run against both `sync` and `io_uring` (TEST_CASE_TEMPLATE).
// The last case is the regression test of a bug the first version had: a sync completing
// after a concurrent one on the same fd failed still published its target.
#include "wal_test_support.hpp"

#include "storage/fault_engine.hpp"
#include "tests/storage/delegating_engine.hpp"
#include "tests/storage/gated_sync_engine.hpp"
#include "tests/storage/io_methods.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace tidemark::storage;
using namespace tidemark::storage::wal_test;

namespace {

using namespace std::chrono_literals;

using test::sync_method;
using test::uring_method;

// Delegates to a real engine and watches the syncs of data (the WAL's fdatasyncs): how
// many run at once, and whether the fd a sync was given is closed (or closed and its
// number reused by another open) before the sync returns. Each data sync is stretched by
// a random delay (up to `max_sync_delay`, one in eight six times that), so that syncs
// overlap, later ones overtake earlier ones, and segment switches happen under them.
class watching_engine final : public test::delegating_engine {
public:
  watching_engine(std::unique_ptr<io_engine> inner, std::chrono::microseconds max_sync_delay)
    : delegating_engine(std::move(inner)), max_sync_delay_(max_sync_delay) {}

  int open_file(const std::string& path, bool create) override {
    int fd = inner().open_file(path, create);
    std::lock_guard lock(mutex_);
    generation_[fd] = ++next_generation_;
    return fd;
  }
  void close_file(int fd) override {
    {
      std::lock_guard lock(mutex_);
      generation_.erase(fd); // before the real close: a new open cannot reuse the number yet
    }
    inner().close_file(fd);
  }
  void sync(int fd, sync_kind kind) override {
    std::uint64_t generation = 0;
    std::chrono::microseconds delay{0};
    {
      std::lock_guard lock(mutex_);
      // Mostly short, now and then long: a long one is overtaken by several later syncs
      // while the WAL moves on by more than a segment.
      delay = random_() % 8 == 0
                ? 6 * max_sync_delay_
                : std::chrono::microseconds(random_() % (max_sync_delay_.count() + 1));
      auto it = generation_.find(fd);
      if (it == generation_.end())
        ++closed_under_sync_; // handed a closed fd
      else
        generation = it->second;
      if (kind == sync_kind::data) {
        ++data_in_flight_;
        max_data_in_flight_ = std::max(max_data_in_flight_, data_in_flight_);
      }
    }
    auto finish = [&] {
      std::lock_guard lock(mutex_);
      auto it = generation_.find(fd);
      if (generation != 0 && (it == generation_.end() || it->second != generation))
        ++closed_under_sync_;
      if (kind == sync_kind::data)
        --data_in_flight_;
    };
    try {
      if (kind == sync_kind::data)
        std::this_thread::sleep_for(delay);
      inner().sync(fd, kind);
    } catch (...) {
      finish();
      throw;
    }
    finish();
  }

  std::uint64_t closed_under_sync() const {
    std::lock_guard lock(mutex_);
    return closed_under_sync_;
  }
  std::uint64_t max_data_in_flight() const {
    std::lock_guard lock(mutex_);
    return max_data_in_flight_;
  }
  std::size_t open_files() const {
    std::lock_guard lock(mutex_);
    return generation_.size();
  }

private:
  std::chrono::microseconds max_sync_delay_;
  mutable std::mutex mutex_;
  std::mt19937_64 random_{42};
  std::map<int, std::uint64_t> generation_; // open fd -> which open it came from
  std::uint64_t next_generation_ = 0;
  std::uint64_t closed_under_sync_ = 0;
  std::uint64_t data_in_flight_ = 0;
  std::uint64_t max_data_in_flight_ = 0;
};

// What one thread saw; checked on the main thread (assertions stay off worker threads).
struct thread_log {
  std::uint64_t violations = 0;
  std::string first_violation;
  std::uint64_t syncs = 0;
  lsn_t max_returned = 0; // largest flushed LSN a sync_through()/flush() returned
  std::vector<std::pair<lsn_t, xid_t>> records; // (start lsn, xid) of every insert
  std::vector<lsn_t> ends;                      // record ends, same order

  void expect(bool ok, const std::string& what) {
    if (ok)
      return;
    if (violations++ == 0)
      first_violation = what;
  }
};

std::string text(const char* what, lsn_t a, lsn_t b) {
  return std::string(what) + " (" + std::to_string(a) + " vs " + std::to_string(b) + ")";
}

lsn_range insert_record(wal_log& wal, record_builder& builder, thread_log& log, xid_t xid,
                        std::size_t main_length) {
  build_record(builder, xid, main_length);
  std::optional<lsn_range> range = wal.insert(builder, wal.redo_lsn());
  if (!range)
    throw std::logic_error("redo point moved in a test that never moves it");
  log.records.emplace_back(range->start, xid);
  log.ends.push_back(range->end);
  return *range;
}

// One committing thread: insert, then write_out() + sync_through() (or flush(), or a
// sync_through() of a stale target), checking the return values and that flushed_lsn as
// this thread sees it never decreases.
void commit_loop(wal_log& wal, std::size_t thread, std::size_t iterations, std::size_t max_record,
                 thread_log& log) {
  record_builder builder;
  std::mt19937_64 random(thread * 7919 + 1);
  lsn_t last_seen = 0;
  lsn_t stale_target = 0;
  for (std::size_t i = 0; i < iterations; ++i) {
    lsn_t mine = 0;
    for (std::size_t n = 1 + random() % 3; n > 0; --n)
      mine = insert_record(wal, builder, log, thread * 1000000 + log.records.size(),
                           16 + random() % max_record)
               .end;
    lsn_t before = wal.flushed_lsn();
    log.expect(before >= last_seen, text("flushed_lsn moved back", before, last_seen));
    lsn_t returned = 0;
    switch (random() % 4) {
      case 0:
      case 1: {
        lsn_t target = wal.write_out();
        log.expect(target >= mine,
                   text("write_out() stopped before this thread's record", target, mine));
        returned = wal.sync_through(target);
        log.expect(returned >= target,
                   text("sync_through() returned less than its target", returned, target));
        stale_target = target;
        break;
      }
      case 2:
        returned = wal.flush(mine);
        log.expect(returned >= mine, text("flush() returned less than asked", returned, mine));
        break;
      default: { // a target another sync has (probably) covered already
        lsn_t target = wal.write_out();
        returned = wal.sync_through(std::max(stale_target, before));
        log.expect(returned >= std::max(stale_target, before),
                   text("sync_through() of a covered target returned less", returned, before));
        returned = std::max(returned, wal.sync_through(target));
        log.expect(returned >= target,
                   text("sync_through() returned less than its target", returned, target));
        break;
      }
    }
    ++log.syncs;
    log.expect(returned <= wal.inserted_lsn(),
               text("flushed past the inserted WAL", returned, wal.inserted_lsn()));
    lsn_t after = wal.flushed_lsn();
    log.expect(after >= returned, text("flushed_lsn below a value sync returned", after, returned));
    log.expect(after >= before, text("flushed_lsn moved back during a sync", after, before));
    log.max_returned = std::max(log.max_returned, returned);
    last_seen = after;
  }
}

// Spins reading flushed_lsn until `done`, counting decreases.
void watch_flushed(const wal_log& wal, const std::atomic<bool>& done, thread_log& log) {
  lsn_t last = wal.flushed_lsn();
  while (!done.load(std::memory_order_acquire)) {
    lsn_t now = wal.flushed_lsn();
    log.expect(now >= last, text("observer saw flushed_lsn move back", now, last));
    last = now;
    std::this_thread::yield();
  }
}

void check_logs(const std::vector<thread_log>& logs) {
  for (std::size_t t = 0; t < logs.size(); ++t) {
    CAPTURE(t);
    CHECK_MESSAGE(logs[t].violations == 0, logs[t].first_violation);
  }
}

struct run_shape {
  const char* name;
  std::uint64_t segment_size;
  std::size_t buffer_size;
  std::size_t max_record;
  std::size_t iterations;
  bool recycle; // a checkpoint-like thread removes/recycles old segments meanwhile
};

template <class M>
void run_concurrent_syncs(const run_shape& shape) {
  CAPTURE(shape.name);
  temp_dir dir;
  watching_engine io(make_io_engine(M::method), 1000us);
  wal_log wal(io, small_options(dir.path(), shape.segment_size, shape.buffer_size), 0, 0);
  constexpr std::size_t threads = 4;
  std::vector<thread_log> logs(threads + 2);
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> removals{0};
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      try {
        commit_loop(wal, t, shape.iterations, shape.max_record, logs[t]);
      } catch (const std::exception& e) {
        logs[t].expect(false, std::string("exception: ") + e.what());
      }
    });
  std::thread observer([&] { watch_flushed(wal, done, logs[threads]); });
  std::thread recycler;
  if (shape.recycle)
    recycler = std::thread([&] {
      try {
        // As eagerly as allowed: every segment wholly before the flushed LSN's segment,
        // also while a sync that started before the flushed LSN moved still runs on it.
        while (!done.load(std::memory_order_acquire)) {
          lsn_t flushed = wal.flushed_lsn();
          if (flushed > shape.segment_size) {
            wal.remove_segments_before(flushed);
            ++removals;
          }
          std::this_thread::sleep_for(100us);
        }
      } catch (const std::exception& e) {
        logs[threads + 1].expect(false, std::string("exception in recycler: ") + e.what());
      }
    });
  for (std::thread& worker : workers)
    worker.join();
  done.store(true, std::memory_order_release);
  observer.join();
  if (recycler.joinable())
    recycler.join();
  check_logs(logs);

  lsn_t end = wal.inserted_lsn();
  CHECK(wal.flush(end) == end);
  CHECK(wal.flushed_lsn() == end);
  CHECK(io.closed_under_sync() == 0);
  // fdatasync runs outside the lock: with each one stretched, several overlapped.
  CHECK(io.max_data_in_flight() >= 2);
  std::uint64_t syncs = 0;
  for (const thread_log& log : logs)
    syncs += log.syncs;
  CHECK(syncs == threads * shape.iterations);
  if (shape.recycle)
    CHECK(removals.load() > 0);

  // Every record is in the WAL, in one valid chain, from the first one still on disk.
  std::vector<std::pair<lsn_t, xid_t>> all;
  for (const thread_log& log : logs)
    all.insert(all.end(), log.records.begin(), log.records.end());
  std::sort(all.begin(), all.end());
  lsn_t oldest_segment = wal_log::list_segments(dir.path()).front();
  auto first = std::lower_bound(all.begin(), all.end(), std::make_pair(oldest_segment, xid_t{0}));
  REQUIRE(first != all.end());
  read_result read = read_all(io, dir.path(), shape.segment_size, first->first);
  CHECK(read.end_lsn == end);
  REQUIRE(read.lsns.size() == static_cast<std::size_t>(all.end() - first));
  bool same = true;
  for (std::size_t i = 0; i < read.lsns.size(); ++i)
    same &= read.lsns[i] == first[i].first && read.xids[i] == first[i].second;
  CHECK(same);
  if (!shape.recycle)
    CHECK(first == all.begin());

  // Once no sync is in flight, crossing into a new segment closes the fds the concurrent
  // phase kept open: only the segment the flushed LSN is in and the new one stay cached.
  if (shape.segment_size < (1u << 20)) {
    record_builder builder;
    thread_log tail;
    lsn_t next_segment = end - end % shape.segment_size + shape.segment_size;
    while (wal.inserted_lsn() <= next_segment)
      insert_record(wal, builder, tail, 9000000 + tail.records.size(), 3000);
    wal.flush(wal.inserted_lsn());
    CHECK(io.open_files() <= 2);
  }
}

} // namespace

TEST_CASE_TEMPLATE("wal_log: concurrent write_out/sync_through/flush keep flushed_lsn monotonic "
                   "and at or past every target",
                   M, sync_method, uring_method) {
  // One segment for the whole run: the overlap is on one fd.
  run_concurrent_syncs<M>({"one segment", 16u << 20, 1u << 20, 400, 120, false});
}

TEST_CASE_TEMPLATE("wal_log: concurrent syncs across 64 KiB segments never have their fd "
                   "closed under them",
                   M, sync_method, uring_method) {
  // Small segments and a small ring: write-outs (also from inserters waiting for ring
  // space) open new segments while syncs of older ones run.
  run_concurrent_syncs<M>({"64 KiB segments", small_segment, 128u << 10, 6000, 120, false});
}

TEST_CASE_TEMPLATE("wal_log: concurrent syncs while old segments are recycled and removed", M,
                   sync_method, uring_method) {
  run_concurrent_syncs<M>(
    {"64 KiB segments, recycling", small_segment, 128u << 10, 6000, 120, true});
}

// ---- durability under the fault engine ------------------------------------------------------

namespace {

struct durability_round {
  std::uint64_t seed;
  std::uint64_t segment_size;
  std::uint64_t crash_after_writes; // the power fails right after this write completes
};

template <class M>
power_loss_report run_power_loss_round(const durability_round& round) {
  CAPTURE(round.seed);
  CAPTURE(round.segment_size);
  temp_dir dir;
  fault_config config;
  config.mode = crash_mode::lose_unsynced;
  config.seed = round.seed;
  config.crash_after_writes = round.crash_after_writes;
  fault_engine io(make_io_engine(M::method), config);
  constexpr std::size_t threads = 6; // 2 writers, 4 syncers
  std::vector<thread_log> logs(threads);
  std::atomic<bool> crashed{false};
  std::atomic<bool> synced_once{false}; // writers start once a sync returned
  power_loss_report report;
  io.on_crash([&](const power_loss_report& r) { // runs under the engine's lock
    report = r;
    crashed.store(true, std::memory_order_release);
  });
  {
    wal_log wal(io, small_options(dir.path(), round.segment_size, 256u << 10), 0, 0);
    std::vector<std::thread> workers;
    for (std::size_t t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        thread_log& log = logs[t];
        record_builder builder;
        std::mt19937_64 random(round.seed * 31 + t);
        try {
          while (!crashed.load(std::memory_order_acquire)) {
            lsn_t mine = insert_record(wal, builder, log, t * 1000000 + log.records.size(),
                                       16 + random() % 2000)
                           .end;
            lsn_t returned = 0;
            // Threads 0 and 1 only write out (like inserters making ring space): their
            // WAL stays unsynced, at risk in a power loss, until a syncer covers it.
            if (t < 2) {
              while (!synced_once.load(std::memory_order_acquire) && !crashed.load())
                std::this_thread::yield();
              wal.write_out();
              continue;
            }
            switch (random() % 3) {
              case 0:
                returned = wal.flush(mine);
                log.expect(returned >= mine,
                           text("flush() returned less than asked", returned, mine));
                break;
              default: {
                lsn_t target = wal.write_out();
                returned = wal.sync_through(target);
                log.expect(returned >= target,
                           text("sync_through() below target", returned, target));
              }
            }
            log.max_returned = std::max(log.max_returned, returned);
            synced_once.store(true, std::memory_order_release);
          }
        } catch (const io_error&) {
          // the power is out: every later call fails; what returned before counts
        }
      });
    for (std::thread& worker : workers)
      worker.join();
  }
  check_logs(logs);
  lsn_t acknowledged = 0;
  std::map<lsn_t, std::pair<lsn_t, xid_t>> by_end; // end -> (start, xid)
  for (const thread_log& log : logs) {
    acknowledged = std::max(acknowledged, log.max_returned);
    for (std::size_t i = 0; i < log.records.size(); ++i)
      by_end[log.ends[i]] = log.records[i];
  }
  REQUIRE(acknowledged > 0);

  // Read back with a fresh engine, as recovery would.
  auto fresh = make_io_engine(io_method::sync);
  wal_reader reader(*fresh, dir.path(), round.segment_size, page_size, 0);
  std::map<lsn_t, xid_t> found;
  bool contents_ok = true;
  while (const record_view* record = reader.next()) {
    found[record->lsn()] = record->header.xid;
    contents_ok &= main_data_matches(*record);
  }
  CHECK(contents_ok);
  CHECK(reader.end_lsn() >= acknowledged);
  std::size_t missing = 0, checked = 0;
  for (const auto& [end, record] : by_end) {
    if (end > acknowledged)
      break;
    ++checked;
    auto it = found.find(record.first);
    missing += it == found.end() || it->second != record.second;
  }
  CHECK(checked > 0);
  CHECK(missing == 0);
  // No valid record past the end claims that WAL past the end had been durable.
  std::optional<wal_corruption> corruption = reader.find_corruption();
  CHECK_MESSAGE(!corruption.has_value(), (corruption ? corruption->reason : std::string()));
  return report;
}

} // namespace

TEST_CASE_TEMPLATE("wal_log: what concurrent sync_through calls returned survives a power loss", M,
                   sync_method, uring_method) {
  const durability_round rounds[] = {
    {1, 1u << 20, 400},  {2, small_segment, 500}, {3, small_segment, 1500},
    {4, 1u << 20, 2000}, {5, small_segment, 900}, {6, small_segment, 3000},
  };
  for (const durability_round& round : rounds) {
    power_loss_report report = run_power_loss_round<M>(round);
    CHECK(report.unsynced_writes > 0); // the power loss hit WAL not yet synced
  }
}

// ---- a failed fdatasync while another one is in flight --------------------------------------

// If another sync_through() on the same cached fd failed, this one's fdatasync returning 0
// proves nothing (the error was reported to the other caller; the failed pages are no
// longer dirty): it must not move flushed_lsn past WAL that may be lost nor report it
// durable. (The first version of concurrent syncs did both.)
TEST_CASE("wal_log: a sync that completes after a concurrent sync failed reports nothing "
          "durable (W3)") {
  temp_dir dir;
  test::gated_sync_engine io(make_io_engine(io_method::sync));
  wal_log wal(io, small_options(dir.path()), 0, 0);
  record_builder builder;
  thread_log log;
  io.script({true, false}); // the first fdatasync to go on fails, the second "succeeds"

  insert_record(wal, builder, log, 1, 100);
  lsn_t first_target = wal.write_out();
  std::optional<bool> first_failed_with_fsync_error;
  std::thread first([&] {
    try {
      wal.sync_through(first_target);
      first_failed_with_fsync_error = false;
    } catch (const io_error& e) {
      first_failed_with_fsync_error = e.fsync_failed();
    }
  });
  bool first_in_flight = io.wait_entered(1);
  CHECK(first_in_flight);

  insert_record(wal, builder, log, 2, 100);
  lsn_t second_target = wal.write_out();
  std::optional<lsn_t> second_returned;
  bool second_threw = false;
  std::thread second([&] {
    try {
      second_returned = wal.sync_through(second_target);
    } catch (const io_error&) {
      second_threw = true;
    }
  });
  // Both fdatasyncs are in flight on the same segment fd.
  bool both_in_flight = io.wait_entered(2);
  CHECK(both_in_flight);
  io.release_one(); // the first one fails ...
  first.join();
  io.release_one(); // ... then the second one returns 0
  second.join();
  io.release_all();

  REQUIRE(first_failed_with_fsync_error.has_value());
  CHECK(*first_failed_with_fsync_error);
  CHECK(wal.flushed_lsn() == 0);
  CHECK_MESSAGE(second_threw, "sync_through(" << second_target << ") returned "
                                              << second_returned.value_or(0)
                                              << " after a concurrent fdatasync failed");
  CHECK_THROWS_AS(wal.flush(second_target), io_error); // the log is unusable (W3)
}
