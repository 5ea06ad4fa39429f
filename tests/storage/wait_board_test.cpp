// The sleeping waits of the buffer pool: no wake-up is ever lost (two threads hand a turn
// back and forth a hundred thousand times, each sleeping until it is theirs), keys that
// share a stripe do not wake the wrong waiter for good, and the pool's waits for a
// latch, for another thread's write and for pins end when the holder lets go.
#include "storage/buffer_pool.hpp"
#include "storage/wait_board.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace tidemark::storage {
namespace {

TEST_CASE("wait_board: a turn handed back and forth 100 000 times is never lost") {
  wait_board board;
  std::atomic<int> turn{0};
  constexpr int rounds = 100000;
  auto player = [&](int me) {
    for (int i = 0; i < rounds; ++i) {
      board.wait(7, [&] { return turn.load() == me; });
      turn.store(1 - me);
      board.wake(7);
    }
  };
  std::thread a(player, 0), b(player, 1);
  a.join();
  b.join();
  CHECK(turn.load() == 0);
}

TEST_CASE("wait_board: waiters on keys that share a stripe each wake for their own key") {
  wait_board board;
  std::atomic<int> released{0};
  std::vector<std::thread> waiters;
  for (int k = 0; k < 4; ++k) // keys 0, 61, 122, 183 share one stripe
    waiters.emplace_back([&, k] { board.wait(61u * k, [&] { return released.load() > k; }); });
  for (int k = 0; k < 4; ++k) {
    released.store(k + 1);
    board.wake(61u * k);
  }
  for (auto& w : waiters)
    w.join();
  CHECK(released.load() == 4);
}

TEST_CASE("buffer pool: latch, write and pin waits end when the holder lets go") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  relation_files files(*io, dir.path(), 8192, 16 * 8192);
  buffer_pool pool(16, files, true);
  buffer_id b = pool.pin({1, 0});
  SUBCASE("an exclusive latch") {
    pool.lock_exclusive(b);
    std::atomic<bool> got{false};
    std::thread reader([&] {
      pool.lock_shared(b);
      got.store(true);
      pool.unlock_shared(b);
    });
    CHECK(!got.load()); // it cannot have the latch yet
    pool.unlock_exclusive(b);
    reader.join();
    CHECK(got.load());
  }
  SUBCASE("every pin reserved") {
    pool.reserve_pins(16);
    std::atomic<bool> got{false};
    std::thread session([&] {
      pool.reserve_pins(1);
      got.store(true);
      pool.release_pins(1);
    });
    CHECK(!got.load());
    pool.release_pins(16);
    session.join();
    CHECK(got.load());
  }
  pool.unpin(b);
}

} // namespace
} // namespace tidemark::storage
