// Keyed tables through the public API only, as an application uses them: the catalog's
// operations, get/put/insert/erase inside and outside transactions, cursors in both
// directions against a std::map, serializable validation (changed keys and phantoms),
// large values, durability across a clean restart and a simulated power loss, and every
// usage error an application can provoke, with nothing applied.
#include <tidemark/database.hpp>

#include "scratch_directory.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace tidemark;

namespace {

const std::vector<std::string> small = {"log_checkpoints=off", "shared_buffers=2MB",
                                        "page_size=4kB"};

std::unique_ptr<database> create_and_open(const std::string& dir,
                                          std::vector<std::string> settings = small) {
  create_options create;
  create.settings = settings;
  database::create(dir, create);
  open_options open;
  open.settings = settings;
  return database::open(dir, open);
}

// Creates `dir`; the options open it on the fault-injecting engine (simulate_power_loss).
open_options create_with_faults(const std::string& dir, const std::vector<std::string>& settings) {
  create_options create;
  create.settings = settings;
  database::create(dir, create);
  open_options faulty;
  faulty.settings = settings;
  faulty.faults = fault_injection{};
  return faulty;
}

std::unique_ptr<database> reopen(const std::string& dir) {
  open_options open;
  open.settings = small;
  return database::open(dir, open);
}

// Every entry of `t`, first to last, outside a transaction.
std::map<std::string, std::string> contents(session& s, const table& t) {
  std::map<std::string, std::string> all;
  table_cursor c = s.cursor(t);
  while (c.next())
    all[c.key()] = c.value();
  return all;
}

std::string key_of(int i) {
  char key[16];
  std::snprintf(key, sizeof key, "k%06d", i);
  return key;
}

// The pages database::tables() lists for `name`.
std::uint64_t pages_of(database& db, const std::string& name) {
  for (const table_info& info : db.tables())
    if (info.name == name)
      return info.pages;
  FAIL("table '" << name << "' is listed");
  return 0;
}

// One transaction of a queue in `t`: 20 keys added after the last one, and each key
// `window` places before a new one erased; `model` follows the commit.
void queue_commit(session& s, const table& t, int window, int& next,
                  std::map<std::string, std::string>& model) {
  s.begin();
  for (int i = 0; i < 20; ++i, ++next) {
    std::string value(50 + next % 300, char('a' + next % 26));
    s.put(t, key_of(next), value);
    model[key_of(next)] = value;
    if (next >= window) {
      s.erase(t, key_of(next - window));
      model.erase(key_of(next - window));
    }
  }
  s.commit();
}

} // namespace

TEST_CASE("tables: create, open, list and drop, kept across a restart") {
  test::scratch_directory scratch("tidemark-tables-api");
  auto db = create_and_open(scratch.dir);
  CHECK(db->tables().empty());
  table users = db->create_table("users");
  table orders = db->create_table("orders");
  CHECK(users.name() == "users");
  CHECK_THROWS_WITH_AS(db->create_table("users"), doctest::Contains("exists already"), usage_error);
  std::vector<table_info> listed = db->tables();
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].name == "orders");
  CHECK(listed[1].name == "users");
  CHECK(listed[1].pages >= 1);

  session s = db->open_session();
  s.begin();
  s.put(users, "alice", "41");
  s.commit();
  db->drop_table("orders");
  CHECK_THROWS_WITH_AS(s.get(orders, "x"), doctest::Contains("'orders' was dropped"), usage_error);
  CHECK_THROWS_WITH_AS(db->drop_table("orders"), doctest::Contains("no table named 'orders'"),
                       usage_error);
  CHECK_THROWS_WITH_AS(db->open_table("orders"), doctest::Contains("no table named 'orders'"),
                       usage_error);
  db->close();

  db = reopen(scratch.dir);
  listed = db->tables();
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].name == "users");
  session again = db->open_session();
  CHECK(again.get(db->open_table("users"), "alice") == std::optional<std::string>("41"));
  // A table made again under a dropped name is a new, empty table.
  table orders2 = db->create_table("orders");
  CHECK(again.get(orders2, "x") == std::nullopt);
}

