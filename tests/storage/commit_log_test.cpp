// The commit-status log (storage/commit_log.hpp): two bits per transaction, four to a byte,
// each set and read back on its own across pages and segment files, also when a page was
// replaced in the buffer and read back from its file; what write_dirty() wrote is there
// after a reopen and for read_recorded_status(). A page is written only after WAL is
// durable up to its newest commit record (W1), every page write registers its segment
// with the sync registry and none fsyncs inline (W2), sync_segment() fsyncs that one
// segment and a failed fsync reaches its caller (W3). A page write torn by a power loss
// keeps every status the page had at its last fsync. Statuses nobody set read unknown, and
// read_recorded_status() reads unknown, creating and writing nothing, where no file holds
// the status (no directory, no segment, past a file's end, past any segment name).
#include "storage/commit_log.hpp"

#include "storage/fault_engine.hpp"
#include "storage/wal_log.hpp"
#include "storage/wal_record.hpp"

#include "delegating_engine.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tidemark::storage {
namespace {

using test::page_size;
constexpr xid_t xids_per_page = 4 * page_size; // two bits each
constexpr xid_t xids_per_segment = commit_log::segment_pages * xids_per_page;

// Notes every write and sync of the commit-status log's files (paths under /xact/), and
// calls on_xact_write at each such write, before it is passed on.
class xact_watching_engine final : public test::delegating_engine {
public:
  xact_watching_engine() : delegating_engine(make_io_engine(io_method::sync)) {}
  void write(int fd, const void* data, std::size_t length, std::uint64_t offset) override {
    if (is_xact(fd)) {
      if (on_xact_write)
        on_xact_write(path_of(fd));
      ++xact_writes;
    }
    delegating_engine::write(fd, data, length, offset);
  }
  void sync(int fd, sync_kind kind) override {
    if (is_xact(fd))
      xact_syncs.emplace_back(path_of(fd), kind);
    delegating_engine::sync(fd, kind);
  }
  std::function<void(const std::string&)> on_xact_write;
  std::size_t xact_writes = 0;
  std::vector<std::pair<std::string, sync_kind>> xact_syncs;

private:
  bool is_xact(int fd) const { return path_of(fd).find("/xact/") != std::string::npos; }
};

// The sync worker's inbox, as the commit-status log sees it: what it registered, in order.
struct recording_registry final : sync_registry {
  void register_files(const file_write* files, std::size_t count, write_source source) override {
    for (std::size_t i = 0; i < count; ++i)
      registered.emplace_back(files[i], source);
  }
  std::vector<std::pair<file_write, write_source>> registered;
};

struct log_fixture {
  test::temp_dir dir;
  xact_watching_engine io;
  wal_log wal{io, wal_options{dir.path(), 1 << 20, 1 << 20}, 0, 0};
  recording_registry registry;
  std::string xact = dir.file("xact");

  std::unique_ptr<commit_log> open(std::size_t buffered_pages = 8) {
    return std::make_unique<commit_log>(io, xact, page_size, wal, registry, buffered_pages);
  }
  /// Inserts one (empty) transaction record and returns its end LSN: not yet durable.
  lsn_t insert_record(xid_t xid) {
    record_builder record;
    record.reset(record_type::transaction, xid);
    record.finish();
    return wal.insert(record, wal.redo_lsn())->end;
  }
  std::set<std::string> files() const {
    std::set<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(xact))
      names.insert(entry.path().filename().string());
    return names;
  }
};

// Statuses spread over pages and segment files: both sides of a page boundary and of a
// segment boundary, and a segment far from the first. Alternating committed and aborted;
// no two xids two apart (xid + 2 is a neighbour nobody set).
std::vector<std::pair<xid_t, xact_status>> spread_statuses() {
  std::vector<std::pair<xid_t, xact_status>> out;
  const xid_t xids[] = {1,
                        xids_per_page - 1,
                        xids_per_page,
                        5 * xids_per_page + 17,
                        xids_per_segment - 1,
                        xids_per_segment,
                        0x1A * xids_per_segment + 2 * xids_per_page + 3};
  bool committed = true;
  for (xid_t xid : xids) {
    out.emplace_back(xid, committed ? xact_status::committed : xact_status::aborted);
    committed = !committed;
  }
  return out;
}

