// Reads on a standby through the public API (docs/replication.md, "Standby"): a primary
// keeps an invariant across two pages in every transaction (one page +1, the other -1), a
// standby in the same process (loopback) streams and replays, and read-only transactions
// on the standby read both pages: every one that commits saw a consistent state (the sum is
// zero), the others end in conflict_error because redo changed what they read. Writes on
// the standby are refused (and so are a checkpoint and a read-only open of it); after
// promotion they are accepted. Keyed tables likewise, while the primary's queue of keys
// has its emptied leaves unlinked and their blocks reused under the standby's readers; a
// table the primary drops loses its files and its handles at the standby's promotion.
#include <tidemark/database.hpp>

#include "replicated_primary.hpp"
#include "scratch_directory.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

using namespace tidemark;

namespace {

constexpr relation_id balances = 1;
constexpr std::uint32_t balance_offset = 64;

void transfer(session& s, std::int64_t amount) {
  s.begin();
  s.add_i64({balances, 0}, balance_offset, amount);
  s.add_i64({balances, 1}, balance_offset, -amount);
  s.commit();
}

} // namespace

TEST_CASE("standby: read-only transactions see whole transactions of the primary") {
  test::scratch_directory primary_dir("tidemark-primary"), standby_dir("tidemark-standby");
  const std::vector<std::string> settings = {"shared_buffers=1MB", "log_checkpoints=off",
                                             "checkpoint_timeout=1s"};
  auto primary = test::create_replicated_primary(primary_dir.dir, settings);
  const std::string listen = primary->replication_address();
  {
    session s = primary->open_session(); // relation 1 gets blocks 0 and 1
    s.begin();
    s.add_i64({balances, 0}, balance_offset, 0);
    s.commit();
    s.begin();
    s.add_i64({balances, 1}, balance_offset, 0);
    s.commit();
  }
  base_backup_report backup = database::base_backup(standby_dir.dir, listen, "reads-test");
  CHECK(backup.end_lsn > backup.redo_lsn);
  open_options standby_options;
  standby_options.settings = settings;
  standby_options.settings.push_back("replication_listen=''");
  standby_options.standby = true;
  auto standby = database::open(standby_dir.dir, standby_options);
  REQUIRE(standby->is_standby());

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> transfers{0};
  std::thread writer([&] {
    session s = primary->open_session();
    for (std::int64_t i = 1; !stop.load(); ++i) {
      transfer(s, i % 7 + 1);
      transfers.fetch_add(1);
    }
  });
  session reader = standby->open_session();
  std::uint64_t consistent = 0, conflicts = 0, inconsistent = 0;
  std::int64_t newest = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((consistent < 300 || transfers.load() < 2000) &&
         std::chrono::steady_clock::now() < deadline) {
    if (standby->relation_blocks(balances) < 2)
      continue; // the setup has not been replayed yet
    reader.begin();
    std::int64_t a = reader.read_i64({balances, 0}, balance_offset);
    std::int64_t b = reader.read_i64({balances, 1}, balance_offset);
    try {
      reader.commit();
    } catch (const conflict_error&) {
      ++conflicts;
      continue;
    }
    if (a + b == 0)
      ++consistent;
    else
      ++inconsistent;
    newest = std::max(newest, a);
  }
  stop.store(true);
  writer.join();
  CHECK(inconsistent == 0);
  CHECK(consistent >= 300);
  CHECK(newest > 0); // the reads followed the primary's changes
  MESSAGE("standby reads: " << consistent << " consistent, " << conflicts << " conflicts, "
                            << transfers.load() << " transfers on the primary");

  CHECK_THROWS_AS(standby->checkpoint(), usage_error); // it makes restartpoints itself
  open_options both = standby_options;
  both.read_only = true;
  CHECK_THROWS_AS(database::open(standby_dir.dir, both), usage_error);

  session writer_on_standby = standby->open_session();
  writer_on_standby.begin();
  CHECK_THROWS_AS(writer_on_standby.add_i64({balances, 0}, balance_offset, 1), usage_error);
  writer_on_standby.rollback();

  primary->close();
  standby->promote();
  CHECK_FALSE(standby->is_standby());
  session after = standby->open_session();
  transfer(after, 5); // a promoted standby accepts writes
  after.begin();
  std::int64_t sum =
    after.read_i64({balances, 0}, balance_offset) + after.read_i64({balances, 1}, balance_offset);
  after.commit();
  CHECK(sum == 0);
  standby->close();
}

