// The B-link tree's descents, single-key changes, splits, ordered reads and check: see
// tree.hpp.
#include "access/tree.hpp"

#include "access/overflow.hpp"
#include "storage/check.hpp"
#include "storage/unsynchronized_reads.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>

namespace tidemark::access {

namespace {

// The entry at `slot` of a latched leaf, its value read from its chain when it has one.
std::pair<std::string, std::string> entry_of(page_store& store, rel_id rel, const node_view& node,
                                             std::size_t slot) {
  item_view item = node.item(slot);
  return {std::string(item.key), item_value(store, rel, item)};
}

// One node a split divides: its new left part stays in its block, the right part goes to a
// new block. `child_slot` is where, among `items`, the item pointing to the level below's
// new block sits (inner nodes; none for the leaf).
struct split_step {
  page_guard node;
  page_guard old_right; // the right sibling whose left link moves to the new block
  std::vector<node_item> items;
  std::size_t split = 0; // items[split..] go right (leaves: see existing_split)
  std::size_t child_slot = ~std::size_t{0};
  std::string separator; // the left part's high key, and the key the parent gets
  block_id new_block = 0;
};

// Where a leaf with items `existing` (their footprints after the pending replacements)
// splits to make room for `pending` (new keys, in order). Both parts of the existing items must fit
// their node with its high key; among the split points that do, the one nearest the target by bytes
// of existing and pending items together. Returns the separator.
std::string choose_leaf_separator(const std::vector<pending_item>& existing,
                                  const std::vector<pending_item>& pending, std::size_t page_size,
                                  std::size_t right_high_bytes, bool rightmost) {
  struct entry {
    key_view key;
    std::size_t footprint;
    bool existing;
  };
  std::vector<entry> merged;
  std::size_t e = 0, p = 0;
  while (e < existing.size() || p < pending.size()) {
    bool take_existing = p == pending.size() ||
                         (e < existing.size() && compare_keys(existing[e].key, pending[p].key) < 0);
    if (take_existing) {
      merged.push_back({existing[e].key, existing[e].footprint, true});
      ++e;
    } else {
      merged.push_back({pending[p].key, pending[p].footprint, false});
      ++p;
    }
  }
  TIDEMARK_CHECK(merged.size() >= 2, "a leaf too full for an item holds another one");
  std::size_t capacity = page_size - slots_offset;
  std::size_t total = 0, existing_total = 0;
  for (const entry& m : merged) {
    total += m.footprint;
    existing_total += m.existing ? m.footprint : 0;
  }
  // Ascending loads into the rightmost leaf: the existing items stay left, packed, and a
  // leaf with nothing but new items keeps nine tenths of a page of them.
  bool ascending = rightmost && !merged.back().existing && !pending.empty() &&
                   (existing.empty() || compare_keys(pending.front().key, existing.back().key) > 0);
  std::size_t packed =
    std::max(existing_total, std::min(total - merged.back().footprint, append_capacity(page_size)));
  std::size_t target = ascending ? packed : total / 2;
  std::size_t best = 0, best_distance = ~std::size_t{0};
  std::size_t left_total = 0, left_existing = 0;
  for (std::size_t split = 1; split < merged.size(); ++split) {
    left_total += merged[split - 1].footprint;
    left_existing += merged[split - 1].existing ? merged[split - 1].footprint : 0;
    std::size_t separator = std::min(merged[split].key.size(), max_key_size);
    bool fits = left_existing + item_header_size + separator <= capacity &&
                existing_total - left_existing + right_high_bytes <= capacity;
    std::size_t distance = left_total > target ? left_total - target : target - left_total;
    if (fits && distance < best_distance) {
      best = split;
      best_distance = distance;
    }
  }
  TIDEMARK_CHECK(best != 0, "a split right after the first item always fits");
  return shortest_separator(merged[best - 1].key, merged[best].key);
}

// A split from a leaf up to the node that takes the last separator: `parent` (with the
// downlink's slot), or, when the root split, a new root (with the meta page).
struct split_plan {
  std::vector<split_step> steps;
  page_guard parent;
  std::size_t parent_slot = 0;
  page_guard meta;       // for a new root, or new blocks from a free list not known empty
  bool new_root = false; // the root split: the meta page points to a new root
};

// The leaf's split (steps[0], its node latched), for the items from `from` on that it
// covers (*covered of them): false when it has room for them, new keys and replacements
// sized as they will be.
bool plan_leaf_split(split_step& step, const std::vector<pending_item>& items, std::size_t from,
                     std::size_t* covered, std::size_t page_size) {
  node_view leaf(step.node.bytes(), page_size);
  std::vector<node_item> existing = node_items(leaf);
  std::vector<pending_item> sized;
  for (const node_item& item : existing)
    sized.push_back({item.key, item.footprint()});
  std::vector<pending_item> added;
  std::size_t needed = 0, freed = 0;
  *covered = 0;
  for (std::size_t i = from; i < items.size(); ++i, ++*covered) {
    const pending_item& item = items[i];
    if (!leaf.below_high_key(item.key))
      break;
    bool found;
    std::size_t slot = leaf.lower_bound(item.key, &found);
    needed += item.footprint;
    if (found) {
      freed += sized[slot].footprint;
      sized[slot].footprint = std::max(sized[slot].footprint, item.footprint);
    } else {
      added.push_back(item);
    }
  }
  if (leaf.fits(needed > freed ? needed - freed : 0))
    return false;
  std::size_t right_high = leaf.has_high_key() ? item_header_size + leaf.high_key().size() : 0;
  step.separator = choose_leaf_separator(sized, added, page_size, right_high, leaf.right() == 0);
  step.items = std::move(existing);
  auto right_part = std::lower_bound(step.items.begin(), step.items.end(), step.separator,
                                     [](const node_item& a, const std::string& key) {
                                       return compare_keys(a.key, key) < 0;
                                     });
  step.split = static_cast<std::size_t>(right_part - step.items.begin());
  return true;
}

// The parent of the node `step` split, latched: the one from the descent, or right of it
// when it split since, up to the one covering the separator. Sets `*busy` when a latch was
// not granted.
page_guard latch_parent(page_store& store, rel_id rel, block_id from, const std::string& separator,
                        std::optional<page_id>* busy) {
  page_guard parent = store.try_latch({rel, from}, latch_mode::exclusive);
  if (!parent) {
    *busy = page_id{rel, from};
    return {};
  }
  while (!node_view(parent.bytes(), store.page_size()).below_high_key(separator)) {
    block_id right = node_view(parent.bytes(), store.page_size()).right();
    page_guard next = store.try_latch({rel, right}, latch_mode::exclusive);
    if (!next) {
      *busy = page_id{rel, right};
      return {};
    }
    parent = std::move(next);
  }
  return parent;
}

// The meta page latched for the plan (try_latch), or the page to wait for.
std::optional<page_id> latch_meta(split_plan& plan, page_store& store, rel_id rel) {
  if (!plan.meta)
    plan.meta = store.try_latch({rel, meta_block}, latch_mode::exclusive);
  return plan.meta ? std::nullopt : std::optional<page_id>(page_id{rel, meta_block});
}

// Latches upwards from the leaf's split: each split node's right sibling (its left link
// moves), then its parent, which takes the separator or splits too; past the root, the
// meta page for a new root. The meta page too unless the table's free list is known empty
// (new blocks come from it first): splits do not all serialize on it. Returns a page to
// wait for when a latch was not granted.
std::optional<page_id> plan_upward(split_plan& plan, page_store& store, rel_id rel,
                                   const descent& path) {
  std::size_t page_size = store.page_size();
  std::optional<page_id> busy;
  for (std::size_t level = 0;; ++level) {
    split_step& step = plan.steps.back();
    node_view node(step.node.bytes(), page_size);
    if (block_id right = node.right(); right != 0) {
      step.old_right = store.try_latch({rel, right}, latch_mode::exclusive);
      if (!step.old_right)
        return page_id{rel, right};
    }
    block_id split_block = step.node.id().block;
    if (level >= path.inner.size()) { // the top of this descent: still the root?
      if ((busy = latch_meta(plan, store, rel)))
        return busy;
      if (load<block_id>(plan.meta.bytes(), meta_root_at) != split_block)
        return page_id{rel, meta_block}; // the tree grew since: descend again
      plan.new_root = true;
      return std::nullopt;
    }
    plan.parent = latch_parent(store, rel, path.inner[level], step.separator, &busy);
    if (busy)
      return busy;
    node_view above(plan.parent.bytes(), page_size);
    plan.parent_slot = 0;
    for (std::size_t slot = 0; slot < above.slot_count(); ++slot)
      if (above.item(slot).child() == split_block)
        plan.parent_slot = slot + 1;
    TIDEMARK_CHECK(plan.parent_slot > 0,
                   "the parent covering a separator holds the downlink of the node split");
    std::string separator = step.separator;
    if (above.fits(item_footprint(separator.size(), 0)))
      return store.free_list_known_empty(rel) ? std::nullopt : latch_meta(plan, store, rel);
    // The parent splits too: its items with the new downlink, divided evenly; the right
    // part's first key moves up and becomes its minus infinity.
    split_step up;
    up.items = node_items(above);
    up.child_slot = plan.parent_slot;
    up.items.insert(up.items.begin() + static_cast<std::ptrdiff_t>(plan.parent_slot),
                    node_item{separator, 0, 0, {}});
    std::size_t high = above.has_high_key() ? above.high_key().size() : 0;
    up.split = choose_split(up.items, page_size, high, false);
    up.separator = up.items[up.split].key;
    up.node = std::move(plan.parent);
    plan.steps.push_back(std::move(up));
  }
}

// Builds one split node's two parts: the left stays in its block, the right goes to the
// new block (`right_edit`), and the old right sibling's left link moves to it.
void build_split_step(split_step& step, page_edit& right_edit,
                      const std::function<page_edit(page_guard&)>& edit_of, std::size_t page_size) {
  node_view node(step.node.bytes(), page_size);
  node_kind kind = node.kind();
  std::uint16_t level = node.level();
  std::optional<std::string> old_high;
  if (node.has_high_key())
    old_high = std::string(node.high_key());
  block_id old_right = node.right(), old_left = node.left();
  std::vector<node_item> left(step.items.begin(), step.items.begin() + step.split);
  std::vector<node_item> right(step.items.begin() + step.split, step.items.end());
  if (kind == node_kind::inner)
    right.front().key.clear(); // minus infinity
  page_edit left_edit = edit_of(step.node);
  if (kind == node_kind::leaf) // the left keeps the node's first items: truncated in place
    truncate_node(left_edit, step.split, step.separator, step.new_block);
  else // the new downlink may be among the left's items
    build_node(left_edit, kind, level, left, &step.separator, step.new_block, old_left);
  build_node(right_edit, kind, level, right, old_high ? &*old_high : nullptr, old_right,
             step.node.id().block);
  if (step.old_right) {
    page_edit sibling = edit_of(step.old_right);
    set_left(sibling, step.new_block);
  }
}

// True when `key` sorts between the keys of an inner node's slots `slot` - 1 (the first
// counts as minus infinity) and `slot`: where an insert at `slot` puts it.
bool between_neighbours(const page_guard& parent, std::size_t slot, const std::string& key,
                        std::size_t page_size) {
  node_view node(parent.bytes(), page_size);
  if (slot > 1 && compare_keys(node.key(slot - 1), key) >= 0)
    return false;
  return slot >= node.slot_count() || compare_keys(key, node.key(slot)) < 0;
}

// Everything is latched: new blocks, every page built, one logged change (its end LSN
// returned). Nothing fails.
lsn_t apply_split(split_plan& plan, page_store& store, rel_id rel) {
  std::size_t page_size = store.page_size();
  std::vector<logged_page> logged;
  page_changes meta_changes;
  page_allocator pages(store, rel, plan.meta, meta_changes, logged);
  std::vector<std::pair<page_guard*, page_changes*>> fresh;
  for (split_step& step : plan.steps) {
    fresh.push_back(pages.take_node_page());
    step.new_block = fresh.back().first->id().block;
  }
  std::pair<page_guard*, page_changes*> new_root{nullptr, nullptr};
  if (plan.new_root)
    new_root = pages.take_node_page();
  std::deque<page_changes> changes; // the split's own pages'; addresses stay put
  std::function<page_edit(page_guard&)> edit_of = [&](page_guard& page) {
    page_changes* log = &changes.emplace_back();
    logged.push_back({&page, log});
    return page_edit(page.mutable_bytes(), page_size, log);
  };
  for (std::size_t k = 0; k < plan.steps.size(); ++k) {
    if (k > 0) // the downlink to the level below's new block
      plan.steps[k].items[plan.steps[k].child_slot].aux = plan.steps[k - 1].new_block;
    page_edit right(fresh[k].first->mutable_bytes(), page_size, fresh[k].second);
    build_split_step(plan.steps[k], right, edit_of, page_size);
  }
  const split_step& top = plan.steps.back();
  if (plan.new_root) {
    auto level = static_cast<std::uint16_t>(node_view(top.node.bytes(), page_size).level() + 1);
    page_edit root_edit(new_root.first->mutable_bytes(), page_size, new_root.second);
    std::vector<node_item> root_items{{"", 0, top.node.id().block, {}},
                                      {top.separator, 0, top.new_block, {}}};
    build_node(root_edit, node_kind::inner, level, root_items, nullptr, 0, 0);
    page_edit meta_edit = pages.edit_meta();
    meta_edit.write_value(meta_root_at, new_root.first->id().block);
    meta_edit.write_value(meta_level_at, level);
  } else {
    page_edit parent_edit = edit_of(plan.parent);
    TIDEMARK_CHECK(between_neighbours(plan.parent, plan.parent_slot, top.separator, page_size),
                   "a split's separator goes between its neighbours in the parent");
    insert_item(parent_edit, plan.parent_slot, top.separator, 0, top.new_block, {});
  }
  for (logged_page& page : logged)
    page.changes->collapse(page.page->bytes(), page_size);
  return store.log_change(logged);
}

// The latches a split plan holds.
std::size_t plan_latches(const split_plan& plan) {
  std::size_t held = (plan.parent ? 1 : 0) + (plan.meta ? 1 : 0);
  for (const split_step& step : plan.steps)
    held += (step.node ? 1 : 0) + (step.old_right ? 1 : 0);
  return held;
}

// A split planned from its leaf (steps[0], latched): latches upwards, takes the new pages'
// room from `reserved`, and applies it; or says what stopped it.
split_attempt complete_split(split_plan& plan, const descent& path, page_store& store, rel_id rel,
                             latch_reservation& reserved) {
  split_attempt done;
  if ((done.busy = plan_upward(plan, store, rel, path)))
    return done;
  std::size_t fresh = plan.steps.size() + (plan.new_root ? 1 : 0); // new nodes, a new root
  std::size_t in_reserve = store.latches_in_reserve();
  if (fresh > in_reserve && !reserved.try_reserve(fresh - in_reserve)) {
    done.latches = plan_latches(plan) + fresh;
    return done;
  }
  done.end = apply_split(plan, store, rel);
  done.split = true;
  return done;
}

} // namespace

bool inline_value_fits(std::size_t page_size, std::size_t key_size, std::size_t value_size) {
  return key_size <= max_key_size &&
         item_footprint(key_size, value_size) <= max_item_size(page_size);
}

// ---- creation and descent ------------------------------------------------------------------

void tree::create(page_store& store, rel_id rel) {
  TIDEMARK_CHECK(store.blocks(rel) == 0, "a tree is created in an empty relation");
  latch_reservation reserved(store);
  reserved.reserve(2);
  block_id meta_at = store.new_block(rel);
  block_id root_at = store.new_block(rel);
  TIDEMARK_CHECK(meta_at == meta_block && root_at == meta_block + 1,
                 "a new relation hands out its blocks in order");
  page_guard meta = store.latch({rel, meta_at}, latch_mode::exclusive);
  page_guard root = store.latch({rel, root_at}, latch_mode::exclusive);
  page_changes meta_changes, root_changes;
  page_edit meta_edit(meta.mutable_bytes(), store.page_size(), &meta_changes);
  page_edit root_edit(root.mutable_bytes(), store.page_size(), &root_changes);
  build_empty(meta_edit, root_edit);
  store.log_change({{&meta, &meta_changes}, {&root, &root_changes}});
}

void tree::build_empty(page_edit& meta, page_edit& root) {
  meta.write_value(meta_magic_at, meta_magic);
  meta.write_value(meta_root_at, block_id{meta_block + 1});
  meta.write_value(meta_level_at, std::uint16_t{0});
  init_node(root, node_kind::leaf, 0, 0, 0);
}

tree::meta tree::read_meta() {
  page_guard page = latch_node(meta_block, latch_mode::shared);
  if (load<std::uint32_t>(page.bytes(), meta_magic_at) != meta_magic)
    throw tidemark::data_error("relation " + std::to_string(rel_) +
                               " is not a table: its block 0 has no tree meta page");
  meta found{load<block_id>(page.bytes(), meta_root_at),
             load<std::uint16_t>(page.bytes(), meta_level_at)};
  store_.note_root(rel_, found.root);
  return found;
}

page_guard tree::latch_node(block_id block, latch_mode mode) {
  return store_.latch({rel_, block}, mode);
}

page_guard tree::move_right(page_guard node, key_view key, latch_mode mode, bool only_try) {
  for (;;) {
    if (!node) // only_try: a latch was not granted
      return node;
    node_view view(node.bytes(), store_.page_size());
    if (!view.is_deleted() && view.below_high_key(key)) // a deleted node's keys went right
      return node;
    block_id right = view.right();
    TIDEMARK_CHECK(right != 0, "a node with a high key has a right sibling");
    node.release();
    node = only_try ? store_.try_latch({rel_, right}, mode) : latch_node(right, mode);
  }
}

page_guard tree::descend_from(block_id block, key_view key, latch_mode mode) {
  page_guard node = move_right(latch_node(block, latch_mode::shared), key, latch_mode::shared);
  for (;;) {
    node_view view(node.bytes(), store_.page_size());
    TIDEMARK_CHECK(view.is_node(), "a descent meets nodes only");
    if (view.is_leaf()) { // the start was a leaf (a root that never split)
      if (mode == latch_mode::shared)
        return node;
      block_id leaf = node.id().block;
      node.release();
      return move_right(latch_node(leaf, mode), key, mode);
    }
    std::uint16_t level = view.level();
    block_id child = view.item(view.child_slot(key)).child();
    node.release();
    latch_mode child_mode = level == 1 ? mode : latch_mode::shared;
    node = move_right(latch_node(child, child_mode), key, child_mode);
    node_view below(node.bytes(), store_.page_size());
    TIDEMARK_CHECK(below.is_node() && below.level() + 1 == level,
                   "a descent meets one level after another");
    if (level == 1)
      return node;
  }
}

tree::unlatched_leaf tree::reach_leaf_unlatched(key_view key) {
  unlatched_leaf found;
  block_id block = store_.root_hint(rel_);
  // Down and right as a latched descent goes; a tree of any height takes far fewer steps,
  // and a node read while it changed may send the walk anywhere until its check fails.
  constexpr std::size_t most_steps = 64;
  for (std::size_t step = 0; block != 0 && step < most_steps; ++step) {
    if (!store_.read_unlatched({rel_, block}, &found.page))
      return found;
    node_view view(found.page.bytes, store_.page_size());
    if (!view.is_node())
      return found;
    block_id next;
    bool next_is_leaf;
    if (view.is_deleted() || !view.below_high_key(key)) {
      next = view.right(); // as move_right
      next_is_leaf = view.is_leaf();
    } else if (view.is_leaf()) {
      found.read = true;
      found.block = block;
      return found;
    } else {
      next = view.item(view.child_slot(key)).child();
      next_is_leaf = view.level() == 1;
    }
    if (!store_.still_unchanged(found.page))
      return found;
    block = next;
    found.block = next_is_leaf ? next : 0;
  }
  found.block = 0; // not reached within the steps: a walk that lost its way
  return found;
}

page_guard tree::latch_leaf(key_view key, latch_mode mode, descent* path) {
  if (path == nullptr) { // a reader, or a change that needs no path back up
    unlatched_leaf found;
    {
      storage::unsynchronized_reads racing;
      found = reach_leaf_unlatched(key);
      if (found.read && !store_.still_unchanged(found.page))
        found.block = 0; // the start was a leaf, or so it seemed
    }
    if (found.block != 0) { // a leaf; whatever split or unlinked it since, move_right passes
      page_guard leaf = move_right(latch_node(found.block, mode), key, mode);
      TIDEMARK_CHECK(node_view(leaf.bytes(), store_.page_size()).is_leaf(),
                     "a descent ends in a leaf");
      return leaf;
    }
    if (block_id start = store_.root_hint(rel_); start != 0)
      return descend_from(start, key, mode);
  }
  meta root = read_meta();
  if (path != nullptr)
    path->inner.assign(root.level, 0);
  block_id block = root.root;
  for (std::uint16_t level = root.level; level > 0; --level) {
    page_guard node = move_right(latch_node(block, latch_mode::shared), key, latch_mode::shared);
    node_view view(node.bytes(), store_.page_size());
    TIDEMARK_CHECK(view.is_node() && view.level() == level,
                   "a descent meets one level after another");
    if (path != nullptr)
      path->inner[level - 1] = node.id().block;
    block = view.item(view.child_slot(key)).child();
  }
  page_guard leaf = move_right(latch_node(block, mode), key, mode);
  TIDEMARK_CHECK(node_view(leaf.bytes(), store_.page_size()).is_leaf(), "a descent ends in a leaf");
  if (path != nullptr)
    path->leaf = leaf.id().block;
  return leaf;
}

// ---- single-key operations -----------------------------------------------------------------

bool tree::read_unlatched(key_view key, read_result* result) {
  storage::unsynchronized_reads racing;
  unlatched_leaf leaf = reach_leaf_unlatched(key);
  if (!leaf.read)
    return false;
  const unlatched_page& page = leaf.page;
  node_view view(page.bytes, store_.page_size());
  bool found;
  std::size_t slot = view.lower_bound(key, &found);
  if (found) {
    item_view item = view.item(slot);
    if (item.flags & item_overflow)
      return false; // a chain is read page by page under latches
    const unsigned char* end = page.bytes + store_.page_size();
    if (item.payload < page.bytes || item.payload > end ||
        item.payload_length > std::size_t(end - item.payload))
      return false; // not a leaf's item: the leaf changed under the read
    result->value.emplace(item.value());
  }
  result->leaf_lsn = storage::page_lsn(page.bytes);
  return store_.still_unchanged(page);
}

tree::read_result tree::read(key_view key) {
  operation_epochs::section section(store_.epochs());
  constexpr int unlatched_attempts = 2;
  for (int attempt = 0; attempt < unlatched_attempts; ++attempt) {
    read_result result;
    if (read_unlatched(key, &result))
      return result;
  }
  latch_reservation reserved(store_);
  reserved.reserve(2); // the leaf, and a page of a value's overflow chain
  page_guard leaf = latch_leaf(key, latch_mode::shared);
  node_view view(leaf.bytes(), store_.page_size());
  read_result result;
  result.leaf_lsn = storage::page_lsn(leaf.bytes());
  bool found;
  std::size_t slot = view.lower_bound(key, &found);
  if (found)
    result.value = item_value(store_, rel_, view.item(slot));
  return result;
}

bool tree::put(key_view key, std::string_view value) {
  operation_epochs::section section(store_.epochs());
  TIDEMARK_CHECK(inline_value_fits(store_.page_size(), key.size(), value.size()),
                 "the caller checks a key and value against the limits");
  std::size_t footprint = item_footprint(key.size(), value.size());
  for (;;) {
    page_guard leaf = latch_leaf(key, latch_mode::exclusive);
    node_view view(leaf.bytes(), store_.page_size());
    bool found;
    std::size_t slot = view.lower_bound(key, &found);
    std::size_t old = found ? item_footprint(key.size(), view.item(slot).payload_length) : 0;
    if (view.fits(footprint > old ? footprint - old : 0)) {
      page_changes changes;
      page_edit edit(leaf.mutable_bytes(), store_.page_size(), &changes);
      auto length = static_cast<std::uint32_t>(value.size());
      if (found)
        replace_item(edit, slot, 0, length, value);
      else
        insert_item(edit, slot, key, 0, length, value);
      changes.collapse(leaf.bytes(), store_.page_size());
      store_.log_change({{&leaf, &changes}});
      return !found;
    }
    leaf.release();
    make_room({{std::string(key), footprint}});
  }
}

bool tree::erase(key_view key) {
  operation_epochs::section section(store_.epochs());
  page_guard leaf = latch_leaf(key, latch_mode::exclusive);
  node_view view(leaf.bytes(), store_.page_size());
  bool found;
  std::size_t slot = view.lower_bound(key, &found);
  if (!found)
    return false;
  page_changes changes;
  page_edit edit(leaf.mutable_bytes(), store_.page_size(), &changes);
  erase_item(edit, slot);
  store_.log_change({{&leaf, &changes}});
  if (view.slot_count() == 0 && view.left() != 0) {
    leaf.release();
    remove_empty_leaf(key);
  }
  return true;
}

// ---- splits --------------------------------------------------------------------------------

void tree::make_room(const std::vector<pending_item>& items) {
  TIDEMARK_CHECK(!store_.latches_reserved(), "splits are made holding no reservation");
  operation_epochs::section section(store_.epochs());
  for (std::size_t i = 1; i < items.size(); ++i)
    TIDEMARK_CHECK(compare_keys(items[i - 1].key, items[i].key) < 0,
                   "make_room is given items in key order, each key once");
  latch_reservation reserved(store_);
  // Leaf by leaf from the first item: split the one covering items[from] until it can take
  // the items it covers, then go on past them.
  for (std::size_t from = 0; from < items.size();) {
    split_attempt attempt = try_split(items, from, reserved);
    if (attempt.latches > 0) { // room for all of them, reserved holding nothing
      reserved.release();
      reserved.reserve(attempt.latches);
    } else if (attempt.busy) {
      store_.wait_for(*attempt.busy);
    } else if (!attempt.split) {
      from += attempt.covered;
    }
  }
}

split_attempt tree::try_split(const std::vector<pending_item>& items, std::size_t from,
                              latch_reservation& reserved) {
  descent path;
  split_plan plan;
  plan.steps.resize(1);
  plan.steps[0].node = latch_leaf(items[from].key, latch_mode::exclusive, &path);
  split_attempt attempt;
  if (!plan_leaf_split(plan.steps[0], items, from, &attempt.covered, store_.page_size()))
    return attempt; // room enough (maybe another split made it)
  return complete_split(plan, path, store_, rel_, reserved);
}

bool tree::try_find_path(key_view key, block_id leaf, descent* path) {
  // From the root hint when there is one. A stale hint (a former root leaf) finds nothing;
  // the commit's way out (make_room) reads the meta page and renews it. A former root
  // above the leaf is the top of the path: a split reaching it finds it is not the root.
  block_id block = store_.root_hint(rel_);
  if (block == 0) {
    page_guard meta = store_.try_latch({rel_, meta_block}, latch_mode::shared);
    if (!meta)
      return false;
    block = load<block_id>(meta.bytes(), meta_root_at);
  }
  for (;;) {
    page_guard node = move_right(store_.try_latch({rel_, block}, latch_mode::shared), key,
                                 latch_mode::shared, true);
    if (!node)
      return false;
    node_view view(node.bytes(), store_.page_size());
    if (view.is_leaf())
      return false; // the root
    if (path->inner.empty())
      path->inner.assign(view.level(), 0);
    path->inner[view.level() - 1] = node.id().block;
    block = view.item(view.child_slot(key)).child();
    if (view.level() == 1)
      return block == leaf;
  }
}

page_guard tree::split_latched(page_guard& leaf, const std::vector<pending_item>& items) {
  TIDEMARK_CHECK(leaf.mode() == latch_mode::exclusive && !items.empty(),
                 "a leaf split for a commit is latched exclusively, for items it covers");
  descent path;
  if (!try_find_path(items.front().key, leaf.id().block, &path))
    return {};
  split_plan plan;
  plan.steps.resize(1);
  plan.steps[0].node = std::move(leaf);
  std::size_t covered;
  page_guard right;
  if (plan_leaf_split(plan.steps[0], items, 0, &covered, store_.page_size())) {
    // Nested in the caller's reservation: room for the new pages is added to it only when
    // free at once; the other pages are try_latched.
    latch_reservation nested(store_);
    split_attempt attempt = complete_split(plan, path, store_, rel_, nested);
    // Nobody else reaches the new leaf while the plan holds its parent and old right
    // sibling and the caller its left: the latch is granted unless there is no room for it.
    if (attempt.split)
      right = store_.try_latch({rel_, plan.steps[0].new_block}, latch_mode::exclusive);
  }
  leaf = std::move(plan.steps[0].node);
  return right;
}

// ---- bulk loading --------------------------------------------------------------------------

std::optional<lsn_t> tree::append(const std::vector<node_item>& entries) {
  TIDEMARK_CHECK(!store_.latches_reserved(), "an append is made holding no reservation");
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    TIDEMARK_CHECK(i == 0 || compare_keys(entries[i - 1].key, entries[i].key) < 0,
                   "appended entries come in key order");
    TIDEMARK_CHECK(!(entries[i].flags & item_overflow) &&
                     inline_value_fits(store_.page_size(), entries[i].key.size(),
                                       entries[i].payload.size()),
                   "appended values are inline");
    bytes += entries[i].footprint();
  }
  TIDEMARK_CHECK(!entries.empty() && bytes <= append_capacity(store_.page_size()),
                 "appended entries fill one leaf at most");
  operation_epochs::section section(store_.epochs());
  latch_reservation reserved(store_);
  for (;;) {
    split_attempt attempt = try_append(entries, reserved);
    if (attempt.latches > 0) { // room for all of them, reserved holding nothing
      reserved.release();
      reserved.reserve(attempt.latches);
    } else if (attempt.busy) {
      store_.wait_for(*attempt.busy);
    } else {
      return attempt.split ? std::optional<lsn_t>(attempt.end) : std::nullopt;
    }
  }
}

