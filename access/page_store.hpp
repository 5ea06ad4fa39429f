// What the tree needs of the page store: latched pages, new blocks, and logging one atomic
// change of several latched pages. The runtime implements it over the buffer pool and the
// WAL; tests/access implements it in memory, so the tree's algorithms are tested without an
// engine.
//
// Latching protocol (the tree keeps it; see tree.hpp for why it cannot deadlock):
//  - latch() blocks. It is called holding no latch; or by a commit, on the pages it needs
//    (leaves, and a table's meta page for its free list) in page order; or on pages nobody
//    else can be waiting for while holding one: a new block, a free-list page under its
//    meta page's exclusive latch, an overflow chain's pages under its leaf's latch (only
//    the holder of that leaf's exclusive latch changes a chain). Every other latch taken
//    while holding one is a try_latch(), and a failed one means: release everything,
//    wait_for() the page, start again.
//  - A guard releases its latch (and pin) when it is destroyed or released.
//  - Room for latches (a buffer pool's pins) is finite, and a thread never waits for room
//    while it holds a latch: a latch taken while holding one comes from a reservation
//    (reserve_latches), made while holding none. A commit reserves room for every latch
//    it will hold (one that would need more than max_latched_pages() is refused); a read
//    for its descent and chain; a split for its plan and new pages (tree.hpp); a split
//    under a commit's latches adds to the commit's reservation only what is free at once
//    (try_reserve_latches).
//  - log_change() is given pages latched exclusively by the caller, with their changes
//    already applied through page_edits; it makes them one WAL record (redo applies all of
//    it or none), stamps the record's LSN on every page and marks them dirty. With a
//    transaction id the record is that transaction's commit record, and the transaction is
//    marked committed in the commit-status log before log_change() returns.
#pragma once

#include "access/commit_gate.hpp"
#include "access/operation_epochs.hpp"
#include "access/page_changes.hpp"
#include "storage/relation_files.hpp"
#include "storage/types.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tidemark::access {

using storage::block_id;
using storage::lsn_t;
using storage::page_id;
using storage::rel_id;

enum class latch_mode { shared, exclusive };

class page_store;

/// A pinned, latched page. Move-only; releases on destruction.
class page_guard {
public:
  page_guard() = default;
  page_guard(page_guard&& other) noexcept { *this = std::move(other); }
  page_guard& operator=(page_guard&& other) noexcept;
  page_guard(const page_guard&) = delete;
  page_guard& operator=(const page_guard&) = delete;
  ~page_guard() { release(); }

  void release();
  bool held() const { return store_ != nullptr; }
  explicit operator bool() const { return held(); }
  page_id id() const { return id_; }
  latch_mode mode() const { return mode_; }
  const unsigned char* bytes() const { return bytes_; }
  /// Exclusive guards only.
  unsigned char* mutable_bytes();

private:
  friend class page_store;
  page_store* store_ = nullptr;
  page_id id_{};
  std::uint64_t handle_ = 0;
  unsigned char* bytes_ = nullptr;
  latch_mode mode_ = latch_mode::shared;
};

/// Room set aside for a commit's or a read's latches (page_store::reserve_latches), given
/// back when it is released or destroyed. Made while the thread holds a reservation
/// already, reserve() sets nothing aside (the outer one covers it, and outlives it), and
/// try_reserve() adds to the outer one what is free at once, given back with it.
class latch_reservation {
public:
  explicit latch_reservation(page_store& store) : store_(store) {}
  ~latch_reservation() { release(); }
  latch_reservation(const latch_reservation&) = delete;
  latch_reservation& operator=(const latch_reservation&) = delete;
  void reserve(std::size_t count);
  bool try_reserve(std::size_t count);
  void release();

private:
  page_store& store_;
  bool held_ = false;
};

/// A page_store::read_unlatched() read: the page's bytes, and the store's note of which
/// buffer at which version they were read from.
struct unlatched_page {
  const unsigned char* bytes = nullptr;
  std::uint64_t handle = 0;
};

/// One page of an atomic change: its guard (exclusive) and the ops that changed it.
struct logged_page {
  page_guard* page;
  page_changes* changes;
  bool reuses_unlinked = false; // the block was a deleted node's (record_reuses_unlinked)
};

class page_store {
public:
  virtual ~page_store() = default;
  virtual std::size_t page_size() const = 0;
  /// Blocks until the latch is granted.
  virtual page_guard latch(page_id id, latch_mode mode) = 0;
  /// An unheld guard when someone else holds the page in a conflicting mode.
  virtual page_guard try_latch(page_id id, latch_mode mode) = 0;
  /// Blocks until the page's current holders release it (the caller holds no latch).
  void wait_for(page_id id) { latch(id, latch_mode::shared).release(); }
  /// A page read with no latch and no pin: its bytes may change under the reader, who
  /// keeps what it read from them only once still_unchanged() says nothing did. Whatever
  /// the bytes say, 16-bit offsets and lengths followed in them stay in mapped memory
  /// (storage::buffer_pool::optimistic_reach). A store that cannot read so says false.
  virtual bool read_unlatched(page_id id, unlatched_page* page) const = 0;
  virtual bool still_unchanged(const unlatched_page& page) const = 0;
  /// A block past the relation's end, all zero, that no one else is given: the caller
  /// latches it, builds a page in it and logs it in the same change.
  virtual block_id new_block(rel_id rel) = 0;
  /// A new_block(), latched exclusively: its bytes are zeros (a store may skip reading it).
  virtual page_guard latch_new_block(rel_id rel) {
    return latch({rel, new_block(rel)}, latch_mode::exclusive);
  }
  /// Blocks the relation has (every one handed out by new_block() counts).
  virtual block_id blocks(rel_id rel) = 0;
  /// One atomic change (see the header comment): a structure change (xid 0) or the commit
  /// of transaction `xid`. Returns the record's end LSN.
  virtual lsn_t log_change(const std::vector<logged_page>& pages, storage::xid_t xid = 0) = 0;
  /// The longest record log_change() can write: a change is checked against it before any
  /// page changes.
  virtual std::size_t max_record_bytes() const = 0;
  /// A change failed after changing pages and before logging them: whoever runs the store
  /// must stop before anyone reads or writes them (W3).
  virtual void half_applied(const std::string& why) = 0;

