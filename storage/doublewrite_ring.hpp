// The doublewrite ring: the file <data>/doublewrite/ring of ring_pages page-sized slots,
// grouped into chunks of batch_pages slots; one batch occupies one chunk. A slot holds a
// finalized page image, which names its own page (identity), LSN and checksum, so the ring
// needs no other metadata to be read back at startup. Each chunk has its own aligned
// staging memory, which writers fill before the batch is written.
//
// Chunk states (DESIGN §4 "Doublewrite slot"), each transition checked here:
//   FREE → ALLOCATED → WRITTEN → DWB_FSYNCED → DATA_WRITTEN → DATA_FSYNCED → FREE
//
// Invariants:
//  - D3: a batch is written with one sequential write and made durable with one fdatasync
//    of the ring; never a sync per page.
//  - D4: a chunk is handed out only when FREE; when none is, acquire() waits (and counts the
//    wait). Nothing ever overwrites a chunk that is not FREE, and the ring is never reset
//    as a whole.
//  - A chunk returns to FREE only from DATA_FSYNCED (D2 is the batcher's part: it moves a
//    chunk there only when the sync worker reports the covering fsyncs).
#pragma once

#include "storage/buffer_pool.hpp"
#include "storage/io_engine.hpp"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace tidemark::storage {

enum class dw_state : std::uint8_t {
  free = 0,
  allocated,
  written,
  dwb_fsynced,
  data_written,
  data_fsynced,
};
const char* to_string(dw_state state);

/// One page staged in a chunk: which page, at which LSN, from which buffer (whose write
/// stays in progress until the batcher finishes it).
struct dw_entry {
  page_id id;
  lsn_t lsn = 0;
  buffer_id buffer = 0;
};

struct dw_counters {
  std::atomic<std::uint64_t> batches{0};
  std::atomic<std::uint64_t> pages{0};
  std::atomic<std::uint64_t> fsyncs{0};
  std::atomic<std::uint64_t> slot_waits{0};
};

class doublewrite_ring {
public:
  /// Opens (creating zero-filled and durable when missing or of the wrong size) the ring.
  doublewrite_ring(io_engine& io, std::string dir, std::size_t page_size, std::uint32_t ring_pages,
                   std::uint32_t batch_pages);
  ~doublewrite_ring();
  doublewrite_ring(const doublewrite_ring&) = delete;
  doublewrite_ring& operator=(const doublewrite_ring&) = delete;

  // --- writers (any thread) ---------------------------------------------------------------
  /// A FREE chunk, now ALLOCATED to the caller. Waits while none is free (D4), calling
  /// `on_wait` once first (so the batcher can hurry retirement). Throws io_error once the
  /// ring failed.
  std::uint32_t acquire(const std::function<void()>& on_wait);
  /// A FREE chunk now ALLOCATED, or false when none is free (never waits, counts nothing).
  bool try_acquire(std::uint32_t* chunk);
  unsigned char* slot_memory(std::uint32_t chunk, std::uint32_t index);
  /// ALLOCATED → FREE for a chunk its writer staged nothing into.
  void give_back(std::uint32_t chunk);
  std::vector<dw_entry>& entries(std::uint32_t chunk) { return chunks_[chunk].entries; }

  // --- the batcher (one thread) -----------------------------------------------------------
  /// ALLOCATED → WRITTEN: one sequential write of the chunk's staged slots.
  void write(std::uint32_t chunk);
  /// WRITTEN → DWB_FSYNCED for `chunk`: one fdatasync of the ring (D3).
  void sync(std::uint32_t chunk);
  /// DWB_FSYNCED → DATA_WRITTEN, DATA_WRITTEN → DATA_FSYNCED.
  void advance(std::uint32_t chunk, dw_state to);
  /// DATA_FSYNCED → FREE; wakes a waiting writer.
  void release(std::uint32_t chunk);
  /// Wakes every waiting writer with an error: the engine failed (W3).
  void fail();

  dw_state state(std::uint32_t chunk) const;
  std::uint32_t free_chunks() const;
  std::uint32_t chunk_count() const { return static_cast<std::uint32_t>(chunks_.size()); }
  std::uint32_t batch_pages() const { return batch_pages_; }
  std::uint32_t ring_pages() const { return ring_pages_; }
  std::size_t page_size() const { return page_size_; }
  dw_counters& counters() { return counters_; }
  std::string path() const { return path_; }

private:
  struct chunk {
    dw_state state = dw_state::free;
    unsigned char* memory = nullptr;
    std::vector<dw_entry> entries;
  };
  void move(std::uint32_t c, dw_state from, dw_state to);
  bool take_free_locked(std::uint32_t* chunk);

  io_engine& io_;
  std::string path_;
  std::size_t page_size_;
  std::uint32_t ring_pages_;
  std::uint32_t batch_pages_;
  int fd_ = -1;
  std::vector<chunk> chunks_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  bool failed_ = false;
  dw_counters counters_;
};

/// D6: the default ring size from the number of writers that can hold a batch at once
/// (bgwriter, checkpointer, the sessions' shared batch) and the batch size — two chunks per
/// writer plus room for the batches retiring while one segment fsync runs — independent of
/// shared_buffers and checkpoint_timeout (1 024 pages, 8 MB, at 64-page batches).
std::uint32_t default_ring_pages(std::uint32_t batch_pages);

} // namespace tidemark::storage
