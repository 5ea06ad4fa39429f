// Supervision (runtime/supervision.hpp): every core actor is watched, and one that dies
// while sessions commit stops the engine at once instead of leaving them waiting. For each
// actor in turn, under a committing load: it is ended as a crash would end it (the test
// hook), every session's next or blocked call ends with engine_stopped_error (or, for a
// commit whose record was written, commit_outcome_unknown), stats() and close() name the
// actor, and a reopen recovers every acknowledged commit.
#include "runtime/api_bridge.hpp"

#include "replicated_primary.hpp"
#include "scratch_directory.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace tidemark;

namespace {

constexpr int session_count = 3;
constexpr block_number blocks_per_session = 48; // with a 1 MB pool, sessions evict
constexpr std::uint64_t commits_before_the_end = 60;

struct outcome {
  std::uint64_t acknowledged = 0;
  std::uint64_t unknown = 0; // commit_outcome_unknown: applied or not, never half
  std::string stopped_with;  // the engine_stopped_error's text
  bool other_error = false;
};

relation_id relation_of(int session) { return static_cast<relation_id>(10 + session); }

struct load_progress {
  std::atomic<std::uint64_t> commits{0};
  std::atomic<bool> give_up{false}; // the test failed: stop rather than run on
  std::mutex mutex;
  std::condition_variable enough;
};

// Adds 1 at offset 64 of one block per commit, going round the session's blocks, until a
// call throws.
void commit_until_stopped(database& db, int index, outcome& out, load_progress& progress) {
  session s = db.open_session();
  for (std::uint64_t i = 0; !progress.give_up.load(); ++i) {
    try {
      s.begin();
      s.add_i64({relation_of(index), static_cast<block_number>(i % blocks_per_session)}, 64, 1);
      s.commit();
      ++out.acknowledged;
    } catch (const commit_outcome_unknown&) {
      ++out.unknown;
    } catch (const engine_stopped_error& error) {
      out.stopped_with = error.what();
      return;
    } catch (const std::exception&) {
      out.other_error = true;
      return;
    }
    if (++progress.commits == commits_before_the_end) {
      std::lock_guard<std::mutex> guard(progress.mutex);
      progress.enough.notify_all();
    }
  }
}

void end_actor_under_load(const std::string& actor, std::vector<std::string> settings) {
  test::scratch_directory scratch("tidemark-supervision");
  settings.insert(settings.end(), {"log_checkpoints=off", "shared_buffers=1MB"});
  create_options create;
  create.settings = settings;
  database::create(scratch.dir, create);
  std::vector<outcome> outcomes(session_count);
  std::vector<std::string> log;
  std::mutex log_mutex;
  {
    open_options options;
    options.settings = settings;
    options.log = [&](const std::string& line) {
      std::lock_guard<std::mutex> guard(log_mutex);
      log.push_back(line);
    };
    auto db = database::open(scratch.dir, options);
    runtime::instance& inside = internal_access::of(*db);
    std::vector<std::string> watched = inside.watched_actors();
    REQUIRE_MESSAGE(std::find(watched.begin(), watched.end(), actor) != watched.end(),
                    actor << " is not watched");

    load_progress progress;
    std::vector<std::future<void>> sessions;
    struct give_up_on_exit {
      load_progress& progress;
      ~give_up_on_exit() { progress.give_up = true; } // before the futures wait
    } give_up{progress};
    for (int i = 0; i < session_count; ++i)
      sessions.push_back(std::async(std::launch::async, [&, i] {
        commit_until_stopped(*db, i, outcomes[i], progress);
      }));
    {
      std::unique_lock<std::mutex> lock(progress.mutex);
      progress.enough.wait(lock, [&] { return progress.commits.load() >= commits_before_the_end; });
    }
    inside.end_actor_abnormally(actor);
    // A bound for a hang, not a timing assertion: every session stops on an event (the
    // engine's failure wakes its waits), long before this.
    for (auto& s : sessions)
      REQUIRE_MESSAGE(s.wait_for(std::chrono::seconds(5)) == std::future_status::ready,
                      "a session still runs 5 s after the " << actor << " ended");
    for (const outcome& out : outcomes) {
      CHECK_FALSE(out.other_error);
      CHECK_MESSAGE(out.stopped_with.find("the " + actor + " actor stopped") != std::string::npos,
                    out.stopped_with);
    }
    statistics stats = db->stats();
    CHECK(stats.failed);
    CHECK(stats.failure.find("the " + actor + " actor stopped unexpectedly") != std::string::npos);
    CHECK_THROWS_AS(db->close(), engine_stopped_error);
  }
  {
    std::lock_guard<std::mutex> guard(log_mutex);
    CHECK(std::any_of(log.begin(), log.end(), [&](const std::string& line) {
      return line.rfind("ERROR:", 0) == 0 &&
             line.find("the " + actor + " actor") != std::string::npos;
    }));
  }
  // Every acknowledged commit is there after recovery; one of unknown outcome is wholly
  // there or wholly absent.
  open_options options;
  options.settings = settings;
  options.log = [](const std::string&) {};
  auto db = database::open(scratch.dir, options);
  session s = db->open_session();
  for (int i = 0; i < session_count; ++i) {
    std::int64_t sum = 0;
    block_number blocks = db->relation_blocks(relation_of(i));
    for (block_number b = 0; b < blocks; ++b)
      sum += s.read_i64({relation_of(i), b}, 64);
    CHECK(sum >= static_cast<std::int64_t>(outcomes[i].acknowledged));
    CHECK(sum <= static_cast<std::int64_t>(outcomes[i].acknowledged + outcomes[i].unknown));
  }
  db->close();
}

} // namespace

