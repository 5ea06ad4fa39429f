// Transactions over keyed tables (access/table_transaction.hpp) in a memory page store:
// what a transaction sees, what a conflict leaves, transfers between accounts on four
// threads keeping every total (serializability), a transaction that needs many splits, large
// commits racing for the same leaves (the commit gate), the
// leaf limit refusing with nothing applied, and the commit records replayed as redo would.
#include "access/table_transaction.hpp"
#include "memory_page_store.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace tidemark::access;
using tidemark::access::testing::memory_page_store;

namespace {

constexpr rel_id accounts = 100;
constexpr rel_id history = 101;

std::map<std::string, std::string> contents(page_store& store, rel_id table) {
  tree t(store, table);
  std::map<std::string, std::string> all;
  for (auto entry = t.first_from("", true); entry; entry = t.first_from(entry->first, false))
    all.insert(*entry);
  return all;
}

// Redo of the records `store` kept (splits and commits) rebuilds the tables byte for byte.
void check_redo_rebuilds(memory_page_store& store, std::initializer_list<rel_id> tables) {
  memory_page_store replayed(store.page_size());
  store.replay_into(replayed);
  for (rel_id table : tables)
    for (block_id block = 0; block < store.blocks(table); ++block)
      REQUIRE(replayed.bytes_of({table, block}) == store.bytes_of({table, block}));
}

std::string account_key(int id) {
  return "account/" + std::string(id % 7 * 10, '-') + std::to_string(id);
}

// A balance, padded to a length that changes with it, so replacements resize items.
std::string balance_value(long long balance) {
  std::string text = std::to_string(balance);
  return text + std::string(static_cast<std::size_t>(balance % 13 + 13) % 13 * 9, '.');
}
long long balance_of(const std::string& value) { return std::stoll(value); }

} // namespace

TEST_CASE("a table transaction sees its own changes and applies them only at commit") {
  memory_page_store store(4096);
  tree::create(store, accounts);
  table_transaction setup(store);
  setup.begin(1);
  setup.put(accounts, "a", "1");
  setup.put(accounts, "b", "2");
  CHECK(setup.commit() > 0);

  table_transaction txn(store);
  txn.begin(2);
  CHECK(txn.get(accounts, "a") == std::optional<std::string>("1"));
  txn.put(accounts, "a", "10");
  CHECK(txn.get(accounts, "a") == std::optional<std::string>("10"));
  CHECK_FALSE(txn.insert(accounts, "b", "x")); // present: nothing changed
  CHECK(txn.insert(accounts, "c", "3"));
  CHECK(txn.erase(accounts, "b"));
  CHECK_FALSE(txn.erase(accounts, "zz"));
  CHECK_FALSE(txn.get(accounts, "b").has_value());
  // Nothing is visible outside before the commit.
  CHECK(contents(store, accounts) == std::map<std::string, std::string>{{"a", "1"}, {"b", "2"}});
  txn.commit();
  CHECK(contents(store, accounts) == std::map<std::string, std::string>{{"a", "10"}, {"c", "3"}});

  txn.begin(3);
  txn.put(accounts, "a", "lost");
  txn.abort();
  CHECK_THROWS_AS(txn.put(accounts, "a", "x"), tidemark::usage_error);
  CHECK(contents(store, accounts).at("a") == "10");
}

TEST_CASE("a transaction whose read changed before its commit conflicts and applies nothing") {
  memory_page_store store(4096);
  tree::create(store, accounts);
  table_transaction setup(store);
  setup.begin(1);
  setup.put(accounts, "x", "1");
  setup.commit();

  table_transaction reader(store), writer(store);
  reader.begin(2);
  REQUIRE(reader.get(accounts, "x") == std::optional<std::string>("1"));
  CHECK_FALSE(reader.get(accounts, "missing").has_value());
  reader.put(accounts, "y", "from the reader");
  SUBCASE("a value read was changed") {
    writer.begin(3);
    writer.put(accounts, "x", "2");
    writer.commit();
  }
  SUBCASE("a key read as absent appeared (a phantom of one key)") {
    writer.begin(3);
    writer.put(accounts, "missing", "here now");
    writer.commit();
  }
  CHECK_THROWS_WITH_AS(reader.commit(), doctest::Contains("changed after it was read"),
                       tidemark::conflict_error);
  CHECK(contents(store, accounts).count("y") == 0);
  CHECK_FALSE(reader.active());
}

