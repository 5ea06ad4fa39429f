// Node reading, editing and splitting: see node.hpp for the layout and its invariants.
#include "access/node.hpp"

#include "storage/check.hpp"

#include <algorithm>
#include <cstring>

namespace tidemark::access {

namespace {

std::size_t item_length(const item_view& item, std::size_t key_length) {
  return item_header_size + key_length + item.payload_length;
}

// Writes an item's bytes at `at` (item header, key, payload) with one write.
void write_item(page_edit& edit, std::size_t at, key_view key, std::uint16_t flags,
                std::uint32_t aux, std::string_view payload, std::vector<unsigned char>& scratch) {
  scratch.resize(item_header_size + key.size() + payload.size());
  auto key_length = static_cast<std::uint16_t>(key.size());
  std::memcpy(&scratch[0], &key_length, 2);
  std::memcpy(&scratch[2], &flags, 2);
  std::memcpy(&scratch[4], &aux, 4);
  // std::copy: an empty key or payload may have no data pointer at all.
  std::copy(key.begin(), key.end(), scratch.begin() + item_header_size);
  std::copy(payload.begin(), payload.end(),
            scratch.begin() + static_cast<std::ptrdiff_t>(item_header_size + key.size()));
  edit.write(at, scratch.data(), scratch.size());
}

std::size_t lower_of(std::size_t slot_count) { return slots_offset + slot_size * slot_count; }

} // namespace

// ---- node_view -----------------------------------------------------------------------------

item_view node_view::item_at(std::size_t offset) const {
  item_view item;
  auto key_length = load<std::uint16_t>(page_, offset);
  item.flags = load<std::uint16_t>(page_, offset + 2);
  item.aux = load<std::uint32_t>(page_, offset + 4);
  item.key = key_view(reinterpret_cast<const char*>(page_ + offset + item_header_size), key_length);
  if (kind() == node_kind::leaf) {
    item.payload = page_ + offset + item_header_size + key_length;
    item.payload_length = item.aux;
  }
  return item;
}

item_view node_view::item(std::size_t slot) const { return item_at(slot_offset(slot)); }

std::size_t node_view::lower_bound(key_view key, bool* found) const {
  std::size_t low = 0, high = slot_count();
  while (low < high) {
    std::size_t middle = low + (high - low) / 2;
    if (compare_keys(this->key(middle), key) < 0)
      low = middle + 1;
    else
      high = middle;
  }
  *found = low < slot_count() && compare_keys(this->key(low), key) == 0;
  return low;
}

std::size_t node_view::child_slot(key_view key) const {
  // The last slot in [1, count) whose key is <= key, else slot 0 (minus infinity).
  std::size_t low = 1, high = slot_count();
  while (low < high) {
    std::size_t middle = low + (high - low) / 2;
    if (compare_keys(this->key(middle), key) <= 0)
      low = middle + 1;
    else
      high = middle;
  }
  return low - 1;
}

std::size_t node_view::contiguous_free() const {
  return load<std::uint16_t>(page_, node_field::upper) - lower_of(slot_count());
}

std::size_t node_view::usable_free() const {
  return contiguous_free() + load<std::uint16_t>(page_, node_field::dead);
}

// ---- editing -------------------------------------------------------------------------------

void init_node(page_edit& edit, node_kind kind, std::uint16_t level, std::uint32_t right,
               std::uint32_t left) {
  unsigned char header[slots_offset - node_header_offset] = {};
  std::uint32_t magic = node_magic;
  auto kind_value = static_cast<std::uint16_t>(kind);
  auto upper = static_cast<std::uint16_t>(edit.page_size());
  std::memcpy(header + (node_field::magic - node_header_offset), &magic, 4);
  std::memcpy(header + (node_field::kind - node_header_offset), &kind_value, 2);
  std::memcpy(header + (node_field::level - node_header_offset), &level, 2);
  std::memcpy(header + (node_field::upper - node_header_offset), &upper, 2);
  std::memcpy(header + (node_field::right - node_header_offset), &right, 4);
  std::memcpy(header + (node_field::left - node_header_offset), &left, 4);
  edit.write(node_header_offset, header, sizeof header);
}

void insert_item(page_edit& edit, std::size_t slot, key_view key, std::uint16_t flags,
                 std::uint32_t aux, std::string_view payload) {
  node_view node(edit.bytes(), edit.page_size());
  std::size_t footprint = item_footprint(key.size(), payload.size());
  TIDEMARK_CHECK(key.size() <= max_key_size && footprint <= max_item_size(edit.page_size()),
                 "an item is checked against the node limits before it is inserted");
  TIDEMARK_CHECK(node.fits(footprint) && slot <= node.slot_count(),
                 "an item is inserted only into a node that has room for it, in key order");
  if (node.contiguous_free() < footprint)
    compact_node(edit);
  std::size_t count = node.slot_count();
  auto upper = static_cast<std::uint16_t>(load<std::uint16_t>(edit.bytes(), node_field::upper) -
                                          (footprint - slot_size));
  std::vector<unsigned char> scratch;
  write_item(edit, upper, key, flags, aux, payload, scratch);
  // The slots from `slot` on move up by one; the new slot goes in front of them.
  scratch.resize(slot_size * (count - slot + 1));
  std::memcpy(&scratch[0], &upper, slot_size);
  std::memcpy(&scratch[slot_size], edit.bytes() + slots_offset + slot_size * slot,
              slot_size * (count - slot));
  edit.write(slots_offset + slot_size * slot, scratch.data(), scratch.size());
  std::uint16_t counts[2] = {static_cast<std::uint16_t>(count + 1), upper};
  edit.write(node_field::slot_count, counts, sizeof counts); // slot_count and upper are adjacent
}

void erase_item(page_edit& edit, std::size_t slot) {
  node_view node(edit.bytes(), edit.page_size());
  std::size_t count = node.slot_count();
  TIDEMARK_CHECK(slot < count, "only an existing item is erased");
  item_view item = node.item(slot);
  std::size_t freed = item_length(item, item.key.size());
  std::vector<unsigned char> later(edit.bytes() + slots_offset + slot_size * (slot + 1),
                                   edit.bytes() + slots_offset + slot_size * count);
  if (!later.empty())
    edit.write(slots_offset + slot_size * slot, later.data(), later.size());
  auto dead =
    static_cast<std::uint16_t>(load<std::uint16_t>(edit.bytes(), node_field::dead) + freed);
  auto new_count = static_cast<std::uint16_t>(count - 1);
  edit.write_value(node_field::slot_count, new_count);
  edit.write_value(node_field::dead, dead);
}

void replace_item(page_edit& edit, std::size_t slot, std::uint16_t flags, std::uint32_t aux,
                  std::string_view payload) {
  node_view node(edit.bytes(), edit.page_size());
  item_view item = node.item(slot);
  std::string key(item.key);
  if (item.payload_length == payload.size()) { // an inner item's empty payload too
    std::size_t at = load<std::uint16_t>(edit.bytes(), slots_offset + slot_size * slot);
    std::vector<unsigned char> scratch;
    write_item(edit, at, key, flags, aux, payload, scratch);
    return;
  }
  erase_item(edit, slot);
  insert_item(edit, slot, key, flags, aux, payload);
}

void set_right(page_edit& edit, std::uint32_t block) { edit.write_value(node_field::right, block); }
void set_left(page_edit& edit, std::uint32_t block) { edit.write_value(node_field::left, block); }

void set_child(page_edit& edit, std::size_t slot, std::uint32_t block) {
  node_view node(edit.bytes(), edit.page_size());
  TIDEMARK_CHECK(node.kind() == node_kind::inner && slot < node.slot_count(),
                 "a child is set in an inner node's item");
  std::size_t at = load<std::uint16_t>(edit.bytes(), slots_offset + slot * slot_size);
  edit.write_value(at + 4, block); // after the item's key length and flags
}

void mark_deleted(page_edit& edit, std::uint32_t next_free) {
  node_view node(edit.bytes(), edit.page_size());
  TIDEMARK_CHECK(node.is_leaf() && node.slot_count() == 0, "only an empty leaf is deleted");
  edit.write_value(node_field::kind, static_cast<std::uint16_t>(node_kind::deleted));
  edit.write_value(node_field::next_free, next_free);
}

// Packs the live items (the slots' and the high key's) against the end of the page, in the
// order they lie: each moves up or stays, the highest first, so none is overwritten before
// it moved. Logged as one move per item that moves, the slot array and the header fields.
void compact_node(page_edit& edit) {
  node_view node(edit.bytes(), edit.page_size());
  std::size_t count = node.slot_count();
  struct live_item {
    std::size_t offset, length, slot; // slot == count: the high key
  };
  std::vector<live_item> live;
  live.reserve(count + 1);
  for (std::size_t slot = 0; slot < count; ++slot) {
    item_view item = node.item(slot);
    live.push_back({load<std::uint16_t>(edit.bytes(), slots_offset + slot_size * slot),
                    item_length(item, item.key.size()), slot});
  }
  if (node.has_high_key()) {
    std::size_t at = load<std::uint16_t>(edit.bytes(), node_field::high_key);
    live.push_back({at, item_header_size + node.high_key().size(), count});
  }
  std::sort(live.begin(), live.end(),
            [](const live_item& a, const live_item& b) { return a.offset > b.offset; });
  std::vector<std::uint16_t> slots(count);
  std::uint16_t fields[4] = {static_cast<std::uint16_t>(count), 0, 0,
                             0}; // count, upper, dead, high
  std::size_t upper = edit.page_size();
  for (const live_item& item : live) {
    upper -= item.length;
    TIDEMARK_CHECK(upper >= item.offset && upper >= lower_of(count),
                   "a compaction moves each item up, clear of the slots");
    edit.move(upper, item.offset, item.length);
    (item.slot == count ? fields[3] : slots[item.slot]) = static_cast<std::uint16_t>(upper);
  }
  fields[1] = static_cast<std::uint16_t>(upper);
  if (count > 0)
    edit.write(slots_offset, slots.data(), slot_size * count);
  // slot_count, upper, dead and high_key are adjacent: one write.
  edit.write(node_field::slot_count, fields, sizeof fields);
}

void truncate_node(page_edit& edit, std::size_t keep, const std::string& high_key,
                   std::uint32_t right) {
  node_view node(edit.bytes(), edit.page_size());
  TIDEMARK_CHECK(keep <= node.slot_count(), "a node keeps at most the items it has");
  // Fewer slots and no high key; the compaction then packs what they refer to (and sets
  // upper and dead from that alone).
  edit.write_value(node_field::slot_count, static_cast<std::uint16_t>(keep));
  edit.write_value(node_field::high_key, std::uint16_t{0});
  compact_node(edit);
  std::size_t upper =
    load<std::uint16_t>(edit.bytes(), node_field::upper) - item_header_size - high_key.size();
  TIDEMARK_CHECK(upper >= lower_of(keep), "a node's first items leave room for its high key");
  std::vector<unsigned char> scratch;
  write_item(edit, upper, high_key, 0, 0, {}, scratch);
  std::uint16_t fields[3] = {static_cast<std::uint16_t>(upper), 0,
                             static_cast<std::uint16_t>(upper)}; // upper, dead, high_key
  edit.write(node_field::upper, fields, sizeof fields);
  set_right(edit, right);
}

void build_node(page_edit& edit, node_kind kind, std::uint16_t level,
                const std::vector<node_item>& items, const std::string* high_key,
                std::uint32_t right, std::uint32_t left) {
  // Built in a private image, then written as two ops: header and slots, and the items.
  // The free space between them is not written: nothing reads it.
  std::size_t page_size = edit.page_size();
  std::vector<unsigned char> image(edit.bytes(), edit.bytes() + page_size);
  std::fill(image.begin() + node_header_offset, image.end(), 0);
  page_edit build(image.data(), page_size, nullptr);
  init_node(build, kind, level, right, left);
  std::size_t upper = page_size;
  std::vector<unsigned char> scratch;
  if (high_key != nullptr) {
    upper -= item_header_size + high_key->size();
    write_item(build, upper, *high_key, 0, 0, {}, scratch);
    build.write_value(node_field::high_key, static_cast<std::uint16_t>(upper));
  }
  for (std::size_t slot = 0; slot < items.size(); ++slot) {
    const node_item& item = items[slot];
    TIDEMARK_CHECK(upper >= lower_of(slot + 1) + item.footprint() - slot_size,
                   "a node is built only from items that fit it");
    upper -= item.footprint() - slot_size;
    write_item(build, upper, item.key, item.flags, item.aux, item.payload, scratch);
    build.write_value(slots_offset + slot_size * slot, static_cast<std::uint16_t>(upper));
  }
  build.write_value(node_field::slot_count, static_cast<std::uint16_t>(items.size()));
  build.write_value(node_field::upper, static_cast<std::uint16_t>(upper));
  std::size_t lower = lower_of(items.size());
  edit.write(node_header_offset, image.data() + node_header_offset, lower - node_header_offset);
  edit.write(upper, image.data() + upper, page_size - upper);
}

std::vector<node_item> node_items(const node_view& node) {
  std::vector<node_item> items;
  items.reserve(node.slot_count());
  for (std::size_t slot = 0; slot < node.slot_count(); ++slot) {
    item_view item = node.item(slot);
    items.push_back({std::string(item.key), item.flags, item.aux, std::string(item.value())});
  }
  return items;
}

// ---- splitting -----------------------------------------------------------------------------

std::string shortest_separator(key_view left, key_view right) {
  std::size_t common = 0;
  while (common < left.size() && common < right.size() && left[common] == right[common])
    ++common;
  TIDEMARK_CHECK(common < right.size(), "a separator is taken between two keys in order");
  return std::string(right.substr(0, common + 1));
}

std::size_t choose_split(const std::vector<node_item>& items, std::size_t page_size,
                         std::size_t right_high_key_length, bool rightmost_append) {
  TIDEMARK_CHECK(items.size() >= 2, "a split has an item for each side");
  std::size_t capacity = page_size - slots_offset;
  std::size_t total = 0;
  for (const node_item& item : items)
    total += item.footprint();
  std::size_t right_high = right_high_key_length == 0 ? 0
                                                      : item_header_size + right_high_key_length;
  std::size_t target = rightmost_append ? total - items.back().footprint() : total / 2;
  // The split point nearest the target at which both sides fit, the left with a high key
  // as long as the separator (at most the right's first key).
  std::size_t best = 0, best_distance = ~std::size_t{0}, left_bytes = 0;
  for (std::size_t split = 1; split < items.size(); ++split) {
    left_bytes += items[split - 1].footprint();
    std::size_t left_high = item_header_size + items[split].key.size();
    bool fits = left_bytes + left_high <= capacity && total - left_bytes + right_high <= capacity;
    std::size_t distance = left_bytes > target ? left_bytes - target : target - left_bytes;
    if (fits && distance < best_distance) {
      best = split;
      best_distance = distance;
    }
  }
  TIDEMARK_CHECK(best != 0, "max_item_size guarantees that some split fits both sides");
  return best;
}

// ---- checking ------------------------------------------------------------------------------

std::string check_node(const node_view& node) {
  if (!node.is_node())
    return "not a tree node (no node magic)";
  if (node.kind() != node_kind::leaf && node.kind() != node_kind::inner)
    return "unknown node kind " + std::to_string(static_cast<int>(node.kind()));
  if ((node.kind() == node_kind::leaf) != (node.level() == 0))
    return "a leaf is at level 0 and only a leaf is";
  std::size_t page_size = node.page_size();
  std::size_t count = node.slot_count();
  std::size_t upper = load<std::uint16_t>(node.bytes(), node_field::upper);
  if (lower_of(count) > upper || upper > page_size)
    return "slot array (" + std::to_string(count) + " slots) and item area (from " +
           std::to_string(upper) + ") overlap or leave the page";
  // Every item inside [upper, page_size), none overlapping another.
  std::vector<std::pair<std::size_t, std::size_t>> extents;
  auto add_extent = [&](std::size_t offset, const item_view& item) -> std::string {
    std::size_t end =
      offset + item_header_size + item.key.size() + (node.is_leaf() ? item.payload_length : 0);
    if (offset < upper || end > page_size)
      return "an item at " + std::to_string(offset) + " lies outside the item area";
    if (item.key.size() > max_key_size)
      return "a key of " + std::to_string(item.key.size()) + " bytes exceeds the limit";
    extents.push_back({offset, end});
    return {};
  };
  auto read_checked = [&](std::size_t at, item_view* out) -> std::string {
    if (at < upper || at + item_header_size > page_size)
      return "an item at " + std::to_string(at) + " lies outside the item area";
    std::size_t key_length = load<std::uint16_t>(node.bytes(), at);
    std::uint32_t aux = load<std::uint32_t>(node.bytes(), at + 4);
    std::size_t payload = node.is_leaf() ? aux : 0;
    if (at + item_header_size + key_length + payload > page_size)
      return "an item at " + std::to_string(at) + " runs past the page";
    out->key =
      key_view(reinterpret_cast<const char*>(node.bytes() + at + item_header_size), key_length);
    out->payload_length = payload;
    return add_extent(at, *out);
  };
  item_view high;
  if (node.has_high_key())
    if (std::string problem =
          read_checked(load<std::uint16_t>(node.bytes(), node_field::high_key), &high);
        !problem.empty())
      return "high key: " + problem;
  item_view previous;
  for (std::size_t slot = 0; slot < count; ++slot) {
    item_view item;
    std::size_t at = load<std::uint16_t>(node.bytes(), slots_offset + slot_size * slot);
    if (std::string problem = read_checked(at, &item); !problem.empty())
      return "slot " + std::to_string(slot) + ": " + problem;
    bool minus_infinity = !node.is_leaf() && slot == 0;
    if (slot > 0 && !(slot == 1 && !node.is_leaf()) && compare_keys(previous.key, item.key) >= 0)
      return "keys out of order at slot " + std::to_string(slot);
    if (!minus_infinity && node.has_high_key() && compare_keys(item.key, high.key) >= 0)
      return "the key at slot " + std::to_string(slot) + " is not below the high key";
    previous = item;
  }
  std::sort(extents.begin(), extents.end());
  std::size_t live = 0;
  for (std::size_t i = 0; i < extents.size(); ++i) {
    if (i > 0 && extents[i].first < extents[i - 1].second)
      return "two items overlap at " + std::to_string(extents[i].first);
    live += extents[i].second - extents[i].first;
  }
  std::size_t dead = load<std::uint16_t>(node.bytes(), node_field::dead);
  if (live + dead != page_size - upper)
    return "item area of " + std::to_string(page_size - upper) + " bytes holds " +
           std::to_string(live) + " live and " + std::to_string(dead) + " dead bytes";
  return {};
}

} // namespace tidemark::access
