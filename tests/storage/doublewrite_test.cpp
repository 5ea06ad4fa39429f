// Doublewrite ring, its records and eager repair. The repair decision table is walked over
// every combination of its inputs, each mapped to exactly one action; repair restores pages
// a checksum never flags (older LSN, same LSN with other bytes) and ignores torn records and
// images; records round-trip compressible and incompressible pages and yield nothing when
// torn or partly overwritten; the ring refuses illegal chunk transitions, never places a
// record over one whose chunk is not FREE, and makes writers wait instead of overwriting.
#include "storage/doublewrite_record.hpp"
#include "storage/doublewrite_repair.hpp"
#include "storage/doublewrite_ring.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>

namespace tidemark::storage {
namespace {

constexpr std::size_t page_size = 8192;

TEST_CASE("doublewrite repair: the decision table covers every input exactly once") {
  // Rows: (verdict, disk vs slot LSN, same bytes) -> action, with the crash story.
  struct row {
    page_verdict disk;
    int lsn_order; // -1 disk older, 0 equal, +1 disk newer
    bool same_bytes;
    repair_action expected;
  };
  std::vector<row> table;
  for (page_verdict v : {page_verdict::ok, page_verdict::all_zero, page_verdict::bad_checksum,
                         page_verdict::wrong_identity})
    for (int order : {-1, 0, 1})
      for (bool same : {false, true}) {
        repair_action expected;
        if (v != page_verdict::ok)
          expected = repair_action::restore; // torn, misdirected or lost in-place write
        else if (order < 0)
          expected = repair_action::restore; // in-place write lost, or torn yet verifying
        else if (order == 0)
          expected = same ? repair_action::keep      // the write made it
                          : repair_action::restore;  // torn in a way the checksum missed
        else
          expected = repair_action::keep; // a later write made it: the slot is stale
        table.push_back({v, order, same, expected});
      }
  CHECK(table.size() == 24);
  for (const row& r : table) {
    repair_inputs in;
    in.disk = r.disk;
    in.slot_lsn = 1000;
    in.disk_lsn = r.disk == page_verdict::ok ? 1000 + r.lsn_order * 10 : 0;
    in.same_bytes = r.same_bytes;
    CHECK_MESSAGE(decide_repair(in) == r.expected,
                  "verdict " << to_string(r.disk) << " order " << r.lsn_order << " same " << r.same_bytes);
  }
}

struct repair_fixture {
  test::temp_dir dir;
  std::unique_ptr<io_engine> io = make_io_engine(io_method::sync);
  relation_files files{*io, dir.path() + "", page_size, 16 * page_size};
  std::string ring_path = dir.file("ring");

