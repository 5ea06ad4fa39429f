// Doublewrite ring records and header slots: see doublewrite_record.hpp for the layout and
// invariants.
#include "storage/doublewrite_record.hpp"

#include "storage/crc32c.hpp"

#include <lz4.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tidemark::storage {
namespace {

constexpr std::uint32_t record_magic = 0x57444d54; // "TMDW"
constexpr std::uint32_t header_magic = 0x48444d54; // "TMDH"
constexpr std::uint32_t header_version = 1;
constexpr std::uint16_t entry_lz4 = 1;

struct ring_record_header {
  std::uint32_t magic;
  std::uint32_t crc;
  std::uint32_t length;
  std::uint32_t count;
  std::uint64_t sequence;
  std::uint32_t page_size;
  std::uint32_t reserved;
};
static_assert(sizeof(ring_record_header) == 32);

struct slot_header {
  std::uint32_t magic;
  std::uint32_t crc;
  std::uint32_t version;
  std::uint32_t reserved;
  std::uint64_t header_sequence;
  std::uint64_t horizon_at;
  std::uint64_t horizon_sequence;
  std::uint64_t next_sequence;
};
static_assert(sizeof(slot_header) == 48);
constexpr std::size_t slot_crc_from = offsetof(slot_header, version);

struct entry_header {
  std::uint16_t stored;
  std::uint16_t flags;
};
static_assert(sizeof(entry_header) == 4);

constexpr std::size_t crc_from = offsetof(ring_record_header, length);

std::size_t round_up(std::size_t n) {
  return (n + ring_record_alignment - 1) / ring_record_alignment * ring_record_alignment;
}

} // namespace

std::size_t max_record_bytes(std::uint32_t batch_pages, std::size_t page_size) {
  return round_up(sizeof(ring_record_header) +
                  std::size_t(batch_pages) * (sizeof(entry_header) + page_size));
}

std::size_t encode_batch(const unsigned char* const* images, std::uint32_t count,
                         std::size_t page_size, std::uint64_t sequence, unsigned char* out) {
  std::size_t at = sizeof(ring_record_header);
  for (std::uint32_t i = 0; i < count; ++i) {
    entry_header e{static_cast<std::uint16_t>(page_size), 0};
    unsigned char* stored = out + at + sizeof e;
    // Compressed only when shorter; the bound keeps LZ4 from writing past a raw image.
    int compressed = LZ4_compress_default(reinterpret_cast<const char*>(images[i]),
                                          reinterpret_cast<char*>(stored),
                                          static_cast<int>(page_size),
                                          static_cast<int>(page_size) - 1);
    if (compressed > 0) {
      e = {static_cast<std::uint16_t>(compressed), entry_lz4};
    } else {
      std::memcpy(stored, images[i], page_size);
    }
    std::memcpy(out + at, &e, sizeof e);
    at += sizeof e + e.stored;
  }
  ring_record_header h{record_magic,
                       0,
                       static_cast<std::uint32_t>(at),
                       count,
                       sequence,
                       static_cast<std::uint32_t>(page_size),
                       0};
  std::memcpy(out, &h, sizeof h);
  h.crc = crc32c(out + crc_from, at - crc_from);
  std::memcpy(out, &h, sizeof h);
  std::size_t padded = round_up(at);
  std::memset(out + at, 0, padded - at);
  return padded;
}

// An image stored uncompressed is copied to the scratch page too: it lies at any offset
// of its record, and callers read it as a page (its header's 8-byte fields aligned).
const unsigned char* ring_image::prefix(std::size_t bytes) const {
  bytes = std::min(bytes, page_size_);
  if (!compressed_) {
    if (stored_bytes_ < bytes)
      return nullptr;
    std::memcpy(scratch_, stored_, bytes);
    return scratch_;
  }
  int decoded = LZ4_decompress_safe_partial(reinterpret_cast<const char*>(stored_),
                                            reinterpret_cast<char*>(scratch_),
                                            static_cast<int>(stored_bytes_),
                                            static_cast<int>(bytes), static_cast<int>(page_size_));
  return decoded >= static_cast<int>(bytes) ? scratch_ : nullptr;
}

const unsigned char* ring_image::page() const {
  if (!compressed_) {
    if (stored_bytes_ != page_size_)
      return nullptr;
    std::memcpy(scratch_, stored_, page_size_);
    return scratch_;
  }
  int restored = LZ4_decompress_safe(reinterpret_cast<const char*>(stored_),
                                     reinterpret_cast<char*>(scratch_),
                                     static_cast<int>(stored_bytes_), static_cast<int>(page_size_));
  return restored == static_cast<int>(page_size_) ? scratch_ : nullptr;
}

