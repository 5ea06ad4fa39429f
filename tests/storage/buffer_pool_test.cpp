// Buffer pool: pinning (and pin hints gone stale), the page table under concurrency,
// clock-sweep eviction of dirty victims through the victim writer, the victim supply and
// its low-water alarm, verification on read, WAL prefetch's claimed reads, and pin
// reservations keeping a tiny pool deadlock-free, the first pass's memory faulted in ahead
// of the hand, and optimistic reads (what ends one, and the memory mapped past the frames).
#include "storage/buffer_pool.hpp"

#include "storage/fault_engine.hpp"
#include "storage/page.hpp"
#include "storage/zeroed_memory.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace tidemark::storage {
namespace {

using test::page_size;

struct pool_fixture {
  test::temp_dir dir;
  std::unique_ptr<io_engine> io = make_io_engine(io_method::sync);
  relation_files files{*io, dir.path(), page_size, 64 * page_size};
};

// Writes victims straight to the files and remembers which pages it wrote.
struct recording_writer final : victim_writer {
  explicit recording_writer(relation_files& f) : files(f) {}
  victim_write write_victim(buffer_id, page_id id, lsn_t, void* copy, bool) override {
    finalize_page_for_write(copy, files.page_size(), id, true);
    files.write_page(id, copy);
    std::lock_guard<std::mutex> guard(mutex);
    written.push_back(id);
    return victim_write::completed;
  }
  relation_files& files;
  std::mutex mutex;
  std::vector<page_id> written;
};

void put_i64(buffer_pool& pool, buffer_id b, std::size_t offset, std::int64_t value) {
  pool.lock_exclusive(b);
  std::memcpy(static_cast<unsigned char*>(pool.page(b)) + offset, &value, 8);
  set_page_lsn(pool.page(b), 1);
  pool.mark_dirty(b);
  pool.unlock_exclusive(b);
}

std::int64_t get_i64(buffer_pool& pool, buffer_id b, std::size_t offset) {
  std::int64_t value;
  std::memcpy(&value, static_cast<unsigned char*>(pool.page(b)) + offset, 8);
  return value;
}

TEST_CASE("buffer pool: a page never written reads as zeros and stays cached") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  buffer_id a = pool.pin({1, 3});
  CHECK(page_is_all_zero(pool.page(a), page_size));
  buffer_id again = pool.pin({1, 3});
  CHECK(again == a);
  pool.unpin(a);
  pool.unpin(again);
  CHECK(pool.tag(a) == page_id{1, 3});
}

TEST_CASE("buffer pool: dirty victims are written through the victim writer and read back") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  recording_writer writer(f.files);
  pool.set_victim_writer(&writer);
  for (block_id block = 0; block < 200; ++block) {
    buffer_id b = pool.pin({2, block});
    put_i64(pool, b, 64, 1000 + block);
    pool.unpin(b);
  }
  CHECK(writer.written.size() >= 200 - 16);
  for (block_id block = 0; block < 200; ++block) {
    buffer_id b = pool.pin({2, block});
    CHECK(get_i64(pool, b, 64) == 1000 + block);
    pool.unpin(b);
  }
}

TEST_CASE("buffer pool: a page pinned again after its buffer went to another page is found "
          "where it is now") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  recording_writer writer(f.files);
  pool.set_victim_writer(&writer);
  buffer_id first = pool.pin({3, 7}); // remembered by this thread
  put_i64(pool, first, 64, 77);
  pool.unpin(first);
  CHECK(pool.pin({3, 7}) == first); // the remembered buffer
  pool.unpin(first);
  // Every buffer goes to other pages, the remembered one too (its page written out), on
  // another thread: this one's hints stay as they are.
  std::thread([&] {
    for (block_id block = 0; block < 64; ++block)
      pool.unpin(pool.pin({4, block}));
  }).join();
  REQUIRE(pool.tag(first) != page_id{3, 7});
  buffer_id again = pool.pin({3, 7});
  CHECK(pool.tag(again) == page_id{3, 7});
  CHECK(get_i64(pool, again, 64) == 77);
  CHECK(pool.tag(first) != page_id{3, 7}); // the stale hint's buffer kept its page
  pool.unpin(again);
  // Another pool over other files: the same page id is its own page there.
  pool_fixture g;
  buffer_pool other(16, g.files, true);
  buffer_id elsewhere = other.pin({3, 7});
  CHECK(get_i64(other, elsewhere, 64) == 0);
  other.unpin(elsewhere);
}

