// The on-disk form of one doublewrite batch in the ring file: a record of the batch's page
// images, each LZ4-compressed when that is shorter, behind one header whose CRC covers the
// whole record. No CAF, no I/O: the ring writes what encode_batch() produced, and repair
// hands the ring file's bytes to for_each_ring_image().
//
// Layout (native byte order; records start at multiples of ring_record_alignment):
//   header  { u32 magic "TMDW", u32 crc32c of bytes [8, length), u32 length, u32 count,
//             u64 sequence, u32 page_size, u32 reserved = 0 }
//   count × { u16 stored length, u16 flags (1: LZ4 block), stored bytes }
//
// Invariants:
//  - A record is used only whole: magic, length, page size and CRC must all check, so a
//    record torn by a crash, or partly overwritten by a later one, yields nothing (its
//    batch's in-place writes never started, D1).
//  - An image for_each_ring_image() yields comes from an intact record; its page() is
//    exactly page_size bytes or nullptr. The caller still verifies the page's own checksum
//    and identity.
//  - A record never exceeds max_record_bytes(batch_pages, page_size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace tidemark::storage {

constexpr std::size_t ring_record_alignment = 4096;

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
    : stored_(stored), stored_bytes_(stored_bytes), compressed_(compressed),
      page_size_(page_size), scratch_(scratch) {}
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

/// Calls `image` with every image of every intact record that starts before `scan_until`
/// in `ring` (`length` bytes of the ring file, from a record alignment boundary), trying
/// each alignment boundary not inside an intact record. Returns where the scan stopped:
/// at or past `scan_until`, or earlier at a record whose header checks but which extends
/// past `length` (read on from there with more bytes).
std::size_t for_each_ring_image(const unsigned char* ring, std::size_t length, std::size_t scan_until,
                                std::size_t page_size,
                                const std::function<void(const ring_image& image)>& image);

} // namespace tidemark::storage
