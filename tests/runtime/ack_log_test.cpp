// The acknowledgement log and `verify`'s use of it: a history that ran other transactions
// under the acknowledged ids (a divergent history: an old primary acknowledged them, the
// promoted standby reused the ids) fails verification, where a check of ids alone passed.
#include "scratch_directory.hpp"
#include "traced_tpcb_run.hpp"
#include "workload/ack_log.hpp"
#include "workload/tpcb/bench.hpp"
#include "workload/tpcb/tpcb.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tidemark {
namespace {

using workload::ack_log;
using workload::acknowledged_transaction;

constexpr std::uint64_t transactions_per_client = 30;

// A fresh scale-1 directory under `dir` that ran 2 × 30 transactions, with their
// acknowledgements appended to `acks` when it is not empty.
void run_history(const std::string& dir, const std::string& acks) {
  test::create_tpcb_directory(dir, {});
  auto db = database::open(dir, open_options{});
  workload::bench_options bench;
  bench.clients = 2;
  bench.transactions_per_client = transactions_per_client;
  bench.ack_log_path = acks;
  workload::bench_result result =
    workload::run_bench(*db, workload::tpcb::layout(db->page_size(), 1), bench, nullptr);
  REQUIRE(result.errors.empty());
  db->close();
}

workload::tpcb::verify_report verify(const std::string& dir,
                                     const std::vector<acknowledged_transaction>& acks) {
  auto db = database::open(dir, open_options{});
  auto report = workload::tpcb::verify(*db, workload::tpcb::layout(db->page_size(), 1), acks);
  db->close();
  return report;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const std::string& line : lines)
    out << line << "\n";
}

} // namespace

TEST_CASE("ack log: another history under the same ids fails verification") {
  test::scratch_directory first("tidemark-ack-log"), second("tidemark-ack-log");
  const std::string acks = first.root + "/acks";
  run_history(first.dir, acks);
  run_history(second.dir, "");
  std::vector<acknowledged_transaction> acknowledged = ack_log::read_all(acks);
  REQUIRE(acknowledged.size() == 2 * transactions_per_client);
  for (const acknowledged_transaction& ack : acknowledged) {
    CHECK(ack.has_digest);
    CHECK(ack.generation == 0);
  }

  auto own = verify(first.dir, acknowledged);
  CHECK(own.lost.empty());
  CHECK(own.diverged.empty());
  CHECK(own.not_committed.empty());

  // The second history assigned the same ids to transactions of its own.
  auto other = verify(second.dir, acknowledged);
  CHECK(other.lost.size() + other.diverged.size() == acknowledged.size());
  CHECK(other.diverged.size() > 0);

  // Ids alone (what the log held before) cannot tell the two histories apart.
  std::vector<acknowledged_transaction> ids_only = acknowledged;
  for (acknowledged_transaction& ack : ids_only)
    ack.has_digest = false;
  CHECK(verify(second.dir, ids_only).diverged.empty());
  CHECK(verify(second.dir, ids_only).lost.empty());

  // A generation this history never reached acknowledged it: not this history's commit.
  std::vector<acknowledged_transaction> newer = {acknowledged.front()};
  newer.front().generation = 1;
  CHECK(verify(first.dir, newer).diverged.size() == 1);
}

TEST_CASE("ack log: lines are read back, malformed ones refused with their line number") {
  test::scratch_directory scratch("tidemark-ack-log");
  const std::string path = scratch.root + "/acks";
  {
    ack_log log(path, 3);
    log.append(17, 0xabcdef0123456789ull);
  }
  std::ofstream(path, std::ios::app) << "18\n\n";
  auto acks = ack_log::read_all(path);
  REQUIRE(acks.size() == 2);
  CHECK(acks[0].xid == 17);
  CHECK(acks[0].generation == 3);
  CHECK(acks[0].digest == 0xabcdef0123456789ull);
  CHECK(acks[0].has_digest);
  CHECK(acks[1].xid == 18);
  CHECK_FALSE(acks[1].has_digest);

  for (const char* bad : {"12 x", "12 0 abc", "-1", "12 0 abcdef0123456789 9",
                          "12 99999999999 abcdef0123456789", "1 2"}) {
    write_lines(path, {"5", bad});
    CHECK_THROWS_WITH_AS(ack_log::read_all(path), doctest::Contains("line 2"), std::runtime_error);
  }
  CHECK_THROWS_WITH_AS(ack_log::read_all(scratch.root + "/none"),
                       doctest::Contains("cannot read ack log"), std::runtime_error);
}

} // namespace tidemark
