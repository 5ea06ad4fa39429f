// A transaction over keyed tables: see table_transaction.hpp.
#include "access/table_transaction.hpp"

#include "storage/check.hpp"
#include "storage/page.hpp"

#include <algorithm>
#include <cstdio>

namespace tidemark::access {

namespace {

// A key as an error message shows it: printable bytes as they are, others as \xNN, long
// keys cut.
std::string describe_key(key_view key) {
  std::string text;
  for (std::size_t i = 0; i < key.size() && text.size() < 64; ++i) {
    auto byte = static_cast<unsigned char>(key[i]);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\') {
      text += static_cast<char>(byte);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      text += escaped;
    }
  }
  return "'" + text + (text.size() >= 64 ? "...'" : "'");
}

} // namespace

void table_transaction::begin(storage::xid_t xid) {
  abort();
  xid_ = xid;
  active_ = true;
}

void table_transaction::abort() {
  writes_.clear();
  reads_.clear();
  newest_seen_ = 0;
  active_ = false;
}

void table_transaction::refuse_outside_transaction(const char* operation) const {
  if (!active_)
    throw tidemark::usage_error(std::string(operation) +
                                " outside a transaction (commit(), rollback() and a "
                                "conflict_error end one): call begin() first; nothing changed");
}

// ---- reads and buffered changes ------------------------------------------------------------

std::optional<std::string> table_transaction::read_committed(rel_id table, key_view key) {
  tree t(store_, table);
  page_guard leaf = t.latch_leaf(key, latch_mode::shared);
  node_view node(leaf.bytes(), store_.page_size());
  bool found;
  std::size_t slot = node.lower_bound(key, &found);
  lsn_t lsn = storage::page_lsn(leaf.bytes());
  newest_seen_ = active_ ? std::max(newest_seen_, lsn) : lsn;
  if (!found)
    return std::nullopt;
  return std::string(node.item(slot).value());
}

std::optional<std::string> table_transaction::get(rel_id table, key_view key) {
  if (!active_)
    return read_committed(table, key);
  table_key at{table, std::string(key)};
  if (auto write = writes_.find(at); write != writes_.end())
    return write->second;
  if (auto read = reads_.find(at); read != reads_.end())
    return read->second.value; // repeatable: validation checks it still holds
  std::optional<std::string> value = read_committed(table, key);
  reads_.emplace(std::move(at), recorded_read{value});
  return value;
}

void table_transaction::put(rel_id table, key_view key, std::string_view value) {
  refuse_outside_transaction("put");
  TIDEMARK_CHECK(inline_value_fits(store_.page_size(), key.size(), value.size()),
                 "the caller checks a key and value against the limits");
  writes_[{table, std::string(key)}] = std::string(value);
}

bool table_transaction::insert(rel_id table, key_view key, std::string_view value) {
  refuse_outside_transaction("insert");
  if (get(table, key))
    return false;
  put(table, key, value);
  return true;
}

bool table_transaction::erase(rel_id table, key_view key) {
  refuse_outside_transaction("erase");
  if (!get(table, key))
    return false;
  writes_[{table, std::string(key)}] = std::nullopt;
  return true;
}

// ---- commit --------------------------------------------------------------------------------

lsn_t table_transaction::commit() {
  refuse_outside_transaction("commit");
  lsn_t end = 0;
  try {
    while (try_commit(&end) == attempt::again) {
    }
  } catch (...) {
    abort();
    throw;
  }
  abort();
  return end;
}

table_transaction::attempt table_transaction::try_commit(lsn_t* end) {
  std::vector<latched_leaf> leaves;
  std::map<table_key, std::size_t> leaf_of;
  if (latch_leaves(leaves, leaf_of) == attempt::again)
    return attempt::again;
  if (make_room(leaves, leaf_of))
    return attempt::again;
  validate_reads(leaves, leaf_of);
  *end = writes_.empty() ? 0 : apply_and_log(leaves, leaf_of);
  return attempt::done;
}

