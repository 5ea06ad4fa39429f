// Atomic multi-page transactions (storage/page_transaction.hpp): what sessions do to pages
// is exactly what redo rebuilds from their WAL, appends from concurrent sessions never
// collide, and full-page images appear once per page per redo point (never without
// full_page_writes).
#include "storage/page_transaction.hpp"

#include "storage/redo.hpp"
#include "storage/wal_reader.hpp"
#include "test_support.hpp"
#include "transfer_workload.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tidemark::storage {
namespace {

using test::engine_fixture;
using test::page_size;
using test::row;
using test::run_transfers;
using test::snapshot;
using test::wal_segment;

TEST_CASE("page transaction: redo from the WAL rebuilds every page byte for byte") {
  engine_fixture f;
  run_transfers(f, 4, 300, true);
  f.wal.flush(f.wal.inserted_lsn());
  // A fresh pool over the same (never written) files: a crash before any page write.
  buffer_pool recovered(64, f.files, true);
  wal_reader reader(*f.io, f.dir.path(), wal_segment, page_size, 0);
  redo_summary summary = replay(reader, recovered, 1);
  CHECK(summary.records == 1200);
  CHECK(summary.next_xid == 1201);
  std::vector<page_id> pages{{2, 0}};
  for (block_id b = 0; b < 30; ++b)
    pages.push_back({1, b});
  for (block_id b = 0; b < f.files.nblocks(3); ++b)
    pages.push_back({3, b});
  for (page_id id : pages)
    CHECK_MESSAGE(snapshot(f.pool, id) == snapshot(recovered, id),
                  "page " << id.rel << "/" << id.block << " differs after redo");
}

TEST_CASE("page transaction: concurrent appends fill each slot exactly once") {
  engine_fixture f;
  run_transfers(f, 4, 250, false);
  std::vector<xid_t> xids;
  std::size_t capacity = rows_per_page(page_size, sizeof(row));
  for (block_id b = 0; b < f.files.nblocks(3); ++b) {
    std::vector<unsigned char> page = snapshot(f.pool, {3, b});
    std::size_t count = header_of(page.data())->item_count;
    CHECK(count <= capacity);
    if (b + 1 < f.files.nblocks(3))
      CHECK(count == capacity); // the tail moves on only when a page is full
    for (std::size_t i = 0; i < count; ++i) {
      row r;
      std::memcpy(&r, page.data() + page_header_size + i * sizeof r, sizeof r);
      xids.push_back(r.xid);
    }
  }
  std::sort(xids.begin(), xids.end());
  REQUIRE(xids.size() == 1000);
  for (std::size_t i = 0; i < xids.size(); ++i)
    CHECK(xids[i] == i + 1);
}

TEST_CASE("page transaction: a full-page image is logged on the first change after a redo point") {
  engine_fixture f;
  page_transaction txn(f.pool, &f.wal, f.tails, true);
  auto change = [&](xid_t xid) {
    txn.begin(xid);
    txn.add_i64({1, 7}, 64, 1);
    txn.commit();
  };
  change(1);
  CHECK(f.wal.counters().fpi.load() == 1); // a new page: first change ever
  change(2);
  CHECK(f.wal.counters().fpi.load() == 1);
  f.wal.begin_redo_point();
  change(3);
  CHECK(f.wal.counters().fpi.load() == 2);
  change(4);
  CHECK(f.wal.counters().fpi.load() == 2);
}

TEST_CASE("page transaction: without full_page_writes no image is ever logged") {
  engine_fixture f;
  run_transfers(f, 2, 50, false);
  f.wal.begin_redo_point();
  run_transfers(f, 2, 50, false);
  CHECK(f.wal.counters().fpi.load() == 0);
}

} // namespace
} // namespace tidemark::storage