TEST_CASE("transfers and whole-table scans on four threads: every committed scan saw the total") {
  memory_page_store store(4096, true);
  tree::create(store, accounts);
  tree::create(store, history);
  constexpr int account_count = 600;
  {
    table_transaction load(store);
    load.begin(1);
    for (int id = 0; id < account_count; ++id)
      load.put(accounts, account_key(id), balance_value(1000));
    load.commit();
  }
  std::atomic<std::uint64_t> next_xid{2};
  std::atomic<int> conflicts{0}, committed{0}, scans{0}, wrong_totals{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 random(t);
      table_transaction txn(store);
      for (int n = 0; n < 1500; ++n) {
        if (n % 10 == 0) { // a scan of every balance: committed, it saw the one total
          for (;;) {
            txn.begin(next_xid++);
            long long sum = 0;
            read_ahead ahead; // every other scan reads a leaf at a time, as a cursor does
            read_ahead* cursor = n % 20 == 0 ? &ahead : nullptr;
            for (auto entry = txn.next_entry(accounts, "", true, cursor); entry;
                 entry = txn.next_entry(accounts, entry->key, false, cursor))
              sum += balance_of(entry->value);
            try {
              txn.commit();
              if (sum != 1000LL * account_count)
                wrong_totals++;
              ++scans;
              break;
            } catch (const tidemark::conflict_error&) {
              ++conflicts;
            }
          }
        }
        int from = static_cast<int>(random() % account_count);
        int to = static_cast<int>(random() % account_count);
        long long amount = static_cast<long long>(random() % 50);
        for (;;) {
          txn.begin(next_xid++);
          long long a = balance_of(*txn.get(accounts, account_key(from)));
          txn.put(accounts, account_key(from), balance_value(a - amount));
          long long b = balance_of(*txn.get(accounts, account_key(to)));
          txn.put(accounts, account_key(to), balance_value(b + amount));
          std::string entry = "t" + std::to_string(t) + "/" + std::to_string(n);
          txn.put(history, entry, std::to_string(from) + ">" + std::to_string(to));
          try {
            txn.commit();
            ++committed;
            break;
          } catch (const tidemark::conflict_error&) {
            ++conflicts;
          }
        }
      }
    });
  for (std::thread& thread : threads)
    thread.join();
  std::map<std::string, std::string> all = contents(store, accounts);
  REQUIRE(all.size() == account_count);
  long long total = 0;
  for (const auto& entry : all)
    total += balance_of(entry.second);
  CHECK(total == 1000LL * account_count);
  CHECK(contents(store, history).size() == 6000);
  CHECK(committed == 6000);
  CHECK(scans == 600);
  CHECK(wrong_totals == 0);
  MESSAGE("conflicts retried: " << conflicts.load());
  CHECK(check_tree(store, accounts) == "");
  CHECK(check_tree(store, history) == "");
  check_redo_rebuilds(store, {accounts, history});
}

TEST_CASE("one transaction inserting thousands of keys into an empty table splits as it needs") {
  memory_page_store store(4096);
  tree::create(store, accounts);
  table_transaction txn(store);
  txn.begin(1);
  std::map<std::string, std::string> expected;
  std::mt19937_64 random(5);
  for (int i = 0; i < 5000; ++i) {
    std::string key = "k" + std::to_string(random() % 1000000);
    std::string value(random() % 40, 'v');
    txn.put(accounts, key, value);
    expected[key] = value;
  }
  txn.commit();
  CHECK(check_tree(store, accounts) == "");
  CHECK(contents(store, accounts) == expected);
}