  std::vector<unsigned char> page(page_id id, lsn_t lsn, unsigned char fill) {
    std::vector<unsigned char> p(page_size, 0);
    std::memset(p.data() + 64, fill, 1000);
    set_page_lsn(p.data(), lsn);
    finalize_page_for_write(p.data(), page_size, id, true);
    return p;
  }
  void write_records(const std::vector<std::vector<unsigned char>>& records) {
    int fd = io->open_file(ring_path, true);
    std::uint64_t at = 0;
    for (const auto& record : records) {
      io->write(fd, record.data(), record.size(), at);
      at += record.size();
    }
    io->close_file(fd);
  }
  static std::vector<unsigned char> encoded(const std::vector<std::vector<unsigned char>>& pages) {
    std::vector<const unsigned char*> images;
    for (const auto& p : pages)
      images.push_back(p.data());
    std::vector<unsigned char> out(max_record_bytes(static_cast<std::uint32_t>(pages.size()), page_size));
    out.resize(encode_batch(images.data(), static_cast<std::uint32_t>(images.size()), page_size, 7,
                            out.data()));
    return out;
  }
  std::vector<unsigned char> disk(page_id id) {
    std::vector<unsigned char> p(page_size);
    files.read_page(id, p.data());
    return p;
  }
};

TEST_CASE("doublewrite repair: pages are restored whether or not a checksum noticed anything") {
  repair_fixture f;
  page_id lost{1, 0}, equal_lsn{1, 1}, newer_on_disk{1, 2}, torn{1, 3};
  f.files.write_page(lost, f.page(lost, 100, 'a').data());                 // valid, older
  f.files.write_page(equal_lsn, f.page(equal_lsn, 200, 'b').data());       // valid, same LSN
  f.files.write_page(newer_on_disk, f.page(newer_on_disk, 900, 'c').data());
  auto torn_page = f.page(torn, 300, 'd');
  std::memset(torn_page.data() + 4096, 'x', 4096); // second half from another version
  f.files.write_page(torn, torn_page.data());
  auto slot_torn = f.page(torn, 300, 'd');
  auto broken_image = f.page({1, 4}, 999, 'e');
  broken_image[5000] ^= 1; // an image whose own checksum fails: never used
  auto torn_record = f.encoded({f.page({1, 5}, 999, 'f')});
  torn_record[100] ^= 1; // a record torn by the crash: never used
  f.write_records({f.encoded({f.page(lost, 150, 'A'), f.page(lost, 120, 'Z')}),
                   f.encoded({f.page(equal_lsn, 200, 'B'), f.page(newer_on_disk, 800, 'C')}),
                   f.encoded({slot_torn, broken_image}), torn_record});
  repair_report report = repair_from_ring(*f.io, f.ring_path, f.files);
  CHECK(report.images_read == 6);
  CHECK(report.pages_considered == 4); // the broken image's page has no valid image
  CHECK(report.pages_repaired == 3);
  CHECK(report.repaired_lsn == 1);
  CHECK(report.repaired_bytes == 1);
  CHECK(report.repaired_checksum == 1);
  CHECK(f.disk(lost) == f.page(lost, 150, 'A')); // the newest slot wins (D5)
  CHECK(f.disk(equal_lsn) == f.page(equal_lsn, 200, 'B'));
  CHECK(f.disk(newer_on_disk) == f.page(newer_on_disk, 900, 'c'));
  CHECK(f.disk(torn) == slot_torn);
  CHECK(page_is_all_zero(f.disk({1, 4}).data(), page_size)); // the broken image restored nothing
  CHECK(page_is_all_zero(f.disk({1, 5}).data(), page_size)); // nor the torn record
}

TEST_CASE("doublewrite repair: a newer image that fails its checksum hides no older valid one") {
  for (bool broken_first : {true, false}) {
    CAPTURE(broken_first);
    repair_fixture f;
    page_id id{1, 0};
    auto valid = f.page(id, 100, 'v');
    auto broken = f.page(id, 200, 'w');
    broken[5000] ^= 1;
    auto twin = f.page(id, 100, 'v'); // the same LSN again, broken: skipped for the valid one
    twin[6000] ^= 1;
    if (broken_first)
      f.write_records({f.encoded({broken, twin}), f.encoded({valid})});
    else
      f.write_records({f.encoded({valid}), f.encoded({broken, twin})});
    repair_report report = repair_from_ring(*f.io, f.ring_path, f.files);
    CHECK(report.images_read == 3);
    CHECK(report.pages_repaired == 1);
    CHECK(f.disk(id) == valid);
  }
}

std::vector<std::vector<unsigned char>> ring_images(const std::vector<unsigned char>& ring) {
  std::vector<std::vector<unsigned char>> images;
  for_each_ring_image(ring.data(), ring.size(), ring.size(), page_size, [&](const ring_image& image) {
    const unsigned char* page = image.page();
    REQUIRE(page != nullptr);
    images.emplace_back(page, page + page_size);
  });
  return images;
}

TEST_CASE("doublewrite record: compressible and incompressible pages round-trip") {
  repair_fixture f;
  auto text = f.page({1, 0}, 10, 'a');                       // mostly zeros: compresses
  auto noise = test::random_bytes(page_size, 9);             // does not
  auto record = f.encoded({text, noise, text});
  CHECK(record.size() % ring_record_alignment == 0);
  CHECK(record.size() < 2 * page_size + 4096);                // the text pages were compressed
  CHECK(record.size() <= max_record_bytes(3, page_size));
  auto images = ring_images(record);
  REQUIRE(images.size() == 3);
  CHECK(images[0] == text);
  CHECK(images[1] == noise);
  CHECK(images[2] == text);
}

TEST_CASE("doublewrite record: a torn record, or one partly overwritten by a later one, yields nothing") {
  repair_fixture f;
  std::vector<std::vector<unsigned char>> noise;
  for (unsigned i = 0; i < 4; ++i)
    noise.push_back(test::random_bytes(page_size, 20 + i));
  auto older = f.encoded(noise);                    // about 32 kB
  auto newer = f.encoded({f.page({1, 1}, 20, 'b')}); // one 4 kB block
  std::vector<unsigned char> ring = older;
  CHECK(ring_images(ring).size() == 4);
  std::copy(newer.begin(), newer.end(), ring.begin()); // the newer record over the older's head
  auto images = ring_images(ring);
  REQUIRE(images.size() == 1);
  CHECK(images[0] == f.page({1, 1}, 20, 'b'));
  // Only part of a record in the buffer: the scan stops at its start, to go on from there.
  std::size_t seen = 0;
  std::vector<unsigned char> two = newer;
  two.insert(two.end(), older.begin(), older.end());
  const std::size_t cut = newer.size() + 3 * page_size; // inside the older record
  CHECK(for_each_ring_image(two.data(), cut, cut, page_size, [&](const ring_image&) { ++seen; }) ==
        newer.size());
  CHECK(seen == 1);
  for (std::size_t at : {std::size_t(40), older.size() / 2, std::size_t(4 * page_size)}) {
    auto torn = older;
    std::fill(torn.begin() + static_cast<long>(at), torn.end(), 0); // lost from `at` on
    CHECK(ring_images(torn).empty());
  }
}

TEST_CASE("doublewrite ring: default staging holds two bgwriter rounds beside the other writers") {
  constexpr std::uint32_t others = 2 * 2 + 10; // checkpointer and sessions, two each; batcher queue
  CHECK(default_staging_chunks(1000, 64) == 2 * 16 + others); // a 1000-page round is 16 batches
  CHECK(default_staging_chunks(1024, 64) == 2 * 16 + others);
  CHECK(default_staging_chunks(1025, 64) == 2 * 17 + others);
  CHECK(default_staging_chunks(0, 64) == others); // bgwriter off
  CHECK(default_staging_chunks(1000, 16) == 2 * 63 + others);
}

TEST_CASE("doublewrite ring: chunks follow the state machine, and illegal transitions are refused") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  doublewrite_ring ring(*io, dir.path(), page_size, 16, 8, 2);
  CHECK(ring.staging_chunks() == 2);
  std::uint32_t c = ring.acquire({});
  CHECK(ring.state(c) == dw_state::allocated);
  CHECK_THROWS_AS(ring.sync(c), std::logic_error);      // not WRITTEN yet
  CHECK_THROWS_AS(ring.release(c), std::logic_error);   // not DATA_FSYNCED
  ring.entries(c).push_back({{1, 0}, 1, 0});
  std::memset(ring.slot_memory(c, 0), 0, page_size);
  CHECK(ring.write(c));
  CHECK_THROWS_AS(ring.write(c), std::logic_error);     // WRITTEN already
  ring.sync(c);
  CHECK_THROWS_AS(ring.advance(c, dw_state::data_fsynced), std::logic_error);
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

TEST_CASE("doublewrite ring: with no free staging a writer waits until a chunk gives it back (D4)") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  doublewrite_ring ring(*io, dir.path(), page_size, 16, 8, 2);
  std::uint32_t a = ring.acquire({});
  std::uint32_t b = ring.acquire({});
  std::atomic<bool> waiting{false};
  std::atomic<int> got{-1};
  std::thread writer([&] {
    got = static_cast<int>(ring.acquire([&] { waiting = true; }));
  });
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
