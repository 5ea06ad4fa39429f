// A transaction over keyed tables: see table_transaction.hpp.
#include "access/table_transaction.hpp"

#include "access/overflow.hpp"

#include "storage/check.hpp"
#include "storage/page.hpp"
#include "storage/page_transaction.hpp"
#include "storage/unsynchronized_reads.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

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

// FNV-1a over an entry's key and value, lengths first: added up over a range, so the sum
// does not depend on the order the entries were read in.
std::uint64_t entry_hash(key_view key, std::string_view value) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  auto mix = [&](const void* data, std::size_t length) {
    for (std::size_t i = 0; i < length; ++i) {
      hash ^= static_cast<const unsigned char*>(data)[i];
      hash *= 0x100000001b3ull;
    }
  };
  std::uint64_t lengths[2] = {key.size(), value.size()};
  mix(lengths, sizeof lengths);
  mix(key.data(), key.size());
  mix(value.data(), value.size());
  return hash;
}

} // namespace

void table_transaction::begin(storage::xid_t xid) {
  abort();
  xid_ = xid;
  active_ = true;
}

void table_transaction::abort() {
  located_.clear(); // first: its keys point into the maps below
  writes_.clear();
  adds_.clear();
  reads_.clear();
  ranges_.clear();
  new_trees_.clear();
  meta_tables_.clear();
  newest_seen_ = 0;
  extra_latches_ = 0;
  emptied_.clear();
  active_ = false;
}

// ---- reads and buffered changes ------------------------------------------------------------

// A read's latches (a descent holds two at most, and a chain page under its leaf) come
// from one reservation, not from the pool's shared pin count at every level.
constexpr std::size_t read_latches = 2;

std::optional<std::string> table_transaction::read_committed(rel_id table, key_view key) {
  tree::read_result read = tree(store_, table).read(key);
  newest_seen_ = active_ ? std::max(newest_seen_, read.leaf_lsn) : read.leaf_lsn;
  return std::move(read.value);
}

std::optional<std::string> table_transaction::get(rel_id table, key_view key) {
  if (!active_)
    return read_committed(table, key);
  table_key at{table, std::string(key)};
  if (auto write = writes_.find(at); write != writes_.end())
    return write->second;
  if (auto read = reads_.find(at); read != reads_.end())
    return with_adds(at, read->second.value); // repeatable: validation checks it holds
  std::optional<std::string> value = read_committed(table, key);
  reads_.emplace(at, recorded_read{value});
  return with_adds(at, std::move(value));
}

namespace {

// Adds `delta` to the i64 at `offset` of `value`; false when those bytes are not inside it.
bool add_at(std::string& value, std::uint32_t offset, std::int64_t delta) {
  if (std::uint64_t(offset) + sizeof delta > value.size())
    return false;
  std::uint64_t sum;
  std::memcpy(&sum, value.data() + offset, sizeof sum);
  sum += static_cast<std::uint64_t>(delta); // wraps, as storage's add_i64 does
  std::memcpy(value.data() + offset, &sum, sizeof sum);
  return true;
}

} // namespace

std::optional<std::string> table_transaction::with_adds(const table_key& at,
                                                        std::optional<std::string> value) const {
  auto adds = adds_.find(at);
  if (!value || adds == adds_.end())
    return value;
  for (const auto& [offset, delta] : adds->second)
    add_at(*value, offset, delta); // a delta that does not fit fails the commit
  return value;
}

std::optional<table_entry> table_transaction::with_adds(rel_id table,
                                                        std::optional<table_entry> entry) const {
  if (entry && !adds_.empty())
    entry->value = *with_adds({table, entry->key}, std::move(entry->value));
  return entry;
}

void table_transaction::add_i64(rel_id table, key_view key, std::uint32_t offset,
                                std::int64_t delta) {
  storage::refuse_outside_transaction(active_, "add_i64");
  table_key at{table, std::string(key)};
  if (auto write = writes_.find(at); write != writes_.end()) {
    if (!write->second)
      throw tidemark::usage_error("add_i64: key " + describe_key(key) +
                                  " was erased by this transaction");
    if (!add_at(*write->second, offset, delta))
      throw tidemark::usage_error("add_i64: bytes " + std::to_string(offset) + ".." +
                                  std::to_string(std::uint64_t(offset) + 8) + " are outside the " +
                                  std::to_string(write->second->size()) + "-byte value of key " +
                                  describe_key(key) + " this transaction put");
    return;
  }
  adds_[std::move(at)].emplace_back(offset, delta);
}

void table_transaction::put(rel_id table, key_view key, std::string_view value) {
  storage::refuse_outside_transaction(active_, "put");
  TIDEMARK_CHECK(key.size() <= max_key_size && value.size() <= max_value_size,
                 "the caller checks a key and value against the limits");
  if (!inline_value_fits(store_.page_size(), key.size(), value.size()))
    meta_tables_.insert(table); // its chain comes from the table's pages
  table_key at{table, std::string(key)};
  adds_.erase(at); // the new value replaces what they would have added to
  writes_[std::move(at)] = std::string(value);
}

bool table_transaction::insert(rel_id table, key_view key, std::string_view value) {
  storage::refuse_outside_transaction(active_, "insert");
  if (get(table, key))
    return false;
  put(table, key, value);
  return true;
}

void table_transaction::create_tree(rel_id table) {
  storage::refuse_outside_transaction(active_, "create_tree");
  new_trees_.push_back(table);
}