// Holds dirty victims back, as the doublewrite batcher does during recovery, and writes
// them (offering each to the supply) only when a search is about to wait for them.
struct holding_writer final : victim_writer {
  holding_writer(buffer_pool& p, relation_files& f, std::size_t l) : pool(p), files(f), limit(l) {}
  victim_write write_victim(buffer_id buffer, page_id id, lsn_t, void* copy, bool) override {
    held.push_back({buffer, id, std::vector<unsigned char>(page_size)});
    std::memcpy(held.back().bytes.data(), copy, page_size);
    ++handed_over;
    return victim_write::handed_over;
  }
  std::size_t handover_limit() const override { return limit; }
  void before_handover_wait() override {
    ++waits;
    for (held_page& page : held) {
      finalize_page_for_write(page.bytes.data(), page_size, page.id, true);
      files.write_page(page.id, page.bytes.data());
      pool.finish_write(page.buffer, true, true);
    }
    held.clear();
  }
  struct held_page {
    buffer_id buffer;
    page_id id;
    std::vector<unsigned char> bytes;
  };
  buffer_pool& pool;
  relation_files& files;
  std::size_t limit;
  std::vector<held_page> held;
  std::size_t handed_over = 0, waits = 0;
};

// Fills a 16-buffer pool with dirty pages of relation 2, then maps one page more.
void evict_one_from_dirty_pool(buffer_pool& pool) {
  for (block_id block = 0; block < pool.size(); ++block) {
    buffer_id b = pool.pin({2, block});
    put_i64(pool, b, 64, 1000 + block);
    pool.unpin(b);
  }
  pool.unpin(pool.pin({2, 100}));
}

TEST_CASE("buffer pool: a search hands over up to its writer's limit of dirty victims before it "
          "waits, and its writer sends them first") {
  for (std::size_t limit : {std::size_t{1}, std::size_t{4}}) {
    CAPTURE(limit);
    pool_fixture f;
    buffer_pool pool(16, f.files, true);
    holding_writer writer(pool, f.files, limit);
    pool.set_victim_writer(&writer);
    evict_one_from_dirty_pool(pool);
    CHECK(writer.handed_over == limit);
    CHECK(writer.waits == 1);
    CHECK(pool.counters().handover_waits.load() == 1);
    CHECK(pool.counters().supplied.load() == 1); // the new page took a victim written for it
  }
}

TEST_CASE("buffer pool: a search that handed over every buffer waits for them, not spinning") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  holding_writer writer(pool, f.files, 1000); // more than the pool holds
  pool.set_victim_writer(&writer);
  evict_one_from_dirty_pool(pool);
  CHECK(writer.handed_over == pool.size());
  CHECK(writer.waits == 1);
  for (block_id block = 0; block < pool.size(); ++block) { // every write reached the file
    buffer_id b = pool.pin({2, block});
    CHECK(get_i64(pool, b, 64) == 1000 + block);
    pool.unpin(b);
  }
}

// Counts the pool's calls to the bgwriter's wake-ups.
struct counting_listener final : allocation_listener {
  void on_allocation() override { ++allocations; }
  void on_supply_low() override { ++alarms; }
  int allocations = 0;
  int alarms = 0;
};

