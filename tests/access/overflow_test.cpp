// Values on overflow chains and the free list (access/overflow.hpp), in a memory page store:
// values of every size up to the limit come back whole; a table whose size stays constant
// under replacements and erases reuses its freed pages instead of growing; readers never see
// a value half replaced; check_tree finds a broken chain and a miscounted free list; and the
// records replay byte for byte.
#include "access/overflow.hpp"
#include "access/table_transaction.hpp"
#include "memory_page_store.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace tidemark::access;
using tidemark::access::testing::memory_page_store;

namespace {

constexpr rel_id table = 100;

// A value that says how it was made: its length and seed in front, then bytes from the
// seed, so a reader can tell a whole value from a torn one.
std::string made_value(std::size_t length, std::uint64_t seed) {
  std::string value(std::max<std::size_t>(length, 16), '\0');
  std::uint64_t header[2] = {value.size(), seed};
  std::memcpy(&value[0], header, sizeof header);
  std::mt19937_64 random(seed);
  for (std::size_t i = 16; i < value.size(); ++i)
    value[i] = static_cast<char>(random());
  return value;
}

bool whole(const std::string& value) {
  if (value.size() < 16)
    return false;
  std::uint64_t header[2];
  std::memcpy(header, value.data(), sizeof header);
  return header[0] == value.size() && made_value(value.size(), header[1]) == value;
}

std::size_t random_length(std::mt19937_64& random) {
  switch (random() % 10) {
    case 0:
      return random() % 64; // inline
    case 1:
      return 1000 + random() % 800; // around the inline limit of a 4 KiB page
    case 2:
      return max_value_size - random() % 3;
    case 3:
      return std::size_t{1} << 20; // 1 MiB
    default:
      return 4000 + random() % 40000; // one to ten pages
  }
}

} // namespace

TEST_CASE("values of every size up to the limit come back whole") {
  memory_page_store store(4096, true);
  tree::create(store, table);
  table_transaction txn(store);
  std::map<std::string, std::string> model;
  std::mt19937_64 random(9);
  tidemark::storage::xid_t xid = 1;
  for (int n = 0; n < 300; ++n) {
    txn.begin(xid++);
    for (int op = 0; op < 2; ++op) {
      std::string key = "key" + std::to_string(random() % 30);
      if (random() % 4 == 0) {
        CHECK(txn.erase(table, key) == (model.erase(key) == 1));
      } else {
        std::string value = made_value(random_length(random), random());
        txn.put(table, key, value);
        model[key] = value;
      }
    }
    txn.commit();
    if (n % 100 == 99)
      REQUIRE(check_tree(store, table) == "");
  }
  txn.begin(xid++);
  for (const auto& [key, value] : model)
    REQUIRE(txn.get(table, key) == value);
  std::size_t seen = 0;
  for (auto entry = txn.next_entry(table, "", true); entry;
       entry = txn.next_entry(table, entry->key, false)) {
    REQUIRE(model.at(entry->key) == entry->value);
    ++seen;
  }
  CHECK(seen == model.size());
  txn.commit();
  memory_page_store replayed(4096);
  store.replay_into(replayed);
  for (tidemark::storage::block_id block = 0; block < store.blocks(table); ++block)
    REQUIRE(replayed.bytes_of({table, block}) == store.bytes_of({table, block}));
}