bool table_transaction::erase(rel_id table, key_view key) {
  storage::refuse_outside_transaction(active_, "erase");
  if (!get(table, key))
    return false;
  table_key at{table, std::string(key)};
  adds_.erase(at);
  writes_[std::move(at)] = std::nullopt;
  return true;
}

// ---- ordered reads -------------------------------------------------------------------------

bool table_transaction::recorded_range::covers(key_view key) const {
  if (low && compare_keys(key, *low) < (low_inclusive ? 0 : 1))
    return false;
  if (high && compare_keys(key, *high) > (high_inclusive ? 0 : -1))
    return false;
  return true;
}

namespace {

std::optional<table_entry> as_entry(std::optional<std::pair<std::string, std::string>> found) {
  if (!found)
    return std::nullopt;
  return table_entry{std::move(found->first), std::move(found->second)};
}

} // namespace

std::optional<std::optional<table_entry>> read_ahead::take(rel_id table, const std::string& key,
                                                           bool inclusive) {
  if (!filled_ || table != table_)
    return std::nullopt;
  int order = compare_keys(key, from_);
  if (order < 0 || (order == 0 && inclusive && !from_inclusive_))
    return std::nullopt; // the step starts before the stretch
  auto& entries = stretch_.entries;
  auto at = std::partition_point(entries.begin(), entries.end(), [&](const auto& entry) {
    int c = compare_keys(entry.first, key);
    return c < 0 || (c == 0 && !inclusive);
  });
  if (at != entries.end()) {
    auto index = static_cast<std::size_t>(at - entries.begin());
    if (index < taken_)
      return std::nullopt; // given out already
    taken_ = index + 1;
    return std::optional<table_entry>(
      table_entry{at->first, std::move(at->second)}); // keys stay: searched
  }
  if (!stretch_.end)
    return std::optional<table_entry>(); // nothing up to the table's end
  return std::nullopt;                   // past what the stretch holds
}

void read_ahead::fill(rel_id table, const std::string& from, bool inclusive, tree::run stretch,
                      lsn_t newest) {
  filled_ = true;
  table_ = table;
  from_ = from;
  from_inclusive_ = inclusive;
  stretch_ = std::move(stretch);
  taken_ = 0;
  newest_ = newest;
}

std::optional<table_entry> table_transaction::committed_step(rel_id table, const std::string* key,
                                                             bool inclusive, bool forward,
                                                             read_ahead* ahead) {
  lsn_t newest = 0;
  std::optional<std::optional<table_entry>> known;
  if (forward && ahead != nullptr && key != nullptr &&
      (known = ahead->take(table, *key, inclusive)))
    newest = ahead->newest();
  if (!known) {
    operation_epochs::section section(store_.epochs());
    latch_reservation reserved(store_);
    reserved.reserve(read_latches);
    tree t(store_, table);
    if (forward) {
      bool from_start = key == nullptr || inclusive;
      std::string from = key != nullptr ? *key : std::string();
      if (ahead != nullptr) {
        ahead->fill(table, from, from_start, t.run_from(from, from_start, ~std::size_t{0}, &newest),
                    newest);
        known = ahead->take(table, from, from_start);
        TIDEMARK_CHECK(known.has_value(), "a stretch just read answers the step it was read for");
      } else {
        known = as_entry(t.first_from(from, from_start, &newest));
      }
    } else {
      known = as_entry(t.last_before(key, inclusive, &newest));
    }
  }
  newest_seen_ = active_ ? std::max(newest_seen_, newest) : newest;
  if (active_)
    record_step(table, key, inclusive, forward, *known);
  return std::move(*known);
}

// A step from `from` (null: the table's start or end) to `found` (none: nothing up to the
// end) looked through a range with at most that one entry. It joins the last range when it
// continues it in the same direction.
void table_transaction::record_step(rel_id table, const std::string* from, bool inclusive,
                                    bool forward, const std::optional<table_entry>& found) {
  std::uint64_t hash = found ? entry_hash(found->key, found->value) : 0;
  std::size_t count = found ? 1 : 0;
  std::optional<std::string> reached;
  if (found)
    reached = found->key;
  if (!ranges_.empty() && from != nullptr && !inclusive) {
    recorded_range& last = ranges_.back();
    std::optional<std::string>& edge = forward ? last.high : last.low;
    bool edge_inclusive = forward ? last.high_inclusive : last.low_inclusive;
    if (last.table == table && edge && *edge == *from && edge_inclusive) {
      edge = reached;
      (forward ? last.high_inclusive : last.low_inclusive) = true;
      last.hash += hash;
      last.count += count;
      return;
    }
  }
  recorded_range range{table, {}, {}, true, true, hash, count, {}};
  std::optional<std::string> start;
  if (from != nullptr)
    start = *from;
  if (forward) {
    range.low = start;
    range.low_inclusive = inclusive;
    range.high = reached;
  } else {
    range.low = reached;
    range.high = start;
    range.high_inclusive = inclusive;
  }
  ranges_.push_back(std::move(range));
}

// The nearest pending change of `table` from `key` on in the direction (key null: from the
// table's start or end), with its key.
const std::optional<std::string>*
table_transaction::pending_step(rel_id table, const std::string* key, bool inclusive, bool forward,
                                const std::string** pending_key) const {
  if (!active_)
    return nullptr;
  auto it = writes_.end();
  if (forward) {
    table_key from{table, key != nullptr ? *key : std::string()};
    it = key != nullptr && !inclusive ? writes_.upper_bound(from) : writes_.lower_bound(from);
  } else {
    auto after = key == nullptr ? writes_.lower_bound({table + 1, std::string()})
                 : inclusive    ? writes_.upper_bound({table, *key})
                                : writes_.lower_bound({table, *key});
    if (after != writes_.begin())
      it = std::prev(after);
  }
  if (it == writes_.end() || it->first.table != table)
    return nullptr;
  *pending_key = &it->first.key;
  return &it->second;
}