TEST_CASE("commit log: four statuses share a byte, and each is set and read on its own") {
  log_fixture f;
  auto log = f.open();
  for (xid_t xid = 0; xid < 8; ++xid)
    CHECK(log->get(xid) == xact_status::unknown);
  log->set(0, xact_status::committed, 0);
  log->set(1, xact_status::aborted, 0);
  log->set(3, xact_status::committed, 0);
  CHECK(log->get(0) == xact_status::committed);
  CHECK(log->get(1) == xact_status::aborted);
  CHECK(log->get(2) == xact_status::unknown);
  CHECK(log->get(3) == xact_status::committed);
  CHECK(log->get(4) == xact_status::unknown); // the next byte
  log->set(2, xact_status::aborted, 0);
  log->set(4, xact_status::committed, 0);
  CHECK(log->get(0) == xact_status::committed);
  CHECK(log->get(1) == xact_status::aborted);
  CHECK(log->get(2) == xact_status::aborted);
  CHECK(log->get(3) == xact_status::committed);
  CHECK(log->get(4) == xact_status::committed);
  CHECK(log->get(5) == xact_status::unknown);
}

TEST_CASE("commit log: statuses across pages and segments survive their pages' replacement") {
  log_fixture f;
  auto log = f.open(2); // two buffered pages for five pages of statuses: replaced all along
  const auto statuses = spread_statuses();
  for (const auto& [xid, status] : statuses)
    log->set(xid, status, 0);
  CHECK(log->page_writes() >= 3); // dirty pages went to their files when replaced
  for (const auto& [xid, status] : statuses) {
    CAPTURE(xid);
    CHECK(log->get(xid) == status);
    CHECK(log->get(xid + 2) == xact_status::unknown); // a neighbour nobody set
  }
  CHECK(log->get(xids_per_page - 2) == xact_status::unknown);
  CHECK(log->get(2 * xids_per_segment) == xact_status::unknown); // a segment never written
  // Replacement writes are a session's (backend) writes; each page went to its segment.
  std::set<std::uint32_t> segments;
  for (const auto& [write, source] : f.registry.registered) {
    CHECK(source == write_source::backend);
    segments.insert(write.tag.segment.segno);
  }
  CHECK(segments.count(0) == 1);
  CHECK(segments.count(1) == 1);
}

TEST_CASE("commit log: what write_dirty() wrote is there after a reopen, and "
          "read_recorded_status() reads it") {
  log_fixture f;
  const auto statuses = spread_statuses();
  {
    auto log = f.open();
    for (const auto& [xid, status] : statuses)
      log->set(xid, status, 0);
    log->write_dirty(write_source::checkpointer);
    // <data>/xact/<segno>, the segment number in four hex digits.
    CHECK(std::filesystem::path(log->segment_path(0x1A)).filename() == "001A");
    CHECK(std::filesystem::path(log->segment_path(0x1A)).parent_path() == f.xact);
  }
  CHECK(f.files() == std::set<std::string>{"0000", "0001", "001A"});
  auto reopened = f.open();
  auto read_only = make_read_only_engine();
  for (const auto& [xid, status] : statuses) {
    CAPTURE(xid);
    CHECK(reopened->get(xid) == status);
    CHECK(read_recorded_status(*read_only, f.xact, page_size, xid) == status);
    CHECK(read_recorded_status(*read_only, f.xact, page_size, xid + 2) == xact_status::unknown);
  }
}