TEST_CASE("large commits racing on four threads for the same leaves each end within a few "
          "attempts, the rest of them run alone") {
  memory_page_store store(4096);
  tree::create(store, accounts);
  constexpr int threads = 4, commits = 12, keys = 300;
  std::vector<std::map<std::string, std::string>> committed(threads);
  std::vector<std::size_t> most_attempts(threads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::mt19937_64 random(static_cast<unsigned>(t) + 11);
      table_transaction txn(store);
      for (int c = 0; c < commits; ++c) {
        txn.begin(static_cast<tidemark::storage::xid_t>(1 + t * commits + c));
        std::map<std::string, std::string> batch;
        for (int k = 0; k < keys; ++k) { // spread over the whole tree, as a hashed load is
          std::string key = "k" + std::to_string(random() % 1000000) + "/" + std::to_string(t);
          batch[key] = std::string(150 + random() % 100, char('a' + t));
          txn.put(accounts, key, batch[key]);
        }
        txn.commit();
        for (const auto& [key, value] : batch) // a later commit's value replaces an earlier one
          committed[t][key] = value;
        most_attempts[t] = std::max(most_attempts[t], txn.last_commit_attempts());
      }
    });
  for (auto& w : workers)
    w.join();
  // Alone, a commit fails at most twice more: once to split the leaves too full for it,
  // once to find the keys those splits moved.
  for (int t = 0; t < threads; ++t)
    CHECK(most_attempts[t] <= commit_gate::alone_after + 3);
  std::map<std::string, std::string> expected;
  for (const auto& part : committed)
    expected.insert(part.begin(), part.end());
  CHECK(check_tree(store, accounts) == "");
  CHECK(contents(store, accounts) == expected);
  MESSAGE("commits run alone: " << store.commit_gate().closed_count() << " of "
                                << threads * commits);
}

// A key in the order of its id.
std::string ordered_key(int id) {
  char key[16];
  std::snprintf(key, sizeof key, "k%04d", id);
  return key;
}

// 80 keys, 0 to 790 by tens, with 150-byte values: ascending, so leaves packed nine tenths full.
void load_ordered(memory_page_store& store) {
  tree::create(store, accounts);
  table_transaction setup(store);
  setup.begin(1);
  for (int id = 0; id < 800; id += 10)
    setup.put(accounts, ordered_key(id), std::string(150, 's'));
  setup.commit();
}

// A table of 80 keys (load_ordered) and a transaction changing two leaves' keys, 405's and
// 5's (in the first leaf, which it latches first), while other commits interfere.
struct two_leaf_commit {
  memory_page_store store{4096, true};
  table_transaction txn{store}, filler{store};
  std::string key = ordered_key(405);
  int fillers = 0; // commits of one key each, made by `interfere`

  two_leaf_commit() {
    load_ordered(store);
    txn.begin(2);
    txn.put(accounts, key, std::string(150, 't'));
    txn.put(accounts, ordered_key(5), std::string(150, 't'));
  }
  // Runs `interfere` right before txn's first exclusive latch, then commits txn: it ends in
  // one attempt, the tree whole, with its writes and the fillers', and redo rebuilds it.
  void commit_after(const std::function<void()>& interfere) {
    store.before_latch = [&](page_id id, latch_mode mode) {
      if (fillers == 0 && mode == latch_mode::exclusive && id.block != meta_block)
        interfere();
    };
    txn.commit();
    store.before_latch = nullptr;
    CHECK(fillers > 0);
    CHECK(txn.last_commit_attempts() == 1);
    CHECK(check_tree(store, accounts) == "");
    auto after = contents(store, accounts);
    CHECK(after.at(key) == std::string(150, 't'));
    CHECK(after.at(ordered_key(5)) == std::string(150, 't'));
    CHECK(after.size() == 82 + static_cast<std::size_t>(fillers));
    check_redo_rebuilds(store, {accounts}); // the split under the latches, then the commit
  }
  void fill(const std::string& filler_key, std::size_t value_size) {
    filler.begin(static_cast<tidemark::storage::xid_t>(3 + fillers++));
    filler.put(accounts, filler_key, std::string(value_size, 'f'));
    filler.commit();
  }
};

TEST_CASE("a leaf filled between a commit's look and its latches is split under them: the "
          "commit ends in one attempt") {
  two_leaf_commit t;
  // Its two leaves and a page read at a time: the leaf the split adds comes from room
  // free at once and does not count against the limit.
  t.store.set_max_latched_pages(3);
  std::size_t need = item_footprint(t.key.size(), 150);
  t.commit_after([&] { // the leaf txn will change, filled to below its need
    page_id leaf = tree(t.store, accounts).latch_leaf(t.key, latch_mode::shared).id();
    for (;;) {
      node_view node(t.store.bytes_of(leaf).data(), 4096);
      if (!node.fits(need))
        break;
      std::string key = t.key + "/" + std::to_string(t.fillers);
      std::size_t room = std::min(node.usable_free(), max_item_size(4096));
      t.fill(key, room - item_footprint(key.size(), 0) - 4);
    }
  });
}

