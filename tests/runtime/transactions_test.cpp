// What an application can rely on from a transaction, through the public headers only:
// serializable commits (read-modify-write loses nothing, a check-then-withdraw never
// overdraws, a read-only transaction sees one state), a transaction's reads of its own
// pending changes, limits refused with nothing applied, reads that return only durable
// data, the error types, and the row cursor.
#include <tidemark/database.hpp>

#include "quiet_database.hpp"
#include "scratch_directory.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace tidemark;

namespace {

constexpr relation_id ledger = 1; // one page of i64 balances
constexpr std::uint32_t account_offset(std::uint32_t account) {
  return static_cast<std::uint32_t>(page_header_bytes + 8 * account);
}

using test::open_quiet;
using test::quiet;

// A directory whose ledger page holds `accounts` balances of `balance` each.
void create_ledger(const std::string& dir, std::uint32_t accounts, std::int64_t balance) {
  create_options create;
  create.settings = quiet;
  create.initial_data = [&](initial_loader& loader) {
    std::vector<std::int64_t> balances(accounts, balance);
    loader.append_rows(ledger, balances.data(), 8, balances.size());
  };
  database::create(dir, create);
}

std::int64_t balance_of(session& s, std::uint32_t account) {
  return s.read_i64({ledger, 0}, account_offset(account));
}

void write_i64(session& s, page_id page, std::uint32_t offset, std::int64_t value) {
  s.write_bytes(page, offset, &value, sizeof value);
}

} // namespace

TEST_CASE("transactions: read-modify-write increments from two threads through write_bytes lose "
          "none") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 4, 0);
  auto db = open_quiet(scratch.dir);
  constexpr int threads = 2, per_thread = 3000;
  std::atomic<std::uint64_t> conflicts{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      session s = db->open_session();
      for (int i = 0; i < per_thread; ++i)
        for (;;) {
          s.begin();
          std::int64_t value = balance_of(s, 0);
          write_i64(s, {ledger, 0}, account_offset(0), value + 1);
          try {
            s.commit();
            break;
          } catch (const conflict_error&) {
            ++conflicts;
            CHECK(!s.in_transaction()); // the conflict ended the transaction
          }
        }
    });
  for (auto& w : workers)
    w.join();
  session s = db->open_session();
  CHECK(balance_of(s, 0) == threads * per_thread);
  CHECK(db->stats().conflicts == conflicts.load());
  MESSAGE("conflicts retried: " << conflicts.load());
}

TEST_CASE("transactions: of two check-then-withdraw transactions on one balance, the second "
          "conflicts") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 2, 100);
  auto db = open_quiet(scratch.dir);
  session a = db->open_session(), b = db->open_session();
  auto withdraw_if_covered = [](session& s, std::int64_t amount) {
    s.begin();
    std::int64_t balance = balance_of(s, 0);
    if (balance >= amount)
      write_i64(s, {ledger, 0}, account_offset(0), balance - amount);
  };
  withdraw_if_covered(a, 100);
  withdraw_if_covered(b, 100); // both saw 100
  a.commit();
  CHECK_THROWS_AS(b.commit(), conflict_error);
  withdraw_if_covered(b, 100); // the retry sees 0 and withdraws nothing
  b.commit();
  session c = db->open_session();
  CHECK(balance_of(c, 0) == 0);
}

TEST_CASE("transactions: concurrent withdrawals never overdraw") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 2, 1000);
  auto db = open_quiet(scratch.dir);
  std::atomic<std::int64_t> withdrawn{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t)
    workers.emplace_back([&] {
      session s = db->open_session();
      for (bool covered = true; covered;)
        try {
          s.begin();
          std::int64_t balance = balance_of(s, 0);
          covered = balance >= 30;
          if (covered)
            write_i64(s, {ledger, 0}, account_offset(0), balance - 30);
          s.commit();
          if (covered)
            withdrawn += 30;
        } catch (const conflict_error&) {
        }
    });
  for (auto& w : workers)
    w.join();
  session s = db->open_session();
  CHECK(balance_of(s, 0) == 1000 - withdrawn.load());
  CHECK(balance_of(s, 0) >= 0);
  CHECK(balance_of(s, 0) < 30);
}

