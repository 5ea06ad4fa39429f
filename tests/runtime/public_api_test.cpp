// The public API (include/tidemark/) as an application uses it: the initial loader's row
// packing, reads and atomic commits, the usage errors that stop bad input before the
// engine sees it, a session outliving its database, statistics, the observer, and the
// offline page check. Only public headers are included.
#include <tidemark/database.hpp>

#include "quiet_database.hpp"
#include "scratch_directory.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace tidemark;

namespace {

using test::open_quiet;
using test::quiet;

struct row {
  std::uint64_t id;
  std::int64_t value;
  char text[24];
};

void create_with_rows(const std::string& dir, std::uint64_t rows) {
  create_options create;
  create.settings = quiet;
  create.initial_data = [rows](initial_loader& loader) {
    std::vector<row> all(rows);
    for (std::uint64_t i = 0; i < rows; ++i) {
      all[i] = row{i, 0, {}};
      std::snprintf(all[i].text, sizeof all[i].text, "row %llu",
                    static_cast<unsigned long long>(i));
    }
    loader.append_rows(1, all.data(), sizeof(row), all.size());
    loader.write_file("app.conf", "rows = " + std::to_string(rows) + "\n");
  };
  database::create(dir, create);
}

} // namespace

TEST_CASE("public API: the initial loader packs rows in order, and a session reads them back") {
  test::scratch_directory scratch("tidemark-public-api");
  const std::uint64_t rows = 1000;
  create_with_rows(scratch.dir, rows);
  std::ifstream app(scratch.dir + "/app.conf");
  std::string line;
  std::getline(app, line);
  CHECK(line == "rows = 1000");

  auto db = open_quiet(scratch.dir);
  std::size_t per_page = rows_per_page(db->page_size(), sizeof(row));
  REQUIRE(per_page > 0);
  CHECK(db->relation_blocks(1) == (rows + per_page - 1) / per_page);
  session s = db->open_session();
  for (std::uint64_t n : {std::uint64_t(0), per_page - 1, per_page, rows - 1}) {
    page_id page{1, static_cast<block_number>(n / per_page)};
    row r;
    s.read_bytes(page, static_cast<std::uint32_t>(page_header_bytes + (n % per_page) * sizeof(row)),
                 &r, sizeof r);
    CHECK(r.id == n);
    CHECK(std::string(r.text) == "row " + std::to_string(n));
  }
  CHECK(s.row_count({1, 0}) == per_page);
  CHECK(s.row_count({1, static_cast<block_number>(rows / per_page)}) == rows % per_page);
  db->close();
}

TEST_CASE("public API: a commit changes several pages at once and survives a reopen") {
  test::scratch_directory scratch("tidemark-public-api");
  create_with_rows(scratch.dir, 10);
  transaction_id committed = 0;
  {
    auto db = open_quiet(scratch.dir);
    session s = db->open_session();
    s.begin();
    s.add_i64({5, 0}, 64, 7);
    s.add_i64({6, 0}, 64, -7);
    CHECK(s.read_i64({5, 0}, 64) == 7); // its own pending add
    s.append_row(7, "abc", 4);
    committed = s.commit();
    CHECK(committed == s.id());
    s.begin();
    s.add_i64({5, 0}, 64, 1000);
    s.rollback();
    CHECK(db->status_of(committed) == transaction_status::committed);
    statistics stats = db->stats();
    CHECK(stats.commits == 1);
    CHECK(stats.wal.records >= 1);
    CHECK(!stats.failed);
    db->close();
  }
  auto db = open_quiet(scratch.dir);
  CHECK(!db->recovery().needed);
  session s = db->open_session();
  CHECK(s.read_i64({5, 0}, 64) == 7);
  CHECK(s.read_i64({6, 0}, 64) == -7);
  CHECK(s.row_count({7, 0}) == 1);
  char text[4];
  s.read_bytes({7, 0}, page_header_bytes, text, 4);
  CHECK(std::string(text) == "abc");
  CHECK(db->status_of(committed) == transaction_status::committed);
  // Ids never assigned are unknown, however large, and reading them creates nothing (an
  // id past the log's segment names once answered with a small id's status).
  const auto xact_files = [&] {
    return std::distance(std::filesystem::directory_iterator(scratch.dir + "/xact"), {});
  };
  const auto files_before = xact_files();
  for (transaction_id id : {committed + 1000, (transaction_id(1) << 40),
                            (transaction_id(1) << 52) + committed, ~transaction_id(0)})
    CHECK(db->status_of(id) == transaction_status::unknown);
  CHECK(xact_files() == files_before);
  CHECK(db->setting("shared_buffers") == "1MB");
  CHECK_THROWS_AS(db->setting("no_such_setting"), config_error);
}

