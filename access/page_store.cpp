// page_guard and page_store's guard plumbing: see page_store.hpp.
#include "access/page_store.hpp"

#include "storage/check.hpp"

namespace tidemark::access {

page_guard& page_guard::operator=(page_guard&& other) noexcept {
  if (this != &other) {
    release();
    store_ = other.store_;
    id_ = other.id_;
    handle_ = other.handle_;
    bytes_ = other.bytes_;
    mode_ = other.mode_;
    other.store_ = nullptr;
  }
  return *this;
}

void page_guard::release() {
  if (store_ == nullptr)
    return;
  page_store* store = store_;
  store_ = nullptr;
  store->unlatch(id_, handle_, mode_);
}

unsigned char* page_guard::mutable_bytes() {
  TIDEMARK_CHECK(store_ != nullptr && mode_ == latch_mode::exclusive,
                 "a page is changed only under its exclusive latch");
  return bytes_;
}

void latch_reservation::reserve(std::size_t count) {
  if (!held_ && store_.latches_reserved())
    return; // nested in another reservation
  store_.reserve_latches(count);
  held_ = true;
}

bool latch_reservation::try_reserve(std::size_t count) {
  if (!held_ && store_.latches_reserved()) // nested: added to the other, released with it
    return store_.try_reserve_latches(count);
  if (!store_.try_reserve_latches(count))
    return false;
  held_ = true;
  return true;
}

void latch_reservation::release() {
  if (held_)
    store_.release_reserved_latches();
  held_ = false;
}

void page_store::note_unlinked(page_id id) {
  std::uint64_t epoch = epochs_.retire();
  std::lock_guard<std::mutex> lock(unlinked_mutex_);
  unlinked_[id] = epoch;
}

bool page_store::reusable(page_id id) {
  std::lock_guard<std::mutex> lock(unlinked_mutex_);
  auto found = unlinked_.find(id);
  if (found == unlinked_.end())
    return epochs_.passed(changes_began_);
  if (!epochs_.passed(found->second))
    return false;
  unlinked_.erase(found);
  return true;
}

page_guard page_store::make_guard(page_id id, std::uint64_t handle, unsigned char* bytes,
                                  latch_mode mode) {
  page_guard guard;
  guard.store_ = this;
  guard.id_ = id;
  guard.handle_ = handle;
  guard.bytes_ = bytes;
  guard.mode_ = mode;
  return guard;
}

} // namespace tidemark::access