// Maps blocks 0.. of relation 1 into every buffer of `pool`, unpinned; returns the buffers.
std::vector<buffer_id> fill(buffer_pool& pool) {
  std::vector<buffer_id> buffers;
  for (block_id block = 0; block < pool.size(); ++block) {
    buffers.push_back(pool.pin({1, block}));
    pool.unpin(buffers.back());
  }
  return buffers;
}

TEST_CASE("buffer pool: allocations take offered victims first, and skip ones used since") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  std::vector<buffer_id> buffers = fill(pool);
  // Only a clean, unpinned buffer nobody used since its last sweep may be offered.
  CHECK_FALSE(pool.offer_victim(buffers[3])); // used once (its usage count is 1)
  for (int lap = 0; lap < 6; ++lap) {         // sweeps age every buffer to usage 0
    buffer_id b = pool.pin({9, static_cast<block_id>(lap)});
    pool.unpin(b);
  }
  buffers = {};
  for (buffer_id b = 0; b < pool.size(); ++b)
    if (pool.is_reusable(b))
      buffers.push_back(b);
  REQUIRE(buffers.size() >= 3);
  CHECK(pool.offer_victim(buffers[0]));
  CHECK(pool.offer_victim(buffers[1]));
  CHECK_FALSE(pool.offer_victim(buffers[1])); // already in the supply
  CHECK(pool.supply_size() == 2);
  page_id used_again = pool.tag(buffers[0]);
  pool.unpin(pool.pin(used_again)); // used since it was offered: a stale entry
  std::uint64_t supplied = pool.counters().supplied.load();
  buffer_id got = pool.pin({7, 0}); // a page not in the pool: one allocation
  CHECK(got == buffers[1]);         // the stale entry was dropped, the next one taken
  CHECK(pool.counters().supplied.load() == supplied + 1);
  CHECK(pool.supply_size() == 0);
  CHECK(pool.tag(buffers[0]) == used_again); // still mapped: it was not evicted
  pool.unpin(got);
}

TEST_CASE("buffer pool: an allocation finding the supply below its low-water mark sounds the "
          "alarm once until it is rearmed") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  counting_listener listener;
  pool.set_allocation_listener(&listener);
  CHECK(pool.supply_low_water() == 8);
  fill(pool);
  CHECK(listener.alarms == 1); // the first allocation found it empty; the rest stay quiet
  CHECK(pool.counters().supply_low.load() == 1);
  pool.rearm_supply_alarm(); // the bgwriter's round is over
  buffer_id b = pool.pin({2, 0});
  pool.unpin(b);
  CHECK(listener.alarms == 2);
  pool.set_allocation_listener(nullptr);
}

TEST_CASE("buffer pool: the supply refilled to its low-water mark rearms the alarm itself") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  counting_listener listener;
  pool.set_allocation_listener(&listener);
  std::vector<buffer_id> buffers = fill(pool);
  REQUIRE(listener.alarms == 1);
  for (int lap = 0; lap < 6; ++lap) { // sweeps age every buffer to usage 0
    buffer_id b = pool.pin({9, static_cast<block_id>(lap)});
    pool.unpin(b);
  }
  CHECK(listener.alarms == 1); // still sounded: allocations stay quiet
  std::size_t offered = 0;
  for (buffer_id b = 0; b < pool.size() && offered < pool.supply_low_water() - 1; ++b)
    offered += pool.offer_victim(b) ? 1 : 0;
  REQUIRE(offered == pool.supply_low_water() - 1);
  pool.unpin(pool.pin({10, 0})); // below the mark again, but not refilled to it: quiet
  CHECK(listener.alarms == 1);
  for (buffer_id b = 0; b < pool.size() && pool.supply_size() < pool.supply_low_water(); ++b)
    pool.offer_victim(b);
  REQUIRE(pool.supply_size() == pool.supply_low_water()); // refilled: rearmed
  pool.unpin(pool.pin({10, 1}));
  CHECK(listener.alarms == 2);
  pool.set_allocation_listener(nullptr);
}

