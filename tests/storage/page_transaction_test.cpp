// Atomic multi-page transactions and redo: what sessions do to pages is exactly what redo
// rebuilds from the WAL (also with WAL prefetch reading ahead into a small pool, or asking
// the kernel to read ahead in a tiny one), full-page images appear once per page per redo
// point, appends from concurrent sessions never collide, prefetch samples its look-ups
// after a long run of cached pages, and a long redo reports its progress.
#include "storage/page_transaction.hpp"

#include "storage/redo.hpp"
#include "storage/wal_prefetcher.hpp"
#include "storage/wal_reader.hpp"
#include "delegating_engine.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace tidemark::storage {
namespace {

constexpr std::size_t page_size = 8192;
constexpr std::uint64_t wal_segment = 256 * 1024;

struct engine_fixture {
  test::temp_dir dir;
  std::unique_ptr<io_engine> io = make_io_engine(io_method::sync);
  relation_files files{*io, dir.path(), page_size, 16 * page_size};
  wal_log wal{*io, wal_options{dir.path(), wal_segment, 1 << 20}, 0, 0};
  buffer_pool pool{64, files, true};
  append_tails tails{files};
};

// Writes dirty victims straight to the files.
struct recording_victims final : victim_writer {
  explicit recording_victims(relation_files& f) : files(f) {}
  victim_write write_victim(buffer_id, page_id id, lsn_t, void* copy, bool) override {
    finalize_page_for_write(copy, files.page_size(), id, true);
    files.write_page(id, copy);
    return victim_write::completed;
  }
  relation_files& files;
};

struct row {
  std::uint64_t xid;
  std::uint64_t filler[7];
};

void run_transfers(engine_fixture& f, int threads, int per_thread, bool full_page_writes) {
  std::vector<std::thread> sessions;
  std::atomic<xid_t> next_xid{1};
  for (int t = 0; t < threads; ++t) {
    sessions.emplace_back([&, t] {
      page_transaction txn(f.pool, &f.wal, f.tails, full_page_writes);
      std::mt19937 random(t);
      for (int i = 0; i < per_thread; ++i) {
        txn.begin(next_xid++);
        std::int64_t delta = static_cast<std::int64_t>(random() % 100) - 50;
        block_id block = random() % 30;
        std::uint16_t offset = static_cast<std::uint16_t>(64 + 8 * (random() % 100));
        txn.add_i64({1, block}, offset, delta);
        txn.add_i64({2, 0}, 64, delta);
        row r{txn.xid(), {}};
        txn.append_row(3, &r, sizeof r);
        txn.commit();
      }
    });
  }
  for (auto& s : sessions)
    s.join();
}

std::vector<unsigned char> snapshot(buffer_pool& pool, page_id id) {
  buffer_id b = pool.pin(id);
  std::vector<unsigned char> bytes(static_cast<unsigned char*>(pool.page(b)),
                                   static_cast<unsigned char*>(pool.page(b)) + page_size);
  pool.unpin(b);
  return bytes;
}

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

// Writes every page the transfers touched to the files (as a checkpoint would), so that
// redo without images has pages to read.
void write_all_pages(engine_fixture& f) {
  std::vector<page_id> pages{{2, 0}};
  for (block_id b = 0; b < 30; ++b)
    pages.push_back({1, b});
  for (page_id id : pages) {
    std::vector<unsigned char> page = snapshot(f.pool, id);
    finalize_page_for_write(page.data(), page_size, id, true);
    f.files.write_page(id, page.data());
  }
}

// A page's bytes without the checksum and identity a write stamps on it (a page in the
// pool carries none that means anything).
std::vector<unsigned char> contents(buffer_pool& pool, page_id id) {
  std::vector<unsigned char> bytes = snapshot(pool, id);
  std::fill(bytes.begin() + 8, bytes.begin() + 20, 0);
  return bytes;
}

TEST_CASE("redo: WAL prefetch reads ahead into a small pool, and redo ends in the same pages") {
  engine_fixture f;
  run_transfers(f, 1, 200, false);
  write_all_pages(f); // pages as of now on disk; the next transfers are redo's to apply
  lsn_t redo_point = f.wal.inserted_lsn();
  run_transfers(f, 4, 300, false);
  f.wal.flush(f.wal.inserted_lsn());
  buffer_pool recovered(16, f.files, true); // a third of the pages: evictions all along
  recording_victims victims(f.files);
  recovered.set_victim_writer(&victims);
  // Into the pool, although by its size alone the kernel would get the read-ahead.
  wal_prefetcher prefetcher(*f.io, f.dir.path(), wal_segment, page_size, redo_point,
                            f.wal.inserted_lsn(), recovered, f.files, 64 << 10, nullptr,
                            wal_prefetcher::target::pool);
  prefetcher.wait_until_ahead(); // deterministic: redo starts behind a full read-ahead
  wal_reader reader(*f.io, f.dir.path(), wal_segment, page_size, redo_point);
  redo_options options;
  options.prefetcher = &prefetcher;
  redo_summary summary = replay(reader, recovered, 1, nullptr, options);
  prefetcher.stop();
  CHECK(summary.records == 1200);
  CHECK(prefetcher.report().error.empty());
  CHECK(prefetcher.report().reads > 0);
  CHECK(recovered.counters().prefetched.load() == prefetcher.report().reads);
  CHECK(recovered.counters().prefetch_hits.load() > 0);
  CHECK(recovered.counters().prefetch_hits.load() <= recovered.counters().prefetched.load());
  for (block_id b = 0; b < 30; ++b)
    CHECK_MESSAGE(contents(f.pool, {1, b}) == contents(recovered, {1, b}),
                  "page 1/" << b << " differs after redo with prefetch");
  CHECK(contents(f.pool, {2, 0}) == contents(recovered, {2, 0}));
}

// Counts the kernel read-ahead advice given for pages of relation files.
struct advice_counting_engine final : test::delegating_engine {
  advice_counting_engine() : delegating_engine(make_io_engine(io_method::sync)) {}
  void will_need(int fd, std::uint64_t offset, std::uint64_t length) override {
    ++advised;
    if (length != page_size || offset % page_size != 0)
      ++misplaced;
    delegating_engine::will_need(fd, offset, length);
  }
  std::atomic<std::uint64_t> advised{0}, misplaced{0};
};

TEST_CASE("redo: WAL prefetch in a pool too small to hold its read-ahead asks the kernel "
          "instead, and redo ends in the same pages") {
  engine_fixture f;
  run_transfers(f, 1, 200, false);
  write_all_pages(f);
  lsn_t redo_point = f.wal.inserted_lsn();
  run_transfers(f, 4, 300, false);
  f.wal.flush(f.wal.inserted_lsn());
  advice_counting_engine counting;
  relation_files files(counting, f.dir.path(), page_size, 16 * page_size);
  REQUIRE_FALSE(wal_prefetcher::reads_into_pool(16));
  REQUIRE(wal_prefetcher::reads_into_pool(128));
  buffer_pool recovered(16, files, true);
  recording_victims victims(files);
  recovered.set_victim_writer(&victims);
  wal_prefetcher prefetcher(*f.io, f.dir.path(), wal_segment, page_size, redo_point,
                            f.wal.inserted_lsn(), recovered, files, 64 << 10);
  prefetcher.wait_until_ahead();
  wal_reader reader(*f.io, f.dir.path(), wal_segment, page_size, redo_point);
  redo_options options;
  options.prefetcher = &prefetcher;
  replay(reader, recovered, 1, nullptr, options);
  prefetcher.stop();
  CHECK(prefetcher.report().error.empty());
  CHECK(prefetcher.report().advised > 0);
  CHECK(counting.advised.load() == prefetcher.report().advised);
  CHECK(counting.misplaced.load() == 0);
  CHECK(prefetcher.report().reads == 0); // nothing read into the pool
  CHECK(recovered.counters().prefetched.load() == 0);
  CHECK(recovered.counters().reads.load() > 0); // redo read every page itself
  for (block_id b = 0; b < 30; ++b)
    CHECK_MESSAGE(contents(f.pool, {1, b}) == contents(recovered, {1, b}),
                  "page 1/" << b << " differs after redo with kernel read-ahead");
  CHECK(contents(f.pool, {2, 0}) == contents(recovered, {2, 0}));
}

TEST_CASE("redo: WAL prefetch looks up one block in eight after a long run of cached ones, "
          "and every block again once one was not cached") {
  lookup_sampler sampler(4, 8);
  for (int i = 0; i < 4; ++i) { // below the streak: every block is looked up
    REQUIRE(sampler.look());
    sampler.found(true);
  }
  auto looks_in = [&](int blocks) {
    int looked = 0;
    for (int i = 0; i < blocks; ++i)
      if (sampler.look()) {
        ++looked;
        sampler.found(true);
      }
    return looked;
  };
  CHECK(looks_in(80) == 10); // one in eight
  CHECK_FALSE(sampler.look());
  for (int i = 0; i < 6; ++i)
    REQUIRE_FALSE(sampler.look());
  REQUIRE(sampler.look()); // the eighth
  sampler.found(false);    // not cached: every block again
  for (int i = 0; i < 3; ++i) {
    CHECK(sampler.look());
    sampler.found(true);
  }
  CHECK(sampler.look()); // the streak is only three long
}

TEST_CASE("redo: WAL prefetch reads no block redo will restore from an image") {
  engine_fixture f;
  run_transfers(f, 2, 100, true); // from an empty start: every first change carries an image
  f.wal.flush(f.wal.inserted_lsn());
  buffer_pool recovered(256, f.files, true); // read-ahead limit above every block touched
  wal_prefetcher prefetcher(*f.io, f.dir.path(), wal_segment, page_size, 0, f.wal.inserted_lsn(),
                            recovered, f.files, 1 << 20);
  prefetcher.wait_until_ahead(); // the distance covers all WAL: every record decoded
  wal_reader reader(*f.io, f.dir.path(), wal_segment, page_size, 0);
  redo_options options;
  options.prefetcher = &prefetcher;
  redo_summary summary = replay(reader, recovered, 1, nullptr, options);
  prefetcher.stop();
  CHECK(prefetcher.report().images == summary.images_restored);
  CHECK(summary.images_restored > 0);
  // Every later change of those blocks follows its image, which redo had not reached when
  // prefetch saw it: nothing was read that redo would only have zero-filled.
  CHECK(prefetcher.report().reads == 0);
  CHECK(recovered.counters().reads.load() == 0);
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