std::optional<table_entry> table_transaction::next_entry(rel_id table, key_view key, bool inclusive,
                                                         read_ahead* ahead) {
  std::string at(key);
  for (;;) {
    std::optional<table_entry> committed = committed_step(table, &at, inclusive, true, ahead);
    const std::string* pending_key = nullptr;
    const std::optional<std::string>* pending =
      pending_step(table, &at, inclusive, true, &pending_key);
    if (pending == nullptr || (committed && compare_keys(*pending_key, committed->key) > 0))
      return with_adds(table, std::move(committed));
    if (*pending)
      return table_entry{*pending_key, **pending};
    at = *pending_key; // erased by this transaction: go on past it
    inclusive = false;
  }
}

std::optional<table_entry> table_transaction::previous_entry(rel_id table, const std::string* key,
                                                             bool inclusive) {
  std::optional<std::string> at;
  if (key != nullptr)
    at = *key;
  for (;;) {
    const std::string* from = at ? &*at : nullptr;
    std::optional<table_entry> committed = committed_step(table, from, inclusive, false);
    const std::string* pending_key = nullptr;
    const std::optional<std::string>* pending =
      pending_step(table, from, inclusive, false, &pending_key);
    if (pending == nullptr || (committed && compare_keys(*pending_key, committed->key) < 0))
      return with_adds(table, std::move(committed));
    if (*pending)
      return table_entry{*pending_key, **pending};
    at = *pending_key;
    inclusive = false;
  }
}

// ---- commit --------------------------------------------------------------------------------

lsn_t table_transaction::commit() {
  storage::refuse_outside_transaction(active_, "commit");
  lsn_t end = 0;
  try {
    operation_epochs::section section(store_.epochs());
    std::optional<commit_gate::alone> alone; // closed after alone_after failed attempts
    for (last_attempts_ = 1;; ++last_attempts_) {
      if (last_attempts_ == commit_gate::alone_after + 1)
        alone.emplace(store_.commit_gate());
      std::optional<commit_gate::attempt_pass> pass;
      if (!alone)
        pass.emplace(store_.commit_gate());
      if (try_commit(&end) == attempt::done)
        break;
    }
    for (const auto& [table, key] : emptied_) // structure changes of their own, after it
      tree(store_, table).remove_empty_leaf(key);
  } catch (...) {
    abort();
    throw;
  }
  abort();
  return end;
}

table_transaction::attempt table_transaction::try_commit(lsn_t* end) {
  latch_reservation reserved(store_); // released after the latches (declared before them)
  std::vector<latched_leaf> leaves;
  std::map<page_id, std::size_t> index;
  if (latch_leaves(leaves, index, reserved) == attempt::again)
    return attempt::again;
  std::vector<chain_to_free> chains;
  if (look_at_writes(leaves, index, reserved, &chains) == attempt::again)
    return attempt::again;
  validate_reads(leaves);
  validate_ranges(leaves, index);
  if (writes_.empty() && adds_.empty() && new_trees_.empty()) {
    *end = 0;
    return attempt::done;
  }
  std::size_t extra = check_before_applying(leaves, chains);
  if (extra > extra_latches_ && !reserved.try_reserve(extra - extra_latches_)) {
    leaves.clear(); // reserve room for them next time, before latching anything
    extra_latches_ = extra;
    return attempt::again;
  }
  *end = apply_and_log(leaves);
  return attempt::done;
}

// A commit holding `pages` latches at once is refused past the store's limit.
void table_transaction::check_latch_limit(std::size_t pages) const {
  if (pages <= store_.max_latched_pages())
    return;
  throw tidemark::usage_error(
    "transaction " + std::to_string(xid_) + " would hold " + std::to_string(pages) +
    " pages at its commit (the leaves it reads and changes, and the overflow pages of its "
    "large values), more than the " +
    std::to_string(store_.max_latched_pages()) +
    " a commit may hold (a quarter of the buffer pool: raise shared_buffers, or split the "
    "transaction); nothing was applied");
}

// The room a leaf's writes need beyond what they free, and the writes that store a value
// (the items of a split, should it need one).
struct table_transaction::leaf_room {
  explicit leaf_room(std::size_t size) : page_size(size) {}
  std::size_t page_size;
  std::size_t added = 0, removed = 0;
  std::vector<const pending_write*> stored;

  /// Counts one write; returns whether its key is in the leaf, at *slot.
  bool add(const node_view& node, const pending_write& write, std::size_t* slot) {
    const auto& [k, value] = write;
    bool found;
    *slot = node.lower_bound(k.key, &found);
    if (found)
      removed += item_footprint(k.key.size(), node.item(*slot).payload_length);
    if (value) {
      added += stored_footprint(page_size, k.key.size(), value->size());
      stored.push_back(&write);
    }
    return found;
  }
  bool fits(const node_view& node) const { return added <= removed || node.fits(added - removed); }
  std::vector<pending_item> items() const {
    std::vector<pending_item> out;
    out.reserve(stored.size());
    for (const pending_write* write : stored)
      out.push_back({write->first.key,
                     stored_footprint(page_size, write->first.key.size(), write->second->size())});
    return out;
  }
};

