// wal_reader: reading back what wal_log wrote (concurrent inserts, records spanning
// segments), the end-of-WAL decision (zeroed tail, torn record, stale recycled bytes,
// missing segment), reopening at the end, and telling durable-WAL corruption from a torn
// tail.
#include "wal_test_support.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

using namespace tidemark::storage;
using namespace tidemark::storage::wal_test;

namespace {

std::vector<lsn_range> insert_records(wal_log& wal, xid_t first_xid, std::size_t count,
                                      std::size_t main_length, bool flush_each = false) {
  std::vector<lsn_range> ranges;
  record_builder builder;
  for (std::size_t i = 0; i < count; ++i) {
    build_record(builder, first_xid + i, main_length);
    std::optional<lsn_range> range = wal.insert(builder, wal.redo_lsn());
    REQUIRE(range);
    ranges.push_back(*range);
    if (flush_each)
      wal.flush(range->end);
  }
  return ranges;
}

} // namespace

TEST_CASE("wal_reader: records inserted concurrently by four threads read back in order") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  // A small ring and small segments: inserters wait for write-out, records span segments.
  wal_log wal(*io, small_options(dir.path(), small_segment, 64u << 10), 0, 0);
  constexpr std::size_t threads = 4, per_thread = 500;
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&wal, t] {
      record_builder builder;
      for (std::size_t i = 0; i < per_thread; ++i) {
        build_record(builder, t * 1000000 + i, 20 + (i % 50) * 13);
        std::optional<lsn_range> range = wal.insert(builder, wal.redo_lsn());
        if (range && i % 25 == 0)
          wal.flush(range->end);
      }
    });
  }
  for (std::thread& worker : workers)
    worker.join();
  wal.flush(wal.inserted_lsn());

  read_result read = read_all(*io, dir.path(), small_segment, 0);
  REQUIRE(read.lsns.size() == threads * per_thread);
  CHECK(read.end_lsn == wal.inserted_lsn());
  std::vector<xid_t> next(threads, 0);
  for (xid_t xid : read.xids) {
    std::size_t thread = xid / 1000000;
    CHECK(xid % 1000000 == next[thread]); // each thread's records in its insert order
    next[thread] = xid % 1000000 + 1;
  }
  CHECK(wal.counters().records == threads * per_thread);
}

TEST_CASE("wal_reader: stops at the zeroed tail and reports where and why") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  std::vector<lsn_range> ranges = insert_records(wal, 1, 30, 100);
  wal.flush(wal.inserted_lsn());

  wal_reader reader(*io, dir.path(), small_segment, page_size, 0);
  std::size_t count = 0;
  while (reader.next())
    ++count;
  CHECK(count == 30);
  CHECK(reader.next() == nullptr); // stays at the end
  CHECK(reader.end_lsn() == wal.inserted_lsn());
  CHECK(reader.last_record_lsn() == ranges.back().start);
  CHECK(reader.end_description() ==
        "record at " + format_lsn(wal.inserted_lsn()) + ": zero record length (never written)");
  CHECK_FALSE(reader.find_corruption());
}

TEST_CASE("wal_reader: stops at a torn record") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  std::vector<lsn_range> ranges = insert_records(wal, 1, 20, 300);
  wal.flush(wal.inserted_lsn());
  garble(dir.path(), small_segment, ranges.back().start + 200, 16);

  read_result read = read_all(*io, dir.path(), small_segment, 0);
  CHECK(read.lsns.size() == 19);
  CHECK(read.end_lsn == ranges.back().start);
  CHECK(read.end_description ==
        "record at " + format_lsn(ranges.back().start) + ": checksum mismatch");
}