TEST_CASE("tables: put, insert, erase and get inside and outside transactions") {
  test::scratch_directory scratch("tidemark-tables-api");
  auto db = create_and_open(scratch.dir);
  table t = db->create_table("t");
  session s = db->open_session();
  s.begin();
  s.put(t, "a", "1");
  CHECK(s.insert(t, "b", "2"));
  CHECK_FALSE(s.insert(t, "a", "other")); // present: nothing changed
  CHECK(s.get(t, "a") == std::optional<std::string>("1"));
  CHECK(s.erase(t, "b"));
  CHECK_FALSE(s.erase(t, "b"));
  s.put(t, "", "the empty key is a key");
  s.commit();
  CHECK(s.get(t, "a") == std::optional<std::string>("1"));
  CHECK(s.get(t, "b") == std::nullopt);
  CHECK(s.get(t, "") == std::optional<std::string>("the empty key is a key"));

  s.begin();
  s.put(t, "a", "changed");
  s.erase(t, "");
  s.rollback(); // nothing applied
  CHECK(s.get(t, "a") == std::optional<std::string>("1"));
  CHECK(s.get(t, "").has_value());
}

TEST_CASE("tables: cursors walk a range both ways, bounds included or not, own changes seen") {
  test::scratch_directory scratch("tidemark-tables-api");
  auto db = create_and_open(scratch.dir);
  table t = db->create_table("t");
  session s = db->open_session();
  std::map<std::string, std::string> model;
  std::mt19937 random(7);
  for (int batch = 0; batch < 10; ++batch) {
    s.begin();
    for (int i = 0; i < 100; ++i) {
      std::string key = key_of(int(random() % 2000));
      std::string value(random() % 300, char('a' + random() % 26));
      s.put(t, key, value);
      model[key] = value;
    }
    s.commit();
  }
  CHECK(contents(s, t) == model);

  for (int round = 0; round < 50; ++round) {
    key_range range;
    range.low = key_of(int(random() % 2000));
    range.high = key_of(int(random() % 2000));
    if (*range.high < *range.low)
      std::swap(range.low, range.high);
    range.low_inclusive = random() % 2 == 0;
    range.high_inclusive = random() % 2 == 0;
    std::vector<std::string> expected;
    for (const auto& entry : model) {
      const std::string& key = entry.first;
      bool above_low = range.low_inclusive ? key >= *range.low : key > *range.low;
      bool below_high = range.high_inclusive ? key <= *range.high : key < *range.high;
      if (above_low && below_high)
        expected.push_back(key);
    }
    s.begin();
    table_cursor c = s.cursor(t, range);
    std::vector<std::string> forward, backward;
    while (c.next())
      forward.push_back(c.key());
    while (c.prev())
      backward.push_back(c.key());
    std::reverse(backward.begin(), backward.end());
    CHECK(forward == expected);
    CHECK(backward == expected);
    s.commit();
  }

  // seek lands on the first key at or after the one asked for, inside the range.
  s.begin();
  table_cursor c = s.cursor(t);
  REQUIRE(c.seek(model.begin()->first));
  CHECK(c.key() == model.begin()->first);
  REQUIRE(c.seek(model.begin()->first, false));
  CHECK(c.key() == std::next(model.begin())->first);
  CHECK_FALSE(c.seek("z")); // past every key
  CHECK_THROWS_AS(c.key(), usage_error);
  REQUIRE(c.seek_last());
  CHECK(c.key() == model.rbegin()->first);
  // The transaction's own pending changes are what its cursor sees.
  s.put(t, "k999999", "pending");
  s.erase(t, model.begin()->first);
  REQUIRE(c.seek_last());
  CHECK(c.key() == "k999999");
  REQUIRE(c.seek_first());
  CHECK(c.key() == std::next(model.begin())->first);
  s.rollback();
}

