// The doublewrite ring: the file <data>/doublewrite/ring, two header slots and then
// ring_pages × page_size bytes of a circular log of batch records (doublewrite_record.hpp:
// each batch's page images, LZ4-compressed, under one CRC). A record names its pages through
// the images themselves (identity, LSN and checksum); the header names the horizon, where
// the records that may still be live begin, so repair reads only from there to the newest
// record (doublewrite_repair.hpp).
//
// A batch lives in a chunk. Chunks are cheap (a state and where its record lies); a chunk
// holds a staging area — the page images writers put there, whence the batcher writes
// them in place, and the batch's entries — only from ALLOCATED until DATA_WRITTEN, from a
// small pool (staging_chunks areas of batch_pages pages). Its record holds ring space from
// WRITTEN until the chunk is FREE again and a durable header lies past it. There is a
// chunk for every record the ring's bytes can hold (each takes at least
// ring_record_alignment), so chunks never run out before ring space does, however small
// the batches; and the ring file can be large (many batches awaiting the data-file fsync
// that frees them, whose in-place writes coalesce in the page cache) while the memory
// stays that of a few batches.
//
// Chunk states (DESIGN §4 "Doublewrite slot"), each transition checked here:
//   FREE → ALLOCATED → WRITTEN → DWB_FSYNCED → DATA_WRITTEN → DATA_FSYNCED → FREE
//
// The chain: records are placed in order, each at the write position if it fits before
// the end of the file, else at the start of the record area, with sequence numbers one
// apart. So from any record the next one is right behind it or at the start, with the next
// sequence. The horizon is the oldest record of a chunk between WRITTEN and FREE (or, with
// none, the write position and the next sequence); the durable horizon is the one of the
// last header an fdatasync covered.
//
// Invariants:
//  - D3: a batch is written with one sequential write and made durable with one fdatasync
//    of the ring, shared by the batches written just before it; never a sync per page. The
//    header, when the horizon moved, is written before that fdatasync and rides on it. Only
//    opening the ring (a header naming the run's first sequence) and a batch that finds
//    room only behind a horizon not yet durable (sync_horizon()) cost an fdatasync of a
//    header alone.
//  - The file is written ahead of the write position, with zeros, a step at a time, before
//    a record lies past its end: a record's fdatasync then finds the file's length already
//    durable and flushes data alone, where a growing file costs a journal commit per sync.
//    Zeros read as no record, as the missing bytes of a short file do.
//  - D4: a chunk is handed out only when a chunk is FREE and staging memory is free; when
//    not, acquire() waits (and counts the wait).
//  - A record is placed only outside the span from the durable horizon to the write
//    position, which holds every record of a chunk between WRITTEN and FREE (their
//    sequences are not below the durable horizon's, checked at every placement) and every
//    record repair may follow from the newest header that can be read after a crash (the
//    last durable one, or a newer one whose fdatasync had not completed). So a torn header
//    leaves the chain from the previous one intact, and the ring is never reset as a whole.
//  - Record sequences grow by one per record and never repeat across runs: a run starts
//    past every record written after the newest intact header (at most one per
//    ring_record_alignment bytes of the file), and makes that start durable in a header
//    before its first record. A file without an intact header starts over empty at open.
//  - A header is written to the slot not holding the newest intact header.
//  - A chunk returns to FREE only from DATA_FSYNCED (D2 is the batcher's part: it moves a
//    chunk there only when the sync worker reports the covering fsyncs).
#pragma once

#include "storage/buffer_pool.hpp"
#include "storage/doublewrite_record.hpp"
#include "storage/io_engine.hpp"
#include "storage/latency_buckets.hpp"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
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
  std::atomic<std::uint64_t> bytes{0};  // written to the ring file (records, padded)
  std::atomic<std::uint64_t> fsyncs{0}; // of the ring since it was opened (not the one at open)
  std::atomic<std::uint64_t> horizon_fsyncs{0}; // of those, of a header alone (sync_horizon)
  atomic_latency_histogram fsync_latency;       // of those ring fdatasyncs
  std::atomic<std::uint64_t> slot_waits{0};
  std::atomic<std::uint64_t> ring_full{0}; // batches that waited for ring space
};

