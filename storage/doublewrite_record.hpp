// The on-disk form of the doublewrite ring file: two header slots, then a circular log of
// batch records, each the batch's page images, LZ4-compressed when that is shorter, behind
// one header whose CRC covers the whole record. No CAF, no I/O: the ring writes what
// encode_batch() and encode_ring_header() produced, and repair hands the ring file's bytes
// to inspect_ring_record(), for_each_record_image() and for_each_ring_image().
//
// Layout (native byte order):
//   [0, ring_records_start)  two header slots A, B of ring_record_alignment bytes each:
//     { u32 magic "TMDH", u32 crc32c of bytes [8, 48), u32 version = 1, u32 reserved = 0,
//       u64 header sequence (the higher of two intact headers is the newer),
//       u64 horizon offset, u64 horizon sequence (the oldest record that may be live, or
//       where and with which sequence the next record goes), u64 next sequence (the one
//       the ring would assign next when the header was written) }, zeros to the slot end
//   [ring_records_start, end) records, each at a multiple of ring_record_alignment:
//     header  { u32 magic "TMDW", u32 crc32c of bytes [8, length), u32 length, u32 count,
//               u64 sequence, u32 page_size, u32 reserved = 0 }
//     count × { u16 stored length, u16 flags (1: LZ4 block), stored bytes }
//   A ring file from before the header slots holds records from offset 0 on and no
//   intact header.
//
// Invariants:
//  - A record is used only whole: magic, length, page size and CRC must all check, so a
//    record torn by a crash, or partly overwritten by a later one, yields nothing (its
//    batch's in-place writes never started, D1).
//  - A header is used only whole (magic, version, CRC, a horizon inside the record area,
//    horizon sequence <= next sequence); a torn one is ignored and the other slot's used.
//  - An image these functions yield comes from an intact record; its page() is exactly
//    page_size bytes or nullptr. The caller still verifies the page's own checksum and
//    identity.
//  - A record never exceeds max_record_bytes(batch_pages, page_size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace tidemark::storage {

constexpr std::size_t ring_record_alignment = 4096;
/// Where the records start: after the two header slots.
constexpr std::size_t ring_records_start = 2 * ring_record_alignment;

/// What a header slot says (see the layout above).
struct ring_header {
  std::uint64_t header_sequence = 0;
  std::uint64_t horizon_at = 0;
  std::uint64_t horizon_sequence = 0;
  std::uint64_t next_sequence = 0;
};

/// Fills `slot` (ring_record_alignment bytes) with the header.
void encode_ring_header(const ring_header& header, unsigned char* slot);
/// The header in `slot` (ring_record_alignment bytes), or false when it is not intact.
bool decode_ring_header(const unsigned char* slot, ring_header* header);
/// The newer intact header of the two slots at `slots` (ring_records_start bytes, zeros
/// where the file is shorter) and its slot (0 or 1), or false when neither is intact.
bool newest_ring_header(const unsigned char* slots, ring_header* header, unsigned* slot);

/// The largest record a batch of `batch_pages` pages can take (incompressible pages),
/// rounded up to ring_record_alignment.
std::size_t max_record_bytes(std::uint32_t batch_pages, std::size_t page_size);

/// Encodes the `count` page images (each page_size bytes) into `out` (at least
/// max_record_bytes(count, page_size) bytes). Returns the bytes to write: the record
/// zero-padded to ring_record_alignment.
std::size_t encode_batch(const unsigned char* const* images, std::uint32_t count,
                         std::size_t page_size, std::uint64_t sequence, unsigned char* out);

/// One page image of an intact record, decoded only as far as asked: a scan that needs
/// only page headers (identity, LSN) does not decompress whole pages. Pointers it returns
/// are valid until the next call on it and only during the scan's callback.
class ring_image {
public:
  ring_image(const unsigned char* stored, std::size_t stored_bytes, bool compressed,
             std::size_t page_size, unsigned char* scratch)
    : stored_(stored), stored_bytes_(stored_bytes), compressed_(compressed), page_size_(page_size),
      scratch_(scratch) {}
  /// The page's first `bytes` bytes (at most page_size), or nullptr if they do not decode.
  const unsigned char* prefix(std::size_t bytes) const;
  /// The whole page, or nullptr if it does not decompress to exactly page_size bytes.
  const unsigned char* page() const;

private:
  const unsigned char* stored_;
  std::size_t stored_bytes_;
  bool compressed_;
  std::size_t page_size_;
  unsigned char* scratch_;
};

/// What the bytes at a record boundary hold. `partial`: a record header that checks, for
/// a record longer than the bytes given (sequence and length are its header's, unverified).
struct ring_record_info {
  enum { none, partial, intact } kind = none;
  std::uint64_t sequence = 0;
  std::size_t length = 0; // intact: padded to ring_record_alignment; partial: as its header says
};
ring_record_info inspect_ring_record(const unsigned char* record, std::size_t available,
                                     std::size_t page_size);

/// Calls `image` with each image of a record inspect_ring_record() found intact. `scratch`:
/// page_size bytes, where compressed images are decoded.
void for_each_record_image(const unsigned char* record, std::size_t page_size,
                           unsigned char* scratch,
                           const std::function<void(const ring_image& image)>& image);

/// Calls `image` with every image of every intact record that starts before `scan_until`
/// in `ring` (`length` bytes of the ring file, from a record alignment boundary), trying
/// each alignment boundary not inside an intact record. Returns where the scan stopped:
/// at or past `scan_until`, or earlier at a record whose header checks but which extends
/// past `length` (read on from there with more bytes). Adds the intact records found to
/// `*records` when given.
std::size_t for_each_ring_image(const unsigned char* ring, std::size_t length,
                                std::size_t scan_until, std::size_t page_size,
                                const std::function<void(const ring_image& image)>& image,
                                std::uint64_t* records = nullptr);

} // namespace tidemark::storage