// The writes from `at` on that `node` covers and that are not located yet, counted into
// `room`; returns the first write past them.
table_transaction::write_iterator
table_transaction::run_covered(const node_view& node, write_iterator at, leaf_room& room) const {
  std::size_t slot; // unused here
  rel_id table = at->first.table;
  for (; at != writes_.end() && at->first.table == table && node.below_high_key(at->first.key) &&
         located_.count(&at->first) == 0;
       ++at)
    room.add(node, *at, &slot);
  return at;
}

// Step 1 for the changed keys not located yet, one shared latch at a time: each leaf with
// the run of keys after its first that it covers (the keys are in order), and the leaves
// too full for their run split at once, so that the attempt latching everything seldom
// finds one (a bulk insert would otherwise latch every leaf twice, convoying with the
// other commits). Keys of a split leaf are located again by step 1 proper.
void table_transaction::locate_writes() {
  std::size_t page_size = store_.page_size();
  std::vector<std::pair<rel_id, std::vector<pending_item>>> too_full;
  for (write_iterator at = writes_.cbegin(); at != writes_.cend();) {
    if (located_.count(&at->first) != 0) {
      ++at;
      continue;
    }
    rel_id table = at->first.table;
    tree t(store_, table);
    leaf_room room(page_size);
    write_iterator run_end = at;
    bool fits = false;
    // The leaf read unlatched: the leaves of other commits' changes are latched until those
    // commits are logged, and a shared latch would wait for each of them. A leaf known but
    // latched now takes its first key unchecked (step 1 proper latches it anyway).
    tree::unlatched_leaf found;
    bool read = false;
    {
      storage::unsynchronized_reads racing;
      found = t.reach_leaf_unlatched(at->first.key);
      if (found.read) {
        node_view node(found.page.bytes, page_size);
        run_end = run_covered(node, at, room);
        fits = room.fits(node);
        read = store_.still_unchanged(found.page);
      }
    }
    block_id block = found.block;
    if (!found.read && block != 0) { // latched by another commit now
      fits = true;
      run_end = std::next(at);
    } else if (!read) {
      page_guard leaf = t.latch_leaf(at->first.key, latch_mode::shared);
      node_view node(leaf.bytes(), page_size);
      room = leaf_room(page_size);
      run_end = run_covered(node, at, room);
      fits = room.fits(node);
      block = leaf.id().block;
    }
    if (fits) {
      for (; at != run_end; ++at)
        located_.emplace(&at->first, page_id{table, block});
    } else {
      too_full.emplace_back(table, room.items());
      at = run_end;
    }
  }
  for (const auto& [table, items] : too_full) // holding nothing
    tree(store_, table).make_room(items);
}

// Steps 1 and 2 of the header: every key's leaf, latched in page order, still covering it.
table_transaction::attempt table_transaction::latch_leaves(std::vector<latched_leaf>& leaves,
                                                           std::map<page_id, std::size_t>& index,
                                                           latch_reservation& reserved) {
  locate_writes();
  std::map<page_id, latch_mode> wanted;
  auto locate = [&](const table_key& k, latch_mode mode) {
    auto known = located_.find(&k); // found by an earlier attempt, and covering it then
    if (known == located_.end())
      known = located_.emplace(&k, tree(store_, k.table).latch_leaf(k.key, latch_mode::shared).id())
                .first;
    auto [entry, added] = wanted.emplace(known->second, mode);
    if (!added && mode == latch_mode::exclusive)
      entry->second = mode;
  };
  for (const auto& write : writes_)
    locate(write.first, latch_mode::exclusive);
  for (const auto& add : adds_)
    locate(add.first, latch_mode::exclusive);
  for (const auto& read : reads_)
    if (writes_.count(read.first) == 0)
      locate(read.first, latch_mode::shared);
  locate_ranges(wanted);
  for (rel_id table : meta_tables_)
    wanted[{table, meta_block}] = latch_mode::exclusive;
  // Room for every leaf, the overflow pages the last attempt found it needs, and one page
  // read at a time (a chain's value while validating), reserved holding nothing. A range
  // read up to the table's end may span many more leaves now than when it was read: if
  // its entries changed, that is a conflict, found without latching them all.
  std::size_t room = wanted.size() + 1 + extra_latches_;
  if (room > store_.max_latched_pages())
    if (std::optional<rel_id> table = changed_range()) {
      std::vector<latched_leaf> none;
      conflict(none, "a range of table " + std::to_string(*table) +
                       " it read changed after it was read (its leaves now number more than "
                       "a commit may latch)");
    }
  check_latch_limit(room);
  leaves_reserved_ = wanted.size();
  reserved.reserve(room);
  for (const auto& [id, mode] : wanted) {
    index[id] = leaves.size();
    leaves.push_back({id, mode, store_.latch(id, mode), id.block == meta_block, {}, {}, {}});
  }
  std::vector<std::size_t> leaf_at; // the leaf of each key of located_, in its order
  leaf_at.reserve(located_.size());
  bool moved = false;
  for (auto at = located_.begin(); at != located_.end();) {
    std::size_t i = index.at(at->second);
    node_view node(leaves[i].guard.bytes(), store_.page_size());
    if (!node.is_node() || !node.is_leaf() || !node.below_high_key(at->first->key)) {
      // A split moved the key right (or its leaf was unlinked): its leaf now, latched
      // without waiting, or everything released to find it again.
      std::optional<std::size_t> right = latch_right_of(leaves, index, i, *at->first);
      if (!right) {
        at = located_.erase(at);
        moved = true;
        continue;
      }
      i = *right;
      at->second = leaves[i].id;
    }
    leaf_at.push_back(i);
    ++at;
  }
  if (moved) {
    leaves.clear(); // find those keys' leaves again
    return attempt::again;
  }
  if (!ranges_latched(leaves, index)) {
    leaves.clear(); // a range's leaves split since they were found
    return attempt::again;
  }
  hand_out(leaf_at, leaves);
  return attempt::done;
}