  /// The most latches one commit may hold at once.
  virtual std::size_t max_latched_pages() const = 0;
  /// Sets aside room for `count` latches that the calling thread's next latch() and
  /// try_latch() calls draw on, instead of waiting for room one page at a time. Blocks
  /// until there is room: call it holding no latch. try_reserve_latches() does not wait
  /// (false: nothing set aside). release_reserved_latches() gives back what was not drawn.
  virtual void reserve_latches(std::size_t count) = 0;
  virtual bool try_reserve_latches(std::size_t count) = 0;
  virtual void release_reserved_latches() = 0;
  /// Whether the calling thread holds a reservation (latch_reservation nests in it).
  virtual bool latches_reserved() const = 0;
  /// The calling thread's reserved room not drawn on by its latches now.
  virtual std::size_t latches_in_reserve() const = 0;

  /// A node of `rel`'s tree a reader's descent may start from instead of reading the meta
  /// page, the page every operation on the table would otherwise latch (0: none known).
  /// Only a hint: a node that was the root once stays a node of the tree at its level
  /// (nodes are never freed), and a B-link descent from it is right wherever the tree
  /// grew since — it moves right past the splits at that level, then down.
  block_id root_hint(rel_id rel) const {
    return rel < storage::max_relations ? root_hints_[rel].load(std::memory_order_relaxed) : 0;
  }
  /// Called by whoever read the meta page (a shared cache line: written only on a change).
  void note_root(rel_id rel, block_id root) {
    if (rel < storage::max_relations && root_hints_[rel].load(std::memory_order_relaxed) != root)
      root_hints_[rel].store(root, std::memory_order_relaxed);
  }

  /// Whether `rel`'s free list was empty when its meta page was last read or changed under
  /// an exclusive latch: a split then takes new blocks without latching the meta page, the
  /// page every split would otherwise serialize on. Only a hint, written under that latch
  /// and read without it: a split that read it just before a page was freed takes a new
  /// block, the splits after the free latch the meta page and reuse the page. Unknown
  /// (false) until a meta page is seen.
  bool free_list_known_empty(rel_id rel) const {
    return rel < storage::max_relations && free_list_empty_[rel].load(std::memory_order_relaxed);
  }
  /// Called under `rel`'s meta page's exclusive latch with its free list's head now.
  void note_free_head(rel_id rel, block_id head) {
    if (rel < storage::max_relations &&
        free_list_empty_[rel].load(std::memory_order_relaxed) != (head == 0))
      free_list_empty_[rel].store(head == 0, std::memory_order_relaxed);
  }

  /// Every tree operation runs in a section of these (operation_epochs.hpp).
  operation_epochs& epochs() { return epochs_; }
  /// Every attempt of a table commit passes it (commit_gate.hpp).
  access::commit_gate& commit_gate() { return commit_gate_; }
  /// A leaf was unlinked from its tree just now: its block goes on the free list, but is
  /// not given out again while an operation that may hold its number is in progress.
  void note_unlinked(page_id id);
  /// Whether a block on the free list may be given out now. Blocks unlinked before this
  /// store began taking changes (before a restart, or replayed on a standby since
  /// promoted) wait only for the operations in progress then.
  bool reusable(page_id id);
  /// The store takes changes from now on (opened for writing, or promoted).
  /// Free lists replayed before it may hold pages: the hints start unknown again.
  void begin_changes() {
    changes_began_ = epochs_.retire();
    for (std::size_t rel = 0; rel < storage::max_relations; ++rel)
      free_list_empty_[rel].store(false, std::memory_order_relaxed);
  }

protected:
  friend class page_guard;
  page_guard make_guard(page_id id, std::uint64_t handle, unsigned char* bytes, latch_mode mode);
  /// The handle make_guard() was given for the guard's page.
  static std::uint64_t handle_of(const page_guard& guard) { return guard.handle_; }
  /// Releases what make_guard() granted.
  virtual void unlatch(page_id id, std::uint64_t handle, latch_mode mode) = 0;

private:
  operation_epochs epochs_;
  access::commit_gate commit_gate_;
  std::mutex unlinked_mutex_;
  std::map<page_id, std::uint64_t> unlinked_; // block -> the epoch it was unlinked in
  std::uint64_t changes_began_ = 0;
  std::unique_ptr<std::atomic<block_id>[]> root_hints_ {
    new std::atomic<block_id>[ storage::max_relations ]()
  };
  std::unique_ptr<std::atomic<bool>[]> free_list_empty_ {
    new std::atomic<bool>[ storage::max_relations ]()
  };
};

} // namespace tidemark::access