TEST_CASE("wal_reader: records with page images span segment boundaries") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  record_builder builder;
  bool spanned = false;
  for (xid_t xid = 1; xid <= 30; ++xid) {
    build_record(builder, xid, 100, true);
    std::optional<lsn_range> range = wal.insert(builder, wal.redo_lsn());
    REQUIRE(range);
    spanned |= range->start / small_segment != (range->end - 1) / small_segment;
  }
  wal.flush(wal.inserted_lsn());
  CHECK(spanned);
  CHECK(wal.counters().fpi == 30);

  wal_reader reader(*io, dir.path(), small_segment, page_size, 0);
  xid_t expected = 1;
  while (const record_view* record = reader.next()) {
    CHECK(record->header.xid == expected);
    REQUIRE(record->block_count == 1);
    REQUIRE(record->blocks[0].image != nullptr);
    std::vector<unsigned char> page(page_size);
    restore_image(record->blocks[0], page.data(), page_size);
    bool image_ok = true;
    for (std::size_t i = 0; i < page_size; ++i)
      image_ok &= page[i] == image_byte(expected, i);
    CHECK(image_ok);
    CHECK(main_data_matches(*record));
    ++expected;
  }
  CHECK(expected == 31);
  CHECK(reader.end_lsn() == wal.inserted_lsn());
}

TEST_CASE("wal_reader: reads across read-ahead refills and records longer than the window") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path(), small_segment, 4u << 20), 0, 0);
  insert_records(wal, 1, 700, 2000); // 1.4 MB: more than one read-ahead window
  insert_records(wal, 701, 1, max_main_length);
  insert_records(wal, 702, 5, 100);
  wal.flush(wal.inserted_lsn());

  read_result read = read_all(*io, dir.path(), small_segment, 0);
  REQUIRE(read.xids.size() == 706);
  for (std::size_t i = 0; i < read.xids.size(); ++i)
    CHECK(read.xids[i] == i + 1);
  CHECK(read.end_lsn == wal.inserted_lsn());
}

TEST_CASE("wal_reader: a missing segment ends the WAL") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  insert_records(wal, 1, 100, 2000);
  wal.flush(wal.inserted_lsn());
  REQUIRE(wal.inserted_lsn() > 2 * small_segment);
  std::filesystem::remove(segment_file(dir.path(), small_segment, small_segment));

  read_result read = read_all(*io, dir.path(), small_segment, 0);
  CHECK(read.end_lsn <= small_segment);
  CHECK(read.end_lsn + 2100 > small_segment);
  CHECK(read.end_description.find("missing") != std::string::npos);
}

TEST_CASE("wal_reader: stale records in recycled segments do not extend the WAL") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  insert_records(wal, 1, 120, 2000); // about 3.7 segments
  wal.flush(wal.inserted_lsn());
  lsn_t redo = wal.begin_redo_point();
  wal.remove_segments_before(redo); // segments 0..2 become 4..6, full of old records
  REQUIRE(wal_log::list_segments(dir.path()).size() == 4);

  std::vector<lsn_range> ranges = insert_records(wal, 1000, 30, 2000);
  REQUIRE(ranges.back().end > 4 * small_segment);
  REQUIRE(ranges.back().end < 5 * small_segment);
  wal.flush(wal.inserted_lsn());

  wal_reader reader(*io, dir.path(), small_segment, page_size, redo);
  std::size_t count = 0;
  while (const record_view* record = reader.next())
    CHECK(record->header.xid == 1000 + count++);
  CHECK(count == 30);
  CHECK(reader.end_lsn() == wal.inserted_lsn());
  CHECK(reader.end_description().find("stored lsn") != std::string::npos);
  CHECK_FALSE(reader.find_corruption()); // old records carry old lsns: never a proof
}

