// A B-link tree (Lehman and Yao, as PostgreSQL's nbtree) over a page_store: one relation,
// block 0 its meta page, the rest nodes (node.hpp). Keys and values are byte strings.
//
// Why a B-link tree: every node has a high key and a right link, so a reader that reaches a
// node after it split moves right until the node covers its key. Readers hold one latch at
// a time and never wait for a structure change to finish.
//
// Structure changes (a split, with the parent's new downlink, up to a new root) are one
// WAL record each (page_store::log_change), made under the exclusive latches of every page
// they change: redo applies all of one or none, so no crash leaves a split half done. They
// are never undone: a transaction that fails after asking for room leaves the split.
// An erase leaves its bytes dead in the leaf until compaction reuses them. A leaf emptied
// by a commit is unlinked right after it (remove_empty_leaf, as nbtree deletes empty pages;
// leaves are not merged while they hold keys): one structure change takes it out of its
// parent and its siblings' links and puts it on the free list as a deleted node, its key
// space going to its right sibling. Its links stay, so a reader who read its number before
// moves right from it; its block is given out again only once every operation that might
// hold that number has ended (operation_epochs.hpp): each public operation below runs in
// a section. Inner nodes are never deleted.
//
// Latching (page_store.hpp's protocol): readers latch one node at a time, top down and
// left to right. Where the store allows, a descent reads the inner nodes without latching
// them (read_unlatched: each node checked unchanged before a link read in it is followed),
// and read() the leaf too; a change latches only its leaf after such a descent. A single
// put or erase latches its leaf alone. A split latches the leaf
// (holding nothing), then everything else it needs (parents, the right sibling whose left
// link changes, the meta page) with try_latch; one that is busy makes it release all and
// wait for that page, then start again. So nobody waits while holding a latch except on
// the first page of a split, or a commit on leaves in block order, and no cycle of waits
// can form. Nor of waits for room (pins): a split latches its new pages while holding the
// rest, so it takes them from a reservation; when it holds more than it reserved and the
// pool has no room to add, it releases everything, reserves the whole count holding
// nothing, and starts again. A commit holding its leaves may split one of them
// (split_latched): every other page by try_latch, its descent to the leaf's parent too, and
// room only as the pool has it at once; anything busy or short, and it gives up, nothing
// changed. A split latches the meta page only for a new root, or when the table's free list
// is not known to be empty (page_store::free_list_known_empty): splits of one table do not
// serialize on it.
//
// Meta page (block 0), after the page header: u32 magic, u32 root block, u16 root level,
// u16 reserved, u32 first free block (0: none), u32 free blocks (overflow.hpp).
#pragma once

#include "access/node.hpp"
#include "access/page_store.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tidemark::access {

constexpr std::uint32_t meta_magic = 0x52544D54; // "TMTR"
constexpr block_id meta_block = 0;
constexpr std::size_t meta_magic_at = storage::page_header_size;
constexpr std::size_t meta_root_at = meta_magic_at + 4;
constexpr std::size_t meta_level_at = meta_magic_at + 8;
constexpr std::size_t meta_free_head_at = meta_magic_at + 12;
constexpr std::size_t meta_free_count_at = meta_magic_at + 16;

/// The blocks a descent visited: inner[l - 1] at level l (1 .. root level), then the leaf.
struct descent {
  std::vector<block_id> inner;
  block_id leaf = 0;
};

/// An item a commit is about to place in a leaf (for the room a split must make).
struct pending_item {
  std::string key;
  std::size_t footprint = 0; // item_footprint() of the item as it will be stored
};

/// What one attempt at a split (or an append) came to; tree's own bookkeeping.
struct split_attempt {
  std::optional<page_id> busy; // a try_latch failed: wait for it (nothing is held)
  std::size_t latches = 0;     // the split holds this many at once, more than reserved
  bool split = false;          // one split was made
  lsn_t end = 0;               // ... and logged, its change ending here
  std::size_t covered = 0;     // when none of these: the items the leaf covers, room enough
};

class tree {
public:
  tree(page_store& store, rel_id rel) : store_(store), rel_(rel) {}