split_attempt tree::try_append(const std::vector<node_item>& entries, latch_reservation& reserved) {
  std::size_t page_size = store_.page_size();
  descent path;
  split_plan plan;
  plan.steps.resize(1);
  split_step& step = plan.steps[0];
  step.node = latch_leaf(entries.back().key, latch_mode::exclusive, &path);
  node_view leaf(step.node.bytes(), page_size);
  split_attempt attempt;
  step.items = node_items(leaf);
  if (leaf.right() != 0 ||
      (!step.items.empty() && compare_keys(step.items.back().key, entries.front().key) >= 0))
    return attempt;         // keys at or past the entries: not an append
  if (step.items.empty()) { // the entries fill the empty rightmost leaf, if nothing is left of it
    if (leaf.left() != 0)
      return attempt; // its lower bound, in its parent, may be above the first entry
    page_changes changes;
    page_edit edit(step.node.mutable_bytes(), page_size, &changes);
    build_node(edit, node_kind::leaf, 0, entries, nullptr, 0, leaf.left());
    changes.collapse(step.node.bytes(), page_size);
    attempt.end = store_.log_change({{&step.node, &changes}});
    attempt.split = true;
    return attempt;
  }
  // A split whose right part is the entries: the leaf keeps its items, under a high key.
  step.separator = shortest_separator(step.items.back().key, entries.front().key);
  std::size_t kept = 0;
  for (const node_item& item : step.items)
    kept += item.footprint();
  if (kept + item_header_size + step.separator.size() > page_size - slots_offset)
    return attempt; // no room for the high key
  step.split = step.items.size();
  step.items.insert(step.items.end(), entries.begin(), entries.end());
  return complete_split(plan, path, store_, rel_, reserved);
}

