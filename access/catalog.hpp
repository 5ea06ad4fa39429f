// The catalog: table names and the relations their trees live in, kept in a keyed table of
// its own (relation catalog_relation), so it is logged, recovered and replicated like any
// table and changes only inside table transactions.
//
// Entries: key = the table's name; value = u8 format (1), u32 relation (little-endian).
// The empty key (no table may have an empty name) holds the next relation to hand out, a
// u32: relations are handed out once and never reused, so a dropped table's leftovers can
// never be mistaken for a new table's.
//
// Invariants:
//  - A table's catalog entry and its tree's first pages are in one commit record
//    (table_transaction::create_tree): after any crash a named table has a tree.
//  - Two transactions that create tables both read the next-relation entry and change it:
//    one of them conflicts, so no relation is handed out twice.
#pragma once

#include "access/table_transaction.hpp"
#include "storage/relation_files.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tidemark::access {

constexpr rel_id catalog_relation = storage::max_page_relations;
constexpr rel_id first_table_relation = catalog_relation + 1;
constexpr std::size_t max_table_name = 128;

struct table_info {
  std::string name;
  rel_id relation = 0;
};

class catalog {
public:
  /// The catalog's own tree, in an empty catalog_relation (one structure change).
  static void create(page_store& store);
  /// True when the catalog's relation has its tree.
  static bool exists(page_store& store);

  /// Throws usage_error naming what is wrong with `name`: empty, longer than
  /// max_table_name bytes, or with a control character.
  static void check_name(std::string_view name);

  /// The table named `name`, read in `txn` (a transaction's read, validated at commit).
  static std::optional<table_info> find(table_transaction& txn, std::string_view name);
  /// Creates the table in `txn`: usage_error when the name is taken or bad, or when every
  /// relation has been handed out.
  static table_info create_table(table_transaction& txn, std::string_view name);
  /// Removes the table's entry in `txn` and returns it: usage_error when there is none.
  /// Its relation's files are the caller's to remove once the transaction committed.
  static table_info drop_table(table_transaction& txn, std::string_view name);
  /// The table an entry of the catalog describes (data_error when it cannot be one).
  static table_info decode(std::string name, const std::string& entry);
  /// The relation the next table will get: every table relation ever handed out is below.
  static rel_id next_relation(table_transaction& txn);
  /// Every table, by name.
  static std::vector<table_info> list(table_transaction& txn);
};

} // namespace tidemark::access
