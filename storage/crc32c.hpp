// CRC32C (Castagnoli). Uses the SSE4.2 crc32 instruction when the CPU has it (checked once
// at start-up), a table-driven software version otherwise; both give identical results.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tidemark::storage {

/// Extends `crc` (0 to start) over `length` bytes. crc32c_extend(crc32c_extend(0, a), b) ==
/// crc32c over a followed by b.
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t length);

inline std::uint32_t crc32c(const void* data, std::size_t length) {
  return crc32c_extend(0, data, length);
}

/// True when the hardware instruction is in use.
bool crc32c_hardware();

namespace detail {
/// The table-driven version, used whatever the CPU has (tests compare it with the hardware
/// path). Same contract as crc32c_extend().
std::uint32_t crc32c_software(std::uint32_t crc, const void* data, std::size_t length);
} // namespace detail

} // namespace tidemark::storage
