// The page format of a B-link tree node (leaf or inner) and the operations on one node.
// No latching, no WAL, no buffer pool here: a node is page bytes; every change goes through
// a page_edit, so it is logged as WAL ops and redo replays it byte for byte.
//
// Layout, after the 32-byte storage page header (storage/page.hpp):
//
//   offset  size  field
//       32     4  magic        node_magic: the page is a tree node
//       36     2  kind         node_kind (leaf, inner)
//       38     2  level        0 for leaves, one more per level up
//       40     2  slot_count   items in key order (the high key is not one of them)
//       42     2  upper        start of the item area; items lie in [upper, page_size)
//       44     2  dead         item-area bytes no slot or high key refers to any more
//       46     2  high_key     offset of the high-key item; 0: none (the rightmost node of
//                              its level, whose keys have no upper bound)
//       48     4  right        right sibling's block; 0: none
//       52     4  left         left sibling's block; 0: none
//       56     4  next_free    a deleted node's next block on the table's free list
//       60     4  reserved     zero
//       64        slot array: slot_count × u16 item offsets, sorted by the items' keys
//
//   item:  u16 key_length, u16 flags, u32 aux, key bytes, payload
//          leaf:  aux = payload length; the payload is the value, or with item_overflow an
//                 overflow_ref (the value lives on overflow pages)
//          inner: aux = child block; no payload. The first item's key counts as minus
//                 infinity whatever it holds (a split leaves it empty).
//
// Invariants (check_node() verifies them all, and tidemark check runs it on every node):
//  - keys strictly increase along the slots; every key is below the high key, if any;
//  - slot array and items do not overlap: 64 + 2 × slot_count <= upper <= page_size; every
//    item lies inside [upper, page_size) and items do not overlap each other;
//  - the bytes in [upper, page_size) are the live items (slots and high key) plus `dead`;
//  - a key is at most max_key_size bytes, an item at most max_item_size(page_size) bytes
//    with its slot: any node can take two of the largest items and the largest high key,
//    so a split always leaves two nodes that fit.
// Keys compare as bytes (memcmp), a key that is a prefix of another first.
#pragma once

#include "access/page_changes.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tidemark::access {

using key_view = std::string_view;