TEST_CASE("supervision: the wal_writer ends under load and the engine stops") {
  end_actor_under_load("wal_writer", {});
}

TEST_CASE("supervision: the checkpointer ends under load and the engine stops") {
  end_actor_under_load("checkpointer", {"checkpoint_timeout=1s"});
}

TEST_CASE("supervision: the bgwriter ends under load and the engine stops") {
  end_actor_under_load("bgwriter", {});
}

TEST_CASE("supervision: the sync worker ends under load and the engine stops") {
  end_actor_under_load("sync_worker", {"checkpoint_timeout=1s"});
}

TEST_CASE("supervision: the doublewrite batcher ends under load and the engine stops") {
  end_actor_under_load("dw_batcher", {"torn_page_protection=doublewrite"});
}

TEST_CASE("supervision: the WAL sender ends under load and the engine stops") {
  end_actor_under_load("wal_sender", {"replication_listen=127.0.0.1:0"});
}

TEST_CASE("supervision: a name no actor has is a usage error") {
  test::scratch_directory scratch("tidemark-supervision");
  database::create(scratch.dir, {});
  open_options options;
  options.settings = {"log_checkpoints=off"};
  auto db = database::open(scratch.dir, options);
  CHECK_THROWS_AS(internal_access::of(*db).end_actor_abnormally("no_such_actor"), usage_error);
  CHECK_FALSE(db->stats().failed);
  db->close();
}

TEST_CASE("supervision: the WAL receiver ends and the standby stops, loudly") {
  test::scratch_directory primary_dir("tidemark-primary"), standby_dir("tidemark-standby");
  const std::vector<std::string> settings = {"shared_buffers=1MB", "log_checkpoints=off"};
  auto primary = test::create_replicated_primary(primary_dir.dir, settings);
  session writer = primary->open_session();
  writer.begin();
  writer.add_i64({1, 0}, 64, 1);
  writer.commit();
  database::base_backup(standby_dir.dir, primary->replication_address(), "supervised");

  std::mutex mutex;
  std::condition_variable logged;
  bool error_logged = false;
  open_options standby_options;
  standby_options.settings = settings;
  standby_options.standby = true;
  standby_options.log = [&](const std::string& line) {
    if (line.rfind("ERROR:", 0) == 0 && line.find("the wal_receiver actor") != std::string::npos) {
      std::lock_guard<std::mutex> guard(mutex);
      error_logged = true;
      logged.notify_all();
    }
  };
  {
    auto standby = database::open(standby_dir.dir, standby_options);
    internal_access::of(*standby).end_actor_abnormally("wal_receiver");
    {
      std::unique_lock<std::mutex> lock(mutex);
      logged.wait(lock, [&] { return error_logged; });
    }
    standby_status status = standby->standby();
    CHECK(status.failed);
    CHECK(status.error.find("the wal_receiver actor stopped unexpectedly") != std::string::npos);
    session reader = standby->open_session();
    CHECK_THROWS_AS(reader.begin(), engine_stopped_error);
    CHECK_THROWS_AS(standby->promote(), error);
    CHECK_THROWS_AS(standby->close(), engine_stopped_error);
  }
  // The primary goes on (its standby is asynchronous); the standby opens again and streams.
  writer.begin();
  writer.add_i64({1, 0}, 64, 1);
  writer.commit();
  standby_options.log = {};
  auto standby = database::open(standby_dir.dir, standby_options);
  CHECK(standby->is_standby());
  CHECK_FALSE(standby->standby().failed);
  standby->close();
  primary->close();
}