TEST_CASE("public API: bad input is a usage_error before anything happens") {
  test::scratch_directory scratch("tidemark-public-api");
  create_with_rows(scratch.dir, 10);
  auto db = open_quiet(scratch.dir);
  session s = db->open_session();
  CHECK_THROWS_AS(s.read_i64({0, 0}, 64), usage_error);
  CHECK_THROWS_AS(s.read_i64({64, 0}, 64), usage_error);
  CHECK_THROWS_AS(s.read_i64({1000000, 0}, 64), usage_error);
  CHECK_THROWS_AS(s.append_row(0x7FFFFFFF, "x", 1), usage_error);
  CHECK_THROWS_AS(s.read_i64({1, 0}, 70000), usage_error); // beyond the page
  CHECK_THROWS_AS(s.add_i64({1, 0}, 20, 1), usage_error);  // inside the header
  CHECK_THROWS_AS(s.write_bytes({1, 0}, 8190, "abcd", 4), usage_error);
  CHECK_THROWS_AS(s.append_row(2, "x", 0), usage_error);
  CHECK_THROWS_AS(s.append_row(2, "x", 100000), usage_error);
  CHECK_THROWS_AS(s.commit(), usage_error); // without begin
  s.begin();
  CHECK_THROWS_AS(s.begin(), usage_error);
  s.add_i64({2, 0}, 64, 1);
  s.commit(); // the transaction survived the mistakes around it
  CHECK(s.read_i64({2, 0}, 64) == 1);
  // Repeated bad ids leak nothing: 10 × the pool's 128 buffers of each mistake, and the
  // pool still serves reads and commits.
  for (int i = 0; i < 1280; ++i) {
    auto block = static_cast<block_number>(i);
    CHECK_THROWS_AS(s.read_i64({0, block}, 64), usage_error);
    CHECK_THROWS_AS(s.read_i64({1, 1000 + block}, 64), usage_error); // past the end
    CHECK_THROWS_AS(s.row_count({2, 1 + block}), usage_error);
    CHECK_THROWS_AS(s.read_bytes({1, 0}, 64, nullptr, 8), usage_error);
  }
  s.begin();
  for (int i = 0; i < 1280; ++i)
    CHECK_THROWS_AS(s.add_i64({1, 2 + static_cast<block_number>(i)}, 64, 1), usage_error);
  s.add_i64({2, 0}, 64, 1);
  s.commit();
  CHECK(s.read_i64({2, 0}, 64) == 2);
  CHECK(db->relation_blocks(1) == 1); // no block was created by a refused change
  db->close();
}

TEST_CASE("public API: a session outliving its database gets usage_error, never freed memory") {
  test::scratch_directory scratch("tidemark-public-api");
  create_with_rows(scratch.dir, 10);
  auto db = open_quiet(scratch.dir);
  session s = db->open_session();
  db->close();
  CHECK_THROWS_AS(s.begin(), usage_error);
  CHECK_THROWS_AS(db->open_session(), usage_error);
  CHECK_THROWS_AS(db->checkpoint(), usage_error);
  CHECK(db->stats().commits == 0); // statistics stay readable after close
  db.reset();
  CHECK_THROWS_AS(s.read_i64({1, 0}, 64), usage_error);
  session moved = std::move(s);
  CHECK_THROWS_AS(s.begin(), usage_error); // NOLINT: a moved-from session
  CHECK_THROWS_AS(moved.begin(), usage_error);
}