TEST_CASE("transactions: a read-only transaction whose page changed before its commit conflicts") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 4, 10);
  auto db = open_quiet(scratch.dir);
  session reader = db->open_session(), writer = db->open_session();
  reader.begin();
  CHECK(balance_of(reader, 1) == 10);
  writer.begin();
  writer.add_i64({ledger, 0}, account_offset(1), -10);
  writer.add_i64({ledger, 0}, account_offset(2), +10);
  writer.commit();
  CHECK(balance_of(reader, 2) == 20);               // sees the transfer's second half ...
  CHECK_THROWS_AS(reader.commit(), conflict_error); // ... so it cannot commit
  reader.begin();
  CHECK(balance_of(reader, 1) + balance_of(reader, 2) == 20);
  reader.commit(); // nothing changed meanwhile
}

TEST_CASE("transactions: blind add_i64 deltas never conflict") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 4, 0);
  auto db = open_quiet(scratch.dir);
  session a = db->open_session(), b = db->open_session();
  a.begin();
  b.begin();
  a.add_i64({ledger, 0}, account_offset(3), 5);
  b.add_i64({ledger, 0}, account_offset(3), 7);
  b.commit();
  a.commit();
  CHECK(balance_of(a, 3) == 12);
}

TEST_CASE("transactions: a transaction reads its own pending changes of every kind") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 8, 1);
  auto db = open_quiet(scratch.dir);
  session s = db->open_session();
  s.begin();
  write_i64(s, {ledger, 0}, account_offset(0), 40);
  CHECK(balance_of(s, 0) == 40); // its own write_bytes
  s.add_i64({ledger, 0}, account_offset(0), 2);
  CHECK(balance_of(s, 0) == 42); // an add on top of its write
  s.add_i64({ledger, 0}, account_offset(1), 9);
  unsigned char bytes[12]; // straddles account 0's last half and account 1
  s.read_bytes({ledger, 0}, account_offset(0) + 4, bytes, sizeof bytes);
  std::int64_t one;
  std::memcpy(&one, bytes + 4, 8);
  CHECK(one == 10);
  const char text[] = "row";
  s.append_row(2, text, sizeof text);
  row_cursor rows = s.rows(2);
  REQUIRE(rows.next());
  CHECK(rows.pending());
  CHECK(std::strcmp(static_cast<const char*>(rows.data()), "row") == 0);
  CHECK(!rows.next());
  session other = db->open_session();
  CHECK(balance_of(other, 0) == 1); // nothing is visible to others before the commit
  s.commit();
  CHECK(balance_of(other, 0) == 42);
  CHECK(balance_of(other, 1) == 10);
}

TEST_CASE("transactions: more than a page's change limit is refused at the call, and nothing is "
          "applied") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 8, 0);
  std::vector<unsigned char> big(8000, 0xab);
  transaction_id refused = 0;
  {
    auto db = open_quiet(scratch.dir);
    session s = db->open_session();
    s.begin();
    refused = s.id();
    s.add_i64({ledger, 0}, account_offset(5), 77); // another page's change, first
    int accepted = 0;
    try {
      for (; accepted < 20; ++accepted)
        s.write_bytes({3, 0}, page_header_bytes, big.data(),
                      static_cast<std::uint32_t>(big.size()));
    } catch (const usage_error& error) {
      CHECK(std::string(error.what()).find("65535 bytes") != std::string::npos);
    }
    CHECK(accepted == 8); // 8 × (8000 + 5) bytes fit, a ninth does not
    s.rollback();
    CHECK(balance_of(s, 5) == 0);
    db->close();
  }
  auto db = open_quiet(scratch.dir);
  session s = db->open_session();
  CHECK(balance_of(s, 5) == 0);
  CHECK(db->relation_blocks(3) == 0);
  CHECK(db->status_of(refused) != transaction_status::committed);
}