// The leaf right of leaves[from] that covers `key` now that splits moved it, found by right
// links and latched in leaves[from]'s mode with try_latch (a commit holding its leaves
// never waits for another), its room added to the reservation only when free at once; or
// none. A leaf on the way the commit already holds is passed through when its mode is as
// strong.
std::optional<std::size_t> table_transaction::latch_right_of(std::vector<latched_leaf>& leaves,
                                                             std::map<page_id, std::size_t>& index,
                                                             std::size_t from,
                                                             const table_key& key) {
  latch_mode mode = leaves[from].mode;
  for (std::size_t at = from, hops = 0; hops <= max_right_hops; ++hops) {
    node_view node(leaves[at].guard.bytes(), store_.page_size());
    if (!node.is_node() || !node.is_leaf() || leaves[at].mode != mode)
      return std::nullopt;
    if (node.below_high_key(key.key))
      return at;
    page_id right{key.table, node.right()};
    if (auto held = index.find(right); held != index.end()) {
      at = held->second;
      continue;
    }
    if (!store_.try_reserve_latches(1))
      return std::nullopt;
    page_guard guard = store_.try_latch(right, mode);
    if (!guard)
      return std::nullopt;
    index[right] = leaves.size();
    leaves.push_back({right, mode, std::move(guard), false, {}, {}, {}});
    at = leaves.size() - 1;
  }
  return std::nullopt;
}

// Each change, delta and read goes to its leaf's lists, in key order: walks located_ (which
// holds every key they name, in the same order) beside each of them, with no lookups.
void table_transaction::hand_out(const std::vector<std::size_t>& leaf_at,
                                 std::vector<latched_leaf>& leaves) const {
  auto hand = [&](const auto& keyed, auto list) {
    auto at = located_.begin();
    std::size_t n = 0;
    for (const auto& entry : keyed) {
      for (; at != located_.end() && *at->first < entry.first; ++at)
        ++n;
      TIDEMARK_CHECK(at != located_.end() && !(entry.first < *at->first),
                     "step 1 located every key the commit reads or changes");
      (leaves[leaf_at[n]].*list).push_back(&entry);
    }
  };
  hand(writes_, &latched_leaf::writes);
  hand(adds_, &latched_leaf::adds);
  hand(reads_, &latched_leaf::reads);
}

void table_transaction::locate_ranges(std::map<page_id, latch_mode>& wanted) {
  for (recorded_range& range : ranges_) {
    range.leaves =
      tree(store_, range.table)
        .leaves_between(range.low ? &*range.low : nullptr, range.high ? &*range.high : nullptr);
    for (block_id block : range.leaves)
      wanted.emplace(page_id{range.table, block}, latch_mode::shared); // exclusive stays
  }
}

// Each range's leaves, latched, are still one chain from the leaf covering its low end to
// the leaf covering its high end.
bool table_transaction::ranges_latched(const std::vector<latched_leaf>& leaves,
                                       const std::map<page_id, std::size_t>& index) const {
  for (const recorded_range& range : ranges_)
    for (std::size_t i = 0; i < range.leaves.size(); ++i) {
      node_view node(leaves[index.at({range.table, range.leaves[i]})].guard.bytes(),
                     store_.page_size());
      if (!node.is_node() || !node.is_leaf())
        return false;
      if (i == 0 && (range.low ? !node.below_high_key(*range.low) : node.left() != 0))
        return false;
      bool last = i + 1 == range.leaves.size();
      if (!last && node.right() != range.leaves[i + 1])
        return false;
      if (last && (range.high ? !node.below_high_key(*range.high) : node.right() != 0))
        return false;
    }
  return true;
}

// Adds the entries of `range` that `leaf` holds to `hash` and `count` (a value on overflow
// pages is read: one latch beyond the leaf's).
void table_transaction::add_range_entries(const recorded_range& range, const unsigned char* leaf,
                                          std::uint64_t* hash, std::size_t* count) const {
  node_view node(leaf, store_.page_size());
  for (std::size_t slot = 0; slot < node.slot_count(); ++slot) {
    item_view item = node.item(slot);
    if (range.covers(item.key)) {
      *hash += entry_hash(item.key, item_value(store_, range.table, item));
      ++*count;
    }
  }
}

// Each range walked along the leaves locate_ranges found, one latched at a time: the table
// of the first that no longer holds the entries it was read with (or whose leaf is a leaf
// no more).
std::optional<rel_id> table_transaction::changed_range() const {
  latch_reservation reserved(store_);
  reserved.reserve(2); // the leaf, and a value's overflow page
  for (const recorded_range& range : ranges_) {
    std::uint64_t hash = 0;
    std::size_t count = 0;
    for (block_id block : range.leaves) {
      page_guard leaf = store_.latch({range.table, block}, latch_mode::shared);
      node_view node(leaf.bytes(), store_.page_size());
      if (!node.is_node() || !node.is_leaf())
        return range.table;
      add_range_entries(range, leaf.bytes(), &hash, &count);
    }
    if (hash != range.hash || count != range.count)
      return range.table;
  }
  return std::nullopt;
}