void encode_ring_header(const ring_header& header, unsigned char* slot) {
  std::memset(slot, 0, ring_record_alignment);
  slot_header h{header_magic,
                0,
                header_version,
                0,
                header.header_sequence,
                header.horizon_at,
                header.horizon_sequence,
                header.next_sequence};
  std::memcpy(slot, &h, sizeof h);
  h.crc = crc32c(slot + slot_crc_from, sizeof h - slot_crc_from);
  std::memcpy(slot, &h, sizeof h);
}

bool decode_ring_header(const unsigned char* slot, ring_header* header) {
  slot_header h;
  std::memcpy(&h, slot, sizeof h);
  if (h.magic != header_magic || h.version != header_version || h.reserved != 0 ||
      crc32c(slot + slot_crc_from, sizeof h - slot_crc_from) != h.crc)
    return false;
  if (h.horizon_at < ring_records_start || h.horizon_at % ring_record_alignment != 0 ||
      h.horizon_sequence > h.next_sequence)
    return false;
  *header = {h.header_sequence, h.horizon_at, h.horizon_sequence, h.next_sequence};
  return true;
}

bool newest_ring_header(const unsigned char* slots, ring_header* header, unsigned* slot) {
  bool found = false;
  for (unsigned s = 0; s < 2; ++s) {
    ring_header h;
    if (decode_ring_header(slots + s * ring_record_alignment, &h) &&
        (!found || h.header_sequence > header->header_sequence)) {
      *header = h;
      *slot = s;
      found = true;
    }
  }
  return found;
}

// Checks the record at `record` (at most `available` bytes long) whole: header, CRC and the
// entries' layout.
ring_record_info inspect_ring_record(const unsigned char* record, std::size_t available,
                                     std::size_t page_size) {
  ring_record_info info;
  ring_record_header h;
  if (available < sizeof h)
    return info;
  std::memcpy(&h, record, sizeof h);
  if (h.magic != record_magic || h.length < sizeof h || h.page_size != page_size || h.reserved != 0)
    return info;
  info.sequence = h.sequence;
  if (h.length > available) {
    info.kind = ring_record_info::partial;
    info.length = h.length;
    return info;
  }
  if (crc32c(record + crc_from, h.length - crc_from) != h.crc)
    return info;
  // An intact record is whole, so any inconsistency in its entries means a bug or a
  // coincidence against the CRC; it yields nothing then.
  std::size_t at = sizeof h;
  for (std::uint32_t i = 0; i < h.count; ++i) {
    entry_header e;
    if (at + sizeof e > h.length)
      return info;
    std::memcpy(&e, record + at, sizeof e);
    at += sizeof e + e.stored;
    if (at > h.length || (e.flags & ~entry_lz4) != 0 ||
        ((e.flags & entry_lz4) == 0 && e.stored != page_size))
      return info;
  }
  if (at != h.length)
    return info;
  info.kind = ring_record_info::intact;
  info.length = round_up(h.length);
  return info;
}

void for_each_record_image(const unsigned char* record, std::size_t page_size,
                           unsigned char* scratch,
                           const std::function<void(const ring_image& image)>& image) {
  ring_record_header h;
  std::memcpy(&h, record, sizeof h);
  std::size_t at = sizeof h;
  for (std::uint32_t i = 0; i < h.count; ++i) {
    entry_header e;
    std::memcpy(&e, record + at, sizeof e);
    const unsigned char* stored = record + at + sizeof e;
    at += sizeof e + e.stored;
    image(ring_image(stored, e.stored, (e.flags & entry_lz4) != 0, page_size, scratch));
  }
}

std::size_t for_each_ring_image(const unsigned char* ring, std::size_t length,
                                std::size_t scan_until, std::size_t page_size,
                                const std::function<void(const ring_image& image)>& image,
                                std::uint64_t* records) {
  std::vector<unsigned char> scratch(page_size);
  std::size_t at = 0;
  while (at < scan_until && at < length) {
    ring_record_info info = inspect_ring_record(ring + at, length - at, page_size);
    if (info.kind == ring_record_info::partial)
      return at;
    if (info.kind == ring_record_info::intact) {
      for_each_record_image(ring + at, page_size, scratch.data(), image);
      if (records != nullptr)
        ++*records;
      at += info.length;
    } else {
      at += ring_record_alignment;
    }
  }
  return std::max(at, scan_until);
}

} // namespace tidemark::storage
