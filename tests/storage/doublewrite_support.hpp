// What the doublewrite tests (doublewrite_record_test.cpp, doublewrite_repair_test.cpp,
// doublewrite_ring_test.cpp) share: page images and the records encode_batch() makes of
// them, the incompressible images a driven ring stages, and driven_ring, a ring written as
// the batcher writes it, over relation files no page was written to in place, that then
// "crashes" and is repaired from.
#pragma once

#include "storage/doublewrite_record.hpp"
#include "storage/doublewrite_repair.hpp"
#include "storage/doublewrite_ring.hpp"
#include "storage/page.hpp"
#include "storage/relation_files.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tidemark::storage::test {

/// Page images: a valid page of `id` at `lsn` whose bytes from 64 on hold 1000 × `fill`
/// (mostly zeros: it compresses), and the ring record of a batch of such images.
struct page_images {
  std::vector<unsigned char> page(page_id id, lsn_t lsn, unsigned char fill) {
    std::vector<unsigned char> p(page_size, 0);
    std::memset(p.data() + 64, fill, 1000);
    set_page_lsn(p.data(), lsn);
    finalize_page_for_write(p.data(), page_size, id, true);
    return p;
  }
  static std::vector<unsigned char> encoded(const std::vector<std::vector<unsigned char>>& pages) {
    std::vector<const unsigned char*> images;
    for (const auto& p : pages)
      images.push_back(p.data());
    std::vector<unsigned char> out(
      max_record_bytes(static_cast<std::uint32_t>(pages.size()), page_size));
    out.resize(encode_batch(images.data(), static_cast<std::uint32_t>(images.size()), page_size, 7,
                            out.data()));
    return out;
  }
};

// The image of block `id` at `lsn` the driven rings stage: finalized, with random bytes
// past its header (incompressible).
inline std::vector<unsigned char> staged_image(page_id id, lsn_t lsn) {
  auto bytes = random_bytes(page_size, id.block * 10 + lsn);
  std::memset(bytes.data(), 0, page_header_size);
  set_page_lsn(bytes.data(), lsn);
  finalize_page_for_write(bytes.data(), page_size, id, true);
  return bytes;
}

// Stages the images of `pages` blocks from `first` of relation 1 at `lsn` in a new chunk.
inline std::uint32_t stage_blocks(doublewrite_ring& ring, block_id first, lsn_t lsn,
                                  std::uint32_t pages = 3) {
  std::uint32_t c = ring.acquire({});
  for (std::uint32_t i = 0; i < pages; ++i) {
    page_id id{1, first + i};
    std::memcpy(ring.slot_memory(c, i), staged_image(id, lsn).data(), page_size);
    ring.entries(c).push_back({id, lsn, 0});
  }
  return c;
}

// A ring driven as the batcher drives it, over relation files no page was written to in
// place: every page repair restores came from a record it used. Records of three
// incompressible pages take 28 kB (seven alignment blocks).
struct driven_ring {
  static constexpr std::uint32_t pages_per_record = 3;
  static constexpr std::uint64_t record_bytes = 7 * ring_record_alignment;
  temp_dir dir;
  std::unique_ptr<io_engine> io = make_io_engine(io_method::sync);
  relation_files files{*io, dir.path(), page_size, 64 * page_size};
  std::string ring_dir = dir.file("doublewrite");
  std::string ring_path = ring_dir + "/ring";
  std::unique_ptr<doublewrite_ring> ring;

  explicit driven_ring(std::uint32_t ring_pages) { open(ring_pages); }
  void open(std::uint32_t ring_pages) {
    ring = std::make_unique<doublewrite_ring>(*io, ring_dir, page_size, ring_pages, 4, 3);
  }
  std::uint32_t stage(block_id first, lsn_t lsn) { return stage_blocks(*ring, first, lsn); }
  // A record of blocks [first, first + 3), durable in the ring and written in place
  // (DATA_WRITTEN: live until its data-file fsync).
  std::uint32_t synced(block_id first, lsn_t lsn = 100) {
    std::uint32_t c = stage(first, lsn);
    REQUIRE(ring->write(c));
    ring->sync(c);
    ring->advance(c, dw_state::data_written);
    return c;
  }
  void retire(std::uint32_t c) {
    ring->advance(c, dw_state::data_fsynced);
    ring->release(c);
  }
  // The process ends (its ring with it) and the next start repairs from what is on disk.
  repair_report crash_and_repair() {
    ring.reset();
    return repair_from_ring(*io, ring_path, files);
  }
  // Whether repair restored any of the record of blocks [first, first + 3): all or none.
  bool restored(block_id first) {
    std::size_t n = 0;
    std::vector<unsigned char> p(page_size);
    for (std::uint32_t i = 0; i < pages_per_record; ++i) {
      files.read_page({1, first + i}, p.data());
      n += !page_is_all_zero(p.data(), page_size);
    }
    REQUIRE((n == 0 || n == pages_per_record));
    return n != 0;
  }
  std::vector<unsigned char> file() {
    int fd = io->open_file(ring_path, false);
    std::vector<unsigned char> bytes(io->file_size(fd));
    io->read(fd, bytes.data(), bytes.size(), 0);
    io->close_file(fd);
    return bytes;
  }
  void overwrite(std::uint64_t at, const unsigned char* bytes, std::size_t length) {
    int fd = io->open_file(ring_path, false);
    io->write(fd, bytes, length, at);
    io->close_file(fd);
  }
  // The newest intact header on disk, and its slot.
  ring_header newest_header(unsigned* slot = nullptr) {
    ring_header h;
    unsigned s = 0;
    REQUIRE(newest_ring_header(file().data(), &h, &s));
    if (slot != nullptr)
      *slot = s;
    return h;
  }
  // The sequences of the intact records in the record area, by offset.
  std::map<std::uint64_t, std::uint64_t> records() {
    std::vector<unsigned char> bytes = file();
    std::map<std::uint64_t, std::uint64_t> found;
    for (std::uint64_t at = ring_records_start; at < bytes.size();) {
      ring_record_info info = inspect_ring_record(bytes.data() + at, bytes.size() - at, page_size);
      if (info.kind != ring_record_info::intact) {
        at += ring_record_alignment;
        continue;
      }
      found[at] = info.sequence;
      at += info.length;
    }
    return found;
  }
};

} // namespace tidemark::storage::test
