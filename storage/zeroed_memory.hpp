// Large zero-filled memory (the buffer pool's frames, the WAL insert buffer), mapped
// anonymously so the kernel supplies zeros page by page as they are first touched: opening
// an engine with a large pool does not touch (and, on a virtual machine, pay a fault for)
// every page of memory it may never use. Regions of 2 MiB or more ask for transparent huge
// pages (madvise; a hint the kernel may ignore), so a pool faults and misses the TLB in
// 2 MiB steps. Aligned to 4 KiB at least (O_DIRECT reads and writes into it).
// fault_in() has the kernel supply a range's pages ahead of their first use without writing
// them, so it may run beside threads that use those bytes.
#pragma once

#include <cstddef>

namespace tidemark::storage {

class zeroed_memory {
public:
  /// Throws std::bad_alloc when the mapping fails.
  explicit zeroed_memory(std::size_t bytes);
  ~zeroed_memory();
  zeroed_memory(const zeroed_memory&) = delete;
  zeroed_memory& operator=(const zeroed_memory&) = delete;

  unsigned char* data() const { return data_; }
  /// Faults in the pages of [offset, offset + length) writable, leaving their bytes as they
  /// are (madvise MADV_POPULATE_WRITE). False when the kernel cannot (before Linux 5.14, or
  /// out of memory): the pages then fault at their first touch, as without it.
  bool fault_in(std::size_t offset, std::size_t length);
  std::size_t size() const { return size_; }

private:
  unsigned char* base_ = nullptr; // the mapping
  std::size_t mapped_ = 0;
  unsigned char* data_ = nullptr; // inside it, on a huge page boundary when large
  std::size_t size_ = 0;
};

} // namespace tidemark::storage