TEST_CASE("public API: a directory in use is refused naming who holds it, and so is check_files") {
  test::scratch_directory scratch("tidemark-public-api");
  create_with_rows(scratch.dir, 10);
  open_options read_only;
  read_only.read_only = true;
  auto db = open_quiet(scratch.dir);
  CHECK_THROWS_WITH_AS(open_quiet(scratch.dir),
                       doctest::Contains("is already open in this process"), config_error);
  CHECK_THROWS_WITH_AS(database::open(scratch.dir, read_only),
                       doctest::Contains("is open for writing in this process"), config_error);
  CHECK_THROWS_WITH_AS(database::check_files(scratch.dir),
                       doctest::Contains("is open for writing in this process"), config_error);
  db->close();
  db.reset();
  { // readers share the directory; a writer waits for both to close
    auto first = database::open(scratch.dir, read_only);
    auto second = database::open(scratch.dir, read_only);
    CHECK(database::check_files(scratch.dir).failures == 0);
    CHECK_THROWS_WITH_AS(open_quiet(scratch.dir),
                         doctest::Contains("is already open in this process"), config_error);
    first->close();
    CHECK_THROWS_WITH_AS(open_quiet(scratch.dir),
                         doctest::Contains("is already open in this process"), config_error);
  }
  db = open_quiet(scratch.dir); // every lock given up: the table forgets closed opens
  db->close();
  file_check_report report = database::check_files(scratch.dir);
  CHECK(report.pages_checked >= 1);
  CHECK(report.failures == 0);
  CHECK_THROWS_WITH_AS(database::check_files(scratch.root + "/missing"),
                       doctest::Contains("does not exist"), config_error);
  CHECK_THROWS_WITH_AS(database::create(scratch.dir, {}),
                       doctest::Contains("exists and is not empty"), config_error);
}

TEST_CASE("public API: a path through a regular file is refused naming that, not as in use or not "
          "empty") {
  test::scratch_directory scratch("tidemark-public-api");
  const std::string file = scratch.root + "/plain-file";
  std::ofstream(file) << "not a directory\n";
  CHECK_THROWS_WITH_AS(open_quiet(file), doctest::Contains("is not a directory"), config_error);
  CHECK_THROWS_WITH_AS(database::check_files(file), doctest::Contains("is not a directory"),
                       config_error);
  CHECK_THROWS_WITH_AS(open_quiet(file + "/db"), doctest::Contains("Not a directory"),
                       config_error);
  CHECK_THROWS_WITH_AS(database::create(file, {}),
                       doctest::Contains("exists and is not a directory"), config_error);
  CHECK_THROWS_WITH_AS(database::create(file + "/db", {}), doctest::Contains("Not a directory"),
                       config_error);
  CHECK(std::filesystem::is_regular_file(file)); // nothing made or removed
}

TEST_CASE("public API: a directory holding only tidemark.conf is not a data directory") {
  test::scratch_directory scratch("tidemark-public-api");
  std::filesystem::create_directory(scratch.dir);
  std::ofstream(scratch.dir + "/tidemark.conf") << "shared_buffers = 1MB\n";
  open_options read_only;
  read_only.read_only = true;
  const std::vector<std::pair<const char*, std::function<void()>>> calls = {
    {"open", [&] { open_quiet(scratch.dir); }},
    {"open read-only", [&] { database::open(scratch.dir, read_only); }},
    {"check_files", [&] { database::check_files(scratch.dir); }},
  };
  for (const auto& [name, call] : calls) {
    CAPTURE(name);
    try {
      call();
      FAIL("accepted as a data directory");
    } catch (const config_error& e) {
      CHECK(std::string(e.what()).find("not a Tidemark data directory") != std::string::npos);
    }
  }
}