class doublewrite_ring {
public:
  /// Opens the ring: created empty and durable when missing, larger than the ring or
  /// without an intact header (every record in it is dead at open: startup repaired from it
  /// first). Writes and fdatasyncs a header naming this run's first sequence. Staging
  /// memory for `staging_chunks` batches; the ring must hold the largest record.
  doublewrite_ring(io_engine& io, std::string dir, std::size_t page_size, std::uint32_t ring_pages,
                   std::uint32_t batch_pages, std::uint32_t staging_chunks);
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
  /// The pages staged in a chunk; only while it holds staging (ALLOCATED until DATA_WRITTEN).
  std::vector<dw_entry>& entries(std::uint32_t chunk);

  // --- the batcher (one thread) -----------------------------------------------------------
  /// ALLOCATED → WRITTEN: encodes the chunk's staged pages into one record and writes it
  /// with one sequential write. Returns false (the chunk stays ALLOCATED) when no ring
  /// space is free: retry after a release() and sync_horizon(), or after a sync().
  bool write(std::uint32_t chunk);
  /// WRITTEN → DWB_FSYNCED for every chunk given: the header first if the horizon moved
  /// since the durable one, then one fdatasync of the ring (D3). With no chunks it syncs
  /// only when the horizon moved, and returns whether it did.
  bool sync(const std::uint32_t* chunks, std::size_t count);
  void sync(std::uint32_t chunk) { sync(&chunk, 1); }
  /// Makes space that released chunks freed reusable: a header with the current horizon
  /// and one fdatasync, if the horizon moved since the durable one (true then).
  bool sync_horizon() { return sync(nullptr, 0); }
  /// DWB_FSYNCED → DATA_WRITTEN (its staging memory is free again: wakes a waiting
  /// writer), DATA_WRITTEN → DATA_FSYNCED.
  void advance(std::uint32_t chunk, dw_state to);
  /// DATA_FSYNCED → FREE, and its record's ring space; wakes a waiting writer.
  void release(std::uint32_t chunk);
  /// Wakes every waiting writer with an error: the engine failed (W3).
  void fail();

  dw_state state(std::uint32_t chunk) const;
  std::uint32_t free_chunks() const;
  /// How many chunks there are: one per ring_record_alignment of the record area, and one
  /// per staging area.
  std::uint32_t chunk_count() const { return static_cast<std::uint32_t>(chunks_.size()); }
  /// Bytes of the record area writes may not reuse: from the durable horizon to the write
  /// position (records of chunks not FREE yet, and of chunks FREE since the last header).
  std::uint64_t used_bytes() const;
  /// Bytes of the record area (ring_pages × page_size; the file is ring_records_start more).
  std::uint64_t capacity_bytes() const { return capacity_; }
  std::uint32_t staging_chunks() const { return static_cast<std::uint32_t>(staging_.size()); }
  std::uint32_t batch_pages() const { return batch_pages_; }
  std::uint32_t ring_pages() const { return ring_pages_; }
  std::size_t page_size() const { return page_size_; }
  dw_counters& counters() { return counters_; }
  std::string path() const { return path_; }

private:
  static constexpr std::uint32_t no_staging = ~std::uint32_t{0};
  struct staging_area {
    unsigned char* memory = nullptr; // batch_pages page images (owned)
    std::vector<dw_entry> entries;
  };
  struct chunk {
    dw_state state = dw_state::free;
    std::uint32_t staging = no_staging; // its staging area, ALLOCATED until DATA_WRITTEN
    std::uint64_t record_at = 0;        // its record, WRITTEN until FREE
    std::uint64_t record_sequence = 0;
    std::uint64_t allocations = 0; // times taken from FREE
  };
  void move(std::uint32_t c, dw_state from, dw_state to);
  bool take_free_locked(std::uint32_t* chunk);
  void return_staging_locked(chunk& c);
  bool place_record_locked(std::uint64_t bytes, std::uint64_t* at) const;
  bool in_span_locked(std::uint64_t at, std::uint64_t bytes) const;
  void horizon_locked(std::uint64_t* at, std::uint64_t* sequence) const;
  void open_ring(const std::string& dir);
  void write_header(std::uint64_t horizon_at, std::uint64_t horizon_sequence);
  void write_zeros_to(std::uint64_t end);

