// Overflow chains and the free list: see overflow.hpp.
#include "access/overflow.hpp"

#include "access/tree.hpp"
#include "storage/check.hpp"

#include <cstring>

namespace tidemark::access {

namespace {

constexpr std::size_t overflow_magic_at = storage::page_header_size;
constexpr std::size_t overflow_next_at = overflow_magic_at + 4;
constexpr std::size_t overflow_length_at = overflow_magic_at + 8;

std::string describe(rel_id rel, block_id block) {
  return "relation " + std::to_string(rel) + " block " + std::to_string(block);
}

} // namespace

std::size_t stored_footprint(std::size_t page_size, std::size_t key_size, std::size_t value_size) {
  return item_footprint(key_size, inline_value_fits(page_size, key_size, value_size)
                                    ? value_size
                                    : overflow_ref_size);
}

std::string encode_ref(overflow_ref ref) {
  std::string bytes(overflow_ref_size, '\0');
  std::memcpy(&bytes[0], &ref.length, 4);
  std::memcpy(&bytes[4], &ref.first, 4);
  return bytes;
}

overflow_ref decode_ref(const item_view& item) {
  TIDEMARK_CHECK(item.payload_length == overflow_ref_size, "an overflow item's payload is its ref");
  overflow_ref ref;
  std::memcpy(&ref.length, item.payload, 4);
  std::memcpy(&ref.first, item.payload + 4, 4);
  return ref;
}

std::string item_value(page_store& store, rel_id rel, const item_view& item) {
  if ((item.flags & item_overflow) == 0)
    return std::string(item.value());
  overflow_ref ref = decode_ref(item);
  std::string value;
  value.reserve(ref.length);
  for (block_id block = ref.first; value.size() < ref.length;) {
    if (block == 0)
      throw tidemark::data_error("an overflow chain in relation " + std::to_string(rel) +
                                 " ends after " + std::to_string(value.size()) + " of its " +
                                 std::to_string(ref.length) + " bytes");
    page_guard page = store.latch({rel, block}, latch_mode::shared);
    auto length = load<std::uint32_t>(page.bytes(), overflow_length_at);
    if (load<std::uint32_t>(page.bytes(), overflow_magic_at) != overflow_magic ||
        length > overflow_capacity(store.page_size()) || length > ref.length - value.size())
      throw tidemark::data_error(describe(rel, block) + " is not the overflow page its chain says");
    value.append(reinterpret_cast<const char*>(page.bytes() + overflow_data_offset), length);
    block = load<block_id>(page.bytes(), overflow_next_at);
  }
  return value;
}

std::string check_chain(page_store& store, rel_id rel, overflow_ref ref, std::vector<bool>* seen) {
  std::size_t pages = overflow_pages(store.page_size(), ref.length), length = 0;
  block_id block = ref.first;
  for (std::size_t i = 0; i < pages; ++i) {
    if (block == 0 || block == meta_block || (seen != nullptr && block >= seen->size()))
      return "an overflow chain of relation " + std::to_string(rel) + " links to block " +
             std::to_string(block) + ", which it cannot hold";
    if (seen != nullptr) {
      if ((*seen)[block])
        return describe(rel, block) + " is reached twice (an overflow chain)";
      (*seen)[block] = true;
    }
    page_guard page = store.latch({rel, block}, latch_mode::shared);
    if (load<std::uint32_t>(page.bytes(), overflow_magic_at) != overflow_magic)
      return describe(rel, block) + " is in an overflow chain but is not an overflow page";
    length += load<std::uint32_t>(page.bytes(), overflow_length_at);
    block = load<block_id>(page.bytes(), overflow_next_at);
  }
  if (block != 0 || length != ref.length)
    return "an overflow chain of relation " + std::to_string(rel) + " from block " +
           std::to_string(ref.first) + " holds " + std::to_string(length) + " bytes, not " +
           std::to_string(ref.length);
  return {};
}

std::optional<block_id> next_free(const unsigned char* page, std::size_t page_size) {
  if (load<std::uint32_t>(page, overflow_magic_at) == free_magic)
    return load<block_id>(page, overflow_next_at);
  node_view node(page, page_size);
  if (node.is_node() && node.is_deleted())
    return node.next_free();
  return std::nullopt;
}

std::string check_free_list(page_store& store, rel_id rel, block_id head, std::uint32_t count,
                            std::vector<bool>& seen) {
  std::uint32_t found = 0;
  for (block_id block = head; block != 0; ++found) {
    if (block >= seen.size() || block == meta_block || seen[block])
      return "the free list of relation " + std::to_string(rel) + " links to block " +
             std::to_string(block) + ", which is not a free block";
    seen[block] = true;
    page_guard page = store.latch({rel, block}, latch_mode::shared);
    std::optional<block_id> next = next_free(page.bytes(), store.page_size());
    if (!next)
      return describe(rel, block) + " is on the free list but is neither a free page nor a "
                                    "deleted node";
    block = *next;
  }
  if (found != count)
    return "the free list of relation " + std::to_string(rel) + " has " + std::to_string(found) +
           " pages; its meta page says " + std::to_string(count);
  return {};
}

// ---- page_allocator ------------------------------------------------------------------------

page_allocator::page_allocator(page_store& store, rel_id rel, page_guard& meta,
                               page_changes& meta_changes, std::vector<logged_page>& logged)
  : store_(store), rel_(rel), meta_(meta), meta_changes_(meta_changes), logged_(logged) {
  TIDEMARK_CHECK(!meta.held() ||
                   (meta.mode() == latch_mode::exclusive && meta.id().block == meta_block),
                 "pages are given out under the meta page's exclusive latch");
  if (meta.held())
    store_.note_free_head(rel_, free_head());
}

block_id page_allocator::free_head() const {
  TIDEMARK_CHECK(meta_.held(), "the free list is read under the meta page's latch");
  return load<block_id>(meta_.bytes(), meta_free_head_at);
}

page_edit page_allocator::edit_meta() {
  TIDEMARK_CHECK(meta_.held(), "the meta page changes under its exclusive latch");
  if (!meta_logged_) {
    logged_.push_back({&meta_, &meta_changes_});
    meta_logged_ = true;
  }
  return page_edit(meta_.mutable_bytes(), store_.page_size(), &meta_changes_);
}

void page_allocator::set_free_list(block_id head, std::int64_t count_change) {
  auto count = load<std::uint32_t>(meta_.bytes(), meta_free_count_at);
  page_edit edit = edit_meta();
  edit.write_value(meta_free_head_at, head);
  edit.write_value(meta_free_count_at, static_cast<std::uint32_t>(count + count_change));
  store_.note_free_head(rel_, head);
}

std::pair<page_guard*, page_changes*> page_allocator::hold(page_guard page) {
  pages_.push_back(std::move(page));
  changes_.emplace_back();
  logged_.push_back({&pages_.back(), &changes_.back()});
  return {&pages_.back(), &changes_.back()};
}

// A page off the free list (latched: only the free list, which the meta latch guards, leads
// to it; or already held, freed earlier in this change), or a new block.
// A deleted node at the head waits until no operation may still hold its number
// (page_store::reusable): a new block is given out meanwhile.
std::pair<page_guard*, page_changes*> page_allocator::take_page() {
  block_id head = free_head();
  if (head == 0 || !store_.reusable({rel_, head}))
    return hold(store_.latch_new_block(rel_));
  std::pair<page_guard*, page_changes*> page{nullptr, nullptr};
  for (std::size_t i = 0; i < pages_.size() && page.first == nullptr; ++i)
    if (pages_[i].id().block == head)
      page = {&pages_[i], &changes_[i]};
  if (page.first == nullptr) {
    page = hold(store_.latch({rel_, head}, latch_mode::exclusive));
    if (node_view(page.first->bytes(), store_.page_size()).is_node())
      logged_.back().reuses_unlinked = true; // a deleted node's block
  }
  std::optional<block_id> next = next_free(page.first->bytes(), store_.page_size());
  if (!next)
    throw tidemark::data_error(describe(rel_, head) +
                               " is on the free list but is neither a free page nor a deleted "
                               "node");
  set_free_list(*next, -1);
  return page;
}

std::pair<page_guard*, page_changes*> page_allocator::take_node_page() {
  if (!meta_.held()) // a split planned while the free list was known empty
    return hold(store_.latch_new_block(rel_));
  return take_page();
}

void page_allocator::free_deleted_leaf(page_guard& leaf, page_changes& changes) {
  page_edit edit(leaf.mutable_bytes(), store_.page_size(), &changes);
  mark_deleted(edit, free_head());
  set_free_list(leaf.id().block, +1);
}

overflow_ref page_allocator::write_chain(std::string_view value) {
  std::size_t page_size = store_.page_size();
  std::size_t count = overflow_pages(page_size, value.size());
  TIDEMARK_CHECK(count > 0, "only a value too large for a leaf goes on a chain");
  std::vector<std::pair<page_guard*, page_changes*>> chain;
  for (std::size_t i = 0; i < count; ++i)
    chain.push_back(take_page());
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t at = i * overflow_capacity(page_size);
    std::size_t length = std::min(overflow_capacity(page_size), value.size() - at);
    std::uint32_t header[4] = {overflow_magic, i + 1 < count ? chain[i + 1].first->id().block : 0,
                               static_cast<std::uint32_t>(length), 0};
    page_edit edit(chain[i].first->mutable_bytes(), page_size, chain[i].second);
    edit.write(overflow_magic_at, header, sizeof header);
    edit.write(overflow_data_offset, value.data() + at, length);
  }
  return {static_cast<std::uint32_t>(value.size()), chain.front().first->id().block};
}

void page_allocator::free_chain(overflow_ref ref) {
  std::size_t pages = overflow_pages(store_.page_size(), ref.length);
  block_id block = ref.first;
  for (std::size_t i = 0; i < pages; ++i) {
    // Reached only through the leaf the caller holds exclusively: nobody waits here.
    auto [page, changes] = hold(store_.latch({rel_, block}, latch_mode::exclusive));
    TIDEMARK_CHECK(load<std::uint32_t>(page->bytes(), overflow_magic_at) == overflow_magic,
                   "a chain is checked (check_chain) before it is freed");
    block_id next = load<block_id>(page->bytes(), overflow_next_at);
    TIDEMARK_CHECK(next != block, "a chain checked before the change does not loop");
    std::uint32_t header[2] = {free_magic, free_head()};
    page_edit edit(page->mutable_bytes(), store_.page_size(), changes);
    edit.write(overflow_magic_at, header, sizeof header);
    set_free_list(block, +1);
    block = next;
  }
}

} // namespace tidemark::access