TEST_CASE("buffer pool: a page failing its checksum is reported with file and block") {
  pool_fixture f;
  std::vector<unsigned char> page(page_size, 0);
  std::memset(page.data() + 100, 7, 50);
  finalize_page_for_write(page.data(), page_size, {3, 5}, true);
  page[5000] ^= 1; // a torn or rotten byte
  f.files.write_page({3, 5}, page.data());
  buffer_pool pool(16, f.files, true);
  try {
    pool.pin({3, 5});
    FAIL("no error");
  } catch (const page_corrupt_error& e) {
    CHECK(std::string(e.where()).find("3.0 block 5") != std::string::npos);
  }
  // The failed read left no pinned or valid buffer behind: the pool keeps working.
  for (block_id block = 0; block < 40; ++block)
    pool.unpin(pool.pin({4, block}));
}

// A valid page for `id` whose bytes at 100.. are `fill`, as it would be on disk.
std::vector<unsigned char> valid_page(page_id id, unsigned char fill) {
  std::vector<unsigned char> page(page_size, 0);
  std::memset(page.data() + 100, fill, 50);
  finalize_page_for_write(page.data(), page_size, id, true);
  return page;
}

TEST_CASE("buffer pool: a prefetched page is read by its claimer, and its first pin is a hit") {
  pool_fixture f;
  f.files.write_page({3, 1}, valid_page({3, 1}, 5).data());
  buffer_pool pool(16, f.files, true);
  pool.unpin(pool.pin({3, 2}));
  buffer_id claimed;
  CHECK_FALSE(pool.start_prefetch({3, 2}, &claimed)); // cached: nothing to read
  REQUIRE(pool.start_prefetch({3, 1}, &claimed));
  CHECK_FALSE(pool.start_prefetch({3, 1}, &claimed)); // being read already
  f.files.read_page({3, 1}, pool.page(claimed));
  pool.finish_prefetch(claimed, true);
  std::uint64_t reads = pool.counters().reads.load();
  buffer_id b = pool.pin({3, 1});
  CHECK(b == claimed);
  CHECK(pool.counters().reads.load() == reads); // the pin read nothing itself
  CHECK(static_cast<unsigned char*>(pool.page(b))[120] == 5);
  pool.unpin(b);
  pool.unpin(pool.pin({3, 1}));
  CHECK(pool.counters().prefetched.load() == 1);
  CHECK(pool.counters().prefetch_hits.load() == 1); // the first pin only
}

TEST_CASE("buffer pool: a pin of a page being prefetched waits for the prefetch to finish") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  buffer_id claimed;
  REQUIRE(pool.start_prefetch({3, 4}, &claimed));
  std::mutex mutex;
  std::condition_variable cv;
  bool pinning = false;
  std::atomic<bool> finished{false};
  bool saw_finished = false;
  unsigned char seen = 0;
  std::thread session([&] {
    {
      std::lock_guard<std::mutex> guard(mutex);
      pinning = true;
    }
    cv.notify_one();
    buffer_id b = pool.pin({3, 4});
    saw_finished = finished.load();
    seen = static_cast<unsigned char*>(pool.page(b))[120];
    pool.unpin(b);
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return pinning; });
  }
  // What the prefetch read; the file itself holds nothing (zeros), so a pin that read for
  // itself would see 0.
  std::vector<unsigned char> page = valid_page({3, 4}, 9);
  std::memcpy(pool.page(claimed), page.data(), page_size);
  finished.store(true);
  pool.finish_prefetch(claimed, true);
  session.join();
  CHECK(saw_finished);
  CHECK(seen == 9);
}