TEST_CASE("a key a split moved right between a commit's look and its latches is followed "
          "there: the commit ends in one attempt") {
  two_leaf_commit t;
  tree lookup(t.store, accounts);
  page_id found = lookup.latch_leaf(t.key, latch_mode::shared).id();
  t.commit_after([&] { // keys just below txn's until a split has moved it to a new leaf
    while (lookup.latch_leaf(t.key, latch_mode::shared).id() == found)
      t.fill(ordered_key(400) + "/" + std::to_string(t.fillers), 300);
  });
}

TEST_CASE("the commit gate: a closer waits for the attempt in progress, and attempts wait for "
          "it") {
  commit_gate gate;
  std::mutex mutex;
  std::vector<std::string> events;
  auto note = [&](const char* what) {
    std::lock_guard lock(mutex);
    events.push_back(what);
  };
  auto first = std::make_unique<commit_gate::attempt_pass>(gate);
  std::promise<void> closing;
  std::thread closer([&] {
    std::thread later;
    closing.set_value();
    {
      commit_gate::alone alone(gate);
      note("closed");
      later = std::thread([&] {
        commit_gate::attempt_pass pass(gate);
        note("later attempt");
      });
      note("opening");
    }
    later.join();
  });
  closing.get_future().wait();
  note("first attempt ends");
  first.reset();
  closer.join();
  CHECK(events ==
        std::vector<std::string>{"first attempt ends", "closed", "opening", "later attempt"});
  CHECK(gate.closed_count() == 1);
}

TEST_CASE("a transaction larger than one WAL record is refused with nothing applied") {
  memory_page_store store(4096);
  store.set_max_record_bytes(256 * 1024); // 64 pages of 4 KiB
  tree::create(store, accounts);
  table_transaction txn(store);
  txn.begin(1);
  std::size_t per_leaf = (4096 - slots_offset) / item_footprint(12, 200);
  for (std::size_t i = 0; i < per_leaf * 80; ++i) {
    char key[16];
    std::snprintf(key, sizeof key, "key%09zu", i);
    txn.put(accounts, key, std::string(200, 'v'));
  }
  CHECK_THROWS_WITH_AS(txn.commit(), doctest::Contains("more than one WAL record holds"),
                       tidemark::usage_error);
  CHECK(contents(store, accounts).empty());
  CHECK(check_tree(store, accounts) == ""); // the splits made for it stay, empty
  // A value whose chain alone is too long for a record is refused the same way.
  txn.begin(2);
  txn.put(accounts, "big", std::string(400 * 1024, 'b'));
  CHECK_THROWS_AS(txn.commit(), tidemark::usage_error);
  CHECK(contents(store, accounts).empty());
}

TEST_CASE("a transaction latching more pages than the store allows is refused, nothing applied") {
  memory_page_store store(4096);
  store.set_max_latched_pages(40);
  tree::create(store, accounts);
  table_transaction txn(store);
  txn.begin(1);
  txn.put(accounts, "small", "1");
  txn.put(accounts, "big", std::string(60 * 4096, 'b')); // a chain of 61 pages
  CHECK_THROWS_WITH_AS(txn.commit(), doctest::Contains("more than the 40 a commit may hold"),
                       tidemark::usage_error);
  CHECK(contents(store, accounts).empty());
  txn.begin(2);
  txn.put(accounts, "big", std::string(30 * 4096, 'b'));
  CHECK(txn.commit() > 0);
  CHECK(contents(store, accounts).size() == 1);
}

namespace {
std::string i64_value(std::int64_t v, std::size_t length = 24) {
  std::string value(length, '.');
  std::memcpy(value.data() + 8, &v, sizeof v);
  return value;
}
std::int64_t i64_at(const std::string& value) {
  std::int64_t v;
  std::memcpy(&v, value.data() + 8, sizeof v);
  return v;
}
} // namespace

