// Doublewrite ring, its records and eager repair. The repair decision table is walked over
// every combination of its inputs, each mapped to exactly one action; repair restores pages
// a checksum never flags (older LSN, same LSN with other bytes) and ignores torn records and
// images; records round-trip compressible and incompressible pages and yield nothing when
// torn or partly overwritten; the ring refuses illegal chunk transitions, never places a
// record over one whose chunk is not FREE, nor over FREE space behind a horizon not yet
// durable, and makes writers wait instead of overwriting. With an intact header repair reads
// only the chain from its horizon (across the end of the ring too), whichever header a torn
// or lost header write leaves; sequences never repeat across runs; a ring from before the
// header slots is read whole. The ring file is written with zeros a step ahead of its
// newest record, never past the ring's end; a power loss that tears or loses those zeros,
// the newest records and the file's growth loses no durable record, in a fresh ring and in
// one reopened on what an earlier power loss left.
#include "storage/doublewrite_record.hpp"
#include "storage/doublewrite_repair.hpp"
#include "storage/doublewrite_ring.hpp"

#include "storage/fault_engine.hpp"

#include "delegating_engine.hpp"
#include "invariant_abort.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
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

// The image of block `id` at `lsn` the driven rings stage: finalized, with random bytes
// past its header (incompressible).
std::vector<unsigned char> staged_image(page_id id, lsn_t lsn) {
  auto bytes = test::random_bytes(page_size, id.block * 10 + lsn);
  std::memset(bytes.data(), 0, page_header_size);
  set_page_lsn(bytes.data(), lsn);
  finalize_page_for_write(bytes.data(), page_size, id, true);
  return bytes;
}

