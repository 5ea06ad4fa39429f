// Relation segment files: relation `rel` is stored in <data>/base/<rel>.<segno>, each
// segment holding segment_size / page_size blocks. Reads past the end of a file return an
// all-zero page (a never-written page); writes past the end extend the file.
//
// Invariants:
//  - A block lives in exactly one segment: segno = block / blocks_per_segment.
//  - File descriptors are opened once and cached for the life of the object; the cache is
//    lock-free for lookups (a relation's table of segment descriptors is made, under the
//    open lock, the first time one of its segments is opened).
//  - nblocks(rel) never shrinks while the object lives; it covers every block written or
//    noted through note_block() (redo may touch blocks the files do not have yet).
//  - Once drop(rel) marked a relation dropped (under the open lock, before its files are
//    truncated and unlinked), no file of it is opened or created again and its writes are
//    skipped: a dirty buffer or a sync request still in flight neither recreates a file
//    nor fails on a missing one. Descriptors stay open (another thread may be using one)
//    until the object is destroyed; truncating the file first frees its space at once.
#pragma once

#include "storage/io_engine.hpp"
#include "storage/types.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tidemark::storage {

/// Relation ids: 1 .. 63 are the page relations an application addresses by number; from
/// 64 on, keyed tables' relations (access/catalog.hpp hands them out).
constexpr rel_id max_page_relations = 64;
constexpr rel_id max_table_relations = 4096;
constexpr rel_id max_relations = max_page_relations + max_table_relations;
constexpr std::uint32_t max_segments = 4096; // per relation

struct page_read {
  page_id id;
  void* out = nullptr;
};

struct page_write {
  page_id id;
  const void* data = nullptr; // finalized page (identity and checksum stamped)
};

class relation_files {
public:
  relation_files(io_engine& io, std::string base_dir, std::size_t page_size,
                 std::uint64_t segment_size);
  ~relation_files();
  relation_files(const relation_files&) = delete;
  relation_files& operator=(const relation_files&) = delete;

  void read_page(page_id id, void* out);
  /// Reads many pages in one engine batch (read_batch); blocks past a file's end, or of a
  /// segment without a file, read as zeros.
  void read_pages(const page_read* pages, std::size_t count);
  /// Tells the kernel the page will be read soon (io_engine::will_need). False, doing
  /// nothing, for a segment without a file (the page reads as zeros).
  bool will_need(page_id id);
  void write_page(page_id id, const void* page);
  /// Writes many pages in one engine batch.
  void write_pages(const page_write* pages, std::size_t count);
  void sync_segment(segment_id segment);
  /// Writes the range's dirty pages back to the device and waits; makes nothing durable
  /// (io_engine::write_back). A no-op for a segment without a file.
  void write_back_segment(segment_id segment, std::uint64_t offset, std::uint64_t length);

  segment_id segment_of(page_id id) const;
  /// Where the block starts in its segment's file.
  std::uint64_t offset_in_segment(page_id id) const {
    return (id.block % blocks_per_segment_) * page_size_;
  }
  std::string segment_path(segment_id segment) const;
  std::string describe(page_id id) const; // "base/3.0 block 17 (relation 3 block 17)"

  /// Blocks in the relation: the larger of what the files hold and what was noted.
  block_id nblocks(rel_id rel);
  void note_block(page_id id);

  /// Segments that exist on disk for `rel` (for verification scans).
  std::uint32_t segment_count(rel_id rel);

  /// Removes a relation's files for good (a dropped table's: relation ids are never used
  /// again): its segments that exist are truncated and unlinked, and from now on its writes
  /// and syncs are skipped and its reads see zeros. Returns the segments removed.
  std::vector<segment_id> drop(rel_id rel);
  bool dropped(rel_id rel) const { return dropped_[rel].load(std::memory_order_acquire); }

  std::size_t page_size() const { return page_size_; }
  std::uint64_t blocks_per_segment() const { return blocks_per_segment_; }
  io_engine& io() { return io_; }

private:
  int fd_for(segment_id segment, bool create);
  void check_ids(page_id id) const;

  io_engine& io_;
  std::string base_dir_;
  std::size_t page_size_;
  std::uint64_t segment_size_;
  std::uint64_t blocks_per_segment_;
  // [rel] -> max_segments descriptors (-1: not open), made at the relation's first open
  std::unique_ptr<std::atomic<std::atomic<int>*>[]> fd_tables_;
  std::mutex open_mutex_;
  std::atomic<block_id> nblocks_[max_relations];
  std::atomic<bool> nblocks_known_[max_relations];
  std::atomic<bool> dropped_[max_relations];
};

} // namespace tidemark::storage