TEST_CASE("public API: check_files names a page whose bytes were damaged on disk") {
  test::scratch_directory scratch("tidemark-public-api");
  create_with_rows(scratch.dir, 1000);
  {
    std::fstream segment(scratch.dir + "/base/1.0",
                         std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(segment);
    segment.seekp(8192 + 100); // block 1, inside its rows
    segment.write("garbage", 7);
  }
  file_check_report report = database::check_files(scratch.dir);
  CHECK(report.failures == 1);
  REQUIRE(report.first_failures.size() == 1);
  CHECK(report.first_failures[0].find("block 1 (relation 1 block 1)") != std::string::npos);
  // Reading the damaged page fails every time, naming it, and never keeps a buffer: 10 ×
  // the pool's buffers of failed reads, then every other page still reads.
  auto db = open_quiet(scratch.dir);
  session s = db->open_session();
  for (int i = 0; i < 1280; ++i) {
    try {
      s.read_i64({1, 1}, 64);
      FAIL("a damaged page was read");
    } catch (const page_corrupt_error& e) {
      CHECK(e.where().find("relation 1 block 1") != std::string::npos);
    }
  }
  for (block_number block = 0; block < db->relation_blocks(1); ++block)
    if (block != 1)
      CHECK(s.row_count({1, block}) > 0);
}

namespace {

class counting_observer final : public observer {
public:
  void on_checkpoint(const checkpoint_event& e) override {
    if (e.phase == checkpoint_phase::finish && std::string(e.reason) == "requested")
      ++finished_requested;
    if (e.phase == checkpoint_phase::write)
      ++write_events;
  }
  void on_file_synced(const file_sync_event& e) override {
    if (e.kind == file_sync_event::file_kind::relation_segment && e.relation == 3)
      ++relation_3_syncs;
  }
  std::atomic<int> finished_requested{0}, write_events{0}, relation_3_syncs{0};
};

} // namespace

TEST_CASE("public API: the observer sees a checkpoint's phases and the fsyncs it asked for") {
  test::scratch_directory scratch("tidemark-public-api");
  create_with_rows(scratch.dir, 10);
  auto events = std::make_shared<counting_observer>();
  open_options options;
  options.settings = quiet;
  options.events = events;
  auto db = database::open(scratch.dir, options);
  session s = db->open_session();
  s.begin();
  s.add_i64({3, 0}, 64, 1);
  s.commit();
  db->checkpoint(); // returns once the checkpoint completed, so its events were sent
  db->close();      // the observer's actor handles what was sent before it stops
  CHECK(events->finished_requested.load() == 1);
  CHECK(events->write_events.load() >= 1);
  CHECK(events->relation_3_syncs.load() >= 1);
  statistics stats = db->stats();
  CHECK(stats.checkpoints.requested >= 1);
  CHECK(stats.buffers.written_by_checkpointer >= 1);
}

TEST_CASE("public API: latency_distribution quantiles, merging and intervals") {
  latency_distribution a, b;
  for (std::uint64_t us = 1; us <= 100; ++us)
    a.record(us * 10); // 10 µs .. 1 ms
  b.record(5000);
  CHECK(a.count() == 100);
  CHECK(a.quantile_ms(0.5) == doctest::Approx(0.5).epsilon(0.06));
  CHECK(a.max_ms() == doctest::Approx(1.0));
  latency_distribution merged = a;
  merged.merge(b);
  CHECK(merged.count() == 101);
  CHECK(merged.quantile_ms(1.0) == doctest::Approx(5.0));
  latency_distribution interval = merged.since(a);
  CHECK(interval.count() == 1);
  CHECK(interval.average_ms() == doctest::Approx(5.0));
}

namespace {

// Every file under `dir` with its size and bytes: what a read-only open must not change.
std::map<std::string, std::string> directory_contents(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file())
      continue;
    std::ifstream in(entry.path(), std::ios::binary);
    files[entry.path().string()] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return files;
}

} // namespace

