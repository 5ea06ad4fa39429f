// Values too large for a leaf, on chains of overflow pages, and the table's free pages.
//
// Overflow page, after the page header: u32 overflow_magic, u32 next block (0: the last),
// u32 bytes of the value on this page, u32 reserved; the bytes from offset 48.
// Free page: u32 free_magic, u32 next free block (0: the last). The free list also holds
// deleted nodes (node.hpp), linked through their next_free field.
// The meta page (tree.hpp) holds the free list's head and length.
//
// A leaf item with item_overflow carries an overflow_ref as its payload: the value's
// length and its chain's first block.
//
// Invariants:
//  - A chain is written once, in the commit record that puts its leaf item, and never
//    changed; it is freed in the commit record that erases or replaces that item. Both
//    happen under the leaf's exclusive latch, so a reader holding the leaf latched (shared)
//    reads the whole chain as it was: latching the chain's pages while holding the leaf
//    cannot wait for anyone but such a reader.
//  - The free list changes only under the meta page's exclusive latch, in the same record
//    as the pages it gives out or takes back: after a crash a page is either in the list or
//    in use, never both, never lost.
//  - Every block of a table is the meta page, a node, an overflow page in one chain, or on
//    the free list (check_tree counts them).
#pragma once

#include "access/node.hpp"
#include "access/page_store.hpp"

#include <deque>
#include <optional>
#include <string>
#include <string_view>

namespace tidemark::access {

constexpr std::uint32_t overflow_magic = 0x564F4D54; // "TMOV"
constexpr std::uint32_t free_magic = 0x52464D54;     // "TMFR"
constexpr std::size_t overflow_header_size = 16;
constexpr std::size_t overflow_data_offset = storage::page_header_size + overflow_header_size;

constexpr std::size_t overflow_capacity(std::size_t page_size) {
  return page_size - overflow_data_offset;
}

struct overflow_ref {
  std::uint32_t length = 0;
  block_id first = 0;
};
constexpr std::size_t overflow_ref_size = 8;

/// The largest value (its commit record must also fit in wal_buffers).
constexpr std::size_t max_value_size = std::size_t{4} << 20;

/// Bytes a key and value take in a leaf, slot included: the value itself, or a ref to its
/// chain when it does not fit inline (inline_value_fits in tree.hpp).
std::size_t stored_footprint(std::size_t page_size, std::size_t key_size, std::size_t value_size);

std::string encode_ref(overflow_ref ref);
overflow_ref decode_ref(const item_view& item);

/// The value of a leaf item: its payload, or its chain read page by page (the caller holds
/// the leaf latched).
std::string item_value(page_store& store, rel_id rel, const item_view& item);

/// Checks a chain: every page an overflow page, the lengths adding up, the right number of
/// pages; with `seen`, no page reached before (each is marked). Returns the first problem
/// or an empty string.
std::string check_chain(page_store& store, rel_id rel, overflow_ref ref, std::vector<bool>* seen);
/// The next block on the free list after `page` (a free page or a deleted node); none when
/// it is neither.
std::optional<block_id> next_free(const unsigned char* page, std::size_t page_size);
/// Checks the free list from `head`: `count` free pages, none reached before (marked).
std::string check_free_list(page_store& store, rel_id rel, block_id head, std::uint32_t count,
                            std::vector<bool>& seen);

/// Pages of a chain for a value of `length` bytes.
constexpr std::size_t overflow_pages(std::size_t page_size, std::size_t length) {
  return (length + overflow_capacity(page_size) - 1) / overflow_capacity(page_size);
}

/// Gives out and takes back a table's pages within one change, with its meta page latched
/// exclusively by the caller (a split of a table whose free list is known empty passes it
/// unheld, and takes new blocks only). Every page it touches (and the meta page, once
/// changed) is added to the change's logged pages.
class page_allocator {
public:
  page_allocator(page_store& store, rel_id rel, page_guard& meta, page_changes& meta_changes,
                 std::vector<logged_page>& logged);

  /// A chain holding `value`, on pages from the free list first, then new blocks.
  overflow_ref write_chain(std::string_view value);
  /// Puts every page of the chain on the free list.
  void free_chain(overflow_ref ref);
  /// A page for a new node (a split's), from the free list first, latched and logged in
  /// this change; the caller builds the whole node in it. The only use without the meta
  /// page latched (`meta` unheld: page_store::free_list_known_empty): a new block.
  std::pair<page_guard*, page_changes*> take_node_page();
  /// Makes `leaf` (empty, latched and logged by the caller, already unlinked from its
  /// tree in this change) a deleted node at the head of the free list.
  void free_deleted_leaf(page_guard& leaf, page_changes& changes);
  /// An edit of the meta page, logged in this change.
  page_edit edit_meta();

private:
  std::pair<page_guard*, page_changes*> take_page();
  std::pair<page_guard*, page_changes*> hold(page_guard page);
  block_id free_head() const;
  void set_free_list(block_id head, std::int64_t count_change);

  page_store& store_;
  rel_id rel_;
  page_guard& meta_;
  page_changes& meta_changes_;
  std::vector<logged_page>& logged_;
  bool meta_logged_ = false;
  std::deque<page_guard> pages_; // stable addresses for logged_
  std::deque<page_changes> changes_;
};

} // namespace tidemark::access
