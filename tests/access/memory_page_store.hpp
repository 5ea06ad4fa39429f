// A page_store in memory for the access layer's tests: pages in vectors, a latch per page,
// and every logged change kept as a record, so a test can replay them onto empty pages the
// way redo would and compare. A latch is a holder count behind a mutex that is held only
// while the count changes (as the buffer pool's latches are no mutexes either): a commit may
// hold hundreds of latches, more than ThreadSanitizer tracks held mutexes.
#pragma once

#include "access/page_store.hpp"
#include "storage/check.hpp"
#include "storage/page.hpp"
#include "storage/wal_record.hpp"

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

namespace tidemark::access::testing {

class memory_page_store final : public page_store {
public:
  struct record {
    lsn_t lsn;
    tidemark::storage::xid_t xid;                                      // 0: a structure change
    std::vector<std::pair<page_id, std::vector<unsigned char>>> pages; // id, ops
  };

  /// `keep_records`: keep every logged change for replay_into() (memory grows with them).
  explicit memory_page_store(std::size_t page_size, bool keep_records = false)
    : page_size_(page_size), keep_records_(keep_records) {}

  std::size_t page_size() const override { return page_size_; }

  /// Called by latch() before it waits for the page: a test runs something at a chosen
  /// moment of an operation (on the same thread, so it must not wait for the caller).
  std::function<void(page_id, latch_mode)> before_latch;

  page_guard latch(page_id id, latch_mode mode) override {
    if (before_latch)
      before_latch(id, mode);
    page& p = page_of(id);
    std::unique_lock<std::mutex> lock(p.mutex);
    p.released.wait(lock, [&] { return p.grantable(mode); });
    p.grant(mode);
    return make_guard(id, 0, p.bytes.data(), mode);
  }

  page_guard try_latch(page_id id, latch_mode mode) override {
    page& p = page_of(id);
    std::lock_guard<std::mutex> lock(p.mutex);
    if (!p.grantable(mode))
      return {};
    p.grant(mode);
    return make_guard(id, 0, p.bytes.data(), mode);
  }

  // Pages here have no room after them for reads past their end (page_store.hpp): every
  // read latches.
  bool read_unlatched(page_id, unlatched_page*) const override { return false; }
  bool still_unchanged(const unlatched_page&) const override { return false; }

  block_id new_block(rel_id rel) override {
    std::unique_lock<std::shared_mutex> lock(pages_mutex_);
    auto& pages = relations_[rel];
    pages.push_back(std::make_unique<page>(page_size_));
    return static_cast<block_id>(pages.size() - 1);
  }

  block_id blocks(rel_id rel) override {
    std::shared_lock<std::shared_mutex> lock(pages_mutex_);
    auto found = relations_.find(rel);
    return found == relations_.end() ? 0 : static_cast<block_id>(found->second.size());
  }

  lsn_t log_change(const std::vector<logged_page>& pages,
                   tidemark::storage::xid_t xid = 0) override {
    std::lock_guard<std::mutex> lock(log_mutex_);
    record r{++lsn_, xid, {}};
    for (const logged_page& p : pages) {
      TIDEMARK_CHECK(p.page->mode() == latch_mode::exclusive,
                     "logged pages are latched exclusively");
      storage::set_page_lsn(p.page->mutable_bytes(), r.lsn);
      r.pages.push_back(
        {p.page->id(),
         std::vector<unsigned char>(p.changes->data(), p.changes->data() + p.changes->size())});
    }
    ++record_count_;
    if (keep_records_)
      records_.push_back(std::move(r));
    return lsn_;
  }

  std::size_t max_record_bytes() const override { return max_record_bytes_; }
  void set_max_record_bytes(std::size_t bytes) { max_record_bytes_ = bytes; }
  /// Memory has room for any number of latches: the limit is only what a test sets.
  std::size_t max_latched_pages() const override { return max_latched_pages_; }
  void set_max_latched_pages(std::size_t pages) { max_latched_pages_ = pages; }
  void reserve_latches(std::size_t) override {}
  bool try_reserve_latches(std::size_t) override { return true; }
  void release_reserved_latches() override {}
  bool latches_reserved() const override { return false; }
  std::size_t latches_in_reserve() const override { return 0; }
  void half_applied(const std::string& why) override {
    TIDEMARK_CHECK_DETAIL(false, "a test's change never fails half applied", why);
  }

  /// Replays every record onto empty pages, as redo would, into `target`.
  void replay_into(memory_page_store& target) const {
    std::lock_guard<std::mutex> lock(log_mutex_);
    TIDEMARK_CHECK(keep_records_, "a store replays only the records it kept");
    for (const record& r : records_)
      for (const auto& [id, ops] : r.pages) {
        while (target.blocks(id.rel) <= id.block)
          target.new_block(id.rel);
        page& p = target.page_of(id);
        storage::apply_ops(p.bytes.data(), page_size_, ops.data(), ops.size());
        storage::set_page_lsn(p.bytes.data(), r.lsn);
      }
  }

  /// How many times the page was latched exclusively (by latch or try_latch).
  std::size_t exclusive_latches(page_id id) {
    page& p = page_of(id);
    std::lock_guard<std::mutex> lock(p.mutex);
    return p.exclusive_grants;
  }

  /// The bytes of a page (no latch: the test makes sure no one writes).
  const std::vector<unsigned char>& bytes_of(page_id id) { return page_of(id).bytes; }
  std::size_t record_count() const {
    std::lock_guard<std::mutex> lock(log_mutex_);
    return record_count_;
  }

protected:
  void unlatch(page_id id, std::uint64_t, latch_mode mode) override {
    page& p = page_of(id);
    std::lock_guard<std::mutex> lock(p.mutex);
    p.holders = mode == latch_mode::exclusive ? 0 : p.holders - 1;
    if (p.holders == 0)
      p.released.notify_all();
  }

private:
  struct page {
    explicit page(std::size_t size) : bytes(size, 0) {}
    bool grantable(latch_mode mode) const {
      return mode == latch_mode::exclusive ? holders == 0 : holders >= 0;
    }
    void grant(latch_mode mode) {
      holders = mode == latch_mode::exclusive ? -1 : holders + 1;
      exclusive_grants += mode == latch_mode::exclusive ? 1 : 0;
    }

    std::vector<unsigned char> bytes;
    std::mutex mutex;                 // guards holders
    std::condition_variable released; // holders reached 0
    int holders = 0;                  // -1: exclusive; n > 0: n shared
    std::size_t exclusive_grants = 0; // guarded by mutex too
  };

  page& page_of(page_id id) {
    std::shared_lock<std::shared_mutex> lock(pages_mutex_);
    auto found = relations_.find(id.rel);
    TIDEMARK_CHECK(found != relations_.end() && id.block < found->second.size(),
                   "the tree latches only blocks its relation has");
    return *found->second[id.block];
  }

  std::size_t page_size_;
  bool keep_records_;
  std::size_t max_record_bytes_ = tidemark::storage::max_wal_record_bytes;
  std::size_t max_latched_pages_ = std::size_t(1) << 30;
  std::size_t record_count_ = 0;
  std::shared_mutex pages_mutex_;
  std::map<rel_id, std::vector<std::unique_ptr<page>>> relations_;
  mutable std::mutex log_mutex_;
  std::vector<record> records_;
  lsn_t lsn_ = 0;
};

} // namespace tidemark::access::testing
