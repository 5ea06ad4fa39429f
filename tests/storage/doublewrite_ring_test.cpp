// The doublewrite ring (storage/doublewrite_ring.hpp): it refuses illegal chunk
// transitions, never places a record over one whose chunk is not FREE, nor over FREE space
// behind a horizon not yet durable, and makes writers wait instead of overwriting;
// sequences never repeat across runs. The ring file is written with zeros a step ahead of
// its newest record, never past the ring's end; a power loss that tears or loses those
// zeros, the newest records and the file's growth loses no durable record, in a fresh ring
// and in one reopened on what an earlier power loss left. (Repair, which these cases use
// to see what a crash leaves, has its own tests in doublewrite_repair_test.cpp.)
#include "storage/doublewrite_ring.hpp"

#include "storage/doublewrite_record.hpp"
#include "storage/doublewrite_repair.hpp"
#include "storage/fault_engine.hpp"

#include "doublewrite_support.hpp"
#include "invariant_abort.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

namespace tidemark::storage {
namespace {

using test::driven_ring;
using test::page_size;
using test::stage_blocks;
using test::staged_image;

TEST_CASE("doublewrite ring: the file is written with zeros a step ahead of its newest record, up "
          "to the ring's end") {
  constexpr std::uint64_t step = std::uint64_t{1} << 20;
  const std::uint64_t ring_end = ring_records_start + 512 * page_size;
  driven_ring f(512);
  CHECK(std::filesystem::file_size(f.ring_path) <= ring_records_start); // a header slot
  f.retire(f.synced(0));
  const std::uint64_t first_end = ring_records_start + driven_ring::record_bytes;
  std::vector<unsigned char> bytes = f.file();
  CHECK(bytes.size() == std::min(ring_end, (first_end + step + step - 1) / step * step));
  CHECK(std::all_of(bytes.begin() + static_cast<long>(first_end), bytes.end(),
                    [](unsigned char b) { return b == 0; }));
  // Records go on over the zeros; the file reaches the ring's end before the first wrap
  // and never grows past it.
  bool wrapped = false;
  for (block_id first = 3; !wrapped; first += 3) {
    f.retire(f.synced(first % 60));
    std::map<std::uint64_t, std::uint64_t> on_disk = f.records();
    CHECK(std::filesystem::file_size(f.ring_path) <= ring_end);
    wrapped = on_disk.begin()->second > on_disk.rbegin()->second; // the newest at the start
    REQUIRE(first < 1000);
  }
  CHECK(std::filesystem::file_size(f.ring_path) == ring_end);
  repair_report report = f.crash_and_repair();
  CHECK(report.bounded);
}

TEST_CASE("doublewrite ring: a power loss during the first pass, its zeros and newest records "
          "unsynced, torn or cut off with the file's growth, loses no durable record") {
  // Records of three incompressible pages take 28 kB: the 37th crosses the first megabyte,
  // so of run 0's records 34 are durable and the five after them, with the zeros written
  // for the next step, are not. Run 1 reopens the ring on what the power loss left, writes
  // its records over run 0's from the start of the record area and on past the file's
  // length, and loses power the same way.
  constexpr std::uint32_t ring_pages = 512; // 4 MB: the file grows in four steps
  const std::uint32_t durable_records[] = {34, 70};
  constexpr std::uint32_t unsynced_records = 5;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    CAPTURE(seed);
    test::temp_dir dir;
    const std::string ring_dir = dir.file("doublewrite");
    const std::string ring_path = ring_dir + "/ring";
    block_id next = 0;
    for (int run = 0; run < 2; ++run) {
      CAPTURE(run);
      fault_config config;
      config.mode = crash_mode::torn;
      config.seed = seed * 2 + static_cast<std::uint64_t>(run);
      config.tear_every_write = seed % 2 == 0;
      fault_engine io(make_io_engine(io_method::sync), config);
      std::vector<block_id> durable, unsynced; // each record's first block
      std::uint64_t durable_length = 0;        // the file's length at its last fdatasync
      {
        doublewrite_ring ring(io, ring_dir, page_size, ring_pages, 4, unsynced_records + 1);
        for (std::uint32_t i = 0; i < durable_records[run]; ++i, next += 3) {
          std::uint32_t c = stage_blocks(ring, next, 100);
          REQUIRE(ring.write(c));
          ring.sync(c);
          ring.advance(c, dw_state::data_written); // live: never retired
          durable.push_back(next);
        }
        durable_length = std::filesystem::file_size(ring_path);
        for (std::uint32_t i = 0; i < unsynced_records; ++i, next += 3) {
          REQUIRE(ring.write(stage_blocks(ring, next, 100)));
          unsynced.push_back(next);
        }
        // A step of zeros went out after the last fdatasync, or the test tests nothing.
        REQUIRE(std::filesystem::file_size(ring_path) > durable_length);
        power_loss_report loss = io.simulate_power_loss();
        CHECK(loss.unsynced_writes > unsynced_records);
      }
      // The file's growth since its last fdatasync may be lost too, to any block.
      std::mt19937_64 random(config.seed);
      const std::uint64_t grown = std::filesystem::file_size(ring_path) - durable_length;
      const std::uint64_t kept = random() % 3 == 0 ? grown : random() % (grown / 4096 + 1) * 4096;
      std::filesystem::resize_file(ring_path, durable_length + kept);
      CAPTURE(kept);

      std::unique_ptr<io_engine> after = make_io_engine(io_method::sync);
      relation_files files{*after, dir.path(), page_size, 64 * page_size};
      repair_report report = repair_from_ring(*after, ring_path, files);
      CHECK(report.bounded);
      CHECK(report.records_read >= durable.size());
      CHECK(report.records_read <= durable.size() + unsynced.size());
      std::vector<unsigned char> p(page_size);
      for (block_id first : durable)
        for (block_id b = first; b < first + 3; ++b) {
          files.read_page({1, b}, p.data());
          CHECK_MESSAGE(p == staged_image({1, b}, 100), "block " << b << " of a durable record");
        }
      for (block_id first : unsynced) { // each whole or not at all
        std::size_t restored = 0;
        for (block_id b = first; b < first + 3; ++b) {
          files.read_page({1, b}, p.data());
          if (!page_is_all_zero(p.data(), page_size)) {
            CHECK(p == staged_image({1, b}, 100));
            ++restored;
          }
        }
        CHECK((restored == 0 || restored == 3));
      }
      CHECK(report.pages_repaired == report.records_read * 3);
    }
  }
}

TEST_CASE("doublewrite ring: space of FREE chunks behind a horizon not yet durable is not reused "
          "until a header past it is") {
  SUBCASE("no batch to carry the header: an fdatasync of the header alone") {
    driven_ring f(8); // two records fit, a third goes to the start
    std::uint32_t a = f.synced(0);
    std::uint32_t b = f.synced(3);
    const std::uint64_t first = f.newest_header().horizon_sequence;
    CHECK(f.ring->counters().fsyncs.load() == 2); // no header: the horizon stayed at a
    f.retire(a);
    f.retire(b);
    CHECK(f.ring->used_bytes() == 2 * driven_ring::record_bytes); // both FREE, both kept
    std::uint32_t c = f.stage(6, 100);
    CHECK_FALSE(f.ring->write(c)); // over a: refused, as the durable header points at a
    CHECK(f.ring->counters().ring_full.load() == 1);
    CHECK(f.newest_header().horizon_sequence == first);
    CHECK(f.ring->sync_horizon());
    CHECK(f.ring->counters().horizon_fsyncs.load() == 1);
    ring_header h = f.newest_header();
    CHECK(h.horizon_sequence == first + 2); // past both: where the next record goes
    CHECK(h.horizon_at == ring_records_start + 2 * driven_ring::record_bytes);
    CHECK(f.ring->used_bytes() == 0);
    CHECK(f.ring->write(c));
    CHECK(f.records().at(ring_records_start) == first + 2); // at the start, over a
    f.ring->sync(c);
    f.ring->advance(c, dw_state::data_written);
    CHECK(f.ring->counters().fsyncs.load() == 4);
  }
  SUBCASE("a batch to carry it: the header rides on the batch's fdatasync") {
    driven_ring f(12); // three records fit
    std::uint32_t a = f.synced(0);
    f.synced(3);
    f.retire(a);
    std::uint32_t c = f.synced(6); // behind b: its sync writes the header (horizon b)
    CHECK(f.newest_header().horizon_at == ring_records_start + driven_ring::record_bytes);
    CHECK(f.ring->used_bytes() == 2 * driven_ring::record_bytes);
    f.synced(9); // over a, at the start, with no fdatasync of its own for the header
    CHECK(f.ring->counters().fsyncs.load() == 4);
    CHECK(f.ring->counters().horizon_fsyncs.load() == 0);
    CHECK(f.ring->state(c) == dw_state::data_written);
  }
}

TEST_CASE("doublewrite ring: sequences never repeat across runs, so a stale record right behind "
          "the chain is never taken for its next") {
  driven_ring f(8);
  f.retire(f.synced(12)); // an earlier run, whose headers stay on disk
  CHECK(f.ring->sync_horizon());
  f.ring.reset();
  // A run writes two records in one group; the crash comes during that fdatasync, and a
  // header written with it would be lost while both records survive.
  f.open(8);
  std::vector<unsigned char> slots_before = f.file();
  slots_before.resize(ring_records_start);
  std::uint32_t a = f.stage(0, 100), b = f.stage(3, 100);
  REQUIRE(f.ring->write(a));
  REQUIRE(f.ring->write(b));
  std::uint32_t group[] = {a, b};
  f.ring->sync(group, 2);
  f.ring->advance(a, dw_state::data_written);
  f.ring->advance(b, dw_state::data_written);
  f.ring.reset();
  f.overwrite(0, slots_before.data(), slots_before.size());
  std::map<std::uint64_t, std::uint64_t> first_run = f.records();
  REQUIRE(first_run.size() == 2);
  const std::uint64_t a_sequence = first_run.at(ring_records_start);
  const std::uint64_t b_sequence = first_run.at(ring_records_start + driven_ring::record_bytes);
  CHECK(f.newest_header().next_sequence == a_sequence); // the run's opening header
  // The next run writes one record, the size of a's and over it, and crashes.
  f.open(8);
  f.synced(6, 200);
  std::map<std::uint64_t, std::uint64_t> second_run = f.records();
  REQUIRE(second_run.size() == 2);
  const std::uint64_t first_new = second_run.at(ring_records_start);
  // Past anything the first run could have written after its newest intact header: at
  // most one record per alignment block of the file.
  const std::uint64_t blocks = (ring_records_start + 8 * page_size) / ring_record_alignment;
  CHECK(first_new > b_sequence);
  CHECK(first_new >= a_sequence + blocks);
  repair_report report = f.crash_and_repair();
  CHECK(report.bounded);
  CHECK(report.records_read == 1); // b, right behind it, is not its next: not followed
  CHECK(f.restored(6));
  CHECK_FALSE(f.restored(3));
}

TEST_CASE("doublewrite ring: default staging holds two bgwriter rounds beside the other writers") {
  constexpr std::uint32_t others = 2 * 2 + 10; // checkpointer and sessions, two each; batcher queue
  CHECK(default_staging_chunks(1000, 64) == 2 * 16 + others); // a 1000-page round is 16 batches
  CHECK(default_staging_chunks(1024, 64) == 2 * 16 + others);
  CHECK(default_staging_chunks(1025, 64) == 2 * 17 + others);
  CHECK(default_staging_chunks(0, 64) == others); // bgwriter off
  CHECK(default_staging_chunks(1000, 16) == 2 * 63 + others);
}

TEST_CASE("doublewrite ring: chunks follow the state machine, and illegal transitions abort") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  doublewrite_ring ring(*io, dir.path(), page_size, 16, 8, 2);
  CHECK(ring.staging_chunks() == 2);
  std::uint32_t c = ring.acquire({});
  CHECK(ring.state(c) == dw_state::allocated);
  const char* cycle = "moves along its cycle";
  CHECK(test::aborts_on_invariant([&] { ring.sync(c); }, "synced only once WRITTEN"));
  CHECK(test::aborts_on_invariant([&] { ring.release(c); }, cycle)); // not DATA_FSYNCED
  ring.entries(c).push_back({{1, 0}, 1, 0});
  std::memset(ring.slot_memory(c, 0), 0, page_size);
  CHECK(ring.write(c));
  CHECK(test::aborts_on_invariant([&] { ring.write(c); }, cycle)); // WRITTEN already
  ring.sync(c);
  CHECK(test::aborts_on_invariant([&] { ring.advance(c, dw_state::data_fsynced); }, cycle));
  ring.advance(c, dw_state::data_written);
  ring.advance(c, dw_state::data_fsynced);
  ring.release(c);
  CHECK(ring.state(c) == dw_state::free);
  CHECK(ring.counters().fsyncs.load() == 1);
  std::vector<std::uint64_t> latency = ring.counters().fsync_latency.snapshot();
  CHECK(std::accumulate(latency.begin(), latency.end(), std::uint64_t{0}) == 1); // its duration
  CHECK(ring.used_bytes() > 0); // FREE, but no durable header past its record yet
  CHECK(ring.sync_horizon());
  CHECK(ring.used_bytes() == 0);
  CHECK_FALSE(ring.sync_horizon()); // nothing moved since: no fdatasync
  CHECK(ring.counters().fsyncs.load() == 2);
  CHECK(ring.counters().horizon_fsyncs.load() == 1);
}