void table_transaction::validate_ranges(std::vector<latched_leaf>& leaves,
                                        const std::map<page_id, std::size_t>& index) {
  for (const recorded_range& range : ranges_) {
    std::uint64_t hash = 0;
    std::size_t count = 0;
    for (block_id block : range.leaves)
      add_range_entries(range, leaves[index.at({range.table, block})].guard.bytes(), &hash, &count);
    if (hash != range.hash || count != range.count)
      conflict(leaves, "a range of table " + std::to_string(range.table) +
                         " it read changed after it was read (an entry appeared, went or changed)");
  }
}

void table_transaction::conflict(std::vector<latched_leaf>& leaves, const std::string& what) {
  leaves.clear();
  throw tidemark::conflict_error("transaction " + std::to_string(xid_) + " conflicts: " + what +
                                 "; nothing was applied, retry it");
}

// Step 3 and what step 5 frees, with one lower_bound per changed key (the same look counts
// a leaf's room and finds the values on chains the changes replace or erase). A chain to
// free comes before room: its table's meta page is latched from the next attempt on, and
// that attempt looks at the room again.
table_transaction::attempt table_transaction::look_at_writes(std::vector<latched_leaf>& leaves,
                                                             std::map<page_id, std::size_t>& index,
                                                             latch_reservation& reserved,
                                                             std::vector<chain_to_free>* chains) {
  for (std::size_t round = 1;; ++round) {
    chains->clear();
    std::set<rel_id> meta_missing; // tables with a chain to free whose meta page is not latched
    std::vector<leaf_split> too_full = find_too_full(leaves, chains, &meta_missing);
    if (!meta_missing.empty()) {
      meta_tables_.insert(meta_missing.begin(), meta_missing.end());
      leaves.clear(); // latch those meta pages too, in order, and look again
      return attempt::again;
    }
    if (too_full.empty())
      return attempt::done;
    if (round <= split_rounds_under_latches && split_under_latches(leaves, index, too_full))
      continue; // the halves are looked at again
    release_and_split(leaves, reserved, too_full);
    return attempt::again;
  }
}

// One look per changed key: the leaves too full for their changes, with the items a split
// must make room for; the chains step 5 will free; the tables whose meta page a chain to
// free needs and the commit does not latch.
std::vector<table_transaction::leaf_split>
table_transaction::find_too_full(const std::vector<latched_leaf>& leaves,
                                 std::vector<chain_to_free>* chains,
                                 std::set<rel_id>* meta_missing) const {
  std::size_t page_size = store_.page_size();
  std::vector<leaf_split> too_full;
  for (std::size_t at = 0; at < leaves.size(); ++at) {
    const latched_leaf& leaf = leaves[at];
    if (leaf.writes.empty())
      continue;
    TIDEMARK_CHECK(leaf.mode == latch_mode::exclusive && !leaf.meta,
                   "a leaf with changes is latched exclusively");
    node_view node(leaf.guard.bytes(), page_size);
    leaf_room room(page_size);
    for (const pending_write* write : leaf.writes) {
      std::size_t slot;
      if (!room.add(node, *write, &slot) || (node.item(slot).flags & item_overflow) == 0)
        continue;
      rel_id table = write->first.table; // a chain to free changes the table's free list
      if (meta_tables_.count(table) == 0)
        meta_missing->insert(table);
      else
        chains->push_back({table, decode_ref(node.item(slot))});
    }
    if (!room.fits(node))
      too_full.push_back({at, room.items()});
  }
  return too_full;
}

// Splits each too-full leaf while every latch is held (tree::split_latched), and hands the
// changes, deltas and reads at or past its separator to the new right leaf, which the
// commit then holds too. False when one could not be split that way (any made before it
// stay: structure changes of their own). Not for a commit that read ranges: their leaves
// were found before the split.
bool table_transaction::split_under_latches(std::vector<latched_leaf>& leaves,
                                            std::map<page_id, std::size_t>& index,
                                            const std::vector<leaf_split>& too_full) {
  if (!ranges_.empty())
    return false;
  for (const leaf_split& full : too_full) {
    latched_leaf& left = leaves[full.leaf];
    page_guard right = tree(store_, left.id.rel).split_latched(left.guard, full.items);
    if (!right)
      return false;
    latched_leaf moved{right.id(), latch_mode::exclusive, std::move(right), false, {}, {}, {}};
    node_view node(left.guard.bytes(), store_.page_size());
    auto hand_right = [&](auto& from, auto& to) { // the entries the separator moved right
      auto first = std::partition_point(from.begin(), from.end(), [&](const auto* entry) {
        return node.below_high_key(entry->first.key);
      });
      for (auto at = first; at != from.end(); ++at)
        located_.at(&(*at)->first) = moved.id;
      to.assign(first, from.end());
      from.erase(first, from.end());
    };
    hand_right(left.writes, moved.writes);
    hand_right(left.adds, moved.adds);
    hand_right(left.reads, moved.reads);
    index[moved.id] = leaves.size();
    leaves.push_back(std::move(moved)); // `left` is not used again
  }
  return true;
}

