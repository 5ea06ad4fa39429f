// Page checksums and verification (format in page.hpp).
//
// Invariants:
//  - The checksum is CRC32C seeded with the page identity: crc32c over {rel, block} (two
//    little-endian u32), extended over the page with the 4-byte checksum field read as zero.
//    It is computed in place, without copying the page.
//  - With checksums off the stored checksum is 0 and only the identity is verified.
//  - An all-zero page is valid (never written); every other page must carry its identity.
#include "storage/page.hpp"

#include "storage/crc32c.hpp"

#include <cstddef>

namespace tidemark::storage {
namespace {

constexpr std::size_t checksum_offset = offsetof(page_header, checksum);
constexpr std::size_t checksum_end = checksum_offset + sizeof(page_header::checksum);

std::uint32_t identity_seed(page_id id) {
  unsigned char identity[8];
  std::memcpy(identity, &id.rel, 4);
  std::memcpy(identity + 4, &id.block, 4);
  return crc32c(identity, sizeof identity);
}

bool identity_matches(const void* page, page_id id) {
  const page_header* header = header_of(page);
  return header->rel == id.rel && header->block == id.block;
}

} // namespace

std::uint32_t compute_page_checksum(const void* page, std::size_t page_size, page_id id) {
  static constexpr unsigned char zero_checksum[sizeof(page_header::checksum)] = {};
  const auto* bytes = static_cast<const unsigned char*>(page);
  std::uint32_t crc = identity_seed(id);
  crc = crc32c_extend(crc, bytes, checksum_offset);
  crc = crc32c_extend(crc, zero_checksum, sizeof zero_checksum);
  return crc32c_extend(crc, bytes + checksum_end, page_size - checksum_end);
}

void finalize_page_for_write(void* page, std::size_t page_size, page_id id, bool checksums) {
  page_header* header = header_of(page);
  header->rel = id.rel;
  header->block = id.block;
  header->checksum = checksums ? compute_page_checksum(page, page_size, id) : 0;
}

page_verdict verify_page(const void* page, std::size_t page_size, page_id id, bool checksums) {
  if (page_is_all_zero(page, page_size))
    return page_verdict::all_zero;
  if (!identity_matches(page, id))
    return page_verdict::wrong_identity;
  if (checksums && header_of(page)->checksum != compute_page_checksum(page, page_size, id))
    return page_verdict::bad_checksum;
  return page_verdict::ok;
}

const char* to_string(page_verdict verdict) {
  switch (verdict) {
    case page_verdict::ok:
      return "ok";
    case page_verdict::all_zero:
      return "all_zero";
    case page_verdict::bad_checksum:
      return "bad_checksum";
    case page_verdict::wrong_identity:
      return "wrong_identity";
  }
  return "unknown";
}

bool page_is_all_zero(const void* page, std::size_t page_size) {
  const auto* bytes = static_cast<const unsigned char*>(page);
  std::size_t position = 0;
  for (; position + sizeof(std::uint64_t) <= page_size; position += sizeof(std::uint64_t)) {
    std::uint64_t word;
    std::memcpy(&word, bytes + position, sizeof word);
    if (word != 0)
      return false;
  }
  for (; position < page_size; ++position)
    if (bytes[position] != 0)
      return false;
  return true;
}

} // namespace tidemark::storage