TEST_CASE("public API: a read-only open reads and runs read-only transactions, and writes "
          "nothing") {
  test::scratch_directory scratch("tidemark-public-api");
  create_with_rows(scratch.dir, 1000);
  transaction_id committed = 0;
  {
    auto db = open_quiet(scratch.dir);
    session s = db->open_session();
    s.begin();
    s.add_i64({1, 0}, page_header_bytes + 8, 41); // row 0's value
    committed = s.commit();
    db->close();
  }
  std::map<std::string, std::string> before = directory_contents(scratch.dir);
  open_options options;
  options.settings = quiet;
  options.read_only = true;
  {
    auto db = database::open(scratch.dir, options);
    CHECK_THROWS_AS(open_quiet(scratch.dir), config_error); // no writer while it reads
    session s = db->open_session();
    CHECK(s.read_i64({1, 0}, page_header_bytes + 8) == 41);
    s.begin();
    std::uint64_t rows = 0;
    row_cursor cursor = s.rows(1);
    while (cursor.next())
      ++rows;
    CHECK(rows == 1000);
    s.commit(); // a read-only transaction
    s.begin();
    CHECK_THROWS_AS(s.add_i64({1, 0}, 64, 1), usage_error);
    CHECK_THROWS_AS(s.append_row(2, "x", 1), usage_error);
    s.rollback();
    CHECK_THROWS_AS(db->checkpoint(), usage_error);
    // The commit-status log is read, not written: acknowledged ids can be checked.
    CHECK(db->status_of(committed) == transaction_status::committed);
    CHECK(db->status_of(committed + 1) == transaction_status::unknown);
    CHECK(db->status_of(transaction_id(1) << 40) == transaction_status::unknown); // no segment
    CHECK(db->stats().buffers.pool_size > 0);
    db->close();
  }
  CHECK(directory_contents(scratch.dir) == before);
  SUBCASE("a directory that needs recovery is refused") {
    {
      open_options faulty;
      faulty.settings = quiet;
      faulty.faults = fault_injection{};
      auto db = database::open(scratch.dir, faulty);
      db->simulate_power_loss();
    }
    try {
      database::open(scratch.dir, options);
      FAIL("a crashed directory opened read-only");
    } catch (const config_error& e) {
      CHECK(std::string(e.what()).find("not shut down cleanly") != std::string::npos);
    }
  }
}

TEST_CASE("public API: log lines go to the application's callback, which may not checkpoint") {
  test::scratch_directory scratch("tidemark-public-api");
  create_with_rows(scratch.dir, 10);
  std::mutex lines_mutex;
  std::vector<std::string> lines;
  std::atomic<int> refused{0};
  std::atomic<database*> running{nullptr};
  open_options options;
  options.settings = {"log_checkpoints=on", "shared_buffers=1MB"};
  options.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> guard(lines_mutex);
    lines.push_back(line);
    if (database* db = running.load()) {
      try {
        db->checkpoint(); // would wait for the thread this runs on
      } catch (const usage_error&) {
        ++refused;
      }
    }
  };
  {
    auto db = database::open(scratch.dir, options);
    running = db.get();
    db->checkpoint();
    running = nullptr;
    {
      std::lock_guard<std::mutex> guard(lines_mutex);
      REQUIRE(lines.size() == 1);
      CHECK(lines[0].find("checkpoint complete (requested)") != std::string::npos);
      CHECK(lines[0].find("wrote ") != std::string::npos);
    }
    CHECK(refused.load() == 1);
    db->close();
  }
  {
    open_options faulty = options;
    faulty.faults = fault_injection{};
    auto db = database::open(scratch.dir, faulty);
    session s = db->open_session();
    s.begin();
    s.add_i64({2, 0}, 64, 1);
    s.commit();
    db->simulate_power_loss();
  }
  lines.clear();
  auto db = database::open(scratch.dir, options);
  CHECK(db->recovery().needed);
  bool recovery_line = false;
  {
    std::lock_guard<std::mutex> guard(lines_mutex);
    for (const std::string& line : lines)
      recovery_line = recovery_line || line.find("recovery complete") != std::string::npos;
  }
  CHECK(recovery_line);
}

