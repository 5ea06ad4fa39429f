// Tests of storage/fault_engine: the volatile-write-cache model. Synced writes survive a
// power loss; unsynced ones survive, vanish or (torn) split at a 512-byte multiple; a later
// surviving write is never clobbered by reverting an earlier one; crash_after_writes and
// fail_sync_after fire exactly when configured.
#include "storage/fault_engine.hpp"
#include "tests/storage/test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace tidemark::storage;

namespace {

constexpr std::size_t page = 8192;
constexpr std::size_t pages = 16;

using byte_vector = std::vector<unsigned char>;

std::unique_ptr<fault_engine> make_fault_engine(fault_config config) {
  return std::make_unique<fault_engine>(make_io_engine(io_method::sync), config);
}

fault_config config_for(crash_mode mode, std::uint64_t seed) {
  fault_config config;
  config.mode = mode;
  config.seed = seed;
  return config;
}

// The file's bytes as the disk has them now, read by a fresh engine.
byte_vector disk_contents(const std::string& path) {
  auto io = make_io_engine(io_method::sync);
  const int fd = io->open_file(path, false);
  byte_vector bytes(io->file_size(fd));
  io->read(fd, bytes.data(), bytes.size(), 0);
  io->close_file(fd);
  return bytes;
}

bool same_range(const byte_vector& a, const byte_vector& b, std::size_t begin, std::size_t end) {
  return std::memcmp(a.data() + begin, b.data() + begin, end - begin) == 0;
}

enum class page_state { old_version, new_version, mixed };

page_state classify(const byte_vector& disk, const byte_vector& old_bytes,
                    const byte_vector& new_bytes, std::size_t index) {
  const std::size_t begin = index * page;
  if (same_range(disk, old_bytes, begin, begin + page))
    return page_state::old_version;
  if (same_range(disk, new_bytes, begin, begin + page))
    return page_state::new_version;
  return page_state::mixed;
}

// A 512-byte multiple inside page `index` where `disk` switches from one version to the
// other (head of one, tail of the other); nullopt if the page is no such mix.
std::optional<std::size_t> sector_split(const byte_vector& disk, const byte_vector& old_bytes,
                                        const byte_vector& new_bytes, std::size_t index) {
  const std::size_t begin = index * page;
  const std::size_t end = begin + page;
  for (std::size_t b = begin + 512; b < end; b += 512) {
    const bool old_at_b = same_range(disk, old_bytes, b, end);
    const bool new_at_b = same_range(disk, new_bytes, b, end);
    if ((new_at_b && same_range(disk, old_bytes, begin, b)) ||
        (old_at_b && same_range(disk, new_bytes, begin, b)))
      return b - begin;
  }
  return std::nullopt;
}

// A file of `pages` pages holding `old_bytes`, synced, then overwritten page by page with
// `new_bytes` without a sync; then the power fails.
struct overwrite_run {
  byte_vector disk;
  power_loss_report report;
};

overwrite_run overwrite_and_lose_power(const test::temp_dir& dir, fault_config config,
                                       const byte_vector& old_bytes, const byte_vector& new_bytes) {
  auto io = make_fault_engine(config);
  const std::string path = dir.file("pages");
  const int fd = io->open_file(path, true);
  io->write(fd, old_bytes.data(), old_bytes.size(), 0);
  io->sync(fd, sync_kind::data);
  for (std::size_t i = 0; i < pages; ++i)
    io->write(fd, new_bytes.data() + i * page, page, i * page);
  io->close_file(fd);
  overwrite_run run;
  run.report = io->simulate_power_loss();
  run.disk = disk_contents(path);
  return run;
}

} // namespace

TEST_CASE("fault_engine: names itself after the inner engine") {
  CHECK(make_fault_engine({})->name() == "fault(sync)");
}

TEST_CASE("fault_engine: writes covered by a sync survive a power loss") {
  test::temp_dir dir;
  auto io = make_fault_engine(config_for(crash_mode::torn, 1));
  const int fd = io->open_file(dir.file("synced"), true);
  const auto first = test::random_bytes(4 * page, 1);
  const auto second = test::random_bytes(4 * page, 2);
  io->write(fd, first.data(), first.size(), 0);
  io->sync(fd, sync_kind::data);
  io->write(fd, second.data(), second.size(), 0);
  io->sync(fd, sync_kind::full);
  io->close_file(fd);
  const power_loss_report report = io->simulate_power_loss();
  CHECK(report.unsynced_writes == 0);
  CHECK(disk_contents(dir.file("synced")) == second);
}