TEST_CASE("tables: a changed read and a phantom in a scanned range are conflicts") {
  test::scratch_directory scratch("tidemark-tables-api");
  auto db = create_and_open(scratch.dir);
  table t = db->create_table("t");
  session a = db->open_session(), b = db->open_session();
  a.begin();
  for (int i = 0; i < 10; ++i)
    a.put(t, key_of(i * 10), "v");
  a.commit();

  SUBCASE("a key read then changed by another commit") {
    a.begin();
    CHECK(a.get(t, key_of(10)) == std::optional<std::string>("v"));
    a.put(t, "other", "x");
    b.begin();
    b.put(t, key_of(10), "w");
    b.commit();
    CHECK_THROWS_AS(a.commit(), conflict_error);
    CHECK(b.get(t, "other") == std::nullopt); // nothing of a applied
  }
  SUBCASE("a key read absent, then inserted") {
    a.begin();
    CHECK(a.get(t, "new") == std::nullopt);
    a.put(t, "other", "x");
    b.begin();
    b.put(t, "new", "w");
    b.commit();
    CHECK_THROWS_AS(a.commit(), conflict_error);
  }
  SUBCASE("a phantom: a key inserted into a stretch a cursor passed over") {
    a.begin();
    key_range range;
    range.low = key_of(20);
    range.high = key_of(50);
    table_cursor c = a.cursor(t, range);
    int seen = 0;
    while (c.next())
      ++seen;
    CHECK(seen == 4);
    a.put(t, "count", std::to_string(seen));
    b.begin();
    b.put(t, key_of(35), "phantom");
    b.commit();
    CHECK_THROWS_AS(a.commit(), conflict_error);
    CHECK(b.get(t, "count") == std::nullopt);
  }
  SUBCASE("a change outside every stretch read commits") {
    a.begin();
    CHECK(a.get(t, key_of(10)).has_value());
    a.put(t, "other", "x");
    b.begin();
    b.put(t, key_of(90), "w");
    b.commit();
    a.commit();
    CHECK(b.get(t, "other") == std::optional<std::string>("x"));
  }
}

TEST_CASE("tables: values up to the limit on overflow pages, kept across a power loss") {
  test::scratch_directory scratch("tidemark-tables-api");
  // A 4 MiB value is a chain of 1 025 pages of 4 KiB, latched together at its commit: a
  // commit may hold a quarter of the pool.
  std::vector<std::string> settings = small;
  settings.push_back("shared_buffers=32MB");
  open_options faulty = create_with_faults(scratch.dir, settings);
  std::map<std::string, std::string> committed;
  {
    auto db = database::open(scratch.dir, faulty);
    table t = db->create_table("blobs");
    session s = db->open_session();
    std::mt19937 random(3);
    for (std::size_t size : {std::size_t(0), std::size_t(100), std::size_t(5000),
                             std::size_t(1) << 20, max_value_bytes}) {
      std::string value(size, '\0');
      for (char& byte : value)
        byte = char(random());
      std::string key = "blob-" + std::to_string(size);
      s.begin();
      s.put(t, key, value);
      s.commit();
      committed[key] = value;
    }
    s.begin();
    s.put(t, "unacknowledged", std::string(3000, 'u'));
    db->simulate_power_loss(); // before the commit: it may not survive, and is not checked
    CHECK_THROWS(s.commit());
  }
  open_options open;
  open.settings = settings;
  auto db = database::open(scratch.dir, open);
  session s = db->open_session();
  table t = db->open_table("blobs");
  for (const auto& [key, value] : committed)
    CHECK(s.get(t, key) == std::optional<std::string>(value));
  db->close();
  file_check_report check = database::check_files(scratch.dir);
  CHECK(check.failures == 0);
  CHECK(check.pages_checked > 0);
}

TEST_CASE("tables: a commit holding more than a quarter of the pool is refused, nothing applied") {
  test::scratch_directory scratch("tidemark-tables-api");
  auto db = create_and_open(scratch.dir); // 2 MB of 4 KiB pages: 512 buffers
  table t = db->create_table("t");
  session s = db->open_session();
  s.begin();
  s.put(t, "small", "applied only with the rest");
  s.put(t, "big", std::string(std::size_t(1) << 20, 'b')); // 257 overflow pages
  CHECK_THROWS_WITH_AS(s.commit(), doctest::Contains("a quarter of the buffer pool"), usage_error);
  CHECK_FALSE(s.in_transaction());
  CHECK(s.get(t, "small") == std::nullopt);
  CHECK(s.get(t, "big") == std::nullopt);
  // Within the limit, the same value commits.
  s.begin();
  s.put(t, "big", std::string(std::size_t(256) << 10, 'b'));
  s.commit();
  CHECK(s.get(t, "big")->size() == std::size_t(256) << 10);
}