// ---- removing empty leaves -----------------------------------------------------------------

namespace {

// A removal holds the leaf, its parent (and the next one right while it looks for the
// downlink), both siblings and the meta page.
constexpr std::size_t removal_latches = 6;

// The parent of leaf `leaf`, from the descent's, right until the one holding its downlink
// (*slot): latched with try_latch, a busy page in *busy; unheld when not found.
page_guard latch_parent_of(page_store& store, rel_id rel, block_id from, block_id leaf,
                           std::size_t* slot, std::optional<page_id>* busy) {
  for (block_id block = from; block != 0;) {
    page_guard parent = store.try_latch({rel, block}, latch_mode::exclusive);
    if (!parent) {
      *busy = page_id{rel, block};
      return {};
    }
    node_view node(parent.bytes(), store.page_size());
    for (std::size_t i = 0; i < node.slot_count(); ++i)
      if (node.item(i).child() == leaf) {
        *slot = i;
        return parent;
      }
    block = node.right();
  }
  return {};
}

} // namespace

void tree::remove_empty_leaf(key_view key) {
  TIDEMARK_CHECK(!store_.latches_reserved(), "a removal is made holding no reservation");
  operation_epochs::section section(store_.epochs());
  latch_reservation reserved(store_);
  reserved.reserve(removal_latches);
  while (std::optional<page_id> busy = try_remove_empty_leaf(key))
    store_.wait_for(*busy);
}