// The way out when a split under the latches was not possible: everything released, the
// leaves split holding nothing (tree::make_room), their keys found again next attempt.
void table_transaction::release_and_split(std::vector<latched_leaf>& leaves,
                                          latch_reservation& reserved,
                                          const std::vector<leaf_split>& too_full) {
  std::set<page_id> split;
  std::vector<std::pair<rel_id, const std::vector<pending_item>*>> to_make;
  for (const leaf_split& full : too_full) {
    split.insert(leaves[full.leaf].id);
    to_make.emplace_back(leaves[full.leaf].id.rel, &full.items);
  }
  for (auto at = located_.begin(); at != located_.end();) // their keys may move: find them again
    at = split.count(at->second) != 0 ? located_.erase(at) : std::next(at);
  leaves.clear();
  reserved.release(); // splits latch a few pages at a time, holding nothing else
  for (const auto& [table, items] : to_make)
    tree(store_, table).make_room(*items);
}

// Step 4: every read still holds, all leaves latched at once.
void table_transaction::validate_reads(std::vector<latched_leaf>& leaves) {
  for (const latched_leaf& leaf : leaves) {
    node_view node(leaf.guard.bytes(), store_.page_size());
    for (const keyed_read* entry : leaf.reads) {
      const auto& [k, read] = *entry;
      bool found;
      std::size_t slot = node.lower_bound(k.key, &found);
      bool holds = found == read.value.has_value() &&
                   (!found || item_value(store_, k.table, node.item(slot)) == *read.value);
      if (!holds)
        conflict(leaves, "key " + describe_key(k.key) + " of table " + std::to_string(k.table) +
                           " changed after it was read");
    }
  }
}

// Before anything changes: each chain to be freed is intact, and the record will fit.
std::size_t table_transaction::check_before_applying(std::vector<latched_leaf>& leaves,
                                                     const std::vector<chain_to_free>& chains) {
  check_adds(leaves);
  std::size_t page_size = store_.page_size();
  std::size_t pages = new_trees_.size() * 2; // all of them latched beyond the leaves
  std::size_t changed_leaves = 0;
  for (const latched_leaf& leaf : leaves)
    changed_leaves += leaf.mode == latch_mode::exclusive ? 1 : 0;
  for (const auto& [k, value] : writes_)
    if (value && !inline_value_fits(page_size, k.key.size(), value->size()))
      pages += overflow_pages(page_size, value->size());
  for (const chain_to_free& chain : chains) {
    if (std::string problem = check_chain(store_, chain.table, chain.ref, nullptr);
        !problem.empty()) {
      leaves.clear();
      throw tidemark::data_error(problem + "; nothing was applied");
    }
    pages += overflow_pages(page_size, chain.ref.length);
  }
  try { // the leaves splits and right links added under the latches need no room of it
    check_latch_limit(leaves_reserved_ + 1 + pages);
  } catch (...) {
    leaves.clear();
    throw;
  }
  // A block costs at most its header, a page of ops or an image, and the op's header.
  std::size_t bound = sizeof(storage::record_header) + (changed_leaves + pages) * (page_size + 24);
  if (bound > store_.max_record_bytes()) {
    leaves.clear();
    throw tidemark::usage_error("the transaction changes " +
                                std::to_string(changed_leaves + pages) +
                                " pages of tables, more than one "
                                "WAL record holds (" +
                                std::to_string(store_.max_record_bytes()) +
                                " bytes: raise "
                                "wal_buffers, or split the transaction); nothing was applied");
  }
  return pages;
}

// Step 5 for one leaf: erases and resized replacements first (their chains freed), then the
// inserts (their chains written), so the inserts find the room step 3 checked.
void table_transaction::apply_to_leaf(latched_leaf& latched, page_changes& changes,
                                      std::map<rel_id, page_allocator>& allocators) {
  std::size_t page_size = store_.page_size();
  page_edit edit(latched.guard.mutable_bytes(), page_size, &changes);
  std::vector<const pending_write*> inserts;
  for (const pending_write* pending : latched.writes) {
    const pending_write& write = *pending;
    node_view node(edit.bytes(), page_size);
    bool found;
    std::size_t slot = node.lower_bound(write.first.key, &found);
    const std::optional<std::string>& value = write.second;
    bool inline_value = value &&
                        inline_value_fits(page_size, write.first.key.size(), value->size());
    if (found && inline_value && (node.item(slot).flags & item_overflow) == 0 &&
        node.item(slot).payload_length == value->size()) {
      replace_item(edit, slot, 0, static_cast<std::uint32_t>(value->size()), *value);
      continue;
    }
    if (found && (node.item(slot).flags & item_overflow) != 0)
      allocators.at(write.first.table).free_chain(decode_ref(node.item(slot)));
    if (found)
      erase_item(edit, slot);
    if (value)
      inserts.push_back(&write);
  }
  for (const auto* write : inserts) {
    const std::string& key = write->first.key;
    const std::string& value = *write->second;
    std::uint16_t flags = 0;
    std::string_view payload = value; // inline, or the reference to its chain:
    std::string reference;
    if (!inline_value_fits(page_size, key.size(), value.size())) {
      flags = item_overflow;
      reference = encode_ref(allocators.at(write->first.table).write_chain(value));
      payload = reference;
    }
    node_view node(edit.bytes(), page_size);
    bool found;
    std::size_t slot = node.lower_bound(key, &found);
    insert_item(edit, slot, key, flags, static_cast<std::uint32_t>(payload.size()), payload);
  }
  apply_adds(latched.adds, edit);
}