TEST_CASE("commit log: a page is written only after WAL is durable up to its newest commit record "
          "(W1)") {
  log_fixture f;
  std::vector<lsn_t> flushed_at_write;
  f.io.on_xact_write = [&](const std::string&) { flushed_at_write.push_back(f.wal.flushed_lsn()); };
  auto log = f.open(1);
  SUBCASE("the checkpoint's write_dirty()") {
    const lsn_t older = f.insert_record(7);
    f.wal.flush(older); // 7's record is durable, 8's not
    const lsn_t newer = f.insert_record(8);
    log->set(8, xact_status::committed, newer); // the newest first: the page's highest counts,
    log->set(7, xact_status::committed, older); // not the last one set
    CHECK(f.wal.flushed_lsn() < newer);         // setting a status flushes nothing
    log->write_dirty(write_source::checkpointer);
    REQUIRE(flushed_at_write.size() == 1);
    CHECK(flushed_at_write[0] >= newer);
  }
  SUBCASE("a page replaced to make room") {
    const lsn_t lsn = f.insert_record(9);
    log->set(9, xact_status::aborted, lsn);
    CHECK(f.wal.flushed_lsn() < lsn);
    CHECK(log->get(xids_per_page + 9) == xact_status::unknown); // another page: 9's goes out
    REQUIRE(flushed_at_write.size() == 1);
    CHECK(flushed_at_write[0] >= lsn);
  }
}

TEST_CASE("commit log: page writes register their segment for the sync worker and never fsync "
          "(W2)") {
  log_fixture f;
  auto log = f.open();
  log->set(3, xact_status::committed, 0);                                      // segment 0, page 0
  log->set(2 * xids_per_segment + 4 * xids_per_page, xact_status::aborted, 0); // segment 2, page 4
  CHECK(f.registry.registered.empty()); // nothing written yet
  log->write_dirty(write_source::checkpointer);
  CHECK(log->page_writes() == 2);
  CHECK(f.io.xact_writes == 2);
  CHECK(f.io.xact_syncs.empty()); // W2: the sync worker fsyncs, later
  REQUIRE(f.registry.registered.size() == 2);
  std::vector<std::pair<std::uint32_t, std::uint64_t>> written; // segment, offset
  for (const auto& [write, source] : f.registry.registered) {
    CHECK(source == write_source::checkpointer);
    CHECK(write.tag.kind == file_kind::commit_log);
    CHECK(write.tag.segment.rel == 0);
    CHECK(write.bytes == page_size);
    CHECK(write.end == write.begin + page_size);
    written.emplace_back(write.tag.segment.segno, write.begin);
  }
  std::sort(written.begin(), written.end());
  CHECK(written ==
        std::vector<std::pair<std::uint32_t, std::uint64_t>>{{0, 0}, {2, 4 * page_size}});
  log->write_dirty(write_source::checkpointer); // nothing dirty: nothing written or registered
  CHECK(log->page_writes() == 2);
  CHECK(f.registry.registered.size() == 2);

  log->sync_segment(2); // what the sync worker calls for a registered segment
  REQUIRE(f.io.xact_syncs.size() == 1);
  CHECK(f.io.xact_syncs[0].first == log->segment_path(2));
  CHECK(f.io.xact_syncs[0].second == sync_kind::data);
}

TEST_CASE("commit log: a failed fsync of a segment reaches sync_segment()'s caller (W3)") {
  test::temp_dir dir;
  fault_config config;
  config.fail_sync_after = 1;
  config.fail_sync_match = "/xact/";
  fault_engine io(make_io_engine(io_method::sync), config);
  wal_log wal{io, wal_options{dir.path(), 1 << 20, 1 << 20}, 0, 0};
  recording_registry registry;
  commit_log log(io, dir.file("xact"), page_size, wal, registry);
  log.set(1, xact_status::committed, 0);
  log.write_dirty(write_source::checkpointer);
  bool fsync_failed = false;
  try {
    log.sync_segment(0);
  } catch (const io_error& e) {
    fsync_failed = e.fsync_failed();
  }
  CHECK(fsync_failed);
}