std::optional<page_id> tree::try_remove_empty_leaf(key_view key) {
  std::size_t page_size = store_.page_size();
  descent path;
  page_guard leaf = latch_leaf(key, latch_mode::exclusive, &path);
  node_view node(leaf.bytes(), page_size);
  if (node.slot_count() != 0 || node.left() == 0 || path.inner.empty())
    return std::nullopt;
  std::optional<page_id> busy;
  std::size_t slot = 0;
  page_guard parent = latch_parent_of(store_, rel_, path.inner[0], leaf.id().block, &slot, &busy);
  if (!parent)
    return busy;
  node_view above(parent.bytes(), page_size);
  if (slot + 1 >= above.slot_count())
    return std::nullopt; // the parent's last child
  block_id right_block = above.item(slot + 1).child();
  TIDEMARK_CHECK(node.right() == right_block,
                 "a leaf's right sibling under the same parent has the next downlink");
  page_guard left = store_.try_latch({rel_, node.left()}, latch_mode::exclusive);
  if (!left)
    return page_id{rel_, node.left()};
  page_guard right = store_.try_latch({rel_, right_block}, latch_mode::exclusive);
  if (!right)
    return page_id{rel_, right_block};
  page_guard meta_page = store_.try_latch({rel_, meta_block}, latch_mode::exclusive);
  if (!meta_page)
    return page_id{rel_, meta_block};
  TIDEMARK_CHECK(node_view(left.bytes(), page_size).right() == leaf.id().block &&
                   node_view(right.bytes(), page_size).left() == leaf.id().block,
                 "a leaf's siblings link to it");
  // One change: the parent's downlink to the leaf goes to its right sibling (which takes
  // its key space) and the sibling's own downlink goes; the siblings link to each other.
  std::vector<logged_page> logged;
  page_changes meta_changes, parent_changes, left_changes, right_changes, leaf_changes;
  page_allocator pages(store_, rel_, meta_page, meta_changes, logged);
  page_edit parent_edit(parent.mutable_bytes(), page_size, &parent_changes);
  erase_item(parent_edit, slot + 1);
  set_child(parent_edit, slot, right_block);
  page_edit left_edit(left.mutable_bytes(), page_size, &left_changes);
  set_right(left_edit, right_block);
  page_edit right_edit(right.mutable_bytes(), page_size, &right_changes);
  set_left(right_edit, left.id().block);
  pages.free_deleted_leaf(leaf, leaf_changes);
  logged.push_back({&parent, &parent_changes});
  logged.push_back({&left, &left_changes});
  logged.push_back({&right, &right_changes});
  logged.push_back({&leaf, &leaf_changes});
  store_.log_change(logged);
  store_.note_unlinked(leaf.id());
  return std::nullopt;
}