namespace {

// Every row of `relation` as text, in cursor order ("" for a pending row's page).
std::vector<std::string> rows_of(session& s, relation_id relation) {
  std::vector<std::string> out;
  row_cursor cursor = s.rows(relation);
  while (cursor.next())
    out.emplace_back(static_cast<const char*>(cursor.data()), cursor.size());
  return out;
}

std::string read_text(session& s, page_id page, std::uint32_t offset, std::uint32_t length) {
  std::string out(length, '\0');
  s.read_bytes(page, offset, out.data(), length);
  return out;
}

} // namespace

TEST_CASE("public API: an append moves past the transaction's own writes, in either order") {
  test::scratch_directory scratch("tidemark-public-api");
  create_with_rows(scratch.dir, 10);
  auto db = open_quiet(scratch.dir);
  session s = db->open_session();
  const std::string a(64, 'a'), b(64, 'b'), c(64, 'c'), d(64, 'd');
  const std::uint32_t slot1 = page_header_bytes + 64; // where a second 64-byte row goes
  s.begin();
  s.append_row(22, a.data(), 64);
  s.commit();
  REQUIRE(s.row_count({22, 0}) == 1);

  // An offset write into slot 1, then an append: the row goes past the write.
  s.begin();
  s.write_bytes({22, 0}, slot1, "xxxxxxxx", 8);
  s.append_row(22, b.data(), 64);
  CHECK(read_text(s, {22, 0}, slot1, 8) == "xxxxxxxx");
  s.commit();
  CHECK(read_text(s, {22, 0}, slot1, 8) == "xxxxxxxx");
  CHECK(s.row_count({22, 0}) == 1);
  CHECK(rows_of(s, 22) == std::vector<std::string>{a, b});

  // An append, then an offset write where the row would have gone (the next free slot of
  // the tail page, block 1 slot 1).
  REQUIRE(db->relation_blocks(22) == 2);
  REQUIRE(s.row_count({22, 1}) == 1);
  s.begin();
  s.append_row(22, c.data(), 64);
  s.write_bytes({22, 1}, slot1, "yyyyyyyy", 8);
  s.commit();
  CHECK(read_text(s, {22, 1}, slot1, 8) == "yyyyyyyy");
  CHECK(s.row_count({22, 1}) == 1);
  CHECK(rows_of(s, 22) == std::vector<std::string>{a, b, c});

  // Rows never start on a page the same transaction writes by offset.
  s.begin();
  s.write_bytes({23, 0}, 4000, "zz", 2);
  s.append_row(23, d.data(), 64);
  s.commit();
  CHECK(read_text(s, {23, 0}, 4000, 2) == "zz");
  CHECK(s.row_count({23, 0}) == 0);
  CHECK(rows_of(s, 23) == std::vector<std::string>{d});
  db->close();

  // The same after a reopen (redo of nothing: the clean stop wrote every page).
  auto reopened = open_quiet(scratch.dir);
  session r = reopened->open_session();
  CHECK(read_text(r, {22, 0}, slot1, 8) == "xxxxxxxx");
  CHECK(read_text(r, {22, 1}, slot1, 8) == "yyyyyyyy");
  CHECK(rows_of(r, 22) == std::vector<std::string>{a, b, c});
}