TEST_CASE("tables: bad input is refused with a clear error and nothing applied") {
  test::scratch_directory scratch("tidemark-tables-api");
  auto db = create_and_open(scratch.dir);
  table t = db->create_table("t");
  session s = db->open_session();

  CHECK_THROWS_WITH_AS(db->create_table(""), doctest::Contains("may not be empty"), usage_error);
  CHECK_THROWS_WITH_AS(db->create_table(std::string(max_table_name_bytes + 1, 'n')),
                       doctest::Contains("at most 128 bytes"), usage_error);
  CHECK_THROWS_WITH_AS(db->create_table("tab\tle"), doctest::Contains("control characters"),
                       usage_error);
  CHECK_THROWS_WITH_AS(db->open_table("missing"), doctest::Contains("no table named 'missing'"),
                       usage_error);
  CHECK(db->tables().size() == 1);

  CHECK_THROWS_WITH_AS(s.put(t, "a", "b"), doctest::Contains("outside a transaction"), usage_error);
  s.begin();
  CHECK_THROWS_WITH_AS(s.put(t, std::string(max_key_bytes + 1, 'k'), "v"),
                       doctest::Contains("a key is at most 1024 bytes"), usage_error);
  CHECK_THROWS_WITH_AS(s.put(t, "k", std::string(max_value_bytes + 1, 'v')),
                       doctest::Contains("a value is at most 4194304 bytes"), usage_error);
  CHECK_THROWS_WITH_AS(s.get(table(), "k"), doctest::Contains("names no table"), usage_error);
  s.put(t, std::string(max_key_bytes, 'k'), "longest key"); // at the limit: accepted
  // A transaction that uses tables may not use pages, nor the reverse.
  CHECK_THROWS_WITH_AS(s.add_i64({1, 0}, 64, 1), doctest::Contains("pages or tables, not both"),
                       usage_error);
  table_cursor c = s.cursor(t);
  std::thread other(
    [&] { CHECK_THROWS_WITH_AS(c.next(), doctest::Contains("another thread"), usage_error); });
  other.join();
  s.commit();
  CHECK_THROWS_WITH_AS(c.next(), doctest::Contains("transaction has ended"), usage_error);
  CHECK(s.get(t, std::string(max_key_bytes, 'k')) == std::optional<std::string>("longest key"));
  CHECK(s.get(t, "k") == std::nullopt); // the refused put applied nothing

  s.begin();
  s.add_i64({1, 0}, 64, 1);
  CHECK_THROWS_WITH_AS(s.get(t, "k"), doctest::Contains("pages or tables, not both"), usage_error);
  s.rollback();

  // A handle of another database.
  test::scratch_directory other_scratch("tidemark-tables-api");
  auto other_db = create_and_open(other_scratch.dir);
  table foreign = other_db->create_table("t");
  CHECK_THROWS_WITH_AS(s.get(foreign, "k"), doctest::Contains("belongs to another database"),
                       usage_error);
  other_db->close();

  db->close();
  CHECK_THROWS_WITH_AS(s.get(t, "k"), doctest::Contains("closed"), usage_error);
  CHECK_THROWS_WITH_AS(db->create_table("u"), doctest::Contains("closed"), usage_error);

  // Read-only: reads work, changes are refused.
  open_options read_only;
  read_only.settings = small;
  read_only.read_only = true;
  auto ro = database::open(scratch.dir, read_only);
  session r = ro->open_session();
  table rt = ro->open_table("t");
  CHECK(r.get(rt, std::string(max_key_bytes, 'k')).has_value());
  r.begin();
  CHECK_THROWS_WITH_AS(r.put(rt, "k", "v"), doctest::Contains("read-only"), usage_error);
  r.rollback();
  CHECK_THROWS_WITH_AS(ro->create_table("u"), doctest::Contains("read-only"), usage_error);
}

namespace {

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

} // namespace

TEST_CASE("tables: a dropped table's files go, and its pending fsyncs never fail a checkpoint") {
  test::scratch_directory scratch("tidemark-tables-api");
  auto db = create_and_open(scratch.dir); // 512 buffers: sessions evict dirty pages
  std::set<std::string> before = files_in(scratch.dir + "/base");
  table keep = db->create_table("keep");
  table doomed = db->create_table("doomed");
  session s = db->open_session();
  std::string value(1000, 'v');
  for (int batch = 0; batch < 40; ++batch) { // ~3 000 pages, many written and registered
    s.begin();
    for (int i = 0; i < 100; ++i)
      s.put(doomed, key_of(batch * 100 + i), value);
    s.commit();
    if (batch == 20)
      db->checkpoint();
  }
  s.begin();
  s.put(keep, "k", "v");
  s.commit();
  std::set<std::string> with_table = files_in(scratch.dir + "/base");
  REQUIRE(with_table.size() > before.size());
  db->drop_table("doomed");
  std::set<std::string> after = files_in(scratch.dir + "/base");
  CHECK(after.size() < with_table.size());
  for (const std::string& name : after)
    CHECK(with_table.count(name) == 1);
  db->checkpoint(); // the dropped files' sync requests are forgotten or find nothing
  s.begin();
  s.put(keep, "k2", "v2"); // the engine goes on
  s.commit();
  db->close();
  CHECK(files_in(scratch.dir + "/base") == after);
  CHECK(database::check_files(scratch.dir).failures == 0);
}