// Stages `pages` pages of random (incompressible) bytes into a fresh chunk.
std::uint32_t staged_chunk(doublewrite_ring& ring, std::uint32_t pages, unsigned seed) {
  std::uint32_t c = ring.acquire({});
  auto random = test::random_bytes(std::size_t(pages) * page_size, seed);
  for (std::uint32_t i = 0; i < pages; ++i) {
    std::memcpy(ring.slot_memory(c, i), random.data() + std::size_t(i) * page_size, page_size);
    ring.entries(c).push_back({{1, i}, 1, 0});
  }
  return c;
}

void retire(doublewrite_ring& ring, std::uint32_t c) {
  ring.sync(c);
  ring.advance(c, dw_state::data_written);
  ring.advance(c, dw_state::data_fsynced);
  ring.release(c);
}

TEST_CASE("doublewrite ring: a record is never placed over one whose chunk is not FREE") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  // Room for two records of 8 incompressible pages, not three.
  doublewrite_ring ring(*io, dir.path(), page_size, 24, 8, 3);
  std::uint32_t a = staged_chunk(ring, 8, 1);
  std::uint32_t b = staged_chunk(ring, 8, 2);
  std::uint32_t c = staged_chunk(ring, 8, 3);
  CHECK(ring.write(a));
  CHECK(ring.write(b));
  CHECK_FALSE(ring.write(c)); // full: c stays ALLOCATED, its staged pages untouched
  CHECK(ring.state(c) == dw_state::allocated);
  CHECK(ring.counters().ring_full.load() == 1);
  ring.sync(b);
  ring.advance(b, dw_state::data_written);
  CHECK_FALSE(ring.write(c)); // b's record is held until b is FREE (D2), not DATA_WRITTEN
  retire(ring, a);
  CHECK_FALSE(ring.write(c)); // a is FREE, but the durable header still points at it
  CHECK(ring.sync_horizon());
  CHECK(ring.write(c)); // into a's space
  // The ring file holds b's and c's records intact: every image comes back.
  int fd = io->open_file(ring.path(), false);
  std::vector<unsigned char> file(io->file_size(fd));
  io->read(fd, file.data(), file.size(), 0);
  io->close_file(fd);
  std::size_t images = 0;
  for_each_ring_image(file.data(), file.size(), file.size(), page_size,
                      [&](const ring_image&) { ++images; });
  CHECK(images == 16);
}