/// memcmp order, a prefix before the longer key: negative, zero or positive.
inline int compare_keys(key_view a, key_view b) {
  std::size_t common = std::min(a.size(), b.size());
  int order = common == 0 ? 0 : std::memcmp(a.data(), b.data(), common);
  if (order != 0)
    return order;
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

constexpr std::uint32_t node_magic = 0x4B4E4D54; // "TMNK"
constexpr std::size_t node_header_offset = storage::page_header_size;
constexpr std::size_t slots_offset = 64;
constexpr std::size_t slot_size = 2;
constexpr std::size_t item_header_size = 8;
constexpr std::size_t max_key_size = 1024;

/// Where the header's fields lie (the layout above).
namespace node_field {
constexpr std::size_t magic = node_header_offset;
constexpr std::size_t kind = node_header_offset + 4;
constexpr std::size_t level = node_header_offset + 6;
constexpr std::size_t slot_count = node_header_offset + 8;
constexpr std::size_t upper = node_header_offset + 10;
constexpr std::size_t dead = node_header_offset + 12;
constexpr std::size_t high_key = node_header_offset + 14;
constexpr std::size_t right = node_header_offset + 16;
constexpr std::size_t left = node_header_offset + 20;
constexpr std::size_t next_free = node_header_offset + 24;
static_assert(next_free + 4 + 4 == slots_offset, "the node header ends where the slots begin");
} // namespace node_field

/// A deleted node is a leaf unlinked from its tree (tree::remove_empty_leaf), on the free
/// list: no items, its high key and sibling links as they were, so that a reader who read
/// its block number before it was unlinked moves right from it.
enum class node_kind : std::uint16_t { leaf = 1, inner = 2, deleted = 3 };

constexpr std::uint16_t item_overflow = 1; // leaf: the payload is an overflow_ref

/// The largest item a node takes, slot included: two of them and the largest high key fit.
constexpr std::size_t max_item_size(std::size_t page_size) {
  return (page_size - slots_offset - (item_header_size + max_key_size)) / 2;
}

/// Bytes an item takes in a node, its slot included.
constexpr std::size_t item_footprint(std::size_t key_length, std::size_t payload_length) {
  return slot_size + item_header_size + key_length + payload_length;
}

/// What a node holds at one slot.
struct item_view {
  key_view key;
  std::uint16_t flags = 0;
  std::uint32_t aux = 0; // leaf: payload length; inner: child block
  const unsigned char* payload = nullptr;
  std::size_t payload_length = 0;

  std::uint32_t child() const { return aux; }
  std::string_view value() const {
    return {reinterpret_cast<const char*>(payload), payload_length};
  }
};

/// An item to place in a node (a copy of an item_view, or a new one).
struct node_item {
  std::string key;
  std::uint16_t flags = 0;
  std::uint32_t aux = 0;
  std::string payload;

  std::size_t footprint() const { return item_footprint(key.size(), payload.size()); }
};

/// Reads a node's bytes. Cheap to make; holds a pointer only.
class node_view {
public:
  node_view(const void* page, std::size_t page_size)
    : page_(static_cast<const unsigned char*>(page)), page_size_(page_size) {}

  // The header's fields, read in place (inline: descents read them at every node).
  /// True when the page carries the node magic (a never-written page does not).
  bool is_node() const { return load<std::uint32_t>(page_, node_field::magic) == node_magic; }
  node_kind kind() const {
    return static_cast<node_kind>(load<std::uint16_t>(page_, node_field::kind));
  }
  bool is_leaf() const { return kind() == node_kind::leaf; }
  bool is_deleted() const { return kind() == node_kind::deleted; }
  /// A deleted node's next block on the free list (0: the last).
  std::uint32_t next_free() const { return load<std::uint32_t>(page_, node_field::next_free); }
  std::uint16_t level() const { return load<std::uint16_t>(page_, node_field::level); }
  std::size_t slot_count() const { return load<std::uint16_t>(page_, node_field::slot_count); }
  std::uint32_t right() const { return load<std::uint32_t>(page_, node_field::right); }
  std::uint32_t left() const { return load<std::uint32_t>(page_, node_field::left); }
  bool has_high_key() const { return load<std::uint16_t>(page_, node_field::high_key) != 0; }
  /// Only when has_high_key().
  key_view high_key() const { return key_at(load<std::uint16_t>(page_, node_field::high_key)); }
  /// True when `key` belongs here or left of here: there is no high key or key < it.
  bool below_high_key(key_view key) const {
    return !has_high_key() || compare_keys(key, high_key()) < 0;
  }

  item_view item(std::size_t slot) const;
  /// The key at `slot`, without the rest of its item (binary searches compare only keys).
  key_view key(std::size_t slot) const { return key_at(slot_offset(slot)); }
  /// The first slot whose key is >= `key` (slot_count() when none); `*found` says whether
  /// that key equals `key`. Leaves only (an inner node's first key is minus infinity).
  std::size_t lower_bound(key_view key, bool* found) const;
  /// Inner nodes: the slot of the child whose key range holds `key` (the last slot whose
  /// key is <= `key`, the first slot counting as minus infinity).
  std::size_t child_slot(key_view key) const;

  /// Bytes free between the slot array and the item area.
  std::size_t contiguous_free() const;
  /// Bytes an insert may use: contiguous free space plus dead item bytes (compaction).
  std::size_t usable_free() const;
  bool fits(std::size_t footprint) const { return usable_free() >= footprint; }

  const unsigned char* bytes() const { return page_; }
  std::size_t page_size() const { return page_size_; }

private:
  std::size_t slot_offset(std::size_t slot) const {
    return load<std::uint16_t>(page_, slots_offset + slot_size * slot);
  }
  key_view key_at(std::size_t offset) const {
    return key_view(reinterpret_cast<const char*>(page_ + offset + item_header_size),
                    load<std::uint16_t>(page_, offset));
  }
  item_view item_at(std::size_t offset) const;

  const unsigned char* page_;
  std::size_t page_size_;
};

/// Writes an empty node (no slots, no high key).
void init_node(page_edit& edit, node_kind kind, std::uint16_t level, std::uint32_t right,
               std::uint32_t left);
/// Inserts an item at `slot` (the caller chose it by key order). Compacts the node first
/// when the contiguous free space is too small. The node must fit it (fits()).
void insert_item(page_edit& edit, std::size_t slot, key_view key, std::uint16_t flags,
                 std::uint32_t aux, std::string_view payload);
/// Removes the item at `slot`; its bytes become dead until a compaction.
void erase_item(page_edit& edit, std::size_t slot);
/// Replaces the item at `slot` by one with the same key: in place when the new payload has
/// the old one's length, otherwise erased and inserted again (the node must fit it once the
/// old item is gone).
void replace_item(page_edit& edit, std::size_t slot, std::uint16_t flags, std::uint32_t aux,
                  std::string_view payload);
void set_right(page_edit& edit, std::uint32_t block);
void set_left(page_edit& edit, std::uint32_t block);
/// Inner nodes: points the item at `slot` to another child.
void set_child(page_edit& edit, std::size_t slot, std::uint32_t block);
/// Turns an empty leaf into a deleted node that links to `next_free` on the free list.
void mark_deleted(page_edit& edit, std::uint32_t next_free);
/// Rewrites the item area without dead bytes (same slots, same high key), logged as moves.
void compact_node(page_edit& edit);
/// Keeps the node's first `keep` items only, with `high_key` as its high key and `right` as
/// its right sibling, compacted: the left half of a leaf's split, made in place and logged
/// in a few dozen bytes. The kept items and the high key must fit (choose_split).
void truncate_node(page_edit& edit, std::size_t keep, const std::string& high_key,
                   std::uint32_t right);
/// Rewrites the whole node: `items` in order, the high key (none when `high_key` is null),
/// siblings. Used for a split's new right node, an inner node's split and new roots. The
/// bytes between the slots and the items are left as they were (nothing reads them).
void build_node(page_edit& edit, node_kind kind, std::uint16_t level,
                const std::vector<node_item>& items, const std::string* high_key,
                std::uint32_t right, std::uint32_t left);

/// Copies the node's items (for a split).
std::vector<node_item> node_items(const node_view& node);

/// Where to split `items` (a node's items with the new one already placed): the first
/// item of the right node. Both nodes fit: the left with a high key as long as the
/// separator, the right with `right_high_key_length` (0 when it has none). `rightmost_append`
/// (the new item went at the end of the rightmost node) packs the left node full, as
/// ascending inserts want; otherwise the bytes are split evenly.
std::size_t choose_split(const std::vector<node_item>& items, std::size_t page_size,
                         std::size_t right_high_key_length, bool rightmost_append);

/// The shortest key s with left < s <= right (left < right): the separator a split puts in
/// the parent and as the left node's high key.
std::string shortest_separator(key_view left, key_view right);

/// Verifies every invariant of the header comment; returns the first violation, or an
/// empty string.
std::string check_node(const node_view& node);

} // namespace tidemark::access