TEST_CASE("standby: keyed tables, created and changed on the primary, read whole on a standby") {
  test::scratch_directory primary_dir("tidemark-primary"), standby_dir("tidemark-standby");
  const std::vector<std::string> settings = {"shared_buffers=1MB", "log_checkpoints=off",
                                             "checkpoint_timeout=1s", "page_size=4kB"};
  auto primary = test::create_replicated_primary(primary_dir.dir, settings);
  database::base_backup(standby_dir.dir, primary->replication_address(), "tables-test");
  open_options standby_options;
  standby_options.settings = settings;
  standby_options.settings.push_back("replication_listen=''");
  standby_options.standby = true;
  auto standby = database::open(standby_dir.dir, standby_options);

  // Made after the base backup: the catalog's change reaches the standby as WAL.
  table t = primary->create_table("balances");
  std::string zero(16, '\0');
  {
    session s = primary->open_session();
    s.begin();
    for (int i = 0; i < 200; ++i) // keys that split leaves of 4 KiB as they grow
      s.put(t, "account-" + std::to_string(i), zero + std::string(150, 'p'));
    s.commit();
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> transfers{0};
  std::thread writer([&] { // moves amounts between accounts: the total stays zero
    session s = primary->open_session();
    for (std::int64_t i = 1; !stop.load(); ++i) {
      s.begin();
      s.add_i64(t, "account-" + std::to_string(i % 200), 0, i % 7 + 1);
      s.add_i64(t, "account-" + std::to_string(i * 7 % 200), 0, -(i % 7 + 1));
      if (i % 2 == 0) { // and a queue: splits, and leaves unlinked and reused, while the
        char key[40];   // standby reads
        std::snprintf(key, sizeof key, "queue-%09lld", static_cast<long long>(i));
        s.put(t, key, std::string(150, 'q'));
        std::snprintf(key, sizeof key, "queue-%09lld", static_cast<long long>(i - 600));
        s.erase(t, key);
      }
      s.commit();
      transfers.fetch_add(1);
    }
  });
  session reader = standby->open_session();
  std::uint64_t consistent = 0, conflicts = 0, inconsistent = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  table on_standby;
  while ((consistent < 200 || transfers.load() < 2000) &&
         std::chrono::steady_clock::now() < deadline) {
    if (!on_standby) {
      try {
        on_standby = standby->open_table("balances");
      } catch (const usage_error&) {
        continue; // the catalog's change has not been replayed yet
      }
    }
    reader.begin();
    std::int64_t sum = 0;
    std::size_t accounts = 0;
    table_cursor c =
      reader.cursor(on_standby, {std::string("account-"), true, std::string("account-~"), true});
    while (c.next()) {
      std::int64_t balance;
      std::memcpy(&balance, c.value().data(), sizeof balance);
      sum += balance;
      ++accounts;
    }
    try {
      reader.commit();
    } catch (const conflict_error&) {
      ++conflicts;
      continue;
    }
    std::string last; // the queue walked backwards, outside a transaction: in order, while
                      // its leaves are unlinked and reused
    for (table_cursor q =
           reader.cursor(on_standby, {std::string("queue-"), true, std::string("queue-~"), true});
         q.prev(); last = q.key())
      if (!last.empty() && !(q.key() < last))
        ++inconsistent;
    if (accounts == 0)
      continue; // the first put has not been replayed yet
    if (sum == 0 && accounts == 200)
      ++consistent;
    else
      ++inconsistent;
  }
  stop.store(true);
  writer.join();
  CHECK(inconsistent == 0);
  CHECK(consistent >= 200);
  MESSAGE("standby table reads: " << consistent << " consistent, " << conflicts << " conflicts, "
                                  << transfers.load() << " transfers");
  reader.begin();
  CHECK_THROWS_AS(reader.put(on_standby, "x", "y"), usage_error); // a standby only reads
  reader.rollback();
  CHECK_THROWS_AS(standby->create_table("other"), usage_error);

  // Dropped on the primary: the standby's handle reads the table as it last was until a
  // promotion removes its files; from then on it is refused as a dropped table's.
  primary->drop_table("balances");
  auto listed = [&] {
    for (const table_info& info : standby->tables())
      if (info.name == "balances")
        return true;
    return false;
  };
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (listed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield(); // until the standby replays the drop
  REQUIRE_FALSE(listed());
  CHECK(reader.get(on_standby, "account-1").has_value());
  primary->close();
  standby->promote();
  CHECK_THROWS_WITH_AS(reader.get(on_standby, "account-1"), doctest::Contains("was dropped"),
                       usage_error);
  CHECK_THROWS_AS(standby->open_table("balances"), usage_error);
  CHECK(standby->tables().empty());
  standby->close();
}
