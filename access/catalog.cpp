// The catalog of tables: see catalog.hpp.
#include "access/catalog.hpp"

#include <cstring>

namespace tidemark::access {

namespace {

constexpr unsigned char entry_format = 1;
const std::string next_relation_key; // the empty key

std::string encode_entry(rel_id relation) {
  std::string value(1 + sizeof relation, '\0');
  value[0] = static_cast<char>(entry_format);
  std::memcpy(&value[1], &relation, sizeof relation);
  return value;
}

rel_id decode_u32(const std::string& value, std::size_t at, std::string_view what) {
  rel_id relation;
  if (value.size() != at + sizeof relation)
    throw tidemark::data_error("the table catalog's " + std::string(what) + " is " +
                               std::to_string(value.size()) + " bytes, not " +
                               std::to_string(at + sizeof relation));
  std::memcpy(&relation, value.data() + at, sizeof relation);
  return relation;
}

} // namespace

table_info catalog::decode(std::string name, const std::string& value) {
  if (value.empty() || static_cast<unsigned char>(value[0]) != entry_format)
    throw tidemark::data_error("the table catalog's entry for '" + name +
                               "' has an unknown format");
  rel_id relation = decode_u32(value, 1, "entry for '" + name + "'");
  if (relation < first_table_relation || relation >= storage::max_relations)
    throw tidemark::data_error("the table catalog's entry for '" + name + "' names relation " +
                               std::to_string(relation) + ", which no table can have");
  return {std::move(name), relation};
}

void catalog::create(page_store& store) { tree::create(store, catalog_relation); }

bool catalog::exists(page_store& store) { return store.blocks(catalog_relation) > 0; }

void catalog::check_name(std::string_view name) {
  if (name.empty())
    throw tidemark::usage_error("a table name may not be empty");
  if (name.size() > max_table_name)
    throw tidemark::usage_error("a table name is at most " + std::to_string(max_table_name) +
                                " bytes; this one has " + std::to_string(name.size()));
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw tidemark::usage_error("a table name may not hold control characters");
}

std::optional<table_info> catalog::find(table_transaction& txn, std::string_view name) {
  check_name(name);
  std::optional<std::string> value = txn.get(catalog_relation, name);
  if (!value)
    return std::nullopt;
  return decode(std::string(name), *value);
}

table_info catalog::create_table(table_transaction& txn, std::string_view name) {
  if (find(txn, name))
    throw tidemark::usage_error("table '" + std::string(name) + "' exists already");
  rel_id relation = next_relation(txn);
  if (relation >= storage::max_relations)
    throw tidemark::usage_error("no more tables can be created: all " +
                                std::to_string(storage::max_relations - first_table_relation) +
                                " relations for tables have been handed out");
  rel_id following = relation + 1;
  txn.put(catalog_relation, next_relation_key,
          std::string(reinterpret_cast<const char*>(&following), sizeof following));
  txn.put(catalog_relation, name, encode_entry(relation));
  txn.create_tree(relation);
  return {std::string(name), relation};
}

rel_id catalog::next_relation(table_transaction& txn) {
  std::optional<std::string> next = txn.get(catalog_relation, next_relation_key);
  return next ? decode_u32(*next, 0, "next relation") : first_table_relation;
}

table_info catalog::drop_table(table_transaction& txn, std::string_view name) {
  std::optional<table_info> table = find(txn, name);
  if (!table)
    throw tidemark::usage_error("no table named '" + std::string(name) + "'");
  txn.erase(catalog_relation, name);
  return *table;
}

std::vector<table_info> catalog::list(table_transaction& txn) {
  std::vector<table_info> tables;
  for (auto entry = txn.next_entry(catalog_relation, next_relation_key, false); entry;
       entry = txn.next_entry(catalog_relation, entry->key, false))
    tables.push_back(decode(entry->key, entry->value));
  return tables;
}

} // namespace tidemark::access
