// One transaction over keyed tables: reads recorded, changes buffered, and at commit every
// read validated and every change applied to the leaves under their latches, logged as one
// commit record (page_store::log_change with the transaction's id).
//
// Reads see the committed tables with the transaction's own pending changes laid over
// them. Each read of a table records what it depended on: for a key, whether it was there
// and its value; for a step of an ordered read, the range it looked through and the
// entries the range held (a count and an order-independent hash of keys and values, so
// adjacent steps join into one range). commit() then:
//   1. finds the leaf of every key it changes or read, and the leaves of every range it
//      read (descents and right links, one latch at a time; a changed key's leaf read
//      without one where it can, tree::reach_leaf_unlatched); a leaf found too full for the
//      changes it gets is split there and then (holding nothing else); an attempt after the
//      first keeps the leaves the last one found for keys they still covered;
//   2. reserves room for all its latches (page_store::reserve_latches, holding nothing;
//      usage_error past max_latched_pages, but conflict_error when a range it read, now
//      spanning more leaves than that, holds other entries: walked a leaf at a time, as
//      when a table grew past the end of a range read to its last key), then latches
//      those leaves in (relation, block) order, exclusively where it changes one, shared
//      where it only reads; checks each key is still covered by its leaf: one a split
//      moved right goes to the leaf that covers it now, found by right links and latched
//      with try_latch; when that fails, releases everything and finds the leaves again;
//   3. checks each changed leaf has room for its changes; one that has not is split there
//      and then, holding every latch (tree::split_latched: the other pages it needs taken
//      with try_latch, a structure change of its own, kept whatever happens next), its new
//      right leaf latched too and given the changes past the separator; when that is not
//      possible (a page busy, its parent full, ranges read), releases everything, splits
//      it, and starts again; a change that frees a value's chain of overflow pages needs the
//      table's meta page (its free list) latched too, in order: without it, releases and starts
//      again;
//   4. validates the reads: with every leaf latched at once, each key is present or absent
//      with the value it was read with, and each range holds the same entries (a key that
//      appeared in it is a phantom); otherwise conflict_error, nothing applied;
//   5. applies the changes (erases and resized replacements first, so the inserts after
//      them find the room step 3 checked), and logs every changed leaf in one record. When
//      its overflow pages need more room than it reserved and none is free at once, it
//      releases everything and starts again with that room reserved up front.
//   6. after the latches are released, unlinks each leaf it left empty (a structure change
//      of its own: tree::remove_empty_leaf).
// The whole commit runs in an operation_epochs section: the leaves it found in step 1 are
// block numbers, and a block is not given out again while it may still hold one.
// Why this is serializable: at the moment every latch is held, every read still holds and
// no other commit can change those leaves; the writes become visible at once when the
// latches are released. Why no deadlock: the leaves are latched in one global order, and
// nobody else waits for a latch while holding one except splits, which only ever try (a
// split under the commit's latches too); and no commit waits for room for a latch while it
// holds one (a split under its latches adds to its reservation only what it gets at once).
// Why no undo: nothing is applied before the record can be written; a split made for the
// transaction is a structure change of its own and stays.
// Why it ends: after commit_gate::alone_after failed attempts, the rest run with the gate
// closed (commit_gate.hpp), so no other commit fills its leaves between its splits and its
// next attempt.
#pragma once

#include "access/overflow.hpp"
#include "access/tree.hpp"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tidemark::access {

struct table_entry {
  std::string key;
  std::string value;
  friend bool operator==(const table_entry& a, const table_entry& b) {
    return a.key == b.key && a.value == b.value;
  }
};

/// A forward cursor's read-ahead (table_transaction::next_entry): the committed entries of
/// one leaf from a key on, which were every entry of the table from that key up to the end
/// of the stretch when the leaf was read. Steps inside the stretch are answered from it: the
/// leaf is read once, not once a step. Owned by one cursor, so what a step shows is never
/// older than what that cursor's earlier steps showed.
class read_ahead {
public:
  /// The answer to a step from `key` (`inclusive`) when the stretch holds it: the entry, or
  /// none at the table's end. Not known (nullopt) otherwise. An entry given is moved out:
  /// a later step that would need it again reads the leaf again.
  std::optional<std::optional<table_entry>> take(rel_id table, const std::string& key,
                                                 bool inclusive);
  void fill(rel_id table, const std::string& from, bool inclusive, tree::run stretch, lsn_t newest);
  lsn_t newest() const { return newest_; }

private:
  bool filled_ = false;
  rel_id table_ = 0;
  std::string from_;
  bool from_inclusive_ = true;
  tree::run stretch_;
  std::size_t taken_ = 0; // entries moved out, from the first
  lsn_t newest_ = 0;
};

class table_transaction {
public:
  explicit table_transaction(page_store& store) : store_(store) {}

  void begin(storage::xid_t xid);
  bool active() const { return active_; }
  storage::xid_t xid() const { return xid_; }