TEST_CASE("add_i64 on a table adds at commit, conflicts with nothing unless read back") {
  memory_page_store store(4096, true);
  tree::create(store, accounts);
  table_transaction setup(store);
  setup.begin(1);
  setup.put(accounts, "a", i64_value(100));
  setup.put(accounts, "big", std::string(3000, 'x')); // on overflow pages
  setup.commit();

  // Two transactions add to the same key without reading it: both commit, both count.
  table_transaction one(store), two(store);
  one.begin(2);
  two.begin(3);
  one.add_i64(accounts, "a", 8, 5);
  two.add_i64(accounts, "a", 8, -7);
  two.add_i64(accounts, "a", 8, 1);
  CHECK(i64_at(*two.get(accounts, "a")) == 94); // its own reads see the sum
  one.commit();
  CHECK_THROWS_AS(two.commit(), tidemark::conflict_error); // it read "a" back
  two.begin(4);
  two.add_i64(accounts, "a", 8, -7);
  two.commit();
  table_transaction reader(store);
  CHECK(i64_at(*reader.get(accounts, "a")) == 98);

  // A delta on a value the transaction put goes into that value.
  one.begin(5);
  one.put(accounts, "b", i64_value(1));
  one.add_i64(accounts, "b", 8, 41);
  CHECK(i64_at(*one.get(accounts, "b")) == 42);
  one.commit();
  CHECK(i64_at(*reader.get(accounts, "b")) == 42);

  // Refused: at once when the transaction itself erased the key or put too short a value;
  // at commit (nothing applied) when the committed key is absent, too short or on overflow.
  one.begin(6);
  one.erase(accounts, "b");
  CHECK_THROWS_WITH_AS(one.add_i64(accounts, "b", 8, 1), doctest::Contains("was erased"),
                       tidemark::usage_error);
  one.put(accounts, "c", "short");
  CHECK_THROWS_WITH_AS(one.add_i64(accounts, "c", 0, 1), doctest::Contains("outside the 5-byte"),
                       tidemark::usage_error);
  one.abort();
  for (auto [key, offset, why] :
       {std::tuple<const char*, std::uint32_t, const char*>{"missing", 8, "is absent"},
        {"a", 20, "outside of"},
        {"big", 8, "overflow pages"}}) {
    one.begin(7);
    one.put(accounts, "applied-only-with-the-delta", "x");
    one.add_i64(accounts, key, offset, 1);
    CHECK_THROWS_WITH_AS(one.commit(), doctest::Contains(why), tidemark::usage_error);
    CHECK_FALSE(reader.get(accounts, "applied-only-with-the-delta"));
  }
  CHECK(i64_at(*reader.get(accounts, "a")) == 98);
  // Replayed as redo would, the records give the same table.
  memory_page_store replayed(4096);
  store.replay_into(replayed);
  CHECK(contents(replayed, accounts) == contents(store, accounts));
}

TEST_CASE("ordered reads see the committed entries with the transaction's own changes laid over") {
  memory_page_store store(4096);
  tree::create(store, accounts);
  table_transaction txn(store);
  txn.begin(1);
  for (const char* key : {"a", "c", "e"})
    txn.put(accounts, key, std::string("old ") + key);
  txn.commit();
  txn.begin(2);
  txn.put(accounts, "b", "new b");
  txn.put(accounts, "c", "new c");
  CHECK(txn.erase(accounts, "e"));
  std::vector<table_entry> forward, backward;
  for (auto entry = txn.next_entry(accounts, "", true); entry;
       entry = txn.next_entry(accounts, entry->key, false))
    forward.push_back(*entry);
  for (auto entry = txn.previous_entry(accounts, nullptr, false); entry;
       entry = txn.previous_entry(accounts, &entry->key, false))
    backward.push_back(*entry);
  std::vector<table_entry> expected{{"a", "old a"}, {"b", "new b"}, {"c", "new c"}};
  CHECK(forward == expected);
  std::reverse(expected.begin(), expected.end());
  CHECK(backward == expected);
  CHECK(txn.next_entry(accounts, "c", false) == std::nullopt);
  std::string d = "d";
  CHECK(txn.previous_entry(accounts, &d, true) == std::optional<table_entry>({"c", "new c"}));
  txn.commit();
}