// Before anything changes: every delta lands inside a value kept in its leaf.
void table_transaction::check_adds(std::vector<latched_leaf>& leaves) const {
  for (const latched_leaf& leaf : leaves)
    for (const pending_adds* entry : leaf.adds)
      if (std::string problem = add_problem(leaf, *entry); !problem.empty()) {
        std::string what = "add_i64: key " + describe_key(entry->first.key) + " of table " +
                           std::to_string(entry->first.table) + " " + problem +
                           "; nothing was applied";
        leaves.clear(); // throws at once: nothing of the loop is used again
        throw tidemark::usage_error(what);
      }
}

// Why `entry`'s deltas cannot be applied to its key in `leaf` (empty: they can).
std::string table_transaction::add_problem(const latched_leaf& leaf,
                                           const pending_adds& entry) const {
  const auto& [k, adds] = entry;
  node_view node(leaf.guard.bytes(), store_.page_size());
  bool found;
  std::size_t slot = node.lower_bound(k.key, &found);
  if (!found)
    return "is absent";
  if ((node.item(slot).flags & item_overflow) != 0)
    return "has a value on overflow pages (add_i64 needs one kept in its leaf)";
  std::string problem;
  for (const auto& add : adds)
    if (std::uint64_t(add.first) + 8 > node.item(slot).payload_length)
      problem = "has a " + std::to_string(node.item(slot).payload_length) +
                "-byte value, which bytes " + std::to_string(add.first) + ".." +
                std::to_string(std::uint64_t(add.first) + 8) + " are outside of";
  return problem;
}

void table_transaction::apply_adds(const std::vector<const pending_adds*>& leaves_adds,
                                   page_edit& edit) const {
  for (const pending_adds* pending : leaves_adds) {
    const auto& [k, adds] = *pending;
    node_view node(edit.bytes(), store_.page_size());
    bool found;
    item_view item = node.item(node.lower_bound(k.key, &found));
    TIDEMARK_CHECK(found, "check_adds found every key a delta adds to");
    std::size_t at = static_cast<std::size_t>(item.payload - edit.bytes());
    for (const auto& [offset, delta] : adds) {
      std::uint64_t sum;
      std::memcpy(&sum, edit.bytes() + at + offset, sizeof sum);
      edit.write_value(at + offset, sum + static_cast<std::uint64_t>(delta));
    }
  }
}

lsn_t table_transaction::apply_and_log(std::vector<latched_leaf>& leaves) {
  std::size_t page_size = store_.page_size();
  reused_changes changes(leaves.size(), store_.max_record_bytes() / 16);
  std::vector<logged_page> logged;
  std::map<rel_id, page_allocator> allocators; // for tables whose meta page is latched
  for (std::size_t i = 0; i < leaves.size(); ++i)
    if (leaves[i].meta)
      allocators.emplace(std::piecewise_construct, std::forward_as_tuple(leaves[i].id.rel),
                         std::forward_as_tuple(store_, leaves[i].id.rel, leaves[i].guard,
                                               changes[i], logged));
  std::vector<page_guard> new_pages;
  std::vector<page_changes> new_changes(new_trees_.size() * 2);
  try {
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      if (leaves[i].mode != latch_mode::exclusive || leaves[i].meta)
        continue;
      apply_to_leaf(leaves[i], changes[i], allocators);
      if (!changes[i].empty()) {
        changes[i].collapse(leaves[i].guard.bytes(), page_size);
        logged.push_back({&leaves[i].guard, &changes[i]});
        note_if_emptied(leaves[i]);
      }
    }
    build_new_trees(new_pages, new_changes, logged);
    if (logged.empty())
      return 0; // only erases of keys the transaction itself had put
  } catch (const std::exception& error) {
    // Pages hold changes no record describes: the engine must stop before anyone sees them.
    store_.half_applied(std::string("a table commit failed while changing pages: ") + error.what());
    throw;
  }
  return store_.log_change(logged, xid_);
}

// A leaf the commit left empty is unlinked after it (tree::remove_empty_leaf), found by a
// key it held.
void table_transaction::note_if_emptied(const latched_leaf& leaf) {
  node_view node(leaf.guard.bytes(), store_.page_size());
  if (node.slot_count() == 0 && node.left() != 0 && !leaf.writes.empty())
    emptied_.emplace_back(leaf.id.rel, leaf.writes.front()->first.key);
}

// The meta page and root leaf of each new tree, for the commit record. Nothing fails here:
// the relations were empty (the catalog hands each out once).
void table_transaction::build_new_trees(std::vector<page_guard>& pages,
                                        std::vector<page_changes>& changes,
                                        std::vector<logged_page>& logged) {
  pages.reserve(new_trees_.size() * 2); // guards are referred to by address
  for (std::size_t i = 0; i < new_trees_.size(); ++i) {
    rel_id table = new_trees_[i];
    block_id meta_at = store_.new_block(table), root_at = store_.new_block(table);
    TIDEMARK_CHECK(meta_at == meta_block && root_at == meta_block + 1,
                   "a new table's relation is empty when its tree is made");
    pages.push_back(store_.latch({table, meta_at}, latch_mode::exclusive));
    pages.push_back(store_.latch({table, root_at}, latch_mode::exclusive));
    page_edit meta(pages[2 * i].mutable_bytes(), store_.page_size(), &changes[2 * i]);
    page_edit root(pages[2 * i + 1].mutable_bytes(), store_.page_size(), &changes[2 * i + 1]);
    tree::build_empty(meta, root);
    logged.push_back({&pages[2 * i], &changes[2 * i]});
    logged.push_back({&pages[2 * i + 1], &changes[2 * i + 1]});
  }
}

} // namespace tidemark::access