  io_engine& io_;
  std::string path_;
  std::size_t page_size_;
  std::uint32_t ring_pages_;
  std::uint32_t batch_pages_;
  std::uint64_t capacity_; // of the record area
  std::uint64_t end_;      // of the file: ring_records_start + capacity_
  int fd_ = -1;
  std::vector<chunk> chunks_;
  std::vector<std::uint32_t> free_list_; // the FREE chunks, the last taken first
  std::vector<staging_area> staging_;
  std::vector<std::uint32_t> free_staging_; // the staging areas no chunk holds
  // The batcher's: the record being written, and for which chunk (and its allocation).
  static constexpr std::uint32_t no_chunk = ~std::uint32_t{0};
  unsigned char* record_ = nullptr;
  std::size_t encoded_bytes_ = 0;
  std::uint32_t encoded_chunk_ = no_chunk;
  std::uint64_t encoded_allocation_ = 0;
  std::uint64_t encoded_sequence_ = 0;
  std::vector<const unsigned char*> images_;
  // The batcher's: the file's length, and zeros to write it ahead of the write position
  // with (made when the ring opens on a file shorter than the ring, freed once it is whole;
  // a file that reaches the ring's end costs a write nothing more).
  std::uint64_t file_bytes_ = 0;
  unsigned char* zeros_ = nullptr;
  std::uint64_t next_record_at_ = ring_records_start; // the write position
  std::uint64_t sequence_ = 1;                        // the next record's
  std::map<std::uint64_t, std::uint32_t> live_;       // sequence → chunk, WRITTEN until FREE
  // The durable horizon's sequence, and where the first record at or past it lies (once
  // sequence_ passed it; the span from there to the write position is not reused).
  std::uint64_t durable_sequence_ = 1;
  std::uint64_t span_at_ = ring_records_start;
  // The header the batcher writes next: its sequence, and the slot holding the newest.
  unsigned char* header_ = nullptr; // ring_records_start bytes: both slots when opening
  std::uint64_t header_sequence_ = 0;
  unsigned header_slot_ = 1;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  bool failed_ = false;
  dw_counters counters_;
};

/// D6: staging memory, in batches, for the writers: two bgwriter rounds (one being written
/// while the next is staged: the batcher holds a round's staging through its ring write,
/// one ring fsync and its in-place writes), two batches each for the checkpointer and the
/// sessions' shared batch, and ten more queued at the batcher. Independent of
/// shared_buffers and checkpoint_timeout: 46 batches, 23 MB, at bgwriter_lru_maxpages 1000
/// and 64-page batches of 8 kB pages.
std::uint32_t default_staging_chunks(std::uint32_t bgwriter_round_pages, std::uint32_t batch_pages);

/// The default ring file size in pages, 512 MB: room for the records of the batches that
/// wait for the fsyncs that free them, and for their in-place writes to coalesce first.
/// Retirement is hurried at half the ring; at 12 000 evictions a second of pgbench pages
/// (about 600 bytes each in the ring) half lasts some 35 s, longer than a checkpoint cycle
/// of 30 s, so a checkpoint's fsyncs retire the batches.
std::uint32_t default_ring_pages(std::size_t page_size);

} // namespace tidemark::storage