TEST_CASE("doublewrite ring: however small the batches, chunks do not run out before ring space "
          "does") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  // 64-page batches, but each batch one page: every record takes one alignment unit.
  doublewrite_ring ring(*io, dir.path(), page_size, 128, 64, 1);
  CHECK(ring.chunk_count() >= ring.capacity_bytes() / ring_record_alignment);
  std::vector<std::uint32_t> waiting; // DATA_WRITTEN, awaiting their data-file fsync
  while (ring.used_bytes() < ring.capacity_bytes() / 2) {
    std::uint32_t c;
    REQUIRE_MESSAGE(ring.try_acquire(&c), "no chunk left with " << ring.used_bytes() << " of "
                                                                << ring.capacity_bytes()
                                                                << " ring bytes used");
    std::memset(ring.slot_memory(c, 0), 0, page_size);
    ring.entries(c).push_back({{1, static_cast<block_id>(waiting.size())}, 1, 0});
    REQUIRE(ring.write(c));
    ring.sync(c);
    ring.advance(c, dw_state::data_written);
    CHECK(
      test::aborts_on_invariant([&] { ring.entries(c); }, "staged pages live")); // only until here
    waiting.push_back(c);
  }
  CHECK(waiting.size() * ring_record_alignment >= ring.capacity_bytes() / 2);
  CHECK(ring.free_chunks() == ring.chunk_count() - waiting.size());
  for (std::uint32_t c : waiting) {
    ring.advance(c, dw_state::data_fsynced);
    ring.release(c);
  }
  CHECK(ring.free_chunks() == ring.chunk_count());
}

