// The table catalog (access/catalog.hpp) in a memory page store: tables created, found,
// listed and dropped in transactions; bad names refused; relations never handed out
// twice, also by creations racing on four threads; a table's entry and its tree arriving in
// one commit record.
#include "access/catalog.hpp"
#include "memory_page_store.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace tidemark::access;
using tidemark::access::testing::memory_page_store;

namespace {

table_info create(page_store& store, const std::string& name, tidemark::storage::xid_t xid) {
  table_transaction txn(store);
  txn.begin(xid);
  table_info table = catalog::create_table(txn, name);
  txn.commit();
  return table;
}

} // namespace

TEST_CASE("tables are created, found, listed and dropped by name") {
  memory_page_store store(4096);
  REQUIRE_FALSE(catalog::exists(store));
  catalog::create(store);
  REQUIRE(catalog::exists(store));
  table_info accounts = create(store, "accounts", 1);
  table_info history = create(store, "history", 2);
  CHECK(accounts.relation == first_table_relation);
  CHECK(history.relation == first_table_relation + 1);

  table_transaction txn(store);
  txn.begin(3);
  CHECK(catalog::find(txn, "accounts")->relation == accounts.relation);
  CHECK_FALSE(catalog::find(txn, "missing").has_value());
  std::vector<table_info> tables = catalog::list(txn);
  REQUIRE(tables.size() == 2);
  CHECK(tables[0].name == "accounts");
  CHECK(tables[1].name == "history");
  CHECK_THROWS_WITH_AS(catalog::create_table(txn, "accounts"), doctest::Contains("exists already"),
                       tidemark::usage_error);
  // The new table's tree is there and works.
  txn.put(accounts.relation, "alice", "100");
  txn.commit();
  CHECK(check_tree(store, accounts.relation) == "");
  CHECK(tree(store, accounts.relation).get("alice") == std::optional<std::string>("100"));

  txn.begin(4);
  CHECK(catalog::drop_table(txn, "accounts").relation == accounts.relation);
  CHECK_THROWS_WITH_AS(catalog::drop_table(txn, "accounts"), doctest::Contains("no table named"),
                       tidemark::usage_error);
  txn.commit();
  // A table made again under the name gets a relation never used before.
  CHECK(create(store, "accounts", 5).relation == first_table_relation + 2);
}

TEST_CASE("bad table names are refused with the reason") {
  memory_page_store store(4096);
  catalog::create(store);
  table_transaction txn(store);
  txn.begin(1);
  CHECK_THROWS_WITH_AS(catalog::create_table(txn, ""), doctest::Contains("may not be empty"),
                       tidemark::usage_error);
  CHECK_THROWS_WITH_AS(catalog::create_table(txn, std::string(max_table_name + 1, 'n')),
                       doctest::Contains("at most 128 bytes"), tidemark::usage_error);
  CHECK_THROWS_WITH_AS(catalog::create_table(txn, "tab\tle"), doctest::Contains("control"),
                       tidemark::usage_error);
  CHECK_NOTHROW(catalog::create_table(txn, std::string(max_table_name, 'n')));
}

TEST_CASE("tables created on four threads at once get relations of their own") {
  memory_page_store store(4096, true);
  catalog::create(store);
  std::atomic<tidemark::storage::xid_t> next_xid{1};
  std::vector<std::vector<table_info>> made(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      table_transaction txn(store);
      for (int i = 0; i < 50; ++i)
        for (;;) {
          txn.begin(next_xid++);
          table_info table =
            catalog::create_table(txn, "t" + std::to_string(t) + "_" + std::to_string(i));
          try {
            txn.commit();
            made[t].push_back(table);
            break;
          } catch (const tidemark::conflict_error&) {
          }
        }
    });
  for (std::thread& thread : threads)
    thread.join();
  std::set<rel_id> relations;
  for (const auto& tables : made)
    for (const table_info& table : tables) {
      relations.insert(table.relation);
      CHECK(check_tree(store, table.relation) == "");
    }
  CHECK(relations.size() == 200);
  CHECK(*relations.rbegin() == first_table_relation + 199);
  // Replayed as redo would, every catalog entry comes with its tree.
  memory_page_store replayed(4096);
  store.replay_into(replayed);
  table_transaction txn(replayed);
  txn.begin(next_xid++);
  std::vector<table_info> tables = catalog::list(txn);
  CHECK(tables.size() == 200);
  for (const table_info& table : tables)
    CHECK(check_tree(replayed, table.relation) == "");
}
