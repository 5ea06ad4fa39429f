// The B-link tree against a std::map model, in a memory page store: a million random
// operations (TIDEMARK_TREE_PROPERTY_OPS; the sanitizer builds run a tenth) with keys and
// values at the limits, empty keys and long shared prefixes;
// ordered reads both ways; replaying the logged changes onto empty pages rebuilds the tree
// byte for byte; check_tree after every phase; and four threads at once.
#include "access/tree.hpp"
#include "memory_page_store.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace tidemark::access;
using tidemark::access::testing::memory_page_store;

namespace {

constexpr rel_id table_rel = 100;

std::string random_key(std::mt19937_64& random, std::size_t space) {
  switch (random() % 10) {
    case 0:
      return "";
    case 1:
      return std::string(max_key_size - random() % 2, static_cast<char>('a' + random() % 3));
    case 2:
    case 3:
      return "user/" + std::string(random() % 200, '0') + std::to_string(random() % space);
    default:
      return "k" + std::to_string(random() % space);
  }
}

std::string random_value(std::mt19937_64& random, std::size_t page_size, std::size_t key_size) {
  std::size_t most = max_item_size(page_size) - item_footprint(key_size, 0);
  std::size_t length = random() % 8 == 0 ? most - random() % 3 : random() % 120;
  std::string value(length, '\0');
  for (char& c : value)
    c = static_cast<char>(random());
  return value;
}

// Every entry in order, forwards with first_from and backwards with last_before.
void expect_scans(tree& t, const std::map<std::string, std::string>& model) {
  std::vector<std::pair<std::string, std::string>> forward, backward;
  for (auto entry = t.first_from("", true); entry; entry = t.first_from(entry->first, false))
    forward.push_back(*entry);
  for (auto entry = t.last_before(nullptr, false); entry;
       entry = t.last_before(&entry->first, false))
    backward.push_back(*entry);
  std::vector<std::pair<std::string, std::string>> expected(model.begin(), model.end());
  REQUIRE(forward == expected);
  std::reverse(expected.begin(), expected.end());
  REQUIRE(backward == expected);
}

} // namespace

TEST_CASE("a tree under random puts, erases and gets (a million) matches a std::map") {
  constexpr int operations = TIDEMARK_TREE_PROPERTY_OPS;
  memory_page_store store(4096);
  tree::create(store, table_rel);
  tree t(store, table_rel);
  std::map<std::string, std::string> model;
  std::mt19937_64 random(42);
  for (int step = 1; step <= operations; ++step) {
    std::size_t space = step < operations / 2 ? 20000 : 2000; // grow, then churn a smaller set
    std::string key = random_key(random, space);
    switch (random() % 4) {
      case 0: {
        auto got = t.get(key);
        auto expected = model.find(key);
        REQUIRE(got.has_value() == (expected != model.end()));
        if (got)
          REQUIRE(*got == expected->second);
        break;
      }
      case 1:
        REQUIRE(t.erase(key) == (model.erase(key) == 1));
        break;
      default: {
        std::string value = random_value(random, store.page_size(), key.size());
        REQUIRE(t.put(key, value) == (model.count(key) == 0));
        model[key] = value;
      }
    }
    if (step % (operations / 4) == 0) {
      CAPTURE(step);
      REQUIRE(check_tree(store, table_rel) == "");
      expect_scans(t, model);
    }
  }
  // Bounds on either side of keys that are there and keys that are not.
  for (int probe = 0; probe < 2000; ++probe) {
    std::string key = random_key(random, 20000);
    auto after = model.upper_bound(key);
    auto at_or_after = model.lower_bound(key);
    auto got = t.first_from(key, false);
    REQUIRE(got.has_value() == (after != model.end()));
    if (got)
      REQUIRE(got->first == after->first);
    got = t.first_from(key, true);
    REQUIRE(got.has_value() == (at_or_after != model.end()));
    if (got)
      REQUIRE(got->first == at_or_after->first);
    got = t.last_before(&key, true);
    auto at_or_before = model.upper_bound(key);
    REQUIRE(got.has_value() == (at_or_before != model.begin()));
    if (got)
      REQUIRE(got->first == std::prev(at_or_before)->first);
  }
}

TEST_CASE("replaying a tree's logged changes onto empty pages rebuilds it byte for byte") {
  memory_page_store store(4096, true);
  tree::create(store, table_rel);
  tree t(store, table_rel);
  std::mt19937_64 random(7);
  for (int step = 0; step < 30000; ++step) {
    std::string key = random_key(random, 3000);
    if (random() % 3 == 0)
      t.erase(key);
    else
      t.put(key, random_value(random, store.page_size(), key.size()));
  }
  REQUIRE(store.blocks(table_rel) > 50); // it split, at more than one level
  memory_page_store replayed(4096);
  store.replay_into(replayed);
  REQUIRE(replayed.blocks(table_rel) == store.blocks(table_rel));
  for (block_id block = 0; block < store.blocks(table_rel); ++block)
    REQUIRE(replayed.bytes_of({table_rel, block}) == store.bytes_of({table_rel, block}));
  CHECK(check_tree(replayed, table_rel) == "");
}