TEST_CASE("fault_engine: write_back makes nothing durable") {
  test::temp_dir dir;
  auto io = make_fault_engine(config_for(crash_mode::lose_unsynced, 1));
  const int fd = io->open_file(dir.file("paced"), true);
  const auto bytes = test::random_bytes(4 * page, 3);
  io->write(fd, bytes.data(), bytes.size(), 0);
  io->write_back(fd, 0, bytes.size(), true);
  io->close_file(fd);
  const power_loss_report report = io->simulate_power_loss();
  CHECK(report.unsynced_writes == 1); // still at the mercy of the power loss
}

TEST_CASE("fault_engine: with lose_unsynced every unsynced page ends fully old or fully new") {
  test::temp_dir dir;
  const auto old_bytes = test::random_bytes(pages * page, 10);
  const auto new_bytes = test::random_bytes(pages * page, 11);
  std::size_t old_pages = 0;
  std::size_t new_pages = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    const fault_config config = config_for(crash_mode::lose_unsynced, seed);
    const auto run = overwrite_and_lose_power(dir, config, old_bytes, new_bytes);
    CHECK(run.report.unsynced_writes == pages);
    CHECK(run.report.survived + run.report.lost == pages);
    CHECK(run.report.torn == 0);
    CHECK(run.disk.size() == pages * page);
    for (std::size_t i = 0; i < pages; ++i) {
      const page_state state = classify(run.disk, old_bytes, new_bytes, i);
      CHECK(state != page_state::mixed);
      old_pages += state == page_state::old_version;
      new_pages += state == page_state::new_version;
    }
  }
  CHECK(old_pages > 0);
  CHECK(new_pages > 0);
}

TEST_CASE("fault_engine: with torn every page is old, new, or split at a 512-byte multiple") {
  test::temp_dir dir;
  const auto old_bytes = test::random_bytes(pages * page, 20);
  const auto new_bytes = test::random_bytes(pages * page, 21);
  std::size_t mixed_pages = 0;
  std::uint64_t torn_reported = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    const fault_config config = config_for(crash_mode::torn, seed);
    const auto run = overwrite_and_lose_power(dir, config, old_bytes, new_bytes);
    CHECK(run.report.survived + run.report.lost + run.report.torn == pages);
    torn_reported += run.report.torn;
    for (std::size_t i = 0; i < pages; ++i) {
      CAPTURE(i);
      if (classify(run.disk, old_bytes, new_bytes, i) != page_state::mixed)
        continue;
      ++mixed_pages;
      CHECK(sector_split(run.disk, old_bytes, new_bytes, i).has_value());
    }
  }
  CHECK(mixed_pages > 0);
  CHECK(mixed_pages == torn_reported);
}

TEST_CASE("fault_engine: reverting an earlier lost write never clobbers a later surviving one") {
  // Three overlapping unsynced writes; after the power loss the file must equal the result
  // of applying, in order, exactly some subset of them (the survivors).
  struct range_write {
    std::size_t offset;
    byte_vector bytes;
  };
  const std::vector<range_write> writes = {
    {0, test::random_bytes(3 * page, 31)},
    {page, test::random_bytes(page, 32)},
    {page / 2, test::random_bytes(2 * page, 33)},
  };
  const auto base = test::random_bytes(3 * page, 30);
  auto outcome = [&](unsigned survivors) {
    auto bytes = base;
    for (std::size_t w = 0; w < writes.size(); ++w)
      if (survivors & (1u << w))
        std::copy(writes[w].bytes.begin(), writes[w].bytes.end(), bytes.begin() + writes[w].offset);
    return bytes;
  };
  test::temp_dir dir;
  std::vector<int> seen(1u << writes.size(), 0);
  for (std::uint64_t seed = 1; seed <= 64; ++seed) {
    CAPTURE(seed);
    auto io = make_fault_engine(config_for(crash_mode::lose_unsynced, seed));
    const int fd = io->open_file(dir.file("overlap"), true);
    io->write(fd, base.data(), base.size(), 0);
    io->sync(fd, sync_kind::data);
    for (const auto& w : writes)
      io->write(fd, w.bytes.data(), w.bytes.size(), w.offset);
    io->close_file(fd);
    io->simulate_power_loss();
    const auto disk = disk_contents(dir.file("overlap"));
    bool matched = false;
    for (unsigned survivors = 0; survivors < seen.size(); ++survivors)
      if (disk == outcome(survivors)) {
        ++seen[survivors];
        matched = true;
        break;
      }
    CHECK(matched);
  }
  CHECK(seen[0b100] > 0); // only the last write survived: both earlier ones were reverted
  CHECK(seen[0b010] > 0); // a middle survivor inside an earlier lost write
}