TEST_CASE("wal_reader: appends after reopening at the end read back cleanly") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  std::vector<lsn_range> ranges;
  {
    wal_log wal(*io, small_options(dir.path()), 0, 0);
    ranges = insert_records(wal, 1, 5, 500);
    wal.flush(wal.inserted_lsn());
  }
  garble(dir.path(), small_segment, ranges[2].start + 100, 8); // record 3 is torn

  wal_reader reader(*io, dir.path(), small_segment, page_size, 0);
  while (reader.next()) {
  }
  REQUIRE(reader.end_lsn() == ranges[2].start);
  // A record of the same size lands where record 3 was: without the zeroing, the old
  // record 4 would follow it with a matching lsn and prev link.
  wal_log wal(*io, small_options(dir.path()), reader.end_lsn(), reader.last_record_lsn());
  std::vector<lsn_range> appended = insert_records(wal, 99, 1, 500);
  wal.flush(wal.inserted_lsn());
  CHECK(appended[0].start == ranges[2].start);

  read_result read = read_all(*io, dir.path(), small_segment, 0);
  CHECK(read.xids == std::vector<xid_t>{1, 2, 99});
  CHECK(read.end_lsn == wal.inserted_lsn());
  CHECK(read.end_description.find("zero record length") != std::string::npos);
}

TEST_CASE("wal_reader: find_corruption reports damaged durable WAL") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  std::vector<lsn_range> ranges = insert_records(wal, 1, 60, 2000, true); // flushed one by one
  REQUIRE(ranges.back().end > small_segment);
  // Damage the header of a record in segment 0: its length is garbage too, so the reader
  // cannot step over it; the proof sits further on.
  garble(dir.path(), small_segment, ranges[10].start, 8);

  wal_reader reader(*io, dir.path(), small_segment, page_size, 0);
  while (reader.next()) {
  }
  REQUIRE(reader.end_lsn() == ranges[10].start);
  std::optional<wal_corruption> corruption = reader.find_corruption();
  REQUIRE(corruption);
  CHECK(corruption->bad_lsn == ranges[10].start);
  CHECK(corruption->proof_lsn == ranges[11].start);
  CHECK(corruption->proof_durable > ranges[10].start);
  CHECK(corruption->segment_path == segment_file(dir.path(), small_segment, 0));
  CHECK(corruption->reason == reader.end_description());
}

TEST_CASE("wal_reader: a torn tail that was never durable is not corruption") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  insert_records(wal, 1, 3, 300);
  lsn_t durable = wal.flush(wal.inserted_lsn());
  // One group commit: the later records were inserted before any of them was durable.
  std::vector<lsn_range> ranges = insert_records(wal, 10, 7, 300);
  wal.flush(wal.inserted_lsn());
  REQUIRE(ranges[2].start > durable);
  garble(dir.path(), small_segment, ranges[2].start + 100, 8);

  wal_reader reader(*io, dir.path(), small_segment, page_size, 0);
  while (reader.next()) {
  }
  CHECK(reader.end_lsn() == ranges[2].start);
  CHECK_FALSE(reader.find_corruption());
}

TEST_CASE("wal_reader: read_at reads one record and rejects other positions") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), 0, 0);
  insert_records(wal, 1, 3, 100);
  record_builder builder;
  builder.reset(record_type::checkpoint, 0);
  checkpoint_payload payload{1234, 56, 78};
  builder.set_main_data(&payload, sizeof payload);
  builder.finish();
  std::optional<lsn_range> checkpoint = wal.insert(builder, wal.redo_lsn());
  REQUIRE(checkpoint);
  insert_records(wal, 4, 3, 100);
  wal.flush(wal.inserted_lsn());

  wal_reader reader(*io, dir.path(), small_segment, page_size, 0);
  const record_view* record = reader.read_at(checkpoint->start);
  REQUIRE(record);
  CHECK(record->type() == record_type::checkpoint);
  checkpoint_payload read_back;
  REQUIRE(record->main_length == sizeof read_back);
  std::memcpy(&read_back, record->main, sizeof read_back);
  CHECK(read_back.redo_lsn == 1234);
  CHECK(reader.read_at(checkpoint->start + 8) == nullptr);
  CHECK(reader.read_at(wal.inserted_lsn()) == nullptr);
}