TEST_CASE("buffer pool: a prefetch that failed or read a corrupt page leaves it to the pin") {
  pool_fixture f;
  std::vector<unsigned char> corrupt = valid_page({3, 5}, 7);
  corrupt[5000] ^= 1;
  f.files.write_page({3, 5}, corrupt.data());
  f.files.write_page({3, 6}, valid_page({3, 6}, 6).data());
  buffer_pool pool(16, f.files, true);
  buffer_id claimed;
  REQUIRE(pool.start_prefetch({3, 5}, &claimed));
  f.files.read_page({3, 5}, pool.page(claimed));
  pool.finish_prefetch(claimed, true); // fails verification: left unread, no error yet
  CHECK_THROWS_AS(pool.pin({3, 5}), page_corrupt_error); // the pin that needs it reports it
  REQUIRE(pool.start_prefetch({3, 6}, &claimed));
  pool.finish_prefetch(claimed, false); // the read itself failed
  buffer_id b = pool.pin({3, 6});       // read again, by the pin
  CHECK(static_cast<unsigned char*>(pool.page(b))[120] == 6);
  pool.unpin(b);
  CHECK(pool.counters().prefetched.load() == 0);
  CHECK(pool.counters().prefetch_hits.load() == 0);
}

TEST_CASE("buffer pool: after a failed sync dropped a written page, it is never served stale") {
  // fsyncgate: a sync fails and the kernel drops the page it could not write back. Serving
  // the older bytes underneath would let a session change a stale page and log it (W3).
  test::temp_dir dir;
  fault_config config;
  config.fail_sync_after = 1;
  fault_engine io(make_io_engine(io_method::sync), config);
  relation_files files{io, dir.path(), page_size, 64 * page_size};
  buffer_pool pool(16, files, true);
  recording_writer writer(files);
  pool.set_victim_writer(&writer);
  buffer_id b = pool.pin({2, 0});
  put_i64(pool, b, 64, 42);
  pool.unpin(b);
  for (block_id block = 1; block < 40; ++block) // evicts block 0 through the writer
    pool.unpin(pool.pin({2, block}));
  REQUIRE(writer.written.front() == page_id{2, 0});
  CHECK_THROWS_AS(files.sync_segment({2, 0}), io_error); // drops the written page
  try {
    b = pool.pin({2, 0});
    FAIL("pinned a page read after a failed sync: " << get_i64(pool, b, 64));
  } catch (const io_error& e) {
    CHECK(e.fsync_failed());
  }
}

TEST_CASE("buffer pool: concurrent sessions on a tiny pool never lose an update") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  recording_writer writer(f.files);
  pool.set_victim_writer(&writer);
  constexpr int threads = 6, rounds = 3000, pages = 40;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 random(t);
      for (int i = 0; i < rounds; ++i) {
        pool.reserve_pins(2); // two pages at once, as a transaction does
        block_id a = random() % pages, b = random() % pages;
        buffer_id first = pool.pin({1, a});
        buffer_id second = pool.pin({1, b});
        pool.lock_exclusive(first);
        std::int64_t v = get_i64(pool, first, 128);
        std::memcpy(static_cast<unsigned char*>(pool.page(first)) + 128, &(v = v + 1), 8);
        set_page_lsn(pool.page(first), 1);
        pool.mark_dirty(first);
        pool.unlock_exclusive(first);
        pool.unpin(first);
        pool.unpin(second);
        pool.release_pins(2);
      }
    });
  }
  for (auto& w : workers)
    w.join();
  std::int64_t total = 0;
  for (block_id block = 0; block < pages; ++block) {
    buffer_id b = pool.pin({1, block});
    total += get_i64(pool, b, 128);
    pool.unpin(b);
  }
  CHECK(total == threads * rounds);
  CHECK(writer.written.size() > 0); // evictions happened while sessions worked
}