  /// The value of `key` as this transaction sees it.
  std::optional<std::string> get(rel_id table, key_view key);
  /// Insert or replace.
  void put(rel_id table, key_view key, std::string_view value);
  /// Inserts only when absent; false (nothing changed) when present.
  bool insert(rel_id table, key_view key, std::string_view value);
  /// True when the key was there.
  bool erase(rel_id table, key_view key);
  /// Adds `delta` (wrapping) to the little-endian i64 at byte `offset` of the key's value
  /// when the transaction commits, without reading it: it conflicts with nothing unless
  /// the transaction also reads the key. Reads in the transaction see the sum. The value
  /// must then be present, kept in its leaf (not on overflow pages), with those 8 bytes
  /// inside it: otherwise commit() throws usage_error, nothing applied. usage_error at once
  /// when the transaction itself erased the key or put a value those bytes are not in.
  void add_i64(rel_id table, key_view key, std::uint32_t offset, std::int64_t delta);
  /// Makes an empty tree in relation `table` (which has no blocks) as part of this
  /// transaction's commit: its first pages go in the commit record (the catalog's
  /// create_table, so that a table and its catalog entry appear together or not at all).
  void create_tree(rel_id table);
  /// Ordered reads as this transaction sees the table: the first entry at or after `key`
  /// (after, with `inclusive` false), and the last entry at or before `key` (before; `key`
  /// null: the last entry). Each is recorded as a range read.
  /// With `ahead`, a cursor's read-ahead: committed entries come from it while its stretch
  /// holds the answer (commit() validates those steps all the same).
  std::optional<table_entry> next_entry(rel_id table, key_view key, bool inclusive,
                                        read_ahead* ahead = nullptr);
  std::optional<table_entry> previous_entry(rel_id table, const std::string* key, bool inclusive);

  /// The newest page LSN a read returned since begin(): the caller makes WAL durable up to
  /// it before acting on what it read.
  lsn_t newest_seen() const { return newest_seen_; }

  /// Validates, applies and logs; returns the commit record's end LSN (0 when nothing
  /// changed: no record). Throws conflict_error (nothing applied) when a read no longer
  /// holds, usage_error (nothing applied) when its commit record would be longer than the
  /// store's max_record_bytes(). The transaction has ended whatever it throws.
  lsn_t commit();
  void abort();
  /// The attempts the last commit() made (the first, and one more after each release:
  /// room made, keys moved by splits, pages to add).
  std::size_t last_commit_attempts() const { return last_attempts_; }

private:
  struct table_key {
    rel_id table;
    std::string key;
    friend bool operator<(const table_key& a, const table_key& b) {
      return a.table != b.table ? a.table < b.table : compare_keys(a.key, b.key) < 0;
    }
  };
  struct recorded_read {
    std::optional<std::string> value; // none: the key was absent
  };
  /// The committed entries between two bounds (none: unbounded) when they were read.
  struct recorded_range {
    rel_id table;
    std::optional<std::string> low, high;
    bool low_inclusive = true, high_inclusive = true;
    std::uint64_t hash = 0;
    std::size_t count = 0;
    std::vector<block_id> leaves; // located at commit
    bool covers(key_view key) const;
  };
  using pending_write = std::pair<const table_key, std::optional<std::string>>;
  using pending_adds =
    std::pair<const table_key, std::vector<std::pair<std::uint32_t, std::int64_t>>>;
  using keyed_read = std::pair<const table_key, recorded_read>;
  struct latched_leaf {
    page_id id;
    latch_mode mode;
    page_guard guard;
    bool meta = false; // a table's meta page (its free list), not a leaf
    // The changes that land on this leaf and the reads it answered, in key order (filled
    // once every leaf is latched: hand_out).
    std::vector<const pending_write*> writes;
    std::vector<const pending_adds*> adds;
    std::vector<const keyed_read*> reads;
  };
  /// A value on overflow pages a change replaces or erases: step 5 frees its chain.
  struct chain_to_free {
    rel_id table;
    overflow_ref ref;
  };
  enum class attempt { done, again };