// ---- ordered reads -------------------------------------------------------------------------

tree::run tree::run_from(key_view key, bool inclusive, std::size_t most, lsn_t* newest) {
  TIDEMARK_CHECK(most > 0, "a run holds at least the entry asked for");
  operation_epochs::section section(store_.epochs());
  page_guard leaf = latch_leaf(key, latch_mode::shared);
  for (;;) {
    node_view view(leaf.bytes(), store_.page_size());
    if (newest != nullptr)
      *newest = std::max(*newest, storage::page_lsn(leaf.bytes()));
    bool found;
    std::size_t slot = view.lower_bound(key, &found);
    if (found && !inclusive)
      ++slot;
    block_id right = view.right();
    if (slot < view.slot_count() || right == 0) {
      run stretch;
      for (; slot < view.slot_count(); ++slot) {
        bool chained = (view.item(slot).flags & item_overflow) != 0;
        if (stretch.entries.size() == most || (chained && !stretch.entries.empty())) {
          stretch.end = std::string(view.key(slot));
          return stretch;
        }
        stretch.entries.push_back(entry_of(store_, rel_, view, slot));
      }
      if (view.has_high_key())
        stretch.end = std::string(view.high_key());
      return stretch;
    }
    leaf.release();
    leaf = latch_node(right, latch_mode::shared);
  }
}