TEST_CASE("fault_engine: crash_after_writes runs the crash handler at exactly the N-th write") {
  test::temp_dir dir;
  fault_config config = config_for(crash_mode::lose_unsynced, 5);
  config.crash_after_writes = 7;
  auto io = make_fault_engine(config);
  std::vector<power_loss_report> crashes;
  io->on_crash([&](const power_loss_report& report) { crashes.push_back(report); });
  const int fd = io->open_file(dir.file("crash"), true);
  const auto bytes = test::random_bytes(page, 40);
  for (std::uint64_t i = 1; i <= 6; ++i) {
    io->write(fd, bytes.data(), bytes.size(), i * page);
    if (i == 3)
      io->sync(fd, sync_kind::data);
    CHECK(crashes.empty());
  }
  io->write(fd, bytes.data(), bytes.size(), 0);
  REQUIRE(crashes.size() == 1);
  CHECK(io->writes_issued() == 7);
  CHECK(crashes[0].unsynced_writes == 4); // writes 4..7; the sync covered 1..3
  CHECK(crashes[0].survived + crashes[0].lost == 4);
  CHECK_THROWS_AS(io->write(fd, bytes.data(), bytes.size(), 0), io_error);
  CHECK_THROWS_AS(io->sync(fd, sync_kind::data), io_error);
  CHECK(io->writes_issued() == 7);
  CHECK(crashes.size() == 1);
  io->close_file(fd);
}

TEST_CASE("fault_engine: crash_after_writes counts each write of a batch") {
  test::temp_dir dir;
  fault_config config;
  config.crash_after_writes = 3;
  auto io = make_fault_engine(config);
  int crashes = 0;
  io->on_crash([&](const power_loss_report&) { ++crashes; });
  const int fd = io->open_file(dir.file("batch"), true);
  const auto bytes = test::random_bytes(page, 41);
  std::vector<io_write> writes;
  for (std::uint64_t i = 0; i < 5; ++i)
    writes.push_back(io_write{fd, bytes.data(), page, i * page});
  CHECK_THROWS_AS(io->write_batch(writes.data(), writes.size()), io_error); // 4th write: crashed
  CHECK(crashes == 1);
  CHECK(io->writes_issued() == 3);
  io->close_file(fd);
}

TEST_CASE("fault_engine: fail_sync_after fails the N-th and every later sync and drops the file's "
          "unsynced writes") {
  test::temp_dir dir;
  fault_config config = config_for(crash_mode::lose_unsynced, 1);
  config.fail_sync_after = 2;
  auto io = make_fault_engine(config);
  const int fd = io->open_file(dir.file("failing"), true);
  const auto bytes = test::random_bytes(page, 50);
  io->write(fd, bytes.data(), bytes.size(), 0);
  io->sync(fd, sync_kind::data);
  io->write(fd, bytes.data(), bytes.size(), page);
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      io->sync(fd, sync_kind::data);
      FAIL("sync should have failed");
    } catch (const io_error& error) {
      CHECK(error.fsync_failed());
      CHECK(error.error_number() == EIO);
      CHECK(std::string(error.what()).find(dir.file("failing")) != std::string::npos);
    }
  }
  // The engine refuses reads now: one could see the dropped write's older bytes.
  std::vector<unsigned char> back(2 * page);
  try {
    io->read(fd, back.data(), back.size(), 0);
    FAIL("read after a failed sync should be refused");
  } catch (const io_error& error) {
    CHECK(error.fsync_failed());
    CHECK(std::string(error.what()).find("injected EIO (sync 2") != std::string::npos);
  }
  // fsyncgate: the write the failed sync could not make durable is gone; the synced one stays.
  auto direct = make_io_engine(io_method::sync);
  const int direct_fd = direct->open_file(dir.file("failing"), false);
  direct->read(direct_fd, back.data(), back.size(), 0);
  direct->close_file(direct_fd);
  CHECK(std::equal(bytes.begin(), bytes.end(), back.begin()));
  CHECK(std::all_of(back.begin() + page, back.end(), [](unsigned char b) { return b == 0; }));
  io->close_file(fd);
  CHECK(io->simulate_power_loss().unsynced_writes == 0);
}

