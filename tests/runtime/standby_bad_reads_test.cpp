// A standby whose reads of the WAL it received and fsynced go bad (docs/replication.md,
// "When a standby cannot read its WAL back"): the fault engine makes the N-th read of
// freshly fsynced WAL, and some of the reads of the same bytes after it, return zeros (a
// stale cached page), end short or fail with EIO, as a FUSE mount with its kernel cache
// on did. Under a primary whose commits wait for the standby's flush (remote_flush):
//  - a bad read that a re-read heals is counted (standby().wal_rereads) and nothing stops;
//    the primary is then stopped and the standby promoted: every acknowledged commit is
//    there;
//  - a bad read that stays bad stops the standby, visibly: standby().failed, an error
//    naming where redo stopped, an ERROR log line, the stream dropped; promote() refuses
//    and leaves a standby. A copy of it promoted offline (a fresh read of its WAL) holds
//    every commit acknowledged so far; the standby opened again resumes, commits go on,
//    and its promotion holds every acknowledged commit.
// The first case is a deterministic stall, the loops run many cycles at random points in
// both torn-page protections. Each writer counts its commits on a page of its own and on
// the pages it spreads over, so a promoted copy shows both whether every acknowledged
// commit is there and whether each commit is whole.
#include <tidemark/database.hpp>

#include "observing.hpp"
#include "scratch_directory.hpp"

#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifndef TIDEMARK_BAD_READ_CYCLES
#define TIDEMARK_BAD_READ_CYCLES 30
#endif

using namespace tidemark;

