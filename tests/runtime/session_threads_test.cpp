// A session is one thread's at a time (include/tidemark/database.hpp): a call made while
// another thread is inside a call of the same session is refused with usage_error and
// changes nothing. To hold the first thread inside commit() for as long as the test needs,
// whatever the timing, the test takes the exclusive latch of the page it changes (through
// the library's own view), so the commit waits for the latch until the test lets go.
#include "runtime/api_bridge.hpp"

#include "scratch_directory.hpp"

#include <doctest/doctest.h>

#include <string>
#include <thread>

using namespace tidemark;

TEST_CASE("session: a second thread's calls are refused while the first is inside commit(), and "
          "change nothing") {
  test::scratch_directory scratch("tidemark-session-threads");
  const std::vector<std::string> settings = {"log_checkpoints=off", "shared_buffers=1MB"};
  create_options create;
  create.settings = settings;
  create.initial_data = [](initial_loader& loader) { // relation 2's block 0 exists
    const char row[16] = "a row";
    loader.append_rows(2, row, sizeof row, 1);
  };
  database::create(scratch.dir, create);
  open_options options;
  options.settings = settings;
  auto db = database::open(scratch.dir, options);
  session s = db->open_session();
  s.begin();
  s.add_i64({2, 0}, 64, 1);
  const transaction_id id = s.id();

  storage::buffer_pool& pool = *internal_access::of(*db).internals().store.pool;
  storage::buffer_id latched = pool.pin({2, 0});
  pool.lock_exclusive(latched); // thread a's commit waits here for the page's latch
  std::string outcome;
  std::thread a([&] {
    try {
      s.commit();
      outcome = "committed";
    } catch (const std::exception& error) {
      outcome = error.what();
    }
  });
  std::string refusal; // from the first refusal on, thread a is inside commit()
  while (refusal.empty()) {
    try {
      transaction_id seen = s.id(); // thread a has not entered commit() yet
      REQUIRE(seen == id);
    } catch (const usage_error& error) {
      refusal = error.what();
    }
    std::this_thread::yield();
  }
  CHECK(refusal.find("in use by another thread") != std::string::npos);
  CHECK_THROWS_AS(s.add_i64({2, 0}, 64, 1000), usage_error);
  CHECK_THROWS_AS(s.rollback(), usage_error);
  CHECK_THROWS_AS(s.begin(), usage_error);
  pool.unlock_exclusive(latched);
  pool.unpin(latched);
  a.join();
  CHECK(outcome == "committed");
  CHECK(s.read_i64({2, 0}, 64) == 1); // the commit, and nothing of the refused add
  CHECK(db->status_of(id) == transaction_status::committed);
  db->close();
}