std::optional<std::pair<std::string, std::string>> tree::first_from(key_view key, bool inclusive,
                                                                    lsn_t* newest) {
  run stretch = run_from(key, inclusive, 1, newest);
  if (stretch.entries.empty())
    return std::nullopt;
  return std::move(stretch.entries.front());
}

std::optional<std::pair<std::string, std::string>>
tree::last_before(const std::string* key, bool inclusive, lsn_t* newest) {
  operation_epochs::section section(store_.epochs());
  for (;;) // again from the top when a step left met a leaf unlinked meanwhile
    if (std::optional<std::optional<entry>> found = try_last_before(key, inclusive, newest))
      return *found;
}

std::optional<std::optional<tree::entry>> tree::try_last_before(const std::string* key,
                                                                bool inclusive, lsn_t* newest) {
  page_guard leaf;
  std::size_t slot;
  if (key != nullptr) {
    leaf = latch_leaf(*key, latch_mode::shared);
    node_view view(leaf.bytes(), store_.page_size());
    bool found;
    slot = view.lower_bound(*key, &found) + (found && inclusive ? 1 : 0);
  } else { // the rightmost leaf: the last child at every level, then right to the end
    meta root = read_meta();
    leaf = latch_node(root.root, latch_mode::shared);
    for (;;) {
      node_view view(leaf.bytes(), store_.page_size());
      if (view.right() != 0) { // a deleted node always has one
        block_id right = view.right();
        leaf.release();
        leaf = latch_node(right, latch_mode::shared);
      } else if (!view.is_leaf()) {
        block_id child = view.item(view.slot_count() - 1).child();
        leaf.release();
        leaf = latch_node(child, latch_mode::shared);
      } else {
        break;
      }
    }
    slot = node_view(leaf.bytes(), store_.page_size()).slot_count();
  }
  for (;;) {
    node_view view(leaf.bytes(), store_.page_size());
    if (newest != nullptr)
      *newest = std::max(*newest, storage::page_lsn(leaf.bytes()));
    if (slot > 0)
      return std::optional<entry>(entry_of(store_, rel_, view, slot - 1));
    // Everything left of this leaf is below its keys: the left sibling, or, when that one
    // split since, the last node of the chain from it to this leaf. A leaf on the way
    // unlinked meanwhile (this one, its left sibling) means: from the top again.
    block_id here = leaf.id().block, left = view.left();
    std::optional<std::string> here_high;
    if (view.has_high_key())
      here_high = std::string(view.high_key());
    leaf.release();
    if (left == 0)
      return std::optional<entry>();
    leaf = latch_node(left, latch_mode::shared);
    for (;;) {
      node_view node(leaf.bytes(), store_.page_size());
      if (node.is_deleted())
        return std::nullopt;
      if (node.right() == here)
        break;
      if (!node.has_high_key() || (here_high && compare_keys(node.high_key(), *here_high) >= 0))
        return std::nullopt; // past where this leaf was: it was unlinked
      block_id right = node.right();
      leaf.release();
      leaf = latch_node(right, latch_mode::shared);
    }
    slot = node_view(leaf.bytes(), store_.page_size()).slot_count();
  }
}