// Steps 1 and 2 of the header: every key's leaf, latched in page order, still covering it.
table_transaction::attempt table_transaction::latch_leaves(std::vector<latched_leaf>& leaves,
                                                           std::map<table_key, std::size_t>& leaf_of) {
  std::map<table_key, page_id> located;
  std::map<page_id, latch_mode> wanted;
  auto locate = [&](const table_key& k, latch_mode mode) {
    page_id id = tree(store_, k.table).latch_leaf(k.key, latch_mode::shared).id();
    located[k] = id;
    auto [entry, added] = wanted.emplace(id, mode);
    if (!added && mode == latch_mode::exclusive)
      entry->second = mode;
  };
  for (const auto& write : writes_)
    locate(write.first, latch_mode::exclusive);
  for (const auto& read : reads_)
    if (writes_.count(read.first) == 0)
      locate(read.first, latch_mode::shared);
  std::size_t changed = static_cast<std::size_t>(std::count_if(
    wanted.begin(), wanted.end(), [](const auto& w) { return w.second == latch_mode::exclusive; }));
  if (changed > max_commit_leaves)
    throw tidemark::usage_error("a transaction may change at most " +
                                std::to_string(max_commit_leaves) + " leaves of tables; this one "
                                "changes " + std::to_string(changed) + "; nothing was applied");
  std::map<page_id, std::size_t> index;
  for (const auto& [id, mode] : wanted) {
    index[id] = leaves.size();
    leaves.push_back({id, mode, store_.latch(id, mode)});
  }
  for (const auto& [k, id] : located) {
    node_view node(leaves[index[id]].guard.bytes(), store_.page_size());
    if (!node.is_node() || !node.is_leaf() || !node.below_high_key(k.key)) {
      leaves.clear(); // a split moved the key right: find the leaves again
      return attempt::again;
    }
    leaf_of[k] = index[id];
  }
  return attempt::done;
}

// Step 3: true (everything released) when leaves had no room for their changes and were
// split.
bool table_transaction::make_room(std::vector<latched_leaf>& leaves,
                                  const std::map<table_key, std::size_t>& leaf_of) {
  std::size_t page_size = store_.page_size();
  std::vector<std::pair<rel_id, std::vector<pending_item>>> too_full;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (leaves[i].mode != latch_mode::exclusive)
      continue;
    node_view node(leaves[i].guard.bytes(), page_size);
    std::size_t added = 0, removed = 0;
    std::vector<pending_item> items;
    for (const auto& [k, value] : writes_) {
      if (leaf_of.at(k) != i)
        continue;
      bool found;
      std::size_t slot = node.lower_bound(k.key, &found);
      if (found)
        removed += item_footprint(k.key.size(), node.item(slot).payload_length);
      if (value) {
        added += item_footprint(k.key.size(), value->size());
        items.push_back({k.key, item_footprint(k.key.size(), value->size())});
      }
    }
    if (added > removed && !node.fits(added - removed))
      too_full.emplace_back(leaves[i].id.rel, std::move(items));
  }
  if (too_full.empty())
    return false;
  leaves.clear();
  for (const auto& [table, items] : too_full)
    tree(store_, table).make_room(items);
  return true;
}

// Step 4: every read still holds, all leaves latched at once.
void table_transaction::validate_reads(std::vector<latched_leaf>& leaves,
                                       const std::map<table_key, std::size_t>& leaf_of) {
  for (const auto& [k, read] : reads_) {
    node_view node(leaves[leaf_of.at(k)].guard.bytes(), store_.page_size());
    bool found;
    std::size_t slot = node.lower_bound(k.key, &found);
    bool holds = found == read.value.has_value() &&
                 (!found || node.item(slot).value() == std::string_view(*read.value));
    if (!holds) {
      leaves.clear();
      throw tidemark::conflict_error("transaction " + std::to_string(xid_) + " conflicts: key " +
                                     describe_key(k.key) + " of table " + std::to_string(k.table) +
                                     " changed after it was read; nothing was applied, retry it");
    }
  }
}

// Step 5: erases and resized replacements first, then inserts; one record for all leaves.
lsn_t table_transaction::apply_and_log(std::vector<latched_leaf>& leaves,
                                       const std::map<table_key, std::size_t>& leaf_of) {
  std::size_t page_size = store_.page_size();
  std::vector<page_changes> changes(leaves.size());
  std::vector<logged_page> logged;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (leaves[i].mode != latch_mode::exclusive)
      continue;
    page_edit edit(leaves[i].guard.mutable_bytes(), page_size, &changes[i]);
    std::vector<const std::pair<const table_key, std::optional<std::string>>*> inserts;
    for (const auto& write : writes_) {
      if (leaf_of.at(write.first) != i)
        continue;
      node_view node(edit.bytes(), page_size);
      bool found;
      std::size_t slot = node.lower_bound(write.first.key, &found);
      const std::optional<std::string>& value = write.second;
      if (found && value && node.item(slot).payload_length == value->size()) {
        replace_item(edit, slot, 0, static_cast<std::uint32_t>(value->size()), *value);
        continue;
      }
      if (found)
        erase_item(edit, slot);
      if (value)
        inserts.push_back(&write);
    }
    for (const auto* write : inserts) {
      node_view node(edit.bytes(), page_size);
      bool found;
      std::size_t slot = node.lower_bound(write->first.key, &found);
      const std::string& value = *write->second;
      insert_item(edit, slot, write->first.key, 0, static_cast<std::uint32_t>(value.size()), value);
    }
    if (!changes[i].empty()) {
      changes[i].collapse(edit.bytes(), page_size);
      logged.push_back({&leaves[i].guard, &changes[i]});
    }
  }
  if (logged.empty())
    return 0; // only erases of keys the transaction itself had put
  return store_.log_change(logged, xid_);
}

} // namespace tidemark::access
