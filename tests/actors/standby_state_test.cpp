// The standby's replay delay (standby_state::replay_delay): the time since the primary
// wrote the oldest WAL not replayed yet, from the primary's clock in its answers. Before,
// the status said how long ago the primary last answered, which read 0.0 s beside a
// replay 60 MB behind a primary that answered every second.
#include "actors/standby_state.hpp"

#include <doctest/doctest.h>

using tidemark::actors::standby_state;

TEST_CASE("standby_state: replay delay is the age of the oldest WAL not replayed") {
  standby_state state;
  constexpr std::int64_t second = 1'000'000;
  CHECK(state.replay_delay(100 * second) == 0); // the primary has not answered yet
  state.note_primary_clock(1000, 10 * second);
  state.note_primary_clock(1000, 11 * second); // nothing new was durable: keeps 10 s
  state.note_primary_clock(5000, 12 * second);
  state.note_primary_clock(9000, 20 * second);
  state.replayed.store(0);
  CHECK(state.replay_delay(30 * second) == doctest::Approx(20)); // WAL durable at 10 s
  state.replayed.store(1000);
  CHECK(state.replay_delay(30 * second) == doctest::Approx(18)); // next: durable at 12 s
  state.replayed.store(4999);
  CHECK(state.replay_delay(30 * second) == doctest::Approx(18));
  state.replayed.store(5000);
  CHECK(state.replay_delay(30 * second) == doctest::Approx(10)); // answers every second
  state.replayed.store(9000);                                    // do not hide the delay
  CHECK(state.replay_delay(30 * second) == 0);
  state.note_primary_clock(9500, 31 * second); // older samples replayed: dropped
  CHECK(state.replay_delay(32 * second) == doctest::Approx(1));
}
