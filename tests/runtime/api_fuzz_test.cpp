// A randomized workout of the public API: several threads issue more than 100 000 calls,
// mixing transfers between accounts (read-modify-write), read-only transactions that check
// the total, appends, scans, and mistakes of every kind (bad relation ids, blocks, offsets,
// lengths, null buffers, begin/commit misuse, a session shared between threads). Every
// mistake must be a usage_error and change nothing; every conflict a conflict_error that
// applies nothing. After close and reopen, the invariants kept along the way must hold:
// the total is unchanged, no balance is negative, and every acknowledged transfer left
// exactly one log row and one count.
#include <tidemark/database.hpp>

#include "scratch_directory.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace tidemark;

namespace {

constexpr relation_id accounts = 1; // i64 balances, 1 016 to a page
constexpr relation_id log_rows = 2; // one row per acknowledged transfer
constexpr relation_id counts = 3;   // block 0, byte 64: transfers, by add_i64
constexpr std::uint32_t account_count = 2000;
constexpr std::int64_t initial_balance = 1000;
constexpr int threads = 4;
constexpr std::uint64_t calls_per_thread = 26000;

struct log_row {
  std::uint32_t thread;
  std::uint32_t sequence;
  std::int64_t amount;
};

const std::vector<std::string> fuzz_settings = {"log_checkpoints=off", "shared_buffers=1MB",
                                                "checkpoint_timeout=1s"};

std::size_t per_page(std::size_t page_size) { return rows_per_page(page_size, 8); }

page_id page_of(std::uint32_t account, std::size_t page_size) {
  return {accounts, static_cast<block_number>(account / per_page(page_size))};
}

std::uint32_t offset_of(std::uint32_t account, std::size_t page_size) {
  return static_cast<std::uint32_t>(page_header_bytes + 8 * (account % per_page(page_size)));
}

struct worker_result {
  std::uint64_t calls = 0, usage_errors = 0, conflicts = 0, transfers = 0, snapshots = 0;
  std::vector<std::string> unexpected;
};

class worker {
public:
  worker(database& db, session& shared, std::uint32_t index, worker_result& out)
    : db_(db), shared_(shared), index_(index), out_(out), random_(index * 7919 + 17),
      page_size_(db.page_size()) {}

  void run() {
    session s = db_.open_session();
    while (out_.calls < calls_per_thread) {
      switch (random_() % 20) {
        case 0:
        case 1:
        case 2:
        case 3:
        case 4:
          transfer(s);
          break;
        case 5:
        case 6:
          snapshot(s);
          break;
        case 7:
          scan(s);
          break;
        case 8:
        case 9:
          single_read(s);
          break;
        case 10:
          shared_read();
          break;
        case 11:
        case 12:
          misuse(s);
          break;
        default:
          bad_input(s);
          break;
      }
    }
    if (s.in_transaction())
      s.rollback();
  }

private:
  template <class Call>
  void expect_usage_error(const char* what, Call call) {
    ++out_.calls;
    try {
      call();
      unexpected(std::string(what) + ": no usage_error");
    } catch (const usage_error&) {
      ++out_.usage_errors;
    }
  }

  // A change refused inside a transaction of its own, which is then rolled back: three
  // calls (begin, the change, rollback) of which the middle one must be a usage_error.
  template <class Change>
  void refused_change(session& s, const char* what, Change change) {
    s.begin();
    expect_usage_error(what, change);
    s.rollback();
    out_.calls += 2;
  }

  void unexpected(const std::string& what) {
    if (out_.unexpected.size() < 10)
      out_.unexpected.push_back(what);
  }

  std::uint32_t account() { return static_cast<std::uint32_t>(random_() % account_count); }