TEST_CASE("a table of constant size under replacements and erases reuses its freed pages") {
  memory_page_store store(4096);
  tree::create(store, table);
  table_transaction txn(store);
  constexpr int rows = 200;
  std::vector<std::size_t> lengths; // each row keeps its size: the table's stays constant
  std::mt19937_64 random(4);
  for (int row = 0; row < rows; ++row)
    lengths.push_back(row % 4 == 0 ? 3000 + random() % 30000 : random() % 300);
  auto key_of = [](int row) { return "row" + std::to_string(row); };
  txn.begin(1);
  for (int row = 0; row < rows; ++row)
    txn.put(table, key_of(row), made_value(lengths[row], random()));
  txn.commit();
  tidemark::storage::block_id loaded = store.blocks(table);
  std::vector<int> erased;
  for (int n = 0; n < 10 * rows; ++n) { // ten times the row count in changes
    int row = static_cast<int>(random() % rows);
    txn.begin(2 + n);
    if (random() % 3 == 0 && txn.erase(table, key_of(row))) {
      erased.push_back(row);
    } else {
      txn.put(table, key_of(row), made_value(lengths[row], random()));
      erased.erase(std::remove(erased.begin(), erased.end(), row), erased.end());
    }
    if (erased.size() > 10) { // put the erased rows back now and then
      for (int back : erased)
        txn.put(table, key_of(back), made_value(lengths[back], random()));
      erased.clear();
    }
    txn.commit();
  }
  REQUIRE(check_tree(store, table) == "");
  MESSAGE("blocks after loading " << rows << " rows: " << loaded << "; after " << 10 * rows
                                  << " replacements and erases: " << store.blocks(table));
  CHECK(store.blocks(table) <= loaded + loaded / 10);
}

TEST_CASE("readers never see a large value half replaced") {
  memory_page_store store(4096);
  tree::create(store, table);
  constexpr int keys = 8;
  {
    table_transaction load(store);
    load.begin(1);
    for (int k = 0; k < keys; ++k)
      load.put(table, "k" + std::to_string(k), made_value(20000, k));
    load.commit();
  }
  std::atomic<tidemark::storage::xid_t> next_xid{2};
  std::atomic<bool> torn{false};
  std::atomic<int> reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 random(t);
      table_transaction txn(store);
      for (int n = 0; n < 300; ++n) {
        std::string key = "k" + std::to_string(random() % keys);
        if (t < 2) { // writers
          txn.begin(next_xid++);
          txn.put(table, key, made_value(4000 + random() % 30000, random()));
          txn.commit();
        } else { // readers, outside a transaction
          std::optional<std::string> value = txn.get(table, key);
          if (!value || !whole(*value))
            torn = true;
          ++reads;
        }
      }
    });
  for (std::thread& thread : threads)
    thread.join();
  CHECK_FALSE(torn.load());
  CHECK(reads == 600);
  CHECK(check_tree(store, table) == "");
}

TEST_CASE("check_tree finds a broken overflow chain and a miscounted free list") {
  memory_page_store store(4096);
  tree::create(store, table);
  table_transaction txn(store);
  txn.begin(1);
  txn.put(table, "a", made_value(20000, 1));
  txn.put(table, "b", made_value(20000, 2));
  txn.commit();
  txn.begin(2);
  txn.erase(table, "b"); // its pages go on the free list
  txn.commit();
  REQUIRE(check_tree(store, table) == "");
  // The meta page's free count, off by one.
  auto& meta = const_cast<std::vector<unsigned char>&>(store.bytes_of({table, meta_block}));
  std::uint32_t count;
  std::memcpy(&count, &meta[meta_free_count_at], 4);
  REQUIRE(count == overflow_pages(4096, 20000));
  ++count;
  std::memcpy(&meta[meta_free_count_at], &count, 4);
  CHECK(check_tree(store, table).find("free list") != std::string::npos);
  --count;
  std::memcpy(&meta[meta_free_count_at], &count, 4);
  REQUIRE(check_tree(store, table) == "");
  // An overflow page of "a" no longer marked as one.
  for (tidemark::storage::block_id block = 2; block < store.blocks(table); ++block) {
    auto& page = const_cast<std::vector<unsigned char>&>(store.bytes_of({table, block}));
    std::uint32_t magic;
    std::memcpy(&magic, &page[tidemark::storage::page_header_size], 4);
    if (magic == overflow_magic) {
      page[tidemark::storage::page_header_size] ^= 1;
      break;
    }
  }
  CHECK(check_tree(store, table).find("not an overflow page") != std::string::npos);
}