TEST_CASE("a read-ahead answers steps inside the stretch it read as it was read, and commit "
          "validates them") {
  memory_page_store store(4096);
  tree::create(store, accounts);
  table_transaction writer(store);
  writer.begin(1);
  for (int i = 0; i < 200; ++i)
    writer.put(accounts, "k" + std::to_string(1000 + i), std::string(100, 'v'));
  writer.commit();
  auto change = [&](tidemark::storage::xid_t xid, const std::vector<std::string>& keys) {
    writer.begin(xid);
    for (const std::string& key : keys)
      writer.put(accounts, key, "changed");
    writer.commit();
  };

  // Outside a transaction: the next step inside the first leaf shows the entry as the leaf
  // was read; a leaf read after the change shows it changed. Every key comes, in order.
  table_transaction reader(store);
  read_ahead ahead;
  auto first = reader.next_entry(accounts, "", true, &ahead);
  REQUIRE(first);
  CHECK(first->key == "k1000");
  change(2, {"k1001", "k1199"});
  std::vector<table_entry> seen{*first};
  for (auto entry = reader.next_entry(accounts, first->key, false, &ahead); entry;
       entry = reader.next_entry(accounts, entry->key, false, &ahead))
    seen.push_back(*entry);
  REQUIRE(seen.size() == 200);
  for (int i = 0; i < 200; ++i)
    CHECK(seen[i].key == "k" + std::to_string(1000 + i));
  CHECK(seen[1].value == std::string(100, 'v'));
  CHECK(seen[199].value == "changed");
  // A step from before the stretch held reads the leaf again: the value now.
  CHECK(reader.next_entry(accounts, "k1000", false, &ahead)->value == "changed");

  // Inside a transaction: the same step, then commit() finds the change.
  read_ahead in_transaction;
  reader.begin(3);
  REQUIRE(reader.next_entry(accounts, "k1010", true, &in_transaction)->key == "k1010");
  change(4, {"k1011"});
  auto next = reader.next_entry(accounts, "k1010", false, &in_transaction);
  REQUIRE(next);
  CHECK(next->key == "k1011");
  CHECK(next->value == std::string(100, 'v')); // as read, before transaction 4
  CHECK_THROWS_AS(reader.commit(), tidemark::conflict_error);
}

TEST_CASE("a range read conflicts with a key that appears in it, not with changes outside it") {
  memory_page_store store(4096);
  tree::create(store, accounts);
  table_transaction setup(store), scanner(store), other(store);
  setup.begin(1);
  for (char c = 'a'; c <= 'z'; ++c)
    if (c != 'k')
      setup.put(accounts, std::string(1, c), "v");
  setup.commit();
  // The scanner reads from "f" to the first key after "m".
  auto scan = [&] {
    scanner.begin(10);
    int seen = 0;
    for (auto entry = scanner.next_entry(accounts, "f", true); entry && entry->key <= "m";
         entry = scanner.next_entry(accounts, entry->key, false))
      ++seen;
    scanner.put(accounts, "scanned", std::to_string(seen));
  };
  SUBCASE("a phantom inside the range") {
    scan();
    other.begin(11);
    other.put(accounts, "k", "phantom");
    other.commit();
    CHECK_THROWS_WITH_AS(scanner.commit(), doctest::Contains("range of table"),
                         tidemark::conflict_error);
    CHECK(contents(store, accounts).count("scanned") == 0);
  }
  SUBCASE("an erase inside the range") {
    scan();
    other.begin(11);
    other.erase(accounts, "g");
    other.commit();
    CHECK_THROWS_AS(scanner.commit(), tidemark::conflict_error);
  }
  SUBCASE("entries added past a range read to the table's end, which then spans more leaves "
          "than a commit may latch") {
    scanner.begin(10);
    int seen = 0;
    for (auto entry = scanner.next_entry(accounts, "x", true); entry;
         entry = scanner.next_entry(accounts, entry->key, false))
      ++seen;
    CHECK(seen == 3); // x y z
    scanner.put(accounts, "scanned", std::to_string(seen));
    other.begin(11);
    for (int i = 0; i < 3000; ++i)
      other.put(accounts, "zz" + std::to_string(i), std::string(40, 'x'));
    other.commit();
    REQUIRE(store.blocks(accounts) > 20);
    store.set_max_latched_pages(8);
    CHECK_THROWS_WITH_AS(scanner.commit(), doctest::Contains("now number more than"),
                         tidemark::conflict_error);
    CHECK(contents(store, accounts).count("scanned") == 0);
  }
  SUBCASE("changes outside the range, with splits of the leaves around it") {
    scan();
    other.begin(11);
    for (int i = 0; i < 3000; ++i)
      other.put(accounts, "p" + std::to_string(i), std::string(40, 'x'));
    for (int i = 0; i < 3000; ++i)
      other.put(accounts, "b" + std::to_string(i), std::string(40, 'x'));
    other.commit();
    REQUIRE(store.blocks(accounts) > 20);
    scanner.commit();
    CHECK(contents(store, accounts).at("scanned") == "7"); // f g h i j l m
  }
}
