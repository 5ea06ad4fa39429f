// WAL record format: building a record in memory, decoding it, and applying its page
// operations. The same apply_ops() runs when a session changes a page and when redo replays
// the record, so forward processing and recovery cannot drift apart.
//
// Layout (all little-endian, records start on 8-byte boundaries; total_length excludes the
// padding that follows):
//
//   record_header (48 bytes; the block count is two bytes, low then high, apart: records
//                  of up to 255 blocks read as they did when it was one)
//   block_count × { block_ref_header (12 bytes), ops (ops_length bytes),
//                   page image, only if block_has_image:
//                     page_size bytes, or, with block_image_lz4 as well,
//                     u16 stored length + that many bytes of LZ4 block format }
//   main data (main_length bytes)
//
//   op:  u8 kind, u16 offset, u16 length, then `length` bytes
//        add_i64:     length 8, the bytes are a signed delta added to the i64 at offset
//        write_bytes: the bytes replace page[offset, offset + length)
//        move_bytes:  length 4, the bytes are u16 source, u16 count: page[source, source +
//                     count) is copied (as memmove) to page[offset, offset + count); a
//                     node's compaction is logged as moves rather than its bytes
//
// Invariants:
//  - crc = crc32c over the header (crc field zeroed) continued from crc32c over everything
//    after the header; it covers lsn, so a stale record in a recycled segment never matches.
//  - lsn is the byte position where the record starts; the page LSN a record gives the
//    pages it changes is its end (lsn + total_length): WAL up to a page's LSN holds every
//    change the page carries.
//  - durable_lsn is the flushed WAL position when the record was inserted: everything
//    before it had been fsynced before this record existed (used to tell real corruption
//    from a torn tail, see wal_reader.hpp).
//  - An image, when present, is the page after this record's ops were applied; redo
//    restores it (restore_image) and does not apply the ops.
//  - An image is stored LZ4-compressed exactly when that is shorter than the page; a
//    stored image always decompresses to exactly page_size bytes, or the record is corrupt.
#pragma once

#include "storage/types.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tidemark::storage {

enum class record_type : std::uint8_t {
  transaction = 1, // page changes of one committed transaction (the commit record)
  checkpoint = 2,  // main data: checkpoint_payload
  structure = 3,   // a keyed table's structure change (a split): pages only, no transaction
};

/// record_header::flags.
enum record_flags : std::uint8_t {
  /// The change gives out a block a leaf deletion unlinked from its tree: a standby's redo
  /// waits for the reads in progress before it replays it (access/operation_epochs.hpp).
  record_reuses_unlinked = 1,
};

struct record_header {
  std::uint32_t total_length;
  std::uint32_t crc;
  std::uint64_t lsn;
  std::uint64_t prev_lsn;
  std::uint64_t durable_lsn;
  std::uint64_t xid;
  std::uint8_t type;
  std::uint8_t block_count;      // low byte of the number of blocks
  std::uint8_t block_count_high; // its high byte (zero in records of 255 blocks or fewer)
  std::uint8_t flags;            // record_flags
  std::uint32_t main_length;

  std::size_t blocks() const { return block_count | std::size_t{block_count_high} << 8; }
};
static_assert(sizeof(record_header) == 48, "record header layout is part of the WAL format");

struct block_ref_header {
  std::uint32_t rel;
  std::uint32_t block;
  std::uint16_t flags; // block_has_image
  std::uint16_t ops_length;
};
static_assert(sizeof(block_ref_header) == 12, "block ref layout is part of the WAL format");

constexpr std::uint16_t block_has_image = 1;
constexpr std::uint16_t block_image_lz4 = 2; // with block_has_image: the image is compressed
constexpr std::size_t record_alignment = 8;
constexpr std::size_t max_blocks_per_record = 0xFFFF; // block_count and block_count_high
/// The longest record: the reader takes a longer length for corruption, and the log refuses
/// to insert one (wal_log::insert).
constexpr std::size_t max_wal_record_bytes = std::size_t{256} << 20;
constexpr std::size_t max_main_length = 1u << 20;
constexpr std::size_t op_header_size = 5;            // u8 kind, u16 offset, u16 length
constexpr std::size_t max_block_ops_length = 0xFFFF; // ops of one block in one record

enum class op_kind : std::uint8_t { add_i64 = 1, write_bytes = 2, move_bytes = 3 };

/// The data of a move_bytes op.
struct move_op {
  std::uint16_t source;
  std::uint16_t count;
};
static_assert(sizeof(move_op) == 4, "a move op's data is two u16");

/// Payload of a checkpoint record.
struct checkpoint_payload {
  lsn_t redo_lsn;
  xid_t next_xid;
  std::uint64_t time_unix_ms;
};

