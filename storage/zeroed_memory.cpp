// Anonymous mappings for large zero-filled memory: see zeroed_memory.hpp.
#include "storage/zeroed_memory.hpp"

#include "storage/check.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace tidemark::storage {

namespace {
constexpr std::size_t huge_page = std::size_t(2) << 20;
constexpr std::size_t small_page = 4096;
#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23; // Linux 5.14; older headers lack the name
#endif
} // namespace

zeroed_memory::zeroed_memory(std::size_t bytes) : size_(bytes) {
  mapped_ = bytes >= huge_page ? (bytes + huge_page - 1) / huge_page * huge_page + huge_page
                               : (bytes == 0 ? 1 : bytes);
  void* memory = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED)
    throw std::bad_alloc();
  base_ = static_cast<unsigned char*>(memory);
  data_ = base_;
  if (bytes >= huge_page) {
    // Start on a huge page boundary (the mapping has a spare huge page for it).
    auto address = reinterpret_cast<std::uintptr_t>(base_);
    data_ = base_ + (huge_page - address % huge_page) % huge_page;
    madvise(data_, mapped_ - std::size_t(data_ - base_), MADV_HUGEPAGE);
  }
}

bool zeroed_memory::fault_in(std::size_t offset, std::size_t length) {
  TIDEMARK_CHECK(offset <= size_ && length <= size_ - offset, "fault_in stays inside the memory");
  std::size_t begin = offset / small_page * small_page; // data_ is page aligned
  std::size_t end = (offset + length + small_page - 1) / small_page * small_page;
  return length == 0 || madvise(data_ + begin, end - begin, MADV_POPULATE_WRITE) == 0;
}

zeroed_memory::~zeroed_memory() { munmap(base_, mapped_); }

} // namespace tidemark::storage