TEST_CASE("transactions: a change limit found only at commit applies nothing, after a close or a "
          "crash") {
  // Changes of a relation's tail page past its next free slot, then a row appended to that
  // relation: the row lands in that slot, on the same page, and together they exceed what
  // one page's changes may be. Only the commit knows where the row goes.
  std::vector<unsigned char> row(1000, 0x5a);
  const std::uint32_t past_slot_1 = page_header_bytes + 2 * 1000;
  std::vector<unsigned char> filler(8192 - past_slot_1, 0x77); // 6 160 bytes
  for (bool crash : {false, true}) {
    CAPTURE(crash);
    test::scratch_directory scratch("tidemark-transactions");
    create_ledger(scratch.dir, 8, 0);
    {
      fault_injection faults;
      auto db = open_quiet(scratch.dir, faults);
      session s = db->open_session();
      s.begin();
      s.append_row(4, row.data(), static_cast<std::uint32_t>(row.size())); // block 0: a row page
      s.commit();
      s.begin();
      s.add_i64({ledger, 0}, account_offset(6), 5);
      for (int i = 0; i < 10; ++i) // 10 × 6 165 + 3 345 bytes of changes: within the limit
        s.write_bytes({4, 0}, past_slot_1, filler.data(),
                      static_cast<std::uint32_t>(filler.size()));
      s.write_bytes({4, 0}, past_slot_1, filler.data(), 3340);
      s.append_row(4, row.data(), static_cast<std::uint32_t>(row.size())); // 1 014 more there
      CHECK_THROWS_AS(s.commit(), usage_error);
      CHECK(!s.in_transaction());
      CHECK(balance_of(s, 6) == 0);
      if (crash) {
        db->simulate_power_loss();
        db.reset();
      } else {
        db->close();
      }
    }
    auto db = open_quiet(scratch.dir);
    session s = db->open_session();
    CHECK(balance_of(s, 6) == 0);
    CHECK(s.row_count({4, 0}) == 1);
    unsigned char first = 0x77;
    s.read_bytes({4, 0}, past_slot_1, &first, 1);
    CHECK(first == 0); // the writes were not applied either
  }
}

TEST_CASE("transactions: a read returns only what is durable, so a crash cannot take back what it "
          "saw") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 2, 0);
  auto db = open_quiet(scratch.dir, fault_injection{});
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> seen{0};
  std::atomic<std::uint64_t> reads{0};
  std::atomic<bool> writer_done{false};
  std::string writer_error, reader_error;
  std::thread writer([&] {
    session s = db->open_session();
    try {
      for (;;) {
        s.begin();
        s.add_i64({ledger, 0}, account_offset(0), 1);
        s.commit();
      }
    } catch (const commit_outcome_unknown& e) {
      writer_error = e.what();
    } catch (const engine_stopped_error& e) {
      writer_error = e.what();
    }
    writer_done.store(true);
  });
  std::thread reader([&] {
    session s = db->open_session();
    try {
      while (!stop.load()) {
        std::int64_t value = balance_of(s, 0); // outside a transaction
        seen.store(value);
        ++reads;
      }
    } catch (const error& e) {
      reader_error = e.what();
    }
  });
  while ((reads.load() < 2000 || seen.load() < 200) && !writer_done.load())
    std::this_thread::yield(); // let both run a while; the power loss comes at any moment
  CHECK(!writer_done.load());
  db->simulate_power_loss();
  stop.store(true);
  writer.join();
  reader.join();
  CHECK(writer_error.find("caf") == std::string::npos);
  CHECK(writer_error.find("system_error") == std::string::npos);
  db.reset();
  auto reopened = open_quiet(scratch.dir);
  session s = reopened->open_session();
  CHECK(balance_of(s, 0) >= seen.load());
  MESSAGE("last value read " << seen.load() << ", after the crash " << balance_of(s, 0));
}

TEST_CASE("transactions: a failed WAL fsync makes the commit's outcome unknown, and the engine "
          "stops") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 2, 0);
  transaction_id unknown = 0;
  {
    fault_injection faults;
    // The first sync of the first segment is open()'s (zeroing past the end of the WAL);
    // the second is the commit's fdatasync.
    faults.fail_fsync_after = 2;
    faults.fail_fsync_match = "/wal/0000000000000000";
    auto db = open_quiet(scratch.dir, faults);
    session s = db->open_session();
    s.begin();
    s.add_i64({ledger, 0}, account_offset(1), 3);
    try {
      s.commit();
      FAIL("the commit returned although its WAL fsync failed");
    } catch (const commit_outcome_unknown& e) {
      unknown = e.transaction();
      CHECK(unknown == s.id());
      CHECK(std::string(e.what()).find("caf") == std::string::npos);
    }
    CHECK_THROWS_AS(s.begin(), engine_stopped_error);
    CHECK_THROWS_AS(balance_of(s, 1), engine_stopped_error);
    CHECK_THROWS_AS(db->checkpoint(), engine_stopped_error);
    CHECK_THROWS_AS(db->close(), engine_stopped_error);
  }
  auto db = open_quiet(scratch.dir);
  CHECK(db->recovery().needed);
  session s = db->open_session();
  // Either wholly present or wholly absent, and the commit-status log agrees.
  if (db->status_of(unknown) == transaction_status::committed)
    CHECK(balance_of(s, 1) == 3);
  else
    CHECK(balance_of(s, 1) == 0);
}

