// The bgwriter's arithmetic: fast attack and slow decline of the allocation estimate, the
// cleaner's position relative to the clock hand, and when it may hibernate.
#include "actors/bgwriter_estimator.hpp"

#include <doctest/doctest.h>

namespace tidemark::actors {
namespace {

TEST_CASE("bgwriter estimator: allocations jump up at once and decay slowly") {
  bgwriter_estimator e(1000, 2.0, 50);
  e.plan({0, 0, 0});
  e.finished({}, 0, 0, 0, 0);
  cleaning_plan busy = e.plan({400, 0, 400});
  CHECK(busy.recent_allocations == 400);
  CHECK(e.smoothed_alloc() == doctest::Approx(400));
  CHECK(busy.target >= 800); // multiplier 2
  e.finished(busy, 0, 400, 0, 0);
  e.plan({400, 0, 400}); // a quiet round: the estimate declines by 1/16 of the gap
  CHECK(e.smoothed_alloc() == doctest::Approx(400 - 400.0 / 16));
  e.plan({400, 0, 400});
  CHECK(e.smoothed_alloc() < 400 - 400.0 / 16);
  e.plan({900, 0, 1400}); // a burst above the estimate is taken at once
  CHECK(e.smoothed_alloc() == doctest::Approx(1000));
}

TEST_CASE("bgwriter estimator: the cleaner restarts at the hand when the hand passes it") {
  bgwriter_estimator e(100, 2.0, 50);
  cleaning_plan first = e.plan({10, 0, 0});
  CHECK(first.start == 10);
  CHECK(first.to_scan == 100);
  e.finished(first, 5, 15, 0, 5); // cleaned 10..14
  cleaning_plan ahead = e.plan({12, 0, 2});
  CHECK(ahead.start == 15);
  CHECK(ahead.to_scan == 100 - (15 - 12)); // up to one lap ahead of the hand
  e.finished(ahead, 0, 15, 0, ahead.reusable_estimate);
  cleaning_plan passed = e.plan({50, 0, 40}); // the hand ran past the cleaner
  CHECK(passed.start == 50);
  CHECK(passed.to_scan == 100);
}

TEST_CASE("bgwriter estimator: idle only when a lap ahead and nothing was allocated") {
  bgwriter_estimator e(100, 2.0, 50);
  cleaning_plan p = e.plan({0, 0, 0});
  CHECK_FALSE(e.idle());
  e.finished(p, 100, 0, 1, 100); // cleaned a whole lap
  e.plan({0, 0, 0});
  CHECK(e.idle());
  cleaning_plan q = e.plan({0, 0, 3});
  CHECK_FALSE(e.idle());
  CHECK(q.recent_allocations == 3);
}

TEST_CASE("bgwriter estimator: at least the whole pool is swept every two minutes") {
  bgwriter_estimator e(24000, 2.0, 50); // 2400 rounds in 120 s: 10 buffers per round
  e.plan({0, 0, 0});
  e.finished({}, 0, 0, 0, 0);
  cleaning_plan idle = e.plan({0, 0, 0});
  CHECK(idle.target >= 10.0);
}

} // namespace
} // namespace tidemark::actors
