// A commit whose status cannot be recorded in the commit-status log (the page it belongs
// on cannot be read back) is not acknowledged: the engine stops, the commit throws
// commit_outcome_unknown, and after the next open the transaction is wholly present or
// wholly absent, as status_of() says. The page is pushed out of the log's buffers through
// the engine's internals.
#include <tidemark/database.hpp>

#include "quiet_database.hpp"
#include "runtime/api_bridge.hpp"
#include "scratch_directory.hpp"
#include "storage/commit_log.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace tidemark;

namespace {

using test::open_quiet;
using test::quiet;

// A directory with relation 1 holding `rows` rows of 16 bytes.
void create_with_zero_rows(const std::string& dir, std::uint64_t rows) {
  create_options create;
  create.settings = quiet;
  create.initial_data = [rows](initial_loader& loader) {
    std::vector<std::uint64_t> all(2 * rows);
    loader.append_rows(1, all.data(), 2 * sizeof(std::uint64_t), rows);
  };
  database::create(dir, create);
}

} // namespace

TEST_CASE("commit status: a commit whose status cannot be recorded stops the engine with "
          "commit_outcome_unknown") {
  test::scratch_directory scratch("tidemark-commit-status");
  create_with_zero_rows(scratch.dir, 10);
  open_options options;
  options.settings = quiet;
  fault_injection faults;
  faults.bad_read = read_fault::error;
  faults.bad_read_after = 1; // the first read of commit-status bytes this run wrote and fsynced
  faults.bad_read_match = "/xact/";
  options.faults = faults;
  transaction_id first = 0, second = 0;
  {
    auto db = database::open(scratch.dir, options);
    session s = db->open_session();
    s.begin();
    s.add_i64({2, 0}, 64, 1);
    first = s.commit();
    db->checkpoint(); // writes the commit-status page holding `first`, and fsyncs it
    // A commit-status page holds 4 ids per byte; the log buffers 8 pages. Reading ids on
    // 16 other pages pushes the one the next commit records its status on out (the public
    // status_of answers ids not assigned yet without reading the log).
    storage::commit_log& log = *internal_access::of(*db).internals().store.commit_log;
    const transaction_id ids_per_page = 4 * db->page_size();
    for (transaction_id page = 1; page <= 16; ++page)
      CHECK(log.get(page * ids_per_page) == storage::xact_status::unknown);
    s.begin();
    s.add_i64({2, 0}, 64, 10);
    second = s.id();
    try {
      s.commit();
      FAIL("the commit was acknowledged without its status");
    } catch (const commit_outcome_unknown& e) {
      CHECK(e.transaction() == second);
    }
    CHECK(!s.in_transaction());
    CHECK(db->stats().failed);
    CHECK_THROWS_AS(s.begin(), engine_stopped_error);
    CHECK_THROWS_AS(db->close(), engine_stopped_error);
  }
  auto db = open_quiet(scratch.dir);
  CHECK(db->recovery().needed);
  session s = db->open_session();
  CHECK(db->status_of(first) == transaction_status::committed);
  // Wholly present or wholly absent, and status_of says which.
  std::int64_t value = s.read_i64({2, 0}, 64);
  if (db->status_of(second) == transaction_status::committed)
    CHECK(value == 11);
  else
    CHECK(value == 1);
  db->close();
}