  /// Writes the meta page and an empty root leaf into an empty relation (one change).
  static void create(page_store& store, rel_id rel);
  /// The two pages of an empty tree, written through the caller's edits (its change logs
  /// them): the meta page in block 0, the root leaf in block 1.
  static void build_empty(page_edit& meta, page_edit& root);

  std::optional<std::string> get(key_view key) { return read(key).value; }
  /// What a read of one key found: its value (none: absent), and the LSN of the leaf that
  /// said so.
  struct read_result {
    std::optional<std::string> value;
    lsn_t leaf_lsn = 0;
  };
  /// Reads `key` without latching where the store allows (read_unlatched: a leaf that
  /// changes under the read is read again, then latched), else under the leaf's latch.
  read_result read(key_view key);
  /// Inserts or replaces; true when the key was new. The value must fit inline
  /// (inline_value_fits).
  bool put(key_view key, std::string_view value);
  /// True when the key was there. A leaf it empties is unlinked (remove_empty_leaf).
  bool erase(key_view key);

  /// The leaf that covers `key`, latched in `mode` (moving right past splits).
  page_guard latch_leaf(key_view key, latch_mode mode, descent* path = nullptr);
  /// How far a descent without latches got (reach_leaf_unlatched).
  struct unlatched_leaf {
    /// The leaf that covers the key or is left of it, as a node checked unchanged pointed
    /// to it (a level-1 node's downlink, or a leaf's right link); 0: not known.
    block_id block = 0;
    /// Its bytes were read (into `page`), to be checked by the caller after it reads them.
    bool read = false;
    unlatched_page page;
  };
  /// Descends from the root hint to the leaf covering `key`, reading nodes unlatched
  /// (page_store::read_unlatched), each node it passes checked unchanged before it follows
  /// a link read in it. It stops where a node cannot be read so (not in the pool, latched
  /// exclusively) or changed under the read: the caller then latches, from the leaf when
  /// that is known. Call it in a storage::unsynchronized_reads scope, in an
  /// operation_epochs section.
  unlatched_leaf reach_leaf_unlatched(key_view key);
  /// Splits leaves until each leaf could take the `items` (sorted by key) it covers, as
  /// far as the moment of each look goes: others may fill them again before the caller
  /// latches them, and it then asks again.
  void make_room(const std::vector<pending_item>& items);

  /// A split made for a commit that holds `leaf` exclusively among other latches (step 3
  /// of table_transaction.hpp), so that the commit need not release them all: the leaf is
  /// split for the `items` (in key order) it covers as make_room would split it, taking
  /// every other page with try_latch only, so it never waits. Returns the new right leaf,
  /// latched exclusively; the caller still holds `leaf`, now the left part. Returns an
  /// unheld guard when it cannot split that way — a page it needs is busy, no room for a
  /// latch, the leaf is the root, or it has room for the items after all — and then nothing
  /// changed. Parents that must split too split with it. A split made stays whatever the
  /// commit does next (a structure change of its own).
  page_guard split_latched(page_guard& leaf, const std::vector<pending_item>& items);

  /// Bulk loading: `entries` (leaf items in key order, values inline, together within
  /// append_capacity()) become a new rightmost leaf in one structure change, which also
  /// gives the old rightmost leaf its high key and right link and the parent its downlink
  /// (splitting upwards as any split does); into an empty rightmost leaf they go as they
  /// are. Returns the change's end LSN; none, with nothing changed, when the rightmost
  /// leaf holds a key not below the first entry or has no room left for a high key (the
  /// caller then puts them the usual way).
  std::optional<lsn_t> append(const std::vector<node_item>& entries);