TEST_CASE("tables: a table dropped before a power loss stays dropped, its files removed") {
  test::scratch_directory scratch("tidemark-tables-api");
  open_options faulty = create_with_faults(scratch.dir, small);
  std::set<std::string> with_keep;
  {
    auto db = database::open(scratch.dir, faulty);
    table keep = db->create_table("keep");
    table doomed = db->create_table("doomed");
    session s = db->open_session();
    s.begin();
    s.put(keep, "k", "v");
    s.commit();
    db->checkpoint();
    with_keep = files_in(scratch.dir + "/base");
    for (int batch = 0; batch < 10; ++batch) { // WAL that redo replays into doomed's files
      s.begin();
      for (int i = 0; i < 50; ++i)
        s.put(doomed, key_of(batch * 50 + i), std::string(500, 'd'));
      s.commit();
    }
    db->drop_table("doomed");
    db->simulate_power_loss();
  }
  auto db = reopen(scratch.dir);
  CHECK(db->recovery().needed);
  std::vector<table_info> listed = db->tables();
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].name == "keep");
  CHECK_THROWS_AS(db->open_table("doomed"), usage_error);
  for (const std::string& name : files_in(scratch.dir + "/base")) // redo's copies removed
    CHECK(with_keep.count(name) == 1);
  session s = db->open_session();
  CHECK(s.get(db->open_table("keep"), "k") == std::optional<std::string>("v"));
}

TEST_CASE("tables: sessions using a table while it is dropped get usage_error, never more") {
  test::scratch_directory scratch("tidemark-tables-api");
  auto db = create_and_open(scratch.dir);
  table other = db->create_table("other");
  for (int round = 0; round < 5; ++round) {
    table t = db->create_table("t");
    std::promise<void> committed; // set by the first commit: the drop races with sessions
    std::once_flag first;
    std::vector<std::thread> workers;
    std::atomic<int> refused{0};
    for (int w = 0; w < 3; ++w)
      workers.emplace_back([&, w] {
        session s = db->open_session();
        for (int i = 0;; ++i) {
          try {
            s.begin();
            s.put(t, key_of(w * 100000 + i), std::string(300, 'x'));
            (void)s.get(t, key_of(i));
            table_cursor c = s.cursor(t);
            c.next();
            s.commit();
            std::call_once(first, [&] { committed.set_value(); });
          } catch (const conflict_error&) {
            continue; // another worker changed a key this one read: nothing applied
          } catch (const usage_error& e) {
            CHECK(std::string(e.what()).find("'t' was dropped") != std::string::npos);
            if (s.in_transaction())
              s.rollback();
            ++refused;
            return;
          }
        }
      });
    committed.get_future().wait();
    db->drop_table("t");
    for (std::thread& worker : workers)
      worker.join();
    CHECK(refused == 3);
    session s = db->open_session();
    s.begin();
    s.put(other, key_of(round), "the engine goes on");
    s.commit();
  }
}

TEST_CASE("tables: one transaction may change a quarter of the pool's pages") {
  test::scratch_directory scratch("tidemark-tables-api");
  // 10 240 buffers of 8 KiB: a commit may hold 2 560 pages. Changed after a checkpoint,
  // each carries a full-page image: 20 MB in one record, more than the 16 MB that used to
  // be the WAL buffer's default (wal_buffers=auto sizes it for this).
  auto db = create_and_open(scratch.dir, {"log_checkpoints=off", "shared_buffers=80MB"});
  REQUIRE(db->max_commit_pages() == 2560);
  table t = db->create_table("t");
  session s = db->open_session();
  const std::string value(3000, 'v'); // two to a leaf
  const int rows = 5200;
  for (int first = 0; first < rows; first += 500) {
    s.begin();
    for (int i = first; i < std::min(rows, first + 500); ++i)
      s.put(t, key_of(i), value);
    s.commit();
  }
  db->checkpoint();
  s.begin();
  for (int i = 0; i < 2 * 2400; i += 2) // about one key per leaf: 2 400 leaves
    s.put(t, key_of(i), std::string(3000, 'w'));
  s.commit();
  CHECK(s.get(t, key_of(4798)) == std::optional<std::string>(std::string(3000, 'w')));
  s.begin();
  for (int i = 0; i < rows; i += 2) // 2 600 leaves: more than the pool allows
    s.put(t, key_of(i), std::string(3000, 'x'));
  CHECK_THROWS_WITH_AS(s.commit(), doctest::Contains("a quarter of the buffer pool"), usage_error);
  CHECK(s.get(t, key_of(0)) == std::optional<std::string>(std::string(3000, 'w')));
  CHECK(db->setting("wal_buffers") == "auto");
}