TEST_CASE("fault_engine: fail_sync_match limits failures to matching files") {
  test::temp_dir dir;
  fault_config config = config_for(crash_mode::lose_unsynced, 1);
  config.fail_sync_after = 1;
  config.fail_sync_match = "/data";
  auto io = make_fault_engine(config);
  const int log = io->open_file(dir.file("log"), true);
  const int data = io->open_file(dir.file("data"), true);
  const auto bytes = test::random_bytes(page, 51);
  io->write(log, bytes.data(), bytes.size(), 0);
  io->write(data, bytes.data(), bytes.size(), 0);
  CHECK_NOTHROW(io->sync(log, sync_kind::data));
  CHECK_THROWS_AS(io->sync(data, sync_kind::data), io_error);
  io->close_file(log);
  io->close_file(data);
}

TEST_CASE("fault_engine: unsynced writes follow a renamed file") {
  test::temp_dir dir;
  const auto bytes = test::random_bytes(page, 60);
  std::size_t reverted = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    auto io = make_fault_engine(config_for(crash_mode::lose_unsynced, seed));
    const int fd = io->open_file(dir.file("tmp"), true);
    io->write(fd, bytes.data(), bytes.size(), 0);
    io->rename(dir.file("tmp"), dir.file("final"));
    CHECK(io->path_of(fd) == dir.file("final"));
    io->close_file(fd);
    const power_loss_report report = io->simulate_power_loss();
    CHECK(report.unsynced_writes == 1);
    CHECK_THROWS_AS(make_io_engine(io_method::sync)->open_file(dir.file("tmp"), false), io_error);
    const auto disk = disk_contents(dir.file("final"));
    const bool reverted_to_zero = disk == byte_vector(page, 0);
    CHECK((reverted_to_zero || disk == bytes));
    reverted += reverted_to_zero;
  }
  CHECK(reverted > 0);
}

TEST_CASE("fault_engine: an unlinked file's unsynced writes are forgotten") {
  test::temp_dir dir;
  auto io = make_fault_engine({});
  const int fd = io->open_file(dir.file("doomed"), true);
  const auto bytes = test::random_bytes(page, 70);
  io->write(fd, bytes.data(), bytes.size(), 0);
  io->unlink(dir.file("doomed"));
  io->write(fd, bytes.data(), bytes.size(), page);
  io->close_file(fd);
  CHECK(io->simulate_power_loss().unsynced_writes == 0);
  CHECK_THROWS_AS(make_io_engine(io_method::sync)->open_file(dir.file("doomed"), false), io_error);
}

TEST_CASE("fault_engine: truncate clips unsynced writes so a revert cannot regrow the file") {
  test::temp_dir dir;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    auto io = make_fault_engine(config_for(crash_mode::torn, seed));
    const int fd = io->open_file(dir.file("shrunk"), true);
    const auto bytes = test::random_bytes(2 * page, 80);
    io->write(fd, bytes.data(), page, 0);
    io->write(fd, bytes.data() + page, page, page);
    io->truncate(fd, page / 2);
    io->close_file(fd);
    CHECK(io->simulate_power_loss().unsynced_writes == 1);
    CHECK(disk_contents(dir.file("shrunk")).size() == page / 2);
  }
}

TEST_CASE("fault_engine: no I/O is accepted after a power loss") {
  test::temp_dir dir;
  auto io = make_fault_engine({});
  const int fd = io->open_file(dir.file("after"), true);
  io->simulate_power_loss();
  unsigned char byte = 1;
  CHECK_THROWS_AS(io->write(fd, &byte, 1, 0), io_error);
  CHECK_THROWS_AS(io->read(fd, &byte, 1, 0), io_error);
  CHECK_THROWS_AS(io->open_file(dir.file("other"), true), io_error);
  io->close_file(fd);
}

// Writes `old_bytes` durably, then lets a process crash after writing `new_bytes` over
// them in two page-sized writes (neither synced), with the journal at `journal`.
void kill_after_unsynced_overwrite(const test::temp_dir& dir, const std::string& journal,
                                   const byte_vector& old_bytes, const byte_vector& new_bytes,
                                   std::vector<power_loss_report>& crashes) {
  auto setup = make_fault_engine({});
  int fd = setup->open_file(dir.file("data"), true);
  setup->write(fd, old_bytes.data(), old_bytes.size(), 0);
  setup->sync(fd, sync_kind::data);
  setup->close_file(fd);
  fault_config killed = config_for(crash_mode::process, 1);
  killed.crash_after_writes = 2;
  killed.journal_path = journal;
  auto io = make_fault_engine(killed);
  io->on_crash([&](const power_loss_report& report) { crashes.push_back(report); });
  fd = io->open_file(dir.file("data"), false);
  io->write(fd, new_bytes.data(), page, 0);
  io->write(fd, new_bytes.data() + page, page, page);
  io->close_file(fd);
}