namespace {

constexpr relation_id counters = 1;
constexpr std::uint32_t counter_offset = 64;
constexpr std::uint32_t writers = 3;
constexpr std::uint32_t spread_pages = 24; // each commit also adds to one of these
constexpr auto deadline_after = std::chrono::seconds(60);

const std::vector<std::string> common_settings = {
  "checkpoint_timeout=1s", "log_checkpoints=off", "wal_segment_size=256kB",
  "max_wal_size=4MB",      "wal_buffers=1MB",
};

std::vector<std::string> mode_settings(const std::string& mode) {
  std::vector<std::string> s = common_settings;
  if (mode == "doublewrite") {
    for (const char* one : {"torn_page_protection=doublewrite", "doublewrite_batch_pages=8",
                            "doublewrite_ring_pages=16", "shared_buffers=16"})
      s.push_back(one);
  } else {
    s.push_back("torn_page_protection=full_page_writes");
    s.push_back("shared_buffers=64");
  }
  return s;
}

using test::log_lines;
using test::poll_until;

using writer_counts = std::array<std::int64_t, writers>;

// Writers committing on the primary; each counts its commits begun and acknowledged. A
// writer whose commit waits for a standby that stopped ends only once a standby confirms
// again (or the primary closes): stop() asks them to end, exited() says they did.
class primary_load {
public:
  explicit primary_load(database& db) : db_(db) {
    for (std::uint32_t t = 0; t < writers; ++t)
      threads_.emplace_back([this, t] { run(t); });
  }
  /// After a failed check: writers still waiting for a standby are released by closing
  /// the primary (which ends those waits with an error).
  ~primary_load() {
    stop();
    if (!poll_until([this] { return exited(); }, std::chrono::seconds(10))) {
      try {
        db_.close();
      } catch (const tidemark::error&) {
      }
    }
    join();
  }
  void stop() { stop_.store(true); }
  bool exited() const { return exited_.load() == writers; }
  void join() {
    for (std::thread& thread : threads_)
      if (thread.joinable())
        thread.join();
  }
  writer_counts acknowledged() const { return snapshot(acked_); }
  writer_counts begun() const { return snapshot(begun_); }
  std::int64_t total() const {
    std::int64_t sum = 0;
    for (std::int64_t n : acknowledged())
      sum += n;
    return sum;
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

private:
  void run(std::uint32_t t) {
    try {
      session s = db_.open_session();
      for (std::int64_t i = 1; !stop_.load(); ++i) {
        begun_[t].store(i);
        s.begin();
        s.add_i64({counters, t}, counter_offset, 1);
        s.add_i64({counters, writers + static_cast<block_number>((i * 7 + t) % spread_pages)},
                  counter_offset + 8 * t, 1);
        s.commit();
        acked_[t].store(i);
      }
    } catch (const tidemark::error& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = e.what();
    }
    exited_.fetch_add(1);
  }
  static writer_counts snapshot(const std::array<std::atomic<std::int64_t>, writers>& values) {
    writer_counts out{};
    for (std::uint32_t t = 0; t < writers; ++t)
      out[t] = values[t].load();
    return out;
  }
  database& db_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint32_t> exited_{0};
  std::array<std::atomic<std::int64_t>, writers> acked_{}, begun_{};
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::string error_;
};

// Every acknowledged commit is there, no commit that was never begun, each one whole.
void check_commits(database& db, const writer_counts& acknowledged, const writer_counts& begun,
                   const std::string& what) {
  session s = db.open_session();
  s.begin();
  for (std::uint32_t t = 0; t < writers; ++t) {
    const std::int64_t count = s.read_i64({counters, t}, counter_offset);
    std::int64_t spread = 0;
    for (std::uint32_t b = 0; b < spread_pages; ++b)
      spread += s.read_i64({counters, writers + b}, counter_offset + 8 * t);
    INFO(what << ": writer " << t << " has " << count << " commits, " << acknowledged[t]
              << " acknowledged, " << begun[t] << " begun");
    CHECK(count >= acknowledged[t]);
    CHECK(count <= begun[t]);
    CHECK(spread == count);
  }
  s.commit();
}

struct fault_plan {
  read_fault kind = read_fault::zeros;
  std::uint64_t after = 1;
  std::uint32_t repeats = 0; // 0: the bytes stay bad
  bool prefetch = false;     // the standby's recovery_prefetch (its reader reads WAL too)
  bool stays_bad() const { return repeats == 0; }
};

std::string describe(const fault_plan& plan) {
  const char* kind = plan.kind == read_fault::zeros        ? "zeros"
                     : plan.kind == read_fault::short_read ? "a short read"
                                                           : "EIO";
  return std::string(kind) + " from the " + std::to_string(plan.after) + "th read of fresh WAL, " +
         (plan.stays_bad() ? std::string("for good") : std::to_string(plan.repeats) + " time(s)") +
         (plan.prefetch ? ", with recovery_prefetch" : ", without recovery_prefetch");
}

// One cycle: a primary under remote_flush load, a base backup, a standby with bad reads,
// then the checks of the header comment. Returns whether the standby stopped.
bool bad_read_cycle(const std::string& mode, const fault_plan& plan) {
  INFO(mode << ", " << describe(plan));
  test::scratch_directory primary_dir("tidemark-bad-reads-primary"),
    standby_dir("tidemark-bad-reads-standby"), copy_dir("tidemark-bad-reads-copy");
  const std::vector<std::string> settings = mode_settings(mode);
  create_options create;
  create.settings = settings;
  database::create(primary_dir.dir, create);
  log_lines primary_log, standby_log;
  open_options primary_options;
  primary_options.settings = settings;
  primary_options.log = primary_log.sink();
  {
    auto setup = database::open(primary_dir.dir, primary_options);
    session s = setup->open_session(); // the blocks the writers change, one by one
    for (block_number b = 0; b < writers + spread_pages; ++b) {
      s.begin();
      s.add_i64({counters, b}, counter_offset, 0);
      s.commit();
    }
    setup->close();
  }
  primary_options.settings.push_back("replication_listen=127.0.0.1:0");
  primary_options.settings.push_back("synchronous_standby=remote_flush");
  auto primary = database::open(primary_dir.dir, primary_options);
  const std::string address = primary->replication_address();
  REQUIRE(address.rfind("127.0.0.1:", 0) == 0);
  database::base_backup(standby_dir.dir, address, "bad-reads");

  open_options standby_options;
  standby_options.settings = settings;
  standby_options.settings.push_back("replication_listen=''");
  standby_options.settings.push_back(plan.prefetch ? "recovery_prefetch=on"
                                                   : "recovery_prefetch=off");
  standby_options.standby = true;
  standby_options.log = standby_log.sink();
  open_options faulty = standby_options;
  faulty.faults = fault_injection{};
  faulty.faults->bad_read = plan.kind;
  faulty.faults->bad_read_after = plan.after;
  faulty.faults->bad_read_match = "/wal/";
  faulty.faults->bad_read_repeats = plan.repeats;
  auto standby = database::open(standby_dir.dir, faulty);

  primary_load load(*primary);
  const bool reached = poll_until([&] {
    standby_status s = standby->standby();
    return s.failed || s.wal_rereads > 0;
  });
  if (!reached) {
    standby_status s = standby->standby();
    FAIL("the bad read did not show within "
         << deadline_after.count() << " s: standby replayed " << s.replayed << ", flushed "
         << s.flushed << ", re-reads " << s.wal_rereads << ", error \"" << s.error
         << "\"; primary acknowledged " << load.total() << "; the standby's log:\n"
         << standby_log.text());
  }

  bool stopped = false;
  // The standby stopped: it shows it, refuses promotion, and its WAL holds every commit
  // acknowledged so far. Then it is opened again (without faults) and resumes.
  auto handle_stop = [&] {
    stopped = true;
    standby_status s = standby->standby();
    CHECK(s.error.find("standby redo stopped at") != std::string::npos);
    CHECK(s.error.find("cannot be read back") != std::string::npos);
    CHECK(s.replayed < s.flushed);
    CHECK(standby_log.contains("ERROR:  standby redo stopped at"));
    CHECK(poll_until([&] { return !standby->standby().connected; }));
    CHECK_THROWS_AS(standby->promote(), data_error);
    CHECK(standby->is_standby());
    CHECK(std::filesystem::exists(standby_dir.dir + "/standby.conf"));
    CHECK_THROWS_AS(standby->close(), engine_stopped_error);
    standby.reset();
    // No standby confirms now: acknowledged commits stand still.
    const writer_counts acknowledged = load.acknowledged(), begun = load.begun();
    std::filesystem::remove_all(copy_dir.dir);
    std::filesystem::copy(standby_dir.dir, copy_dir.dir, std::filesystem::copy_options::recursive);
    open_options offline = standby_options;
    offline.stream = false;
    auto copy = database::open(copy_dir.dir, offline);
    copy->promote();
    check_commits(*copy, acknowledged, begun, "the stopped standby's copy, promoted offline");
    copy->close();
    standby = database::open(standby_dir.dir, standby_options);
  };
  auto failed = [&] { return !stopped && standby->standby().failed; };
  // Commits go on (after a stop once the standby is back). A prefetch that read the bad
  // bytes first and gave up leaves them to redo, which may meet them only later.
  for (int round = 0; round < 2; ++round) {
    if (failed())
      handle_stop();
    const std::int64_t before = load.total();
    CHECK(
      poll_until([&] { return load.total() >= before + 60 || !load.error().empty() || failed(); }));
  }
  // The writers end; one may wait for a standby that stops only now: it is handled, and
  // the standby opened again confirms that commit.
  load.stop();
  CHECK(poll_until([&] { return load.exited() || failed(); }));
  if (failed()) {
    handle_stop();
    CHECK(poll_until([&] { return load.exited(); }));
  }
  load.join();
  CHECK(load.error().empty());
  auto caught_up = [&] { // replayed is the last record's end; flushed is 8-byte aligned
    standby_status s = standby->standby();
    return s.failed || (s.replayed + 7) / 8 * 8 >= s.flushed;
  };
  CHECK(poll_until(caught_up));
  if (failed()) {
    handle_stop();
    CHECK(poll_until(caught_up));
  }
  CHECK_FALSE(standby->standby().failed);
  if (plan.stays_bad() && !plan.prefetch)
    CHECK(stopped); // redo alone reads its WAL: the bytes that stay bad stop it
  if (!plan.stays_bad())
    CHECK_FALSE(stopped); // every reader reads again more often than they go bad
  const writer_counts acknowledged = load.acknowledged(), begun = load.begun();
  primary->close();
  standby->promote();
  check_commits(*standby, acknowledged, begun, "the promoted standby");
  standby->close();
  return stopped;
}

fault_plan random_plan(std::mt19937_64& random) {
  constexpr read_fault kinds[] = {read_fault::zeros, read_fault::short_read, read_fault::error};
  fault_plan plan;
  plan.kind = kinds[random() % 3];
  plan.after = 1 + random() % 300;
  plan.repeats = static_cast<std::uint32_t>(random() % 4); // 1..3 heal, 0 stays bad
  plan.prefetch = random() % 2 == 0;
  return plan;
}

void bad_read_cycles(const std::string& mode, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  int stopped = 0;
  for (int cycle = 0; cycle < TIDEMARK_BAD_READ_CYCLES; ++cycle) {
    CAPTURE(cycle);
    stopped += bad_read_cycle(mode, random_plan(random));
  }
  MESSAGE(mode << ": " << TIDEMARK_BAD_READ_CYCLES << " cycles, " << stopped
               << " standbys stopped on WAL that stayed unreadable, the others re-read it");
}

} // namespace

TEST_CASE("standby bad reads: WAL that stays unreadable stops the standby and promotion refuses") {
  CHECK(bad_read_cycle("full_page_writes", {read_fault::zeros, 40, 0, false}));
}

TEST_CASE("standby bad reads: a re-read heals a stale read and nothing is lost") {
  CHECK_FALSE(bad_read_cycle("full_page_writes", {read_fault::zeros, 40, 1, true}));
}

TEST_CASE("standby bad reads: random cycles, full_page_writes") {
  bad_read_cycles("full_page_writes", 20261205);
}

TEST_CASE("standby bad reads: random cycles, doublewrite") {
  bad_read_cycles("doublewrite", 20261206);
}