TEST_CASE("commit log: a power loss that tears a page write keeps every status the page had at its "
          "last fsync") {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    CAPTURE(seed);
    test::temp_dir dir;
    auto wal_io = make_io_engine(io_method::sync); // the WAL off the faulty disk
    wal_log wal{*wal_io, wal_options{dir.path(), 1 << 20, 1 << 20}, 0, 0};
    recording_registry registry;
    fault_config config;
    config.mode = crash_mode::torn;
    config.seed = seed;
    config.tear_every_write = true;
    fault_engine io(make_io_engine(io_method::sync), config);
    // One status in each 512-byte sector of page 0 (2048 statuses to a sector) before the
    // fsync, another in each after it.
    std::vector<xid_t> durable, later;
    for (xid_t sector = 0; sector < page_size / 512; ++sector) {
      durable.push_back(sector * 2048 + 5 * sector);
      later.push_back(sector * 2048 + 1000 + 3 * sector);
    }
    {
      commit_log log(io, dir.file("xact"), page_size, wal, registry);
      for (xid_t xid : durable)
        log.set(xid, xid % 2 ? xact_status::aborted : xact_status::committed, 0);
      log.write_dirty(write_source::checkpointer);
      log.sync_segment(0);
      for (xid_t xid : later)
        log.set(xid, xact_status::committed, 0);
      log.write_dirty(write_source::checkpointer);
    } // closes its files, writing nothing more
    const power_loss_report loss = io.simulate_power_loss();
    CHECK(loss.unsynced_writes == 1);
    CHECK(loss.torn == 1);
    auto plain = make_io_engine(io_method::sync);
    commit_log reopened(*plain, dir.file("xact"), page_size, wal, registry);
    for (xid_t xid : durable) {
      CAPTURE(xid);
      CHECK(reopened.get(xid) == (xid % 2 ? xact_status::aborted : xact_status::committed));
    }
    std::size_t kept = 0;
    for (xid_t xid : later) { // the new image's or the old one's: set, or never set
      CAPTURE(xid);
      xact_status status = reopened.get(xid);
      CHECK((status == xact_status::committed || status == xact_status::unknown));
      kept += status == xact_status::committed;
    }
    // Torn inside the page: some sectors hold the new image, the others the old one.
    CHECK(kept > 0);
    CHECK(kept < later.size());
  }
}

TEST_CASE("commit log: where no file holds a status, read_recorded_status() reads unknown and "
          "creates nothing") {
  log_fixture f;
  auto read_only = make_read_only_engine(); // opens O_RDONLY and creates nothing
  // No directory at all (the log's constructor makes it: not opened yet).
  CHECK_FALSE(std::filesystem::exists(f.xact));
  CHECK(read_recorded_status(*read_only, f.xact, page_size, 5) == xact_status::unknown);
  CHECK_FALSE(std::filesystem::exists(f.xact));
  {
    auto log = f.open();
    log->set(5, xact_status::committed, 0);
    log->write_dirty(write_source::checkpointer); // segment 0 holds its page 0 only
  }
  const std::set<std::string> before = f.files();
  REQUIRE(before == std::set<std::string>{"0000"});
  CHECK(std::filesystem::file_size(f.xact + "/0000") == page_size);
  CHECK(read_recorded_status(*read_only, f.xact, page_size, 5) == xact_status::committed);
  CHECK(read_recorded_status(*read_only, f.xact, page_size, 6) == xact_status::unknown);
  // Past the end of segment 0's file; a segment with no file; past any segment name.
  CHECK(read_recorded_status(*read_only, f.xact, page_size, 3 * xids_per_page + 5) ==
        xact_status::unknown);
  CHECK(read_recorded_status(*read_only, f.xact, page_size, xids_per_segment + 5) ==
        xact_status::unknown);
  CHECK(read_recorded_status(*read_only, f.xact, page_size, std::numeric_limits<xid_t>::max()) ==
        xact_status::unknown);
  CHECK(f.files() == before);
  CHECK(std::filesystem::file_size(f.xact + "/0000") == page_size);
}

} // namespace
} // namespace tidemark::storage