  std::optional<std::string> read_committed(rel_id table, key_view key);
  std::optional<table_entry> committed_step(rel_id table, const std::string* key, bool inclusive,
                                            bool forward, read_ahead* ahead = nullptr);
  void record_step(rel_id table, const std::string* from, bool inclusive, bool forward,
                   const std::optional<table_entry>& found);
  const std::optional<std::string>* pending_step(rel_id table, const std::string* key,
                                                 bool inclusive, bool forward,
                                                 const std::string** pending_key) const;
  void locate_ranges(std::map<page_id, latch_mode>& wanted);
  bool ranges_latched(const std::vector<latched_leaf>& leaves,
                      const std::map<page_id, std::size_t>& index) const;
  void add_range_entries(const recorded_range& range, const unsigned char* leaf,
                         std::uint64_t* hash, std::size_t* count) const;
  std::optional<rel_id> changed_range() const;
  void validate_ranges(std::vector<latched_leaf>& leaves,
                       const std::map<page_id, std::size_t>& index);
  attempt try_commit(lsn_t* end);
  attempt latch_leaves(std::vector<latched_leaf>& leaves, std::map<page_id, std::size_t>& index,
                       latch_reservation& reserved);
  void hand_out(const std::vector<std::size_t>& leaf_at, std::vector<latched_leaf>& leaves) const;
  /// Right links a commit follows, latching, to a key a split moved before it starts again.
  static constexpr std::size_t max_right_hops = 4;
  std::optional<std::size_t> latch_right_of(std::vector<latched_leaf>& leaves,
                                            std::map<page_id, std::size_t>& index, std::size_t from,
                                            const table_key& key);
  struct leaf_room;
  using write_iterator = std::map<table_key, std::optional<std::string>>::const_iterator;
  write_iterator run_covered(const node_view& node, write_iterator at, leaf_room& room) const;
  void locate_writes();
  /// A leaf (its place in the commit's leaves) too full for its changes, and the items a
  /// split must make room for.
  struct leaf_split {
    std::size_t leaf;
    std::vector<pending_item> items;
  };
  /// Rounds of splits under the latches before a commit releases everything to split.
  static constexpr std::size_t split_rounds_under_latches = 3;
  /// Step 3, one look per changed key: `again` (everything released) when a chain to free
  /// needs its table's meta page latched, or a leaf too full could not be split under the
  /// latches and is split holding nothing; otherwise the chains step 5 will free.
  attempt look_at_writes(std::vector<latched_leaf>& leaves, std::map<page_id, std::size_t>& index,
                         latch_reservation& reserved, std::vector<chain_to_free>* chains);
  std::vector<leaf_split> find_too_full(const std::vector<latched_leaf>& leaves,
                                        std::vector<chain_to_free>* chains,
                                        std::set<rel_id>* meta_missing) const;
  bool split_under_latches(std::vector<latched_leaf>& leaves, std::map<page_id, std::size_t>& index,
                           const std::vector<leaf_split>& too_full);
  void release_and_split(std::vector<latched_leaf>& leaves, latch_reservation& reserved,
                         const std::vector<leaf_split>& too_full);
  void check_latch_limit(std::size_t pages) const;
  void validate_reads(std::vector<latched_leaf>& leaves);
  [[noreturn]] void conflict(std::vector<latched_leaf>& leaves, const std::string& what);
  void note_if_emptied(const latched_leaf& leaf);
  lsn_t apply_and_log(std::vector<latched_leaf>& leaves);
  /// Checks what applying needs (chains to free intact, the latches and the record within
  /// their limits) and returns how many pages it latches beyond the leaves.
  std::size_t check_before_applying(std::vector<latched_leaf>& leaves,
                                    const std::vector<chain_to_free>& chains);
  void apply_to_leaf(latched_leaf& latched, page_changes& changes,
                     std::map<rel_id, page_allocator>& allocators);
  /// `value` with the transaction's pending deltas on `at` added.
  std::optional<std::string> with_adds(const table_key& at, std::optional<std::string> value) const;
  std::optional<table_entry> with_adds(rel_id table, std::optional<table_entry> entry) const;
  void check_adds(std::vector<latched_leaf>& leaves) const;
  std::string add_problem(const latched_leaf& leaf, const pending_adds& entry) const;
  void apply_adds(const std::vector<const pending_adds*>& adds, page_edit& edit) const;
  void build_new_trees(std::vector<page_guard>& pages, std::vector<page_changes>& changes,
                       std::vector<logged_page>& logged);

  page_store& store_;
  storage::xid_t xid_ = 0;
  bool active_ = false;
  lsn_t newest_seen_ = 0;
  std::map<table_key, std::optional<std::string>> writes_; // none: erase
  /// Deltas on keys not in writes_, applied to the committed value at commit.
  std::map<table_key, std::vector<std::pair<std::uint32_t, std::int64_t>>> adds_;
  std::map<table_key, recorded_read> reads_;
  std::vector<recorded_range> ranges_;
  std::vector<rel_id> new_trees_;
  std::set<rel_id> meta_tables_;  // tables whose meta page the commit latches (chains)
  std::size_t extra_latches_ = 0; // pages beyond the leaves the last attempt found it needs
  // The leaves this attempt reserved room for: those splits and right links add under the
  // latches come from room free at once, and do not count against max_latched_pages.
  std::size_t leaves_reserved_ = 0;
  /// The leaf each key read or changed was found in: kept from one attempt to the next while
  /// it still covers the key (the commit's operation_epochs section keeps the block from
  /// being given out again, and a live leaf only loses keys to its right), so an attempt
  /// after a split descends again only for the keys that moved.
  struct by_pointed_key {
    bool operator()(const table_key* a, const table_key* b) const { return *a < *b; }
  };
  /// Keyed by the keys of writes_, adds_ and reads_ (map nodes: they stay put while the
  /// commit runs), so that locating a key copies nothing.
  std::map<const table_key*, page_id, by_pointed_key> located_;
  std::size_t last_attempts_ = 0;
  std::vector<std::pair<rel_id, std::string>> emptied_; // a key of each leaf it emptied
};

} // namespace tidemark::access
