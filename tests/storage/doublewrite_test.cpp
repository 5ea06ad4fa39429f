// Doublewrite ring and eager repair. The repair decision table is walked over every
// combination of its inputs, each mapped to exactly one action; repair restores pages a
// checksum never flags (older LSN, same LSN with other bytes) and ignores torn slots; the
// ring refuses illegal chunk transitions and makes writers wait instead of overwriting.
#include "storage/doublewrite_repair.hpp"
#include "storage/doublewrite_ring.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
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
  void write_ring(const std::vector<std::vector<unsigned char>>& slots) {
    int fd = io->open_file(ring_path, true);
    for (std::size_t i = 0; i < slots.size(); ++i)
      io->write(fd, slots[i].data(), page_size, i * page_size);
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
  f.files.write_page(lost, f.page(lost, 100, 'a').data());                 // valid, older
  f.files.write_page(equal_lsn, f.page(equal_lsn, 200, 'b').data());       // valid, same LSN
  f.files.write_page(newer_on_disk, f.page(newer_on_disk, 900, 'c').data());
  auto torn_page = f.page(torn, 300, 'd');
  std::memset(torn_page.data() + 4096, 'x', 4096); // second half from another version
  f.files.write_page(torn, torn_page.data());
  auto slot_torn = f.page(torn, 300, 'd');
  auto broken_slot = f.page({1, 4}, 999, 'e');
  broken_slot[5000] ^= 1; // a slot write torn by the crash: never used
  f.write_ring({f.page(lost, 150, 'A'), f.page(lost, 120, 'Z'), f.page(equal_lsn, 200, 'B'),
                f.page(newer_on_disk, 800, 'C'), slot_torn, broken_slot});
  repair_report report = repair_from_ring(*f.io, f.ring_path, f.files);
  CHECK(report.slots_valid == 5);
  CHECK(report.pages_repaired == 3);
  CHECK(report.repaired_lsn == 1);
  CHECK(report.repaired_bytes == 1);
  CHECK(report.repaired_checksum == 1);
  CHECK(f.disk(lost) == f.page(lost, 150, 'A')); // the newest slot wins (D5)
  CHECK(f.disk(equal_lsn) == f.page(equal_lsn, 200, 'B'));
  CHECK(f.disk(newer_on_disk) == f.page(newer_on_disk, 900, 'c'));
  CHECK(f.disk(torn) == slot_torn);
  CHECK(page_is_all_zero(f.disk({1, 4}).data(), page_size)); // the torn slot restored nothing
}

TEST_CASE("doublewrite ring: chunks follow the state machine; illegal transitions are refused") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  doublewrite_ring ring(*io, dir.path(), page_size, 16, 8);
  CHECK(ring.chunk_count() == 2);
  std::uint32_t c = ring.acquire({});
  CHECK(ring.state(c) == dw_state::allocated);
  CHECK_THROWS_AS(ring.sync(c), std::logic_error);      // not WRITTEN yet
  CHECK_THROWS_AS(ring.release(c), std::logic_error);   // not DATA_FSYNCED
  ring.entries(c).push_back({{1, 0}, 1, 0});
  ring.write(c);
  ring.sync(c);
  CHECK_THROWS_AS(ring.advance(c, dw_state::data_fsynced), std::logic_error);
  ring.advance(c, dw_state::data_written);
  ring.advance(c, dw_state::data_fsynced);
  ring.release(c);
  CHECK(ring.state(c) == dw_state::free);
  CHECK(ring.counters().fsyncs.load() == 1);
}

TEST_CASE("doublewrite ring: with no free chunk a writer waits until one is released (D4)") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  doublewrite_ring ring(*io, dir.path(), page_size, 16, 8);
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
  ring.entries(b).clear();
  ring.give_back(b);
  writer.join();
  CHECK(got.load() == static_cast<int>(b));
  CHECK(ring.counters().slot_waits.load() == 1);
  (void)a;
}

TEST_CASE("doublewrite ring: a failed engine wakes waiting writers with an error") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  doublewrite_ring ring(*io, dir.path(), page_size, 16, 8);
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