TEST_CASE("tables: a bulk load fills an empty table in key order, durable at finish") {
  test::scratch_directory scratch("tidemark-tables-api");
  // No checkpoint during the load, so that recovery replays all of its records.
  std::vector<std::string> settings = small;
  settings.insert(settings.end(), {"checkpoint_timeout=1h", "max_wal_size=1GB"});
  open_options faulty = create_with_faults(scratch.dir, settings);
  std::uint64_t pages = 0;
  {
    auto db = database::open(scratch.dir, faulty);
    table t = db->create_table("loaded");
    session s = db->open_session();
    table_loader loader = s.load(t);
    for (int i = 0; i < 20000; ++i)
      loader.add(key_of(i), std::string(i % 97 == 0 ? 5000 : 40, char('a' + i % 26)));
    CHECK_THROWS_WITH_AS(loader.add(key_of(5), "x"), doctest::Contains("increasing order"),
                         usage_error);
    // The session is free between the loader's calls, but a load is not part of its
    // transactions.
    s.begin();
    CHECK_THROWS_WITH_AS(loader.add(key_of(20001), "x"), doctest::Contains("inside a transaction"),
                         usage_error);
    s.rollback();
    CHECK(loader.finish() == 20000);
    CHECK_THROWS_WITH_AS(loader.add(key_of(30000), "x"), doctest::Contains("the load is over"),
                         usage_error);
    CHECK_THROWS_WITH_AS(s.load(t), doctest::Contains("is not empty"), usage_error);
    for (const table_info& info : db->tables())
      if (info.name == "loaded")
        pages = info.pages;
    db->simulate_power_loss(); // everything finish() returned for is durable
  }
  {
    auto db = reopen(scratch.dir);
    // Pages filled left to right, a record per leaf (splits of inner nodes and the 206
    // values on overflow chains ride in those records or their own commits): the load
    // logged fewer records than it has pages.
    MESSAGE("recovery replayed " << db->recovery().records << " records for a load of " << pages
                                 << " pages");
    CHECK(db->recovery().records < pages);
    session s = db->open_session();
    std::map<std::string, std::string> all = contents(s, db->open_table("loaded"));
    REQUIRE(all.size() == 20000);
    CHECK(all.begin()->first == key_of(0));
    CHECK(all[key_of(97)].size() == 5000);
    CHECK(all[key_of(98)] == std::string(40, char('a' + 98 % 26)));
    db->close();
    CHECK(database::check_files(scratch.dir).failures == 0);
  }
  // A table dropped during its load: the batch in progress is refused, nothing more lands.
  {
    auto db = database::open(scratch.dir, faulty);
    table t = db->create_table("dropped");
    session s = db->open_session();
    table_loader loader = s.load(t);
    for (int i = 0; i < 1000; ++i)
      loader.add(key_of(i), std::string(60, 'd'));
    db->drop_table("dropped");
    CHECK_THROWS_WITH_AS(loader.add(key_of(2000), "x"), doctest::Contains("was dropped"),
                         usage_error);
    CHECK_THROWS_WITH_AS(loader.finish(), doctest::Contains("was dropped"), usage_error);
    s.begin(); // the session is free again, and the engine goes on
    s.commit();
    db->close();
  }
  // A power loss in the middle of a load leaves a prefix of it, nothing else.
  {
    auto db = database::open(scratch.dir, faulty);
    table t = db->create_table("half");
    session s = db->open_session();
    table_loader loader = s.load(t);
    for (int i = 0; i < 30000; ++i)
      loader.add(key_of(i), std::string(60, 'h'));
    db->simulate_power_loss();
  }
  auto db = reopen(scratch.dir);
  session s = db->open_session();
  std::map<std::string, std::string> half = contents(s, db->open_table("half"));
  int expected = 0;
  for (const auto& [key, value] : half)
    CHECK(key == key_of(expected++));
  MESSAGE("a load cut by a power loss kept " << half.size() << " of 30000 entries");
}

