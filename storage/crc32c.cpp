// CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the SSE4.2 crc32 instruction when
// the CPU has it, slicing-by-8 tables otherwise.
//
// Invariants:
//  - Both paths compute the same function: the standard CRC32C with pre- and post-inversion
//    inside crc32c_extend(), so crc32c("123456789") == 0xE3069283 and extending composes
//    (crc32c_extend(crc32c_extend(0, a), b) == crc32c(a || b)).
//  - The path is chosen once per process (first call) and never changes.
#include "storage/crc32c.hpp"

#include <array>
#include <cstring>
#include <nmmintrin.h>

namespace tidemark::storage {
namespace {

constexpr std::uint32_t castagnoli_reflected = 0x82F63B78u;

using crc_tables = std::array<std::array<std::uint32_t, 256>, 8>;

// tables[0] is the classic byte table; tables[k][b] is the CRC of byte b followed by k zero
// bytes, which lets the software path consume 8 bytes per step.
constexpr crc_tables make_tables() {
  crc_tables tables{};
  for (std::uint32_t byte = 0; byte < 256; ++byte) {
    std::uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ ((crc & 1u) ? castagnoli_reflected : 0u);
    tables[0][byte] = crc;
  }
  for (std::size_t k = 1; k < tables.size(); ++k)
    for (std::size_t byte = 0; byte < 256; ++byte) {
      const std::uint32_t previous = tables[k - 1][byte];
      tables[k][byte] = (previous >> 8) ^ tables[0][previous & 0xFFu];
    }
  return tables;
}

constexpr crc_tables tables = make_tables();

std::uint64_t load_u64(const unsigned char* bytes) {
  std::uint64_t value;
  std::memcpy(&value, bytes, sizeof value);
  return value;
}

// Raw (not inverted) CRC update, table-driven.
std::uint32_t software_update(std::uint32_t crc, const unsigned char* bytes, std::size_t length) {
  for (; length >= 8; bytes += 8, length -= 8) {
    const std::uint64_t word = load_u64(bytes) ^ crc; // little-endian: low bytes first
    crc = tables[7][word & 0xFF] ^ tables[6][(word >> 8) & 0xFF] ^ tables[5][(word >> 16) & 0xFF] ^
          tables[4][(word >> 24) & 0xFF] ^ tables[3][(word >> 32) & 0xFF] ^
          tables[2][(word >> 40) & 0xFF] ^ tables[1][(word >> 48) & 0xFF] ^ tables[0][word >> 56];
  }
  for (; length > 0; ++bytes, --length)
    crc = (crc >> 8) ^ tables[0][(crc ^ *bytes) & 0xFFu];
  return crc;
}

// Raw (not inverted) CRC update with the SSE4.2 instruction.
__attribute__((target("sse4.2"))) std::uint32_t
hardware_update(std::uint32_t crc, const unsigned char* bytes, std::size_t length) {
  std::uint64_t wide = crc;
  for (; length >= 8; bytes += 8, length -= 8)
    wide = _mm_crc32_u64(wide, load_u64(bytes));
  crc = static_cast<std::uint32_t>(wide);
  for (; length > 0; ++bytes, --length)
    crc = _mm_crc32_u8(crc, *bytes);
  return crc;
}

bool cpu_has_sse42() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return has;
}

} // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t length) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (!cpu_has_sse42())
    return detail::crc32c_software(crc, data, length);
  return ~hardware_update(~crc, bytes, length);
}

bool crc32c_hardware() { return cpu_has_sse42(); }

namespace detail {

std::uint32_t crc32c_software(std::uint32_t crc, const void* data, std::size_t length) {
  return ~software_update(~crc, static_cast<const unsigned char*>(data), length);
}

} // namespace detail
} // namespace tidemark::storage
