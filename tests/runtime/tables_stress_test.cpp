// Keyed tables under four threads for TIDEMARK_TABLE_STRESS_SECONDS (30 in the release
// build), through the public API: random puts, erases, counter deltas, gets of other
// threads' keys and range scans both ways, small and overflow-sized values, runs of keys
// erased at once (so leaves empty and are unlinked while others scan). Each thread alone
// writes its own keys and a count of them (in the same transactions), so the committed
// transactions give a model of the table; every committed scan of a thread's keys must
// find exactly as many as that thread's count says (a missing or phantom key in a
// serializable snapshot would break it). At the end, after a clean restart, the table
// equals the model and check_files finds every tree intact. No deadlock: the test ends.
#include <tidemark/database.hpp>

#include "scratch_directory.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifndef TIDEMARK_TABLE_STRESS_SECONDS
#define TIDEMARK_TABLE_STRESS_SECONDS 30
#endif

using namespace tidemark;

namespace {

constexpr int thread_count = 4;
constexpr int keys_per_thread = 400;

std::string thread_key(int thread, int k) {
  return "t" + std::to_string(thread) + "-" + std::to_string(1000 + k);
}
std::string count_key(int thread) { return "count-" + std::to_string(thread); }

struct thread_result {
  std::map<std::string, std::string> model; // this thread's keys, as committed
  std::uint64_t commits = 0, conflicts = 0, scans = 0, bad_scans = 0;
};

std::string random_value(std::mt19937_64& random) {
  std::size_t size = random() % 16 == 0 ? 3000 + random() % 6000 : 8 + random() % 200;
  std::string value(size, char('a' + random() % 26));
  return value;
}

// One write transaction of thread `w`: a few of its keys changed, its count kept, a key of
// another thread read. The model changes only when the commit succeeds.
void write_some(session& s, const table& t, int w, std::mt19937_64& random, thread_result& out) {
  std::map<std::string, std::string> next = out.model;
  s.begin();
  if (random() % 8 == 0) { // a run of its keys erased: leaves empty and are unlinked
    int from = int(random() % keys_per_thread);
    for (int k = from; k < std::min(keys_per_thread, from + 40); ++k)
      if (next.erase(thread_key(w, k)) != 0)
        s.erase(t, thread_key(w, k));
  }
  for (int n = 1 + int(random() % 4); n > 0; --n) {
    std::string key = thread_key(w, int(random() % keys_per_thread));
    if (next.count(key) != 0 && random() % 2 == 0) {
      s.erase(t, key);
      next.erase(key);
    } else {
      std::string value = random_value(random);
      s.put(t, key, value);
      next[key] = value;
    }
  }
  s.put(t, count_key(w), std::to_string(next.size()));
  (void)s.get(t, thread_key(int(random() % thread_count), int(random() % keys_per_thread)));
  try {
    s.commit();
  } catch (const conflict_error&) {
    ++out.conflicts;
    return;
  }
  ++out.commits;
  out.model = std::move(next);
}

// A scan of one thread's keys (walked forwards or backwards), counted against that
// thread's count key, read in the same transaction.
void scan(session& s, const table& t, std::mt19937_64& random, thread_result& out) {
  int owner = int(random() % thread_count);
  std::string prefix = "t" + std::to_string(owner) + "-";
  s.begin();
  std::optional<std::string> count = s.get(t, count_key(owner));
  std::size_t seen = 0;
  table_cursor c = s.cursor(t, {prefix, true, prefix + "~", true});
  bool forward = random() % 2 == 0;
  while (forward ? c.next() : c.prev())
    ++seen;
  try {
    s.commit();
  } catch (const conflict_error&) {
    ++out.conflicts;
    return;
  }
  ++out.scans;
  if (seen != (count ? std::stoul(*count) : 0))
    ++out.bad_scans;
}

} // namespace

TEST_CASE("tables under four threads: every committed scan is consistent, the end state is "
          "the committed transactions'") {
  test::scratch_directory scratch("tidemark-tables-stress");
  const std::vector<std::string> settings = {"log_checkpoints=off", "shared_buffers=4MB",
                                             "page_size=4kB", "checkpoint_timeout=2s"};
  create_options create;
  create.settings = settings;
  database::create(scratch.dir, create);
  open_options open;
  open.settings = settings;
  auto db = database::open(scratch.dir, open);
  table t = db->create_table("stress");
  std::vector<thread_result> results(thread_count);
  std::vector<std::thread> workers;
  const auto until =
    std::chrono::steady_clock::now() + std::chrono::seconds(TIDEMARK_TABLE_STRESS_SECONDS);
  for (int w = 0; w < thread_count; ++w)
    workers.emplace_back([&, w] {
      std::mt19937_64 random(w + 1);
      session s = db->open_session();
      while (std::chrono::steady_clock::now() < until) {
        if (random() % 8 == 0)
          scan(s, t, random, results[w]);
        else
          write_some(s, t, w, random, results[w]);
      }
    });
  for (std::thread& worker : workers)
    worker.join();
  std::map<std::string, std::string> expected;
  std::uint64_t commits = 0, conflicts = 0, scans = 0;
  for (int w = 0; w < thread_count; ++w) {
    CHECK(results[w].bad_scans == 0);
    commits += results[w].commits;
    conflicts += results[w].conflicts;
    scans += results[w].scans;
    expected.insert(results[w].model.begin(), results[w].model.end());
    if (results[w].commits > 0)
      expected[count_key(w)] = std::to_string(results[w].model.size());
  }
  MESSAGE(commits << " commits, " << scans << " consistent scans, " << conflicts << " conflicts in "
                  << TIDEMARK_TABLE_STRESS_SECONDS << " s");
  CHECK(commits > 0);
  CHECK(scans > 0);
  db->close();

  db = database::open(scratch.dir, open);
  session s = db->open_session();
  std::map<std::string, std::string> found;
  for (table_cursor c = s.cursor(db->open_table("stress")); c.next();)
    found[c.key()] = c.value();
  CHECK(found.size() == expected.size());
  CHECK(found == expected);
  db->close();
  file_check_report check = database::check_files(scratch.dir);
  CHECK(check.failures == 0);
  CHECK(check.tables_checked == 2);
}