  /// A stretch of the table read at once: `entries`, in key order, were every entry from
  /// the key asked for up to `end` (not included; none: the table's end).
  struct run {
    std::vector<std::pair<std::string, std::string>> entries;
    std::optional<std::string> end;
  };
  /// From the first key >= `key` (> with `inclusive` false) on, the entries of its leaf: at
  /// most `most`, and past the first none whose value lies on overflow pages (reading a
  /// chain is left to the step that reaches it). `*newest`, when given, is raised to the
  /// LSN of every leaf looked at.
  run run_from(key_view key, bool inclusive, std::size_t most, lsn_t* newest = nullptr);
  /// The first key >= `key` (> with `inclusive` false), with its value (run_from's first).
  std::optional<std::pair<std::string, std::string>> first_from(key_view key, bool inclusive,
                                                                lsn_t* newest = nullptr);
  /// The last key < `key` (<= with `inclusive`), with its value; `key` null: the last key.
  std::optional<std::pair<std::string, std::string>>
  last_before(const std::string* key, bool inclusive, lsn_t* newest = nullptr);

  /// Unlinks the leaf covering `key` when it is empty (one structure change): its key
  /// space goes to its right sibling, it becomes a deleted node on the free list. Left as
  /// it is when it is not empty, the leftmost leaf (a descent may start there), or its
  /// parent's last child (its right sibling has another parent).
  void remove_empty_leaf(key_view key);
  /// The leaves from the one covering `low` (null: the leftmost) to the one covering `high`
  /// (null: the rightmost), left to right, as the right links had them a moment ago.
  std::vector<block_id> leaves_between(const std::string* low, const std::string* high);

  rel_id relation() const { return rel_; }
  page_store& store() { return store_; }

private:
  struct meta {
    block_id root = 0;
    std::uint16_t level = 0;
  };
  meta read_meta();
  /// The node right of `node` (or it) that covers `key`; with `only_try`, latched with
  /// try_latch, and an unheld guard when one was not granted (or `node` is unheld).
  page_guard move_right(page_guard node, key_view key, latch_mode mode, bool only_try = false);
  /// A descent from `block`, a node at any level (the root, or a former root: see
  /// page_store::root_hint): each node's own level says when the next one is a leaf.
  page_guard descend_from(block_id block, key_view key, latch_mode mode);
  /// read() without a latch: false when that did not work out (reach_leaf_unlatched, or
  /// the leaf changed under the read, or its value lies on overflow pages).
  bool read_unlatched(key_view key, read_result* result);
  page_guard latch_node(block_id block, latch_mode mode);
  /// The inner nodes above `leaf` on the way to `key` (path->inner, level 1 first), found by
  /// a descent of try_latches from the root hint, or the root; false when a latch was not
  /// granted, the root is a leaf, or the level-1 node's downlink for `key` is not `leaf`.
  bool try_find_path(key_view key, block_id leaf, descent* path);
  using entry = std::pair<std::string, std::string>;
  /// last_before(), or none when a leaf on its way left was unlinked meanwhile.
  std::optional<std::optional<entry>> try_last_before(const std::string* key, bool inclusive,
                                                      lsn_t* newest);
  /// One attempt at remove_empty_leaf(): a page to wait for when a latch was not granted.
  std::optional<page_id> try_remove_empty_leaf(key_view key);
  /// One attempt at append(): the same outcomes as a split's (`split`: appended; none of
  /// busy, latches and split: declined).
  split_attempt try_append(const std::vector<node_item>& entries, latch_reservation& reserved);
  /// One attempt at a split of the leaf covering items[from], its new pages latched from
  /// `reserved`.
  split_attempt try_split(const std::vector<pending_item>& items, std::size_t from,
                          latch_reservation& reserved);

  page_store& store_;
  rel_id rel_;
};

/// The item bytes (slots included) a bulk load puts in one leaf: nine tenths of a node,
/// as a split of the rightmost leaf under ascending inserts leaves it, so that the leaf
/// still takes its high key and a few replacements that grow.
constexpr std::size_t append_capacity(std::size_t page_size) {
  return (page_size - slots_offset) * 9 / 10;
}

/// True when a key and value of these sizes make a leaf item (slot included) no larger
/// than max_item_size for the page size.
bool inline_value_fits(std::size_t page_size, std::size_t key_size, std::size_t value_size);

/// Checks the whole tree: every node valid (check_node), levels, sibling links both ways,
/// each child's range equal to its parent's separators, every block reachable exactly
/// once. Returns the first violation, or an empty string. Needs no concurrent writers.
std::string check_tree(page_store& store, rel_id rel);

} // namespace tidemark::access