  // Moves an amount between two accounts when the first covers it: a read-modify-write
  // of both, a blind count, and a log row.
  void transfer(session& s) {
    std::uint32_t from = account(), to = account();
    std::int64_t amount = static_cast<std::int64_t>(random_() % 200) + 1;
    try {
      s.begin();
      ++out_.calls;
      std::int64_t a = s.read_i64(page_of(from, page_size_), offset_of(from, page_size_));
      ++out_.calls;
      if (a < 0)
        unexpected("negative balance read: " + std::to_string(a));
      if (a < amount || from == to) {
        s.rollback();
        ++out_.calls;
        return;
      }
      std::int64_t b = s.read_i64(page_of(to, page_size_), offset_of(to, page_size_));
      ++out_.calls;
      std::int64_t new_a = a - amount, new_b = b + amount;
      s.write_bytes(page_of(from, page_size_), offset_of(from, page_size_), &new_a, 8);
      s.write_bytes(page_of(to, page_size_), offset_of(to, page_size_), &new_b, 8);
      s.add_i64({counts, 0}, 64, 1);
      log_row row{index_, next_sequence_, amount};
      s.append_row(log_rows, &row, sizeof row);
      out_.calls += 4;
      if (random_() % 8 == 0) { // a mistake inside the transaction changes nothing
        expect_usage_error("begin inside a transaction", [&] { s.begin(); });
        expect_usage_error("write past the page", [&] {
          s.write_bytes({counts, 0}, 8190, &row, 8);
        });
      }
      s.commit();
      ++out_.calls;
      ++out_.transfers;
      ++next_sequence_;
    } catch (const conflict_error&) {
      ++out_.conflicts;
      ++out_.calls;
      if (s.in_transaction())
        unexpected("a conflict left the transaction open");
    }
  }

  // A read-only transaction over every account: when it commits, it saw one state, and
  // transfers keep the total.
  void snapshot(session& s) {
    try {
      s.begin();
      std::vector<std::int64_t> balances(per_page(page_size_));
      std::int64_t total = 0;
      for (std::uint32_t first = 0; first < account_count;
           first += static_cast<std::uint32_t>(per_page(page_size_))) {
        std::uint32_t n = std::min<std::uint32_t>(static_cast<std::uint32_t>(per_page(page_size_)),
                                                  account_count - first);
        s.read_bytes(page_of(first, page_size_), offset_of(first, page_size_), balances.data(),
                     8 * n);
        ++out_.calls;
        for (std::uint32_t i = 0; i < n; ++i)
          total += balances[i];
      }
      s.commit();
      ++out_.calls;
      ++out_.snapshots;
      if (total != std::int64_t(account_count) * initial_balance)
        unexpected("a committed read-only transaction saw a total of " + std::to_string(total));
    } catch (const conflict_error&) {
      ++out_.conflicts;
      ++out_.calls;
    }
  }

  void scan(session& s) {
    row_cursor rows = s.rows(log_rows);
    ++out_.calls;
    std::uint64_t seen = 0;
    while (seen < 10 && rows.next()) {
      ++seen;
      if (rows.size() != sizeof(log_row))
        unexpected("a log row of " + std::to_string(rows.size()) + " bytes");
    }
    out_.calls += seen;
  }

  void single_read(session& s) {
    std::uint32_t a = account();
    ++out_.calls;
    if (s.read_i64(page_of(a, page_size_), offset_of(a, page_size_)) < 0)
      unexpected("negative balance read outside a transaction");
  }

  // Reads through the session every thread shares: one at a time succeeds, the others get
  // usage_error; none hangs or sees torn state.
  void shared_read() {
    ++out_.calls;
    try {
      std::uint32_t a = account();
      if (shared_.read_i64(page_of(a, page_size_), offset_of(a, page_size_)) < 0)
        unexpected("negative balance read through the shared session");
    } catch (const usage_error&) {
      ++out_.usage_errors;
    }
  }

  void misuse(session& s) {
    if (s.in_transaction())
      s.rollback();
    switch (random_() % 3) {
      case 0:
        expect_usage_error("commit without begin", [&] { s.commit(); });
        break;
      case 1:
        s.begin();
        ++out_.calls;
        expect_usage_error("begin twice", [&] { s.begin(); });
        s.rollback();
        ++out_.calls;
        break;
      default:
        expect_usage_error("a row cursor that no session made", [&] {
          row_cursor nothing = db_.open_session().rows(log_rows);
          nothing.next(); // its session is gone
        });
        break;
    }
  }