std::vector<block_id> tree::leaves_between(const std::string* low, const std::string* high) {
  operation_epochs::section section(store_.epochs());
  std::vector<block_id> leaves;
  page_guard leaf = latch_leaf(low != nullptr ? key_view(*low) : key_view(), latch_mode::shared);
  for (;;) {
    leaves.push_back(leaf.id().block);
    node_view view(leaf.bytes(), store_.page_size());
    if (view.right() == 0 || (high != nullptr && view.below_high_key(*high)))
      return leaves;
    block_id right = view.right();
    leaf.release();
    leaf = latch_node(right, latch_mode::shared);
  }
}

// ---- checking ------------------------------------------------------------------------------

namespace {

std::string describe_node(rel_id rel, block_id block) {
  return "relation " + std::to_string(rel) + " block " + std::to_string(block);
}

// One level, left to right from `leftmost`: every node valid and at `level`, left links
// matching, keys rising across siblings; `children` gets the downlinks in order, and
// `bounds` each downlink's upper bound (the next separator, or the node's high key).
std::string check_level(page_store& store, rel_id rel, block_id leftmost, std::uint16_t level,
                        std::vector<bool>& seen, std::vector<block_id>& order,
                        std::vector<block_id>& children,
                        std::vector<std::optional<std::string>>& bounds) {
  std::optional<std::string> low; // the previous node's high key
  block_id previous = 0;
  for (block_id block = leftmost; block != 0;) {
    if (block >= seen.size() || block == meta_block)
      return describe_node(rel, block) + ": a link points outside the tree's blocks";
    if (seen[block])
      return describe_node(rel, block) + " is reached twice";
    seen[block] = true;
    order.push_back(block);
    page_guard page = store.latch({rel, block}, latch_mode::shared);
    node_view node(page.bytes(), store.page_size());
    if (std::string problem = check_node(node); !problem.empty())
      return describe_node(rel, block) + ": " + problem;
    if (node.level() != level)
      return describe_node(rel, block) + " is at level " + std::to_string(node.level()) +
             ", its neighbours at " + std::to_string(level);
    if (node.left() != previous)
      return describe_node(rel, block) + ": its left link is " + std::to_string(node.left()) +
             ", not " + std::to_string(previous);
    std::size_t first = node.is_leaf() ? 0 : 1; // an inner node's first key is minus infinity
    if (low && node.slot_count() > first && compare_keys(node.key(first), *low) < 0)
      return describe_node(rel, block) + ": a key lies below its left sibling's high key";
    if (node.has_high_key() != (node.right() != 0))
      return describe_node(rel, block) + ": a high key exactly when there is a right sibling";
    if (!node.is_leaf()) {
      if (node.slot_count() == 0)
        return describe_node(rel, block) + ": an inner node without children";
      for (std::size_t slot = 0; slot < node.slot_count(); ++slot) {
        children.push_back(node.item(slot).child());
        if (slot + 1 < node.slot_count())
          bounds.emplace_back(std::string(node.key(slot + 1)));
        else if (node.has_high_key())
          bounds.emplace_back(std::string(node.high_key()));
        else
          bounds.emplace_back(std::nullopt);
      }
    }
    low = node.has_high_key() ? std::optional<std::string>(std::string(node.high_key()))
                              : std::nullopt;
    previous = block;
    block = node.right();
  }
  return {};
}

// Past the nodes: every overflow chain the leaves refer to, the free list, and blocks in
// none of them, which may only be never-written (a split's block whose record a crash
// took).
std::string check_pages_accounted(page_store& store, rel_id rel,
                                  const std::vector<block_id>& leaves, std::vector<bool>& seen) {
  for (block_id block : leaves) {
    page_guard page = store.latch({rel, block}, latch_mode::shared);
    node_view leaf(page.bytes(), store.page_size());
    for (std::size_t slot = 0; slot < leaf.slot_count(); ++slot) {
      item_view item = leaf.item(slot);
      if ((item.flags & item_overflow) == 0)
        continue;
      if (item.payload_length != overflow_ref_size)
        return describe_node(rel, block) + ": an overflow item without an overflow ref";
      if (std::string problem = check_chain(store, rel, decode_ref(item), &seen); !problem.empty())
        return problem;
    }
  }
  {
    page_guard meta = store.latch({rel, meta_block}, latch_mode::shared);
    if (std::string problem =
          check_free_list(store, rel, load<block_id>(meta.bytes(), meta_free_head_at),
                          load<std::uint32_t>(meta.bytes(), meta_free_count_at), seen);
        !problem.empty())
      return problem;
  }
  for (block_id block = meta_block + 1; block < seen.size(); ++block) {
    if (seen[block])
      continue;
    page_guard page = store.latch({rel, block}, latch_mode::shared);
    if (!storage::page_is_all_zero(page.bytes(), store.page_size()))
      return describe_node(rel, block) + " is in use but neither in the tree, in an overflow "
                                         "chain nor on the free list";
  }
  return {};
}

} // namespace