fault_config restart_with(const std::string& journal, std::uint64_t seed) {
  fault_config config = config_for(crash_mode::lose_unsynced, seed);
  config.journal_path = journal;
  return config;
}

TEST_CASE("fault_engine: a process crash keeps every write, and the journal lets a later power "
          "loss lose them") {
  test::temp_dir dir;
  const std::string journal = dir.file("journal");
  const auto old_bytes = test::random_bytes(2 * page, 50);
  const auto new_bytes = test::random_bytes(2 * page, 51);
  std::vector<power_loss_report> crashes;
  kill_after_unsynced_overwrite(dir, journal, old_bytes, new_bytes, crashes);
  REQUIRE(crashes.size() == 1);
  CHECK(crashes[0].process_crash);
  CHECK(crashes[0].unsynced_writes == 2);
  CHECK(disk_contents(dir.file("data")) == new_bytes); // nothing reverted

  auto restarted = make_fault_engine(restart_with(journal, 7));
  const power_loss_report report = restarted->simulate_power_loss();
  CHECK(report.unsynced_writes == 2); // the killed run's writes, never synced
  CHECK(report.survived + report.lost == 2);
  const byte_vector disk = disk_contents(dir.file("data"));
  std::uint64_t old_pages = 0;
  for (std::size_t index = 0; index < 2; ++index) {
    const page_state state = classify(disk, old_bytes, new_bytes, index);
    CHECK(state != page_state::mixed);
    old_pages += state == page_state::old_version;
  }
  CHECK(old_pages == report.lost);
  restarted.reset();
  auto after = make_fault_engine(restart_with(journal, 7)); // emptied by the power loss
  CHECK(after->simulate_power_loss().unsynced_writes == 0);
}

TEST_CASE("fault_engine: an fsync or a syncfs in a later run covers the journal's writes") {
  for (bool whole_file_system : {false, true}) {
    test::temp_dir dir;
    const std::string journal = dir.file("journal");
    const auto old_bytes = test::random_bytes(2 * page, 52);
    const auto new_bytes = test::random_bytes(2 * page, 53);
    std::vector<power_loss_report> crashes;
    kill_after_unsynced_overwrite(dir, journal, old_bytes, new_bytes, crashes);
    {
      auto restarted = make_fault_engine(restart_with(journal, 3));
      if (whole_file_system) {
        restarted->sync_file_system(dir.path());
      } else {
        const int fd = restarted->open_file(dir.file("data"), false);
        restarted->sync(fd, sync_kind::data);
        restarted->close_file(fd);
      }
    } // saves what is still unsynced: nothing
    auto later = make_fault_engine(restart_with(journal, 3));
    CHECK(later->simulate_power_loss().unsynced_writes == 0);
    CHECK(disk_contents(dir.file("data")) == new_bytes);
  }
}

TEST_CASE("fault_engine: a malformed journal is refused, naming it") {
  test::temp_dir dir;
  const std::string journal = dir.file("journal");
  {
    auto io = make_io_engine(io_method::sync);
    const int fd = io->open_file(journal, true);
    io->write(fd, "not a journal", 13, 0);
    io->close_file(fd);
  }
  CHECK_THROWS_WITH_AS(make_fault_engine(restart_with(journal, 1)), doctest::Contains("journal"),
                       io_error);
}

// ---- bad reads of freshly synced bytes (read_fault_plan.hpp) ------------------------------

namespace {

struct synced_file {
  std::unique_ptr<fault_engine> io;
  int fd = -1;
  byte_vector bytes; // what the file holds: two synced pages, then one unsynced
};

synced_file file_with_fresh_bytes(const test::temp_dir& dir, read_fault kind, std::uint64_t after,
                                  std::uint32_t repeats, std::string match = "") {
  fault_config config = config_for(crash_mode::lose_unsynced, 1);
  config.bad_reads = {kind, after, std::move(match), repeats};
  synced_file f{make_fault_engine(config), -1, test::random_bytes(3 * page, 70)};
  f.fd = f.io->open_file(dir.file("wal"), true);
  f.io->write(f.fd, f.bytes.data(), 2 * page, 0);
  f.io->sync(f.fd, sync_kind::data);
  f.io->write(f.fd, f.bytes.data() + 2 * page, page, 2 * page);
  return f;
}

bool reads_back(synced_file& f, std::uint64_t offset, std::size_t length) {
  byte_vector out(length);
  return f.io->read(f.fd, out.data(), length, offset) == length &&
         same_range(out, byte_vector(f.bytes.begin() + offset, f.bytes.begin() + offset + length),
                    0, length);
}

} // namespace

