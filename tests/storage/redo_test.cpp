// WAL redo (storage/redo.hpp): replaying the same WAL twice ends in the same pages (images
// restored again, older records skipped by the page LSN), and a long redo reports where it
// is. (That redo rebuilds what sessions did is page_transaction_test.cpp's first case; redo
// with WAL prefetch is in wal_prefetcher_test.cpp.)
#include "storage/redo.hpp"

#include "storage/wal_reader.hpp"
#include "test_support.hpp"
#include "transfer_workload.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <vector>

namespace tidemark::storage {
namespace {

using test::engine_fixture;
using test::page_size;
using test::run_transfers;
using test::snapshot;
using test::wal_segment;

TEST_CASE("redo: replaying the same WAL twice ends in the same pages") {
  engine_fixture f;
  run_transfers(f, 2, 100, true);
  f.wal.flush(f.wal.inserted_lsn());
  buffer_pool recovered(64, f.files, true);
  {
    wal_reader reader(*f.io, f.dir.path(), wal_segment, page_size, 0);
    replay(reader, recovered, 1);
  }
  std::vector<unsigned char> before = snapshot(recovered, {2, 0});
  std::vector<unsigned char> block_5 = snapshot(recovered, {1, 5});
  wal_reader again(*f.io, f.dir.path(), wal_segment, page_size, 0);
  redo_summary second = replay(again, recovered, 1);
  // Images are restored again and the records after them re-applied (as PostgreSQL does);
  // records older than a page without an image in between are skipped by the LSN check.
  CHECK(second.images_restored > 0);
  CHECK(snapshot(recovered, {2, 0}) == before);
  CHECK(snapshot(recovered, {1, 5}) == block_5);
}

TEST_CASE("redo: a long redo reports where it is") {
  engine_fixture f;
  run_transfers(f, 1, 3000, false);
  f.wal.flush(f.wal.inserted_lsn());
  buffer_pool recovered(64, f.files, true);
  wal_reader reader(*f.io, f.dir.path(), wal_segment, page_size, 0);
  std::vector<redo_progress> reports;
  redo_options options;
  options.progress_every = std::chrono::nanoseconds(1); // every check: each 1024 records
  options.progress = [&](const redo_progress& at) { reports.push_back(at); };
  replay(reader, recovered, 1, nullptr, options);
  REQUIRE(reports.size() == 2);
  CHECK(reports[0].records == 1024);
  CHECK(reports[1].records == 2048);
  CHECK(reports[0].position < reports[1].position);
  CHECK(reports[1].position < f.wal.inserted_lsn());
}

} // namespace
} // namespace tidemark::storage