TEST_CASE("ascending inserts fill leaves nearly full") {
  memory_page_store store(8192);
  tree::create(store, table_rel);
  tree t(store, table_rel);
  const int count = 100000;
  for (int i = 0; i < count; ++i) {
    char key[16];
    std::snprintf(key, sizeof key, "%010d", i);
    t.put(key, std::string(100, 'v'));
  }
  REQUIRE(check_tree(store, table_rel) == "");
  std::size_t per_leaf = (8192 - slots_offset) / item_footprint(10, 100);
  std::size_t minimum_leaves = (count + per_leaf - 1) / per_leaf;
  // Leaves packed full leave few more blocks than the minimum (inner nodes are ~1 %).
  CHECK(store.blocks(table_rel) < minimum_leaves * 105 / 100);
}

TEST_CASE("appended leaves: one record per leaf, a valid tree, replayed byte for byte") {
  // Batches of sorted keys, each a leaf's worth, appended to a tree that grows three levels
  // (4 KiB pages, keys with long shared prefixes so that inner nodes fill too).
  memory_page_store store(4096, true);
  tree::create(store, table_rel);
  tree t(store, table_rel);
  std::map<std::string, std::string> model;
  std::vector<node_item> batch;
  std::size_t batch_bytes = 0, appends = 0;
  std::size_t records_before = store.record_count();
  auto append_batch = [&] {
    REQUIRE(t.append(batch).has_value());
    ++appends;
    batch.clear();
    batch_bytes = 0;
  };
  for (int i = 0; i < 60000; ++i) {
    char number[16];
    std::snprintf(number, sizeof number, "%09d", i);
    std::string key = "user/" + std::string(300, 'p') + number;
    std::string value(i % 50, char('a' + i % 26));
    node_item item{key, 0, static_cast<std::uint32_t>(value.size()), value};
    if (batch_bytes + item.footprint() > append_capacity(store.page_size()))
      append_batch();
    batch_bytes += item.footprint();
    batch.push_back(item);
    model[key] = value;
  }
  append_batch();
  REQUIRE(check_tree(store, table_rel) == "");
  expect_scans(t, model);
  std::size_t records = store.record_count() - records_before;
  std::size_t blocks = store.blocks(table_rel) - 2; // the new blocks past the meta page and root
  MESSAGE(appends << " appends made " << records << " records and " << blocks << " blocks");
  CHECK(records == appends); // the first filled the empty root; each other one a leaf
  CHECK(records <= blocks + 1);
  memory_page_store replayed(4096);
  store.replay_into(replayed);
  for (block_id block = 0; block < store.blocks(table_rel); ++block)
    REQUIRE(replayed.bytes_of({table_rel, block}) == store.bytes_of({table_rel, block}));
  // Keys not above the tree's are no append: declined, nothing changed.
  std::string low = "user/0";
  std::size_t records_then = store.record_count();
  CHECK_FALSE(t.append({node_item{low, 0, 1, "x"}}).has_value());
  CHECK_FALSE(t.append({node_item{model.rbegin()->first, 0, 1, "x"}}).has_value());
  CHECK(store.record_count() == records_then);
  CHECK(t.get(low) == std::nullopt);
  // A put in the middle, and appends again after it.
  t.put(low, "y");
  REQUIRE(t.append({node_item{"zzz", 0, 1, "z"}}).has_value());
  model[low] = "y";
  model["zzz"] = "z";
  REQUIRE(check_tree(store, table_rel) == "");
  expect_scans(t, model);
}

TEST_CASE("a queue (inserts at one end, erases at the other) keeps its size: empty leaves go") {
  // Keys in increasing order, the oldest erased once 2 000 are in: every leaf empties in
  // turn, is unlinked, and its block comes back for the next split.
  memory_page_store store(4096);
  tree::create(store, table_rel);
  tree t(store, table_rel);
  constexpr int window = 2000, total = 40 * window;
  auto key_of = [](int i) {
    char key[16];
    std::snprintf(key, sizeof key, "q%09d", i);
    return std::string(key);
  };
  std::map<std::string, std::string> model;
  block_id settled = 0;
  for (int i = 0; i < total; ++i) {
    std::string value(100 + i % 150, char('a' + i % 26));
    t.put(key_of(i), value);
    model[key_of(i)] = value;
    if (i >= window) {
      REQUIRE(t.erase(key_of(i - window)));
      model.erase(key_of(i - window));
    }
    if (i == 4 * window)
      settled = store.blocks(table_rel);
  }
  REQUIRE(check_tree(store, table_rel) == "");
  expect_scans(t, model);
  MESSAGE("blocks with " << window << " keys queued: " << settled << " after " << 4 * window
                         << " inserts, " << store.blocks(table_rel) << " after " << total);
  CHECK(store.blocks(table_rel) <= settled + settled / 10);
  // Erasing everything leaves the leftmost leaf and the rightmost of each parent.
  for (int i = total - window; i < total; ++i)
    REQUIRE(t.erase(key_of(i)));
  REQUIRE(check_tree(store, table_rel) == "");
  CHECK(!t.first_from("", true));
  CHECK(!t.last_before(nullptr, false));
}