TEST_CASE("doublewrite ring: staging memory comes back at DATA_WRITTEN, ring space after FREE") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  doublewrite_ring ring(*io, dir.path(), page_size, 64, 8, 1);
  std::uint32_t a = staged_chunk(ring, 4, 1);
  std::uint32_t b;
  CHECK_FALSE(ring.try_acquire(&b)); // the one staging buffer is taken
  CHECK(ring.write(a));
  ring.sync(a);
  std::uint64_t used = ring.used_bytes();
  CHECK(used > 4 * page_size);
  ring.advance(a, dw_state::data_written);
  CHECK(ring.try_acquire(&b)); // staging free again while a awaits its data-file fsync
  CHECK(b != a);
  CHECK(ring.used_bytes() == used);
  ring.advance(a, dw_state::data_fsynced);
  ring.release(a);
  CHECK(ring.used_bytes() == used); // until a header past it is durable
  CHECK(ring.sync_horizon());
  CHECK(ring.used_bytes() == 0);
}

TEST_CASE("doublewrite ring: with no free staging a writer waits until a chunk gives it back "
          "(D4)") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  doublewrite_ring ring(*io, dir.path(), page_size, 16, 8, 2);
  std::uint32_t a = ring.acquire({});
  std::uint32_t b = ring.acquire({});
  std::atomic<bool> waiting{false};
  std::atomic<int> got{-1};
  std::thread writer([&] { got = static_cast<int>(ring.acquire([&] { waiting = true; })); });
  while (!waiting.load())
    std::this_thread::yield();
  CHECK(got.load() == -1); // still waiting: nothing was overwritten
  ring.give_back(b);
  writer.join();
  CHECK(got.load() >= 0);
  CHECK(got.load() != static_cast<int>(a));
  CHECK(ring.counters().slot_waits.load() == 1);
}

TEST_CASE("doublewrite ring: a failed engine wakes waiting writers with an error") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  doublewrite_ring ring(*io, dir.path(), page_size, 16, 8, 2);
  ring.acquire({});
  ring.acquire({});
  std::atomic<bool> waiting{false}, threw{false};
  std::thread writer([&] {
    try {
      ring.acquire([&] { waiting = true; });
    } catch (const io_error&) {
      threw = true;
    }
  });
  while (!waiting.load())
    std::this_thread::yield();
  ring.fail();
  writer.join();
  CHECK(threw.load());
}

} // namespace
} // namespace tidemark::storage