std::string check_tree(page_store& store, rel_id rel) {
  latch_reservation reserved(store); // a leaf and its chain's page; the meta page and a free one
  reserved.reserve(2);
  block_id blocks = store.blocks(rel);
  if (blocks == 0)
    return "relation " + std::to_string(rel) + " has no blocks";
  block_id root;
  std::uint16_t root_level;
  {
    page_guard meta = store.latch({rel, meta_block}, latch_mode::shared);
    if (load<std::uint32_t>(meta.bytes(), meta_magic_at) != meta_magic)
      return describe_node(rel, meta_block) + " is not a tree meta page";
    root = load<block_id>(meta.bytes(), meta_root_at);
    root_level = load<std::uint16_t>(meta.bytes(), meta_level_at);
  }
  std::vector<bool> seen(blocks, false);
  std::vector<block_id> leaves;
  std::vector<block_id> expected{root}; // the level's nodes, as the level above links them
  std::vector<std::optional<std::string>> expected_bounds{std::nullopt};
  for (int level = root_level; level >= 0; --level) {
    std::vector<block_id> order, children;
    std::vector<std::optional<std::string>> bounds;
    if (std::string problem = check_level(store, rel, expected.front(),
                                          static_cast<std::uint16_t>(level), seen, order, children,
                                          bounds);
        !problem.empty())
      return problem;
    if (order != expected)
      return "level " + std::to_string(level) + " of relation " + std::to_string(rel) +
             ": its right links and its parents' downlinks list different nodes";
    for (std::size_t i = 0; i < order.size(); ++i) { // each node's high key: its bound above
      page_guard page = store.latch({rel, order[i]}, latch_mode::shared);
      node_view node(page.bytes(), store.page_size());
      std::optional<std::string> high;
      if (node.has_high_key())
        high = std::string(node.high_key());
      if (high != expected_bounds[i])
        return describe_node(rel, order[i]) + ": its high key differs from its parent's separator";
    }
    if (level == 0)
      leaves = order;
    expected = std::move(children);
    expected_bounds = std::move(bounds);
  }
  return check_pages_accounted(store, rel, leaves, seen);
}

} // namespace tidemark::access