TEST_CASE("leaf splits of a table whose free list is empty do not latch its meta page") {
  // Every split used to latch it exclusively (its free list gives out pages first): the
  // splits of one table all serialized on it, and a commit's split under its latches
  // failed whenever another split held it.
  memory_page_store store(4096);
  tree::create(store, table_rel);
  tree t(store, table_rel);
  auto key_of = [](int i) { return "k" + std::to_string(i * 7919 % 100000); };
  for (int i = 0; i < 200; ++i) // a root over leaves; the splits saw the free list empty
    t.put(key_of(i), std::string(100, 'a'));
  page_id meta{table_rel, meta_block};
  std::size_t meta_latches = store.exclusive_latches(meta);
  block_id blocks = store.blocks(table_rel);
  for (int i = 200; i < 400; ++i) // leaf splits under a root with room for their downlinks
    t.put(key_of(i), std::string(100, 'b'));
  CHECK(store.blocks(table_rel) > blocks + 5);
  CHECK(store.exclusive_latches(meta) == meta_latches);
  CHECK(check_tree(store, table_rel) == "");
  // A leaf emptied goes on the free list (the meta page latched), and the next split
  // latches the meta page again to take that block rather than a new one.
  auto in_first_half = [&](int i) { return key_of(i) < "k5"; }; // a stretch of whole leaves
  for (int i = 0; i < 400; ++i)
    if (in_first_half(i))
      REQUIRE(t.erase(key_of(i)));
  std::size_t freed_latches = store.exclusive_latches(meta);
  CHECK(freed_latches > meta_latches);
  blocks = store.blocks(table_rel);
  for (int i = 0; i < 400; ++i)
    if (in_first_half(i))
      t.put(key_of(i), std::string(100, 'c'));
  CHECK(store.exclusive_latches(meta) > freed_latches);
  CHECK(store.blocks(table_rel) == blocks); // every split took a freed block
  CHECK(check_tree(store, table_rel) == "");
}

TEST_CASE("four threads of puts, erases, gets and scans leave the tree their models say") {
  memory_page_store store(4096);
  tree::create(store, table_rel);
  tree t(store, table_rel);
  constexpr int threads = 4;
  std::vector<std::map<std::string, std::string>> models(threads);
  std::atomic<bool> failed{false};
  std::vector<std::thread> workers;
  for (int id = 0; id < threads; ++id)
    workers.emplace_back([&, id] {
      std::mt19937_64 random(1000 + id);
      auto& model = models[id];
      for (int step = 0; step < 60000 && !failed; ++step) {
        // Each thread owns the keys ending in its digit; scans see everyone's.
        std::string key =
          random_key(random, 5000).substr(0, max_key_size - 2) + "#" + std::to_string(id);
        switch (random() % 6) {
          case 0: {
            auto got = t.get(key);
            auto expected = model.find(key);
            if (got.has_value() != (expected != model.end()) || (got && *got != expected->second))
              failed = true;
            break;
          }
          case 1: {
            // A short scan: keys strictly rising.
            std::string at = key;
            for (int n = 0; n < 20; ++n) {
              auto next = t.first_from(at, false);
              if (!next)
                break;
              if (compare_keys(next->first, at) <= 0)
                failed = true;
              at = next->first;
            }
            break;
          }
          case 2:
            if (t.erase(key) != (model.erase(key) == 1))
              failed = true;
            break;
          default: {
            std::string value = random_value(random, store.page_size(), key.size());
            if (t.put(key, value) != (model.count(key) == 0))
              failed = true;
            model[key] = value;
          }
        }
      }
    });
  for (std::thread& worker : workers)
    worker.join();
  REQUIRE_FALSE(failed.load());
  std::map<std::string, std::string> all;
  for (const auto& model : models)
    all.insert(model.begin(), model.end());
  REQUIRE(check_tree(store, table_rel) == "");
  expect_scans(t, all);
}

TEST_CASE("check_tree names a broken link") {
  memory_page_store store(4096);
  tree::create(store, table_rel);
  tree t(store, table_rel);
  for (int i = 0; i < 2000; ++i)
    t.put("key" + std::to_string(i), std::string(50, 'x'));
  REQUIRE(check_tree(store, table_rel) == "");
  // Point block 2's left link somewhere else.
  {
    page_guard page = store.latch({table_rel, 2}, latch_mode::exclusive);
    page_edit edit(page.mutable_bytes(), store.page_size(), nullptr);
    node_view node(page.bytes(), store.page_size());
    set_left(edit, node.left() + 1);
  }
  CHECK(check_tree(store, table_rel).find("left link") != std::string::npos);
}