// Stages the images of `pages` blocks from `first` of relation 1 at `lsn` in a new chunk.
std::uint32_t stage_blocks(doublewrite_ring& ring, block_id first, lsn_t lsn, std::uint32_t pages = 3) {
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
  test::temp_dir dir;
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

// Notes the byte ranges read from the ring file. Repair reads from several threads at once.
class ring_read_recorder final : public test::delegating_engine {
public:
  ring_read_recorder() : delegating_engine(make_io_engine(io_method::sync)) {}
  std::size_t read(int fd, void* data, std::size_t length, std::uint64_t offset) override {
    if (path_of(fd).size() >= 5 && path_of(fd).compare(path_of(fd).size() - 5, 5, "/ring") == 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      reads.emplace_back(offset, length);
    }
    return delegating_engine::read(fd, data, length, offset);
  }
  std::vector<std::pair<std::uint64_t, std::size_t>> reads; // read once repair has returned

private:
  std::mutex mutex_;
};

TEST_CASE("doublewrite repair: with an intact header only the chain is read, and stale records before the horizon are neither used nor read") {
  driven_ring f(64); // room for nine records: no wrap
  for (block_id first : {0, 3, 6, 9})
    f.retire(f.synced(first)); // stale: FREE, still intact in the file
  f.synced(12);
  f.synced(15); // live: the horizon is 12's record
  CHECK(f.records().size() == 6);
  ring_check_report checked = check_ring(*f.io, f.ring_path, page_size);
  CHECK(checked.images == 6 * driven_ring::pages_per_record); // the header slots are no record
  CHECK(checked.unreadable == 0);
  f.ring.reset(); // the process ends; the next start repairs, its ring reads watched
  ring_read_recorder recorder;
  repair_report report = repair_from_ring(recorder, f.ring_path, f.files);
  CHECK(report.bounded);
  CHECK(report.records_read == 2);
  CHECK(report.images_read == 6);
  CHECK(report.pages_repaired == 6);
  CHECK(f.restored(12));
  CHECK(f.restored(15));
  for (block_id first : {0, 3, 6, 9})
    CHECK_FALSE(f.restored(first));
  // The header slots, a first look of one block each at the horizon and at the start of
  // the record area, the pass following the chain (its window reads on into the zeros the
  // file is written with ahead of its records, up to the file's end), and one pass per
  // repair thread over the chain's two records: never the stale records.
  const std::uint64_t horizon_at = ring_records_start + 4 * driven_ring::record_bytes;
  const std::uint64_t file_bytes = std::filesystem::file_size(f.ring_path);
  CHECK(report.ring_bytes_read <= ring_records_start + 2 * ring_record_alignment +
                                    (file_bytes - horizon_at) +
                                    repair_threads() * 2 * driven_ring::record_bytes);
  // Of the stale records' bytes, only the first look at the start of the record area.
  const std::uint64_t stale_end = horizon_at;
  std::uint64_t ring_bytes = 0;
  for (const auto& [at, length] : recorder.reads) {
    ring_bytes += length;
    bool outside = at + length <= ring_records_start || at >= stale_end;
    bool first_look = at == ring_records_start && length <= ring_record_alignment;
    CHECK_MESSAGE((outside || first_look), "read [" << at << ", " << at + length
                                                    << ") of a stale record");
  }
  CHECK(ring_bytes == report.ring_bytes_read);
  CHECK(report.seconds >= 0);
}

TEST_CASE("doublewrite ring: the file is written with zeros a step ahead of its newest record, up to the ring's end") {
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

TEST_CASE("doublewrite ring: a power loss during the first pass, its zeros and newest records unsynced, torn or cut off with the file's growth, loses no durable record") {
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

TEST_CASE("doublewrite repair: a live part that wraps around the end of the ring is followed to its newest record") {
  driven_ring f(24); // the record area holds six records; the seventh goes to its start
  std::vector<std::uint32_t> stale;
  for (block_id first : {0, 3, 6})
    f.retire(f.synced(first));
  for (block_id first : {9, 12, 15, 18, 21})
    f.synced(first); // 18 and 21 over 0 and 3, at the start
  std::map<std::uint64_t, std::uint64_t> on_disk = f.records();
  REQUIRE(on_disk.size() == 6);
  CHECK(on_disk.begin()->first == ring_records_start); // the newest records are at the start
  CHECK(f.newest_header().horizon_at == ring_records_start + 3 * driven_ring::record_bytes);
  repair_report report = f.crash_and_repair();
  CHECK(report.bounded);
  CHECK(report.records_read == 5);
  for (block_id first : {9, 12, 15, 18, 21})
    CHECK(f.restored(first));
  CHECK_FALSE(f.restored(6)); // stale, between the newest record and the horizon
}

TEST_CASE("doublewrite ring: space of FREE chunks behind a horizon not yet durable is not reused until a header past it is") {
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

TEST_CASE("doublewrite repair: a torn or lost newest header leaves the previous one, whose chain is intact") {
  for (int damage : {0, 1, 2}) { // 0: the newest header torn, 1: its write lost, 2: both torn
    CAPTURE(damage);
    driven_ring f(8); // two records fit: every record after the second reuses FREE space
    std::uint32_t r1 = f.synced(0);
    std::uint32_t r2 = f.synced(3);
    f.retire(r1);
    std::uint32_t r3 = f.stage(6, 100);
    if (!f.ring->write(r3)) { // over r1, once a header past it is durable
      CHECK(f.ring->sync_horizon());
      REQUIRE(f.ring->write(r3));
    }
    f.ring->sync(r3);
    f.ring->advance(r3, dw_state::data_written); // live: its pages may be torn in place
    f.retire(r2);
    // The next record, over r2: the next header is written either alone before it or with
    // it, and the crash comes during that header's fdatasync.
    std::vector<unsigned char> before = f.file();
    const std::uint64_t previous = f.newest_header().header_sequence;
    std::uint32_t r4 = f.stage(9, 100);
    if (f.ring->write(r4))
      f.ring->sync(r4);
    else
      CHECK(f.ring->sync_horizon());
    unsigned slot = 0;
    REQUIRE(f.newest_header(&slot).header_sequence == previous + 1);
    const std::uint64_t at = std::uint64_t{slot} * ring_record_alignment;
    std::vector<unsigned char> damaged(before.begin() + static_cast<long>(at),
                                       before.begin() + static_cast<long>(at + ring_record_alignment));
    if (damage != 1) { // torn: its first sector new, the rest as before
      std::vector<unsigned char> now = f.file();
      std::copy(now.begin() + static_cast<long>(at), now.begin() + static_cast<long>(at + 512),
                damaged.begin());
      damaged[20] ^= 1;
    }
    f.overwrite(at, damaged.data(), damaged.size());
    if (damage == 2) {
      std::vector<unsigned char> other(ring_record_alignment, 0);
      other[0] = 'T';
      f.overwrite((1 - slot) * ring_record_alignment, other.data(), other.size());
    }
    repair_report report = f.crash_and_repair();
    CHECK(report.bounded == (damage != 2));
    CHECK(report.records_read == 2); // r2 (FREE, but kept intact for this) and r3
    CHECK(f.restored(6));            // nothing live missed
  }
}

TEST_CASE("doublewrite ring: sequences never repeat across runs, so a stale record right behind the chain is never taken for its next") {
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

TEST_CASE("doublewrite repair: a ring file from before the header slots is read whole, and the ring starts over empty on it") {
  repair_fixture f;
  page_id p{1, 0}, q{1, 1};
  f.write_records({f.encoded({f.page(p, 100, 'p')}), f.encoded({f.page(q, 100, 'q')})}); // from offset 0
  repair_report report = repair_from_ring(*f.io, f.ring_path, f.files);
  CHECK_FALSE(report.bounded);
  CHECK(report.records_read == 2);
  CHECK(report.pages_repaired == 2);
  // The header slots (the file's first two blocks, the old records), then both records
  // once to find each page's newest image and once more by each repair thread.
  CHECK(report.ring_bytes_read == (2 + 2 + 2 * repair_threads()) * ring_record_alignment);
  CHECK(f.disk(p) == f.page(p, 100, 'p'));
  CHECK(f.disk(q) == f.page(q, 100, 'q'));
  // Opened after that repair: nothing old is left to be mistaken for a new record.
  doublewrite_ring ring(*f.io, f.dir.path(), page_size, 16, 8, 2);
  int fd = f.io->open_file(f.ring_path, false);
  CHECK(f.io->file_size(fd) == ring_record_alignment); // the first header alone
  f.io->close_file(fd);
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

TEST_CASE("doublewrite ring: however small the batches, chunks do not run out before ring space does") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  // 64-page batches, but each batch one page: every record takes one alignment unit.
  doublewrite_ring ring(*io, dir.path(), page_size, 128, 64, 1);
  CHECK(ring.chunk_count() >= ring.capacity_bytes() / ring_record_alignment);
  std::vector<std::uint32_t> waiting; // DATA_WRITTEN, awaiting their data-file fsync
  while (ring.used_bytes() < ring.capacity_bytes() / 2) {
    std::uint32_t c;
    REQUIRE_MESSAGE(ring.try_acquire(&c), "no chunk left with " << ring.used_bytes() << " of "
                                                                 << ring.capacity_bytes() << " ring bytes used");
    std::memset(ring.slot_memory(c, 0), 0, page_size);
    ring.entries(c).push_back({{1, static_cast<block_id>(waiting.size())}, 1, 0});
    REQUIRE(ring.write(c));
    ring.sync(c);
    ring.advance(c, dw_state::data_written);
    CHECK(test::aborts_on_invariant([&] { ring.entries(c); }, "staged pages live")); // only until here
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
