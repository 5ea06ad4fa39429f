// WAL prefetch for redo (storage/wal_prefetcher.hpp): it reads ahead into a small pool, or
// in a pool too small for its read-ahead asks the kernel instead, and redo ends in the same
// pages either way; it reads no block redo will restore from an image; and its look-ups are
// sampled one block in eight after a long run of cached ones (lookup_sampler).
#include "storage/wal_prefetcher.hpp"

#include "delegating_engine.hpp"
#include "storage/redo.hpp"
#include "storage/wal_reader.hpp"
#include "test_support.hpp"
#include "transfer_workload.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <vector>

namespace tidemark::storage {
namespace {

using test::engine_fixture;
using test::page_size;
using test::run_transfers;
using test::snapshot;
using test::wal_segment;

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

} // namespace
} // namespace tidemark::storage
