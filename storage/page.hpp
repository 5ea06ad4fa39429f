// On-disk page format. A page is `page_size` bytes (fixed at init: 4, 8, 16 or 32 KiB)
// starting with a 32-byte header:
//
//   offset  size  field
//        0     8  lsn          end LSN of the last WAL record that changed the page
//        8     4  checksum     CRC32C of the page with this field zeroed, seeded with
//                              the page's identity (rel, block)
//       12     4  rel          identity, also stored: a misdirected write is caught
//       16     4  block
//       20     2  item_count   rows appended to the page (append_row, the initial loader)
//       22     2  row_size     their size in bytes; 0 on a page without rows (or one
//                              written before the field existed)
//       24     8  reserved     zero
//
// Invariants:
//  - A page whose bytes are all zero is a valid, never-written page (relation extension
//    leaves such pages; they carry no data and lsn 0).
//  - Any other page is valid only if its checksum matches and its stored identity equals the
//    (rel, block) it was read from. With data_checksums=off only the identity is checked.
//  - The checksum is set on a private copy just before the write and verified just after the
//    read; a page in the buffer pool does not carry a meaningful checksum.
#pragma once

#include "storage/types.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tidemark::storage {

constexpr std::size_t page_header_size = 32;
constexpr std::size_t page_size_min = 4096;
constexpr std::size_t page_size_max = 32768;
constexpr std::size_t page_size_default = 8192;

struct page_header {
  std::uint64_t lsn;
  std::uint32_t checksum;
  std::uint32_t rel;
  std::uint32_t block;
  std::uint16_t item_count;
  std::uint16_t row_size;
  unsigned char reserved[8];
};
static_assert(sizeof(page_header) == page_header_size, "page header layout is part of the format");
static_assert(page_size_min % 4096 == 0, "pages are whole 4 KiB sectors");

inline bool valid_page_size(std::size_t size) {
  return size == 4096 || size == 8192 || size == 16384 || size == 32768;
}

inline page_header* header_of(void* page) { return static_cast<page_header*>(page); }
inline const page_header* header_of(const void* page) {
  return static_cast<const page_header*>(page);
}

inline lsn_t page_lsn(const void* page) { return header_of(page)->lsn; }
inline void set_page_lsn(void* page, lsn_t lsn) { header_of(page)->lsn = lsn; }

/// Checksum of `page` as stored at `id` (the checksum field itself is skipped).
std::uint32_t compute_page_checksum(const void* page, std::size_t page_size, page_id id);

/// Stamps identity and checksum into `page` (a private copy about to be written).
void finalize_page_for_write(void* page, std::size_t page_size, page_id id, bool checksums);

enum class page_verdict { ok, all_zero, bad_checksum, wrong_identity };

/// Verifies a page just read from `id`.
page_verdict verify_page(const void* page, std::size_t page_size, page_id id, bool checksums);

const char* to_string(page_verdict verdict);

bool page_is_all_zero(const void* page, std::size_t page_size);

} // namespace tidemark::storage
