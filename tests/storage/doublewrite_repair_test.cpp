// Eager doublewrite repair (storage/doublewrite_repair.hpp). The repair decision table is
// walked over every combination of its inputs, each mapped to exactly one action; repair
// restores pages a checksum never flags (older LSN, same LSN with other bytes) and ignores
// torn records and images. With an intact header repair reads only the chain from its
// horizon (across the end of the ring too), whichever header a torn or lost header write
// leaves; a ring from before the header slots is read whole.
#include "storage/doublewrite_repair.hpp"

#include "storage/doublewrite_record.hpp"
#include "storage/doublewrite_ring.hpp"

#include "delegating_engine.hpp"
#include "doublewrite_support.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace tidemark::storage {
namespace {

using test::driven_ring;
using test::page_size;

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
          expected = same ? repair_action::keep     // the write made it
                          : repair_action::restore; // torn in a way the checksum missed
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
    CHECK_MESSAGE(decide_repair(in) == r.expected, "verdict " << to_string(r.disk) << " order "
                                                              << r.lsn_order << " same "
                                                              << r.same_bytes);
  }
}

struct repair_fixture : test::page_images {
  test::temp_dir dir;
  std::unique_ptr<io_engine> io = make_io_engine(io_method::sync);
  relation_files files{*io, dir.path() + "", page_size, 16 * page_size};
  std::string ring_path = dir.file("ring");

  void write_records(const std::vector<std::vector<unsigned char>>& records) {
    int fd = io->open_file(ring_path, true);
    std::uint64_t at = 0;
    for (const auto& record : records) {
      io->write(fd, record.data(), record.size(), at);
      at += record.size();
    }
    io->close_file(fd);
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
  f.files.write_page(lost, f.page(lost, 100, 'a').data());           // valid, older
  f.files.write_page(equal_lsn, f.page(equal_lsn, 200, 'b').data()); // valid, same LSN
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

TEST_CASE("doublewrite repair: with an intact header only the chain is read, and stale records "
          "before the horizon are neither used nor read") {
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
    CHECK_MESSAGE((outside || first_look),
                  "read [" << at << ", " << at + length << ") of a stale record");
  }
  CHECK(ring_bytes == report.ring_bytes_read);
  CHECK(report.seconds >= 0);
}

TEST_CASE("doublewrite repair: a live part that wraps around the end of the ring is followed to "
          "its newest record") {
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

TEST_CASE("doublewrite repair: a torn or lost newest header leaves the previous one, whose chain "
          "is intact") {
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
                                       before.begin() +
                                         static_cast<long>(at + ring_record_alignment));
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

TEST_CASE("doublewrite repair: a ring file from before the header slots is read whole, and the "
          "ring starts over empty on it") {
  repair_fixture f;
  page_id p{1, 0}, q{1, 1};
  f.write_records(
    {f.encoded({f.page(p, 100, 'p')}), f.encoded({f.page(q, 100, 'q')})}); // from offset 0
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

} // namespace
} // namespace tidemark::storage