  void bad_input(session& s) {
    std::uint64_t r = random_();
    std::int64_t value = 0;
    switch (r % 10) {
      case 0:
        expect_usage_error("relation 0", [&] { s.read_i64({0, 0}, 64); });
        break;
      case 1:
        expect_usage_error("relation past the last", [&] {
          s.read_i64({static_cast<relation_id>(64 + r % 1000000), 0}, 64);
        });
        break;
      case 2:
        expect_usage_error("block past the end", [&] {
          s.read_i64({accounts, static_cast<block_number>(2 + r % 100000)}, 64);
        });
        break;
      case 3:
        expect_usage_error("offset in the header", [&] {
          s.read_i64({accounts, 0}, static_cast<std::uint32_t>(r % page_header_bytes));
        });
        break;
      case 4:
        expect_usage_error("offset past the page", [&] {
          s.read_i64({accounts, 0}, static_cast<std::uint32_t>(page_size_ - 4 + r % 100000));
        });
        break;
      case 5:
        expect_usage_error("length past the page", [&] {
          std::vector<unsigned char> out(16);
          s.read_bytes({accounts, 0}, 64, out.data(),
                       static_cast<std::uint32_t>(page_size_ + r % 1000));
        });
        break;
      case 6:
        expect_usage_error("null output", [&] { s.read_bytes({accounts, 0}, 64, nullptr, 8); });
        break;
      case 7:
        refused_change(s, "a change two blocks past the end", [&] {
          s.add_i64({counts, static_cast<block_number>(2 + r % 1000)}, 64, 1);
        });
        break;
      case 8: {
        std::vector<unsigned char> row(page_size_, 1);
        refused_change(s, "a row too big for a page", [&] {
          s.append_row(log_rows, row.data(), static_cast<std::uint32_t>(row.size()));
        });
        break;
      }
      default:
        refused_change(s, "write into the header", [&] {
          s.write_bytes({accounts, 0}, 20, &value, 8);
        });
        break;
    }
  }

  database& db_;
  session& shared_;
  std::uint32_t index_;
  worker_result& out_;
  std::mt19937_64 random_;
  std::size_t page_size_;
  std::uint32_t next_sequence_ = 0;
};

} // namespace

TEST_CASE("public API under a randomized mix of 100 000 valid and wrong calls from four threads") {
  test::scratch_directory scratch("tidemark-api-fuzz");
  create_options create;
  create.settings = fuzz_settings;
  create.initial_data = [](initial_loader& loader) {
    std::vector<std::int64_t> balances(account_count, initial_balance);
    loader.append_rows(accounts, balances.data(), 8, balances.size());
  };
  database::create(scratch.dir, create);
  std::vector<worker_result> results(threads);
  {
    open_options options;
    options.settings = fuzz_settings;
    auto db = database::open(scratch.dir, options);
    session shared = db->open_session();
    {
      session first = db->open_session(); // give relation 3 its block 0
      first.begin();
      first.add_i64({counts, 0}, 64, 0);
      first.commit();
    }
    std::vector<std::thread> running;
    for (int t = 0; t < threads; ++t)
      running.emplace_back([&, t] {
        try {
          worker(*db, shared, static_cast<std::uint32_t>(t), results[t]).run();
        } catch (const std::exception& e) {
          results[t].unexpected.push_back(std::string("thread stopped: ") + e.what());
        }
      });
    for (auto& t : running)
      t.join();
    db->close();
  }
  std::uint64_t calls = 0, transfers = 0, conflicts = 0, snapshots = 0, usage = 0;
  for (const worker_result& r : results) {
    for (const std::string& what : r.unexpected)
      CHECK_MESSAGE(false, what);
    calls += r.calls;
    transfers += r.transfers;
    conflicts += r.conflicts;
    snapshots += r.snapshots;
    usage += r.usage_errors;
  }
  MESSAGE(calls << " calls: " << transfers << " transfers, " << snapshots << " snapshots, "
                << conflicts << " conflicts, " << usage << " usage errors");
  CHECK(calls >= 100000);
  CHECK(snapshots > 0);

  open_options options;
  options.settings = fuzz_settings;
  auto db = database::open(scratch.dir, options);
  CHECK(!db->recovery().needed);
  session s = db->open_session();
  std::int64_t total = 0;
  for (std::uint32_t a = 0; a < account_count; ++a) {
    std::int64_t balance = s.read_i64(page_of(a, db->page_size()), offset_of(a, db->page_size()));
    CHECK(balance >= 0);
    total += balance;
  }
  CHECK(total == std::int64_t(account_count) * initial_balance);
  CHECK(s.read_i64({counts, 0}, 64) == std::int64_t(transfers));
  std::vector<std::set<std::uint32_t>> sequences(threads);
  std::uint64_t rows = 0;
  row_cursor cursor = s.rows(log_rows);
  while (cursor.next()) {
    log_row row;
    REQUIRE(cursor.size() == sizeof row);
    std::memcpy(&row, cursor.data(), sizeof row);
    REQUIRE(row.thread < threads);
    CHECK(sequences[row.thread].insert(row.sequence).second); // exactly once
    ++rows;
  }
  CHECK(rows == transfers);
  for (int t = 0; t < threads; ++t)
    CHECK(sequences[t].size() == results[t].transfers);
}
