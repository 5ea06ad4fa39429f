// Helpers shared by the WAL tests: record construction with checkable contents, reading
// everything back, and direct damage to segment files (torn or corrupt bytes).
#pragma once

#include "test_support.hpp"

#include "storage/io_engine.hpp"
#include "storage/wal_log.hpp"
#include "storage/wal_reader.hpp"
#include "storage/wal_record.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

namespace tidemark::storage::wal_test {

constexpr std::uint64_t small_segment = 64u << 10;

using test::page_size;
using test::temp_dir;

inline unsigned char pattern_byte(xid_t xid, std::size_t i) {
  return static_cast<unsigned char>(xid * 31 + i * 7 + 1);
}

/// Byte i of the page image in build_record()'s record for `xid`: a hash, so that LZ4 finds
/// nothing to compress and the image takes a whole page in WAL.
inline unsigned char image_byte(xid_t xid, std::size_t i) {
  std::uint64_t x = (xid << 20 | i) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return static_cast<unsigned char>(x >> 56);
}

/// A transaction record for `xid` with `main_length` bytes of main data derived from xid,
/// and one block with a page image when `with_image` is set.
inline void build_record(record_builder& builder, xid_t xid, std::size_t main_length,
                         bool with_image = false) {
  std::vector<unsigned char> main(main_length);
  for (std::size_t i = 0; i < main_length; ++i)
    main[i] = pattern_byte(xid, i);
  builder.reset(record_type::transaction, xid);
  if (with_image) {
    std::vector<unsigned char> image(page_size);
    for (std::size_t i = 0; i < page_size; ++i)
      image[i] = image_byte(xid, i);
    builder.begin_block(page_id{1, static_cast<block_id>(xid)});
    builder.add_i64(64, 1);
    builder.end_block(image.data(), page_size);
  }
  builder.set_main_data(main.data(), main.size());
  builder.finish();
}

/// True if the record's main data is what build_record() put there for its xid.
inline bool main_data_matches(const record_view& record) {
  for (std::size_t i = 0; i < record.main_length; ++i)
    if (record.main[i] != pattern_byte(record.header.xid, i))
      return false;
  return true;
}

inline std::string segment_file(const std::string& dir, std::uint64_t segment_size, lsn_t lsn) {
  return dir + "/" + wal_log::segment_name(lsn - lsn % segment_size);
}

/// Overwrites `length` bytes of WAL at `lsn` (inside one segment) with a garbage pattern.
inline void garble(const std::string& dir, std::uint64_t segment_size, lsn_t lsn,
                   std::size_t length) {
  int fd = ::open(segment_file(dir, segment_size, lsn).c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  std::vector<unsigned char> bytes(length);
  REQUIRE(::pread(fd, bytes.data(), length, static_cast<off_t>(lsn % segment_size)) ==
          static_cast<ssize_t>(length));
  for (unsigned char& byte : bytes)
    byte ^= 0x5A;
  REQUIRE(::pwrite(fd, bytes.data(), length, static_cast<off_t>(lsn % segment_size)) ==
          static_cast<ssize_t>(length));
  ::close(fd);
}

inline wal_options small_options(const std::string& dir, std::uint64_t segment_size = small_segment,
                                 std::size_t buffer_size = 1u << 20) {
  return wal_options{dir, segment_size, buffer_size};
}

/// Every record from `start` on, as (lsn, xid) pairs; the reader is left at the end.
struct read_result {
  std::vector<lsn_t> lsns;
  std::vector<xid_t> xids;
  lsn_t end_lsn = 0;
  std::string end_description;
};

inline read_result read_all(io_engine& io, const std::string& dir, std::uint64_t segment_size,
                            lsn_t start) {
  read_result result;
  wal_reader reader(io, dir, segment_size, page_size, start);
  lsn_t previous = 0;
  while (const record_view* record = reader.next()) {
    if (!result.lsns.empty())
      CHECK(record->header.prev_lsn == previous);
    CHECK(main_data_matches(*record));
    previous = record->lsn();
    result.lsns.push_back(record->lsn());
    result.xids.push_back(record->header.xid);
  }
  result.end_lsn = reader.end_lsn();
  result.end_description = reader.end_description();
  return result;
}

} // namespace tidemark::storage::wal_test