TEST_CASE("fault_engine: only reads of bytes written and synced count towards a bad read") {
  test::temp_dir dir;
  synced_file f = file_with_fresh_bytes(dir, read_fault::zeros, 2, 1);
  CHECK(reads_back(f, 2 * page, page)); // unsynced bytes: not counted
  CHECK(reads_back(f, 0, page));        // the first counted read
  byte_vector out(page);
  CHECK(f.io->read(f.fd, out.data(), page, page / 2) == page); // the second: it goes bad
  CHECK(std::all_of(out.begin(), out.end(), [](unsigned char b) { return b == 0; }));
  CHECK(f.io->reads_faulted() == 1);
  CHECK(reads_back(f, page / 2, page)); // repeats = 1: the next read of those bytes heals
  CHECK(disk_contents(dir.file("wal")) == f.bytes); // the file itself is untouched
  f.io->close_file(f.fd);
}

TEST_CASE("fault_engine: a bad read repeats on the bad range only, as often as configured") {
  test::temp_dir dir;
  synced_file f = file_with_fresh_bytes(dir, read_fault::zeros, 1, 3);
  byte_vector out(page);
  f.io->read(f.fd, out.data(), page / 2, 0); // bad range [0, page / 2)
  CHECK(reads_back(f, page, page));          // outside it: untouched, not counted
  f.io->read(f.fd, out.data(), page, 0);     // overlaps: only the bad range reads zeros
  CHECK(std::all_of(out.begin(), out.begin() + page / 2, [](unsigned char b) { return b == 0; }));
  CHECK(same_range(out, byte_vector(f.bytes.begin(), f.bytes.begin() + page), page / 2, page));
  f.io->read(f.fd, out.data(), page, 0);
  CHECK(f.io->reads_faulted() == 3);
  CHECK(reads_back(f, 0, page));
  f.io->close_file(f.fd);

  synced_file forever = file_with_fresh_bytes(dir, read_fault::zeros, 1, 0);
  for (int i = 0; i < 10; ++i)
    CHECK_FALSE(reads_back(forever, 0, page));
  CHECK(forever.io->reads_faulted() == 10);
  forever.io->close_file(forever.fd);
}

TEST_CASE("fault_engine: a short bad read ends where the bad range begins, an error read fails") {
  test::temp_dir dir;
  synced_file f = file_with_fresh_bytes(dir, read_fault::short_read, 1, 1);
  byte_vector out(2 * page, 0xAB);
  CHECK(f.io->read(f.fd, out.data(), 2 * page, 0) == 0); // the bad range is the whole read
  CHECK(std::all_of(out.begin(), out.end(), [](unsigned char b) { return b == 0; }));
  CHECK(reads_back(f, 0, 2 * page));
  f.io->close_file(f.fd);

  synced_file e = file_with_fresh_bytes(dir, read_fault::error, 1, 1);
  try {
    e.io->read(e.fd, out.data(), page, 0);
    FAIL("the read did not fail");
  } catch (const io_error& error) {
    CHECK(error.error_number() == EIO);
    CHECK_FALSE(error.fsync_failed());
  }
  CHECK(reads_back(e, 0, page));
  e.io->close_file(e.fd);
}

TEST_CASE("fault_engine: bad reads count only matching paths and forget renamed files") {
  test::temp_dir dir;
  synced_file f = file_with_fresh_bytes(dir, read_fault::zeros, 1, 0, "/elsewhere/");
  CHECK(reads_back(f, 0, page));
  CHECK(f.io->reads_faulted() == 0);
  f.io->close_file(f.fd);

  synced_file renamed = file_with_fresh_bytes(dir, read_fault::zeros, 1, 0);
  renamed.io->rename(dir.file("wal"), dir.file("recycled"));
  CHECK(reads_back(renamed, 0, page)); // no longer the bytes just written and synced
  CHECK(renamed.io->reads_faulted() == 0);
  renamed.io->close_file(renamed.fd);
}