TEST_CASE("tables: a bulk load beside sessions writing into the same table") {
  // The loader adds the even keys; another session commits the odd ones among them at its
  // own pace (landing in leaves the load built, or in the one it builds next: then that
  // leaf is committed the usual way) and, once half the load is in, keys above all of it:
  // the load waits for the first, so that every later leaf of it is committed the usual
  // way. A third session scans the table in transactions. Everything any of them
  // committed is there, in order, and the trees check.
  test::scratch_directory scratch("tidemark-tables-api");
  auto db = create_and_open(scratch.dir);
  table t = db->create_table("shared");
  constexpr int count = 40000;
  session s = db->open_session();
  table_loader loader = s.load(t); // while the table is empty
  std::promise<void> half_loaded, high_written;
  std::atomic<bool> done{false};
  std::set<std::string> written;
  std::thread writer([&, half = half_loaded.get_future()] {
    session w = db->open_session();
    int high = 0;
    for (int i = 1; i < count; i += 20) {
      if (i >= count / 2 && high == 0)
        half.wait();
      w.begin();
      for (int k = i; k < i + 20 && k < count; k += 2) {
        w.put(t, key_of(k), "odd");
        written.insert(key_of(k));
      }
      if (i >= count / 2) {
        w.put(t, "z" + std::to_string(high), "high");
        written.insert("z" + std::to_string(high++));
      }
      w.commit();
      if (high == 1)
        high_written.set_value();
    }
  });
  std::uint64_t scans = 0, out_of_order = 0;
  std::thread reader([&] { // stretches of 300 entries: a commit holds their leaves at once
    session r = db->open_session();
    for (int start = 0; !done.load(); start = (start + 7919) % count) {
      r.begin();
      std::string last;
      bool first = true;
      int seen = 0;
      for (table_cursor c = r.cursor(t, {key_of(start), true, std::nullopt, true});
           seen < 300 && c.next(); last = c.key(), first = false, ++seen)
        if (!first && !(last < c.key()))
          ++out_of_order;
      try {
        r.commit();
        ++scans;
      } catch (const conflict_error&) {
      }
    }
  });
  for (int i = 0; i < count; i += 2) {
    loader.add(key_of(i), std::string(40, 'e'));
    if (i == count / 2) {
      half_loaded.set_value();
      high_written.get_future().wait();
    }
  }
  CHECK(loader.finish() == count / 2);
  writer.join();
  done.store(true);
  reader.join();
  std::map<std::string, std::string> all = contents(s, t);
  CHECK(out_of_order == 0);
  CHECK(all.size() == count / 2 + written.size());
  for (int i = 0; i < count; i += 2)
    REQUIRE(all[key_of(i)] == std::string(40, 'e'));
  for (const std::string& key : written)
    REQUIRE(all.count(key) == 1);
  MESSAGE(scans << " scans committed beside the load; " << written.size() << " keys written");
  db->close();
  file_check_report check = database::check_files(scratch.dir);
  CHECK(check.failures == 0);
  CHECK(check.tables_checked == 2);
}