TEST_CASE("buffer pool: a pool of more buffers than a pin count holds gives out at most that "
          "many pins") {
  constexpr std::size_t small_page = 256; // keeps the frames of 2^18 buffers small
  test::temp_dir dir;
  std::unique_ptr<io_engine> io = make_io_engine(io_method::sync);
  relation_files files{*io, dir.path(), small_page, 64 * small_page};
  buffer_pool pool(buffer_pool::max_pins + 2, files, false);
  CHECK(pool.pin_capacity() == buffer_pool::max_pins);
  REQUIRE(pool.try_reserve_pins(buffer_pool::max_pins));
  CHECK_FALSE(pool.try_reserve_pins(1));
  // Every pin on one buffer: its count reaches the field's limit and comes back intact.
  std::vector<buffer_id> pinned;
  for (std::uint32_t i = 0; i < buffer_pool::max_pins; ++i)
    pinned.push_back(pool.pin({1, 0}));
  CHECK(pinned.front() == pinned.back());
  for (buffer_id b : pinned)
    pool.unpin(b);
  pool.release_pins(buffer_pool::max_pins);
  CHECK(pool.is_reusable(pinned.front()) == false); // used: its usage count is up
  CHECK(pool.try_reserve_pins(buffer_pool::max_pins));
}

TEST_CASE("buffer pool: a write started on a page dirtied again keeps it dirty") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  buffer_id b = pool.pin({1, 0});
  put_i64(pool, b, 64, 1);
  std::vector<unsigned char> copy(page_size);
  page_id id;
  lsn_t lsn;
  REQUIRE(pool.start_write(b, copy.data(), &id, &lsn));
  CHECK_FALSE(pool.start_write(b, copy.data(), &id, &lsn)); // one write at a time
  put_i64(pool, b, 64, 2);                                  // dirtied during the write
  pool.finish_write(b, true);
  CHECK(pool.is_dirty(b));
  REQUIRE(pool.start_write(b, copy.data(), &id, &lsn));
  pool.finish_write(b, true);
  CHECK_FALSE(pool.is_dirty(b));
  pool.unpin(b);
}

TEST_CASE("buffer pool: a wait for a write ends with that write, a next write after it "
          "notwithstanding") {
  // The checkpointer waits for writes others began (C1); the buffer may be written again
  // right after. Before, the wait looked a second time after it ended, saw the next write,
  // and reported a stopped engine that had not stopped (a standby's restartpoint under
  // doublewrite then failed the whole engine).
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  buffer_id b = pool.pin({1, 0});
  constexpr int writes = 100000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::vector<unsigned char> copy(page_size);
    page_id id;
    lsn_t lsn;
    for (int i = 0; i < writes; ++i) {
      put_i64(pool, b, 64, i);
      if (pool.start_write(b, copy.data(), &id, &lsn))
        pool.finish_write(b, true);
    }
    done.store(true);
  });
  std::size_t waits = 0, stopped = 0;
  while (!done.load()) {
    try {
      pool.wait_for_write(b);
    } catch (const engine_stopped_error&) {
      ++stopped;
    }
    ++waits;
  }
  writer.join();
  pool.unpin(b);
  CHECK(waits > 0);
  CHECK(stopped == 0);
}

// Whether every small page of [begin, begin + length) is resident (mincore).
bool resident(const void* begin, std::size_t length) {
  std::size_t small = 4096;
  std::vector<unsigned char> pages((length + small - 1) / small);
  REQUIRE(mincore(const_cast<void*>(begin), length, pages.data()) == 0);
  for (unsigned char page : pages)
    if (!(page & 1))
      return false;
  return true;
}

TEST_CASE("buffer pool: fault_in_ahead faults in the buffers ahead of the clock hand's first "
          "pass and leaves their bytes as they are") {
  zeroed_memory probe(4096);
  if (!probe.fault_in(0, 4096)) {
    MESSAGE("the kernel lacks MADV_POPULATE_WRITE: nothing to check");
    return;
  }
  pool_fixture f;
  constexpr std::size_t buffers = 2048; // 16 MiB: eight huge pages
  buffer_pool pool(buffers, f.files, true);
  const std::size_t huge = 256; // buffers a 2 MiB huge page holds
  CHECK_FALSE(resident(pool.page(0), page_size));
  CHECK_FALSE(resident(pool.page(4 * huge), huge * page_size));

  buffer_id first = pool.pin({1, 1}); // the hand's first buffer, now holding a page
  put_i64(pool, first, 100, 0x5eed);
  pool.fault_in_ahead(huge); // the hand is at buffer 1: buffers 1 .. 256
  CHECK(resident(pool.page(1), huge * page_size));
  CHECK_FALSE(resident(pool.page(4 * huge), huge * page_size)); // not that far ahead
  pool.fault_in_ahead(buffers);
  CHECK(resident(pool.page(0), buffers * page_size));
  CHECK(get_i64(pool, first, 100) == 0x5eed); // a buffer in use keeps its bytes
  CHECK(page_is_all_zero(pool.page(buffers - 1), page_size));
  pool.unpin(first);
}

