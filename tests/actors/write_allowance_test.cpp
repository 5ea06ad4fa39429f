// write_allowance: pages earned at the limit's rate as time passes, spent as written, at
// most a second's worth banked; no limit allows everything.
#include "actors/write_allowance.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <limits>

namespace tidemark::actors {
namespace {

using std::chrono::milliseconds;

TEST_CASE("write allowance: earns at the limit's rate, spends what was written, banks a second") {
  write_allowance a;
  const auto start = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  constexpr std::uint64_t limit = 800 * 1024;  // 100 pages of 8 kB a second
  CHECK(a.available(limit, 8192, start) == 0); // nothing earned yet
  CHECK(a.available(limit, 8192, start + milliseconds(100)) == 10);
  a.spend(10);
  CHECK(a.available(limit, 8192, start + milliseconds(150)) == 5);
  a.spend(2); // wrote less than allowed: the rest stays
  CHECK(a.available(limit, 8192, start + milliseconds(200)) == 8);
  a.spend(8);
  CHECK(a.available(limit, 8192, start + milliseconds(10'200)) == 100); // a second, not ten
  CHECK(a.available(0, 8192, start + milliseconds(10'300)) ==
        std::numeric_limits<std::size_t>::max());
  CHECK(a.available(limit, 8192, start + milliseconds(10'400)) == 0); // the limit starts anew
}

} // namespace
} // namespace tidemark::actors