/// A WAL position as PostgreSQL shows one: "1/2A3B4C58" (high and low 32 bits, hex).
std::string format_lsn(lsn_t lsn);

inline std::size_t aligned_record_size(std::size_t total_length) {
  return (total_length + record_alignment - 1) & ~(record_alignment - 1);
}

/// Upper bound of total_length for `page_size`: every block with 64 KiB of ops and an image
/// (a compressed one is never longer than the page), plus the longest main data, and never
/// more than max_wal_record_bytes. The reader rejects longer lengths without reading them.
inline std::size_t max_record_length(std::size_t page_size) {
  std::size_t block_max = sizeof(block_ref_header) + 0xFFFF + page_size;
  std::size_t longest = sizeof(record_header) + max_blocks_per_record * block_max + max_main_length;
  return longest < max_wal_record_bytes ? longest : max_wal_record_bytes;
}

/// Assembles one record. Reusable: reset() keeps the buffer's capacity, so steady-state
/// building does not allocate.
class record_builder {
public:
  void reset(record_type type, xid_t xid);
  /// Frees the buffer when it grew past `keep_bytes` (a builder kept for reuse holds on to
  /// no more than that between records).
  void shrink_to(std::size_t keep_bytes);
  /// Sets record_header::flags (before finish()).
  void set_flags(std::uint8_t flags);
  void begin_block(page_id id);
  void add_i64(std::uint16_t offset, std::int64_t delta);
  void write_bytes(std::uint16_t offset, const void* data, std::uint16_t length);
  /// Appends ops already encoded in the op format (the access layer records them as it
  /// changes a page); they must be valid for the page size (TIDEMARK_CHECK).
  void add_ops(const unsigned char* ops, std::size_t length, std::size_t page_size);
  /// The ops added since begin_block(), to apply to the page (valid until end_block()).
  const unsigned char* block_ops() const;
  std::size_t block_ops_length() const;
  /// Ends the block; appends `image` (page_size bytes) when it is not null, compressed
  /// when that saves space.
  void end_block(const void* image, std::size_t page_size);
  void set_main_data(const void* data, std::size_t length);
  /// Fills total_length, block_count, main_length and the payload part of the CRC.
  void finish();

  const unsigned char* data() const { return bytes_.data(); }
  /// total_length (without alignment padding).
  std::size_t size() const { return bytes_.size(); }
  std::uint32_t payload_crc() const { return payload_crc_; }
  bool has_images() const { return image_count_ > 0; }
  std::size_t image_count() const { return image_count_; }
  record_header& header();

private:
  void write_op(op_kind kind, std::uint16_t offset, const void* data, std::uint16_t length);
  std::uint16_t append_image(const void* image, std::size_t page_size);

  std::vector<unsigned char> bytes_;
  std::size_t block_start_ = 0; // offset of the open block's header; 0: no block open
  std::size_t block_count_ = 0;
  std::size_t main_length_ = 0;
  std::size_t image_count_ = 0;
  std::uint32_t payload_crc_ = 0;
};

/// Completes the header fields known only at insert time and the final CRC.
void seal_record(unsigned char* record, lsn_t lsn, lsn_t prev_lsn, lsn_t durable_lsn,
                 std::uint32_t payload_crc);

struct block_ref_view {
  page_id id;
  const unsigned char* ops = nullptr;
  std::size_t ops_length = 0;
  const unsigned char* image = nullptr; // null when the block has no image
  std::size_t image_length = 0;         // stored bytes (page_size unless compressed)
  bool image_compressed = false;
};

/// Writes the page image of `block` (which has one) into `page`. Throws data_error when a
/// compressed image does not decompress to exactly `page_size` bytes.
void restore_image(const block_ref_view& block, void* page, std::size_t page_size);

struct record_view {
  record_header header;
  std::size_t block_count = 0;
  std::vector<block_ref_view> blocks; // block_count of them (kept allocated between records)
  const unsigned char* main = nullptr;
  std::size_t main_length = 0;

  lsn_t lsn() const { return header.lsn; }
  lsn_t end_lsn() const { return header.lsn + header.total_length; }
  record_type type() const { return static_cast<record_type>(header.type); }
};

enum class decode_result { ok, bad_length, bad_checksum, bad_structure };

/// Decodes `length` bytes holding exactly one record (length == header.total_length).
/// Verifies the CRC and the block structure; the view points into `bytes`.
decode_result decode_record(const unsigned char* bytes, std::size_t length, std::size_t page_size,
                            record_view& out);

/// Applies encoded ops to a page. Offsets were validated when the record was built or
/// decoded (decode_record rejects ops that fall outside the page).
void apply_ops(void* page, std::size_t page_size, const unsigned char* ops, std::size_t length);

} // namespace tidemark::storage