TEST_CASE("transactions: every error is a tidemark::error") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 2, 0);
  auto db = open_quiet(scratch.dir);
  session s = db->open_session();
  CHECK_THROWS_AS(s.read_i64({0, 0}, 32), error);
  CHECK_THROWS_AS(s.commit(), error);
  CHECK_THROWS_AS(open_quiet(scratch.dir), error); // in use
  CHECK_THROWS_AS(database::open(scratch.root + "/missing"), error);
}

TEST_CASE("transactions: rows of two sizes, a page written by offset, and the cursor over them") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 2, 0);
  auto db = open_quiet(scratch.dir);
  session s = db->open_session();
  s.begin();
  s.write_bytes({5, 0}, page_header_bytes + 100, "keep", 4); // not a row page
  s.commit();
  s.begin();
  s.append_row(5, "aaaa", 4); // cannot go to block 0 over "keep": goes to block 1
  s.append_row(5, "bbbb", 4);
  s.commit();
  s.begin();
  s.append_row(5, "cccccccc", 8); // another size: a page of its own
  s.commit();
  char kept[4];
  s.read_bytes({5, 0}, page_header_bytes + 100, kept, 4);
  CHECK(std::memcmp(kept, "keep", 4) == 0);
  CHECK(s.row_count({5, 0}) == 0);
  CHECK(s.row_count({5, 1}) == 2);
  CHECK(s.row_count({5, 2}) == 1);
  std::vector<std::string> seen;
  row_cursor rows = s.rows(5);
  while (rows.next()) {
    CHECK(!rows.pending());
    seen.emplace_back(static_cast<const char*>(rows.data()), rows.size());
  }
  CHECK(seen == std::vector<std::string>{"aaaa", "bbbb", "cccccccc"});
  SUBCASE("a cursor outliving its session throws") {
    row_cursor orphan = db->open_session().rows(5);
    CHECK_THROWS_AS(orphan.next(), usage_error);
  }
  SUBCASE("a scan that reached the end conflicts with a concurrent append") {
    session other = db->open_session();
    s.begin();
    row_cursor all = s.rows(5);
    while (all.next()) {
    }
    s.add_i64({ledger, 0}, account_offset(0), 3); // record "3 rows seen"
    other.begin();
    other.append_row(5, "dddddddd", 8);
    other.commit();
    CHECK_THROWS_AS(s.commit(), conflict_error);
  }
}

TEST_CASE("transactions: blocks past a relation's end: reads refused, a change extends by one") {
  test::scratch_directory scratch("tidemark-transactions");
  create_ledger(scratch.dir, 2, 0);
  auto db = open_quiet(scratch.dir);
  session s = db->open_session();
  CHECK(db->relation_blocks(ledger) == 1);
  CHECK_THROWS_AS(s.read_i64({ledger, 1}, 32), usage_error);
  s.begin();
  CHECK_THROWS_AS(s.add_i64({ledger, 2}, 32, 1), usage_error); // past the next block
  s.add_i64({ledger, 1}, 32, 1);                               // the next block: extends
  s.add_i64({ledger, 2}, 32, 1);                               // and the one after it
  CHECK(s.read_i64({ledger, 2}, 32) == 1);                     // its own extension
  s.commit();
  CHECK(db->relation_blocks(ledger) == 3);
  CHECK(s.read_i64({ledger, 2}, 32) == 1);
  CHECK_THROWS_AS(s.read_i64({ledger, 1000000}, 32), usage_error);
}