TEST_CASE("tables: a table of constant size keeps its size under replacements and erases") {
  // 2 000 rows, one in ten with a value on overflow pages; then 10 x 2 000 changes, each a
  // replacement (a new size, inline or on a chain) or an erase with an insert of a new key,
  // so the row count stays put. Erased bytes in leaves are reused when a leaf is compacted,
  // freed chain pages go to the free list and come back: the table's files stay near the
  // size the rows need.
  test::scratch_directory scratch("tidemark-tables-api");
  auto db = create_and_open(scratch.dir);
  table t = db->create_table("churn");
  session s = db->open_session();
  std::mt19937_64 random(11);
  auto random_value = [&] {
    return std::string(random() % 10 == 0 ? 5000 + random() % 3000 : 20 + random() % 200,
                       char('a' + random() % 26));
  };
  auto random_key = [&] { return "key-" + std::to_string(random() % 1000000000); };
  std::map<std::string, std::string> model;
  auto table_pages = [&] { return pages_of(*db, "churn"); };
  constexpr int rows = 2000, changes_per_commit = 20;
  while (model.size() < rows) {
    s.begin();
    for (int i = 0; i < changes_per_commit && model.size() < rows; ++i) {
      std::string key = random_key(), value = random_value();
      s.put(t, key, value);
      model[key] = value;
    }
    s.commit();
  }
  std::uint64_t filled = table_pages();
  std::uint64_t most = filled;
  for (int change = 0; change < 10 * rows;) {
    s.begin();
    for (int i = 0; i < changes_per_commit; ++i, ++change) {
      auto victim = model.begin();
      std::advance(victim, static_cast<long>(random() % model.size()));
      std::string key = victim->first;
      if (random() % 2 == 0) {
        s.erase(t, key);
        model.erase(key);
        key = random_key();
      }
      std::string value = random_value();
      s.put(t, key, value);
      model[key] = value;
    }
    s.commit();
    most = std::max(most, table_pages());
  }
  MESSAGE("pages: " << filled << " after the first " << rows << " rows, at most " << most
                    << " during " << 10 * rows << " changes, " << table_pages() << " at the end");
  CHECK(contents(s, t) == model);
  CHECK(most <= filled + filled / 2);
  db->close();
  CHECK(database::check_files(scratch.dir).failures == 0);
}

TEST_CASE("tables: a queue keeps its size: leaves its erases empty are unlinked and reused") {
  // 2 000 rows keyed in increasing order; 10 x 2 000 times a new row at the end and the
  // oldest erased, twenty to a transaction. Every leaf empties in turn: the commit that
  // empties it unlinks it, and the next split takes its block again.
  test::scratch_directory scratch("tidemark-tables-api");
  auto db = create_and_open(scratch.dir);
  table t = db->create_table("queue");
  session s = db->open_session();
  auto table_pages = [&] { return pages_of(*db, "queue"); };
  constexpr int rows = 2000;
  std::map<std::string, std::string> model;
  std::uint64_t filled = 0;
  for (int next = 0; next < 11 * rows;) {
    queue_commit(s, t, rows, next, model);
    if (next == 2 * rows)
      filled = table_pages();
  }
  MESSAGE("pages: " << filled << " with " << rows << " rows queued, " << table_pages() << " after "
                    << 10 * rows << " more in and out");
  CHECK(table_pages() <= filled + filled / 10);
  CHECK(contents(s, t) == model);
  std::vector<std::string> backward;
  table_cursor c = s.cursor(t);
  while (c.prev())
    backward.push_back(c.key());
  CHECK(backward.size() == model.size());
  CHECK(std::is_sorted(backward.rbegin(), backward.rend()));
  db->close();
  CHECK(database::check_files(scratch.dir).failures == 0);
}

TEST_CASE("tables: unlinked leaves and their reused blocks survive power losses, torn or lost") {
  // A queue churned for a while, then the power lost (unsynced writes lost or torn), six
  // times over, both protections: each recovery replays the unlinking of leaves and the
  // reuse of their blocks, and the table holds exactly the acknowledged commits.
  for (const char* protection : {"full_page_writes", "doublewrite"}) {
    CAPTURE(protection);
    test::scratch_directory scratch("tidemark-tables-api");
    std::vector<std::string> settings = small;
    settings.push_back(std::string("torn_page_protection=") + protection);
    settings.push_back("checkpoint_timeout=1s");
    open_options faulty = create_with_faults(scratch.dir, settings);
    faulty.faults->mode = crash_mode::torn;
    std::map<std::string, std::string> model;
    std::mt19937_64 random(5);
    int next = 0;
    constexpr int rows = 1000;
    for (int round = 0; round < 6; ++round) {
      faulty.faults->seed = random();
      auto db = database::open(scratch.dir, faulty);
      table t = round == 0 ? db->create_table("queue") : db->open_table("queue");
      session s = db->open_session();
      REQUIRE(contents(s, t) == model);
      for (int commits = 20 + int(random() % 100); commits > 0; --commits)
        queue_commit(s, t, rows, next, model);
      db->simulate_power_loss();
    }
    open_options open;
    open.settings = settings;
    auto db = database::open(scratch.dir, open);
    session s = db->open_session();
    CHECK(contents(s, db->open_table("queue")) == model);
    db->close();
    CHECK(database::check_files(scratch.dir).failures == 0);
  }
}