TEST_CASE("buffer pool: an optimistic read holds while nothing changes the page, and fails "
          "once an exclusive latch or a retag may have") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  recording_writer writer(f.files);
  pool.set_victim_writer(&writer);
  buffer_pool::optimistic_read read;
  CHECK_FALSE(pool.begin_optimistic({5, 1}, &read)); // not in the pool

  buffer_id b = pool.pin({5, 1});
  put_i64(pool, b, 64, 41);
  pool.unpin(b);
  REQUIRE(pool.begin_optimistic({5, 1}, &read));
  CHECK(read.buffer == b);
  CHECK(read.bytes == pool.page(b));
  CHECK(get_i64(pool, b, 64) == 41);
  b = pool.pin({5, 1}); // pins and shared latches change nothing
  pool.lock_shared(b);
  pool.unlock_shared(b);
  CHECK(pool.still_unchanged(read));

  pool.lock_exclusive(b); // a change may begin: the read fails at once
  CHECK_FALSE(pool.still_unchanged(read));
  buffer_pool::optimistic_read during;
  CHECK_FALSE(pool.begin_optimistic({5, 1}, &during)); // nor can one start meanwhile
  pool.unlock_exclusive(b);
  CHECK_FALSE(pool.still_unchanged(read)); // nothing was written, but it might have been
  REQUIRE(pool.begin_optimistic({5, 1}, &read));
  CHECK(pool.try_lock_exclusive(b));
  CHECK_FALSE(pool.still_unchanged(read));
  pool.unlock_exclusive(b);
  pool.unpin(b);

  // The buffer goes to another page: a read of the old page begun before fails.
  REQUIRE(pool.begin_optimistic({5, 1}, &read));
  for (block_id block = 0; block < 64; ++block)
    pool.unpin(pool.pin({6, block}));
  REQUIRE(pool.tag(b) != page_id{5, 1});
  CHECK_FALSE(pool.still_unchanged(read));
  CHECK_FALSE(pool.begin_optimistic({5, 1}, &read)); // not in the pool any more
  b = pool.pin({5, 1});
  pool.unpin(b);
  REQUIRE(pool.begin_optimistic({5, 1}, &read));
  CHECK(get_i64(pool, read.buffer, 64) == 41); // read back from the file
  CHECK(pool.still_unchanged(read));
}

TEST_CASE("buffer pool: offsets up to optimistic_reach past the last frame are mapped") {
  pool_fixture f;
  buffer_pool pool(16, f.files, true);
  std::vector<buffer_id> pinned;
  for (block_id block = 0; block < 16; ++block) // every buffer, the last one too
    pinned.push_back(pool.pin({7, block}));
  buffer_id last = *std::max_element(pinned.begin(), pinned.end());
  REQUIRE(last == 15);
  const auto* bytes = static_cast<const unsigned char*>(pool.page(last));
  unsigned char sum = 0;
  for (std::size_t at = 0; at < buffer_pool::optimistic_reach; at += 4096)
    sum |= bytes[at];
  sum |= bytes[buffer_pool::optimistic_reach - 1];
  CHECK(sum == 0); // zeros, and no fault reading them
  for (buffer_id b : pinned)
    pool.unpin(b);
}

} // namespace
} // namespace tidemark::storage