TEST_CASE("public API: a change outside a transaction is a usage_error, and so is one after a "
          "conflict") {
  test::scratch_directory scratch("tidemark-public-api");
  create_with_rows(scratch.dir, 10);
  auto db = open_quiet(scratch.dir);
  session s = db->open_session();
  const std::int64_t nine = 9;
  CHECK_THROWS_AS(s.add_i64({2, 0}, 64, 1), usage_error);
  CHECK_THROWS_AS(s.write_bytes({2, 0}, 72, &nine, 8), usage_error);
  CHECK_THROWS_AS(s.append_row(3, "row", 4), usage_error);
  CHECK(db->relation_blocks(2) == 0); // nothing buffered extends it
  s.begin();                          // nothing carried into the next transaction
  s.add_i64({2, 0}, 80, 1);
  s.commit();
  CHECK(s.read_i64({2, 0}, 64) == 0);
  CHECK(s.read_i64({2, 0}, 72) == 0);
  CHECK(db->relation_blocks(3) == 0); // no row was appended

  // A conflict ends the transaction: what follows is outside one.
  session other = db->open_session();
  s.begin();
  std::int64_t seen = s.read_i64({2, 0}, 80);
  other.begin();
  other.write_bytes({2, 0}, 80, &nine, 8);
  other.commit();
  std::int64_t next = seen + 1;
  s.write_bytes({2, 0}, 80, &next, 8);
  CHECK_THROWS_AS(s.commit(), conflict_error);
  CHECK(!s.in_transaction());
  CHECK_THROWS_AS(s.add_i64({2, 0}, 64, 1), usage_error);
  CHECK_THROWS_AS(s.write_bytes({2, 0}, 80, &next, 8), usage_error);
  CHECK_THROWS_AS(s.append_row(3, "row", 4), usage_error);
  CHECK_THROWS_AS(s.commit(), usage_error);
  s.begin();
  s.commit();
  CHECK(s.read_i64({2, 0}, 64) == 0);
  CHECK(s.read_i64({2, 0}, 80) == 9);
  CHECK(db->relation_blocks(3) == 0); // no row was appended
  db->close();
}

TEST_CASE("public API: commit() throws io_error when a page it changes cannot be read, applies "
          "nothing, and the engine goes on") {
  test::scratch_directory scratch("tidemark-public-api");
  // Relation 4: one row per page, enough pages to push any page out of the 1 MB pool.
  create_options create;
  create.settings = quiet;
  create.initial_data = [](initial_loader& loader) {
    std::size_t row_size = loader.page_size() - page_header_bytes;
    std::vector<unsigned char> rows(row_size * 1024, 1);
    loader.append_rows(4, rows.data(), row_size, 1024);
  };
  database::create(scratch.dir, create);
  open_options options;
  options.settings = quiet;
  fault_injection faults;
  faults.bad_read = read_fault::error;
  faults.bad_read_after = 1; // the first read of relation 2's bytes this run wrote and fsynced
  faults.bad_read_match = "base/2.";
  options.faults = faults;
  auto db = database::open(scratch.dir, options);
  session s = db->open_session();
  s.begin();
  s.add_i64({2, 0}, 64, 1);
  s.commit();
  db->checkpoint(); // writes relation 2's block 0 and fsyncs it
  std::int64_t committed = 1;
  bool refused = false;
  // Each round reads every page of relation 4, then commits a change of relation 2's page,
  // which the commit must read back once the reads pushed it out of the pool.
  for (int round = 0; round < 10 && !refused; ++round) {
    for (block_number block = 0; block < db->relation_blocks(4); ++block)
      (void)s.read_i64({4, block}, 64);
    s.begin();
    s.add_i64({2, 0}, 64, 1);
    try {
      s.commit();
      ++committed;
    } catch (const io_error& e) {
      refused = true;
      CHECK(e.error_number() == EIO);
      CHECK(!s.in_transaction());
    }
  }
  REQUIRE(refused);
  CHECK(!db->stats().failed);
  CHECK(s.read_i64({2, 0}, 64) == committed); // nothing applied; this read gets the bytes
  s.begin();
  s.add_i64({2, 0}, 64, 1);
  s.commit();
  CHECK(s.read_i64({2, 0}, 64) == committed + 1);
  db->close();
}

TEST_CASE("public API: write_trace to a file it cannot create is an io_error naming it") {
  test::scratch_directory scratch("tidemark-public-api");
  create_with_rows(scratch.dir, 10);
  open_options options;
  options.settings = quiet;
  options.trace = true;
  auto db = database::open(scratch.dir, options);
  const std::string path = scratch.root + "/missing/trace.json";
  try {
    db->write_trace(path);
    FAIL("a trace was written where no file can be");
  } catch (const io_error& e) {
    CHECK(e.error_number() == ENOENT);
    CHECK(std::string(e.what()).find(path) != std::string::npos);
  }
  db->write_trace(scratch.root + "/trace.json");
  CHECK(std::filesystem::file_size(scratch.root + "/trace.json") > 0);
  db->close();
}
