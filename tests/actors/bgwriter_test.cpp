// Who wrote each buffer, on the deterministic scheduler: a session writes the dirty
// victims it evicts itself and they count as the sessions'; the bgwriter's rounds count
// as the bgwriter's, at most bgwriter_lru_maxpages a round, every round the cap stopped
// counted in maxwritten_clean, and none at all with bgwriter_lru_maxpages = 0; a
// checkpoint's writes count as the checkpointer's; background_write_limit caps its pace.
#include "actors/bgwriter.hpp"

#include "checkpoint_fixture.hpp"

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

namespace tidemark {
namespace {

using messages::trace_type;
using storage::write_source;

// A 64-buffer pool with the bgwriter spawned beside the checkpointer and its sync worker.
struct bgwriter_fixture : test::checkpoint_fixture {
  messages::bgwriter_actor bgwriter;

  explicit bgwriter_fixture(const std::string& lru_maxpages, const std::string& write_limit = "0")
    : test::checkpoint_fixture({"shared_buffers=64", "bgwriter_delay=50ms",
                                "bgwriter_lru_maxpages=" + lru_maxpages,
                                "bgwriter_lru_multiplier=2", "checkpoint_timeout=3600s",
                                "background_write_limit=" + write_limit}) {
    bgwriter = actors::spawn_bgwriter(system, engine, false);
    run();
  }
  ~bgwriter_fixture() {
    caf::anon_send_exit(bgwriter, caf::exit_reason::user_shutdown);
    run();
  }

  std::uint64_t written(write_source source) const { return engine.store.writer->written(source); }
  std::uint64_t capped_rounds() const { return engine.counters.bgwriter.maxwritten_clean.load(); }

  /// Commits to the next `count` blocks of relation 3: with 64 buffers, a session evicts
  /// dirty pages and writes them itself (no actor runs meanwhile).
  void dirty_blocks(storage::block_id count) {
    for (storage::block_id end = next_block + count; next_block < end; ++next_block)
      touch(3, next_block);
  }

  /// The bgwriter's rounds that wrote something: how many each wrote.
  std::vector<std::uint64_t> round_writes() const {
    std::vector<std::uint64_t> out;
    for (const auto& e : events(trace_type::bgwriter_write))
      out.push_back(e.a);
    return out;
  }

  /// Lets the bgwriter run `rounds` rounds (its wake-ups from the sessions' allocations,
  /// queued meanwhile, run too), committing `per_round` more blocks before each.
  void rounds(int rounds, storage::block_id per_round) {
    for (int i = 0; i < rounds; ++i) {
      dirty_blocks(per_round);
      advance(std::chrono::milliseconds(50));
    }
  }

  /// 200 blocks dirtied (the pool turned over three times), then `count` rounds of 40.
  void fill_then_rounds(int count) {
    dirty_blocks(200);
    advance(std::chrono::milliseconds(50));
    rounds(count, 40);
  }

  storage::block_id next_block = 0;
};

TEST_CASE("bgwriter: sessions count their own victims' writes, the bgwriter its rounds' (capped by "
          "bgwriter_lru_maxpages)") {
  bgwriter_fixture f("4");
  f.dirty_blocks(200);
  const std::uint64_t by_sessions = f.written(write_source::backend);
  CHECK(by_sessions >= 200 - 64); // every page but the 64 the pool holds went out as a victim
  CHECK(f.written(write_source::bgwriter) == 0); // no actor has run yet
  f.advance(std::chrono::milliseconds(50));
  f.rounds(10, 40);
  std::vector<std::uint64_t> rounds = f.round_writes();
  REQUIRE_FALSE(rounds.empty());
  std::uint64_t sum = 0, capped = 0;
  for (std::uint64_t written : rounds) {
    CHECK(written <= 4);
    sum += written;
    capped += written == 4;
  }
  CHECK(f.written(write_source::bgwriter) == sum);
  CHECK(capped >= 1); // 40 allocations a round ask for 80 clean buffers: the cap stops it
  CHECK(f.capped_rounds() == capped);
  CHECK(f.written(write_source::checkpointer) == 0);
}

TEST_CASE("bgwriter: bgwriter_lru_maxpages = 0 turns LRU cleaning off") {
  bgwriter_fixture f("0");
  f.fill_then_rounds(10);
  CHECK(f.round_writes().empty());
  CHECK(f.written(write_source::bgwriter) == 0);
  CHECK(f.capped_rounds() == 0);
  CHECK(f.written(write_source::backend) >= 600 - 64); // the sessions wrote every victim
}

TEST_CASE("bgwriter: uncapped rounds write what the allocations ask for, and no round counts as "
          "capped") {
  bgwriter_fixture f("1000");
  f.fill_then_rounds(10);
  std::vector<std::uint64_t> rounds = f.round_writes();
  REQUIRE_FALSE(rounds.empty());
  std::uint64_t most = 0;
  for (std::uint64_t written : rounds)
    most = std::max(most, written);
  CHECK(most > 4);
  CHECK(f.capped_rounds() == 0);
}

TEST_CASE("bgwriter: a checkpoint's writes count as the checkpointer's, not the sessions' or the "
          "bgwriter's") {
  bgwriter_fixture f("0");
  f.dirty_blocks(40); // fits the pool: no session writes a victim
  REQUIRE(f.written(write_source::backend) == 0);
  test::checkpoint_fixture::answer a;
  f.request(a);
  f.run();
  REQUIRE(a.done);
  CHECK(a.done->buffers_written >= 40);
  CHECK(f.written(write_source::checkpointer) == a.done->buffers_written);
  CHECK(f.written(write_source::backend) == 0);
  CHECK(f.written(write_source::bgwriter) == 0);
}

TEST_CASE("bgwriter: background_write_limit caps what its rounds write over time") {
  // 1 MB/s of 8 kB pages: 128 pages a second, 6.4 a 50 ms round, where the allocations
  // ask for 80 a round.
  bgwriter_fixture f("1000", "1MB");
  f.fill_then_rounds(20); // 1 s
  const std::uint64_t written = f.written(write_source::bgwriter);
  CHECK(written <= 128 + 7);
  CHECK(written >= 64); // it cleaned at the limit's pace, not less
}

TEST_CASE("bgwriter: a round with nothing to add to the supply is not woken again by every "
          "allocation, and cleans again a tenth of its delay later") {
  // A pool filling its never-used buffers, as a bulk load does: the first allocation finds
  // the supply empty and sounds the alarm; the round it wakes finds nothing to offer (the
  // buffers just used are in use, the never-used ones are nobody's to offer). Rearmed, the
  // alarm would wake it again at the next allocation, for another such round.
  bgwriter_fixture f("1000");
  auto alarms = [&] { return f.engine.store.pool->counters().supply_low.load(); };
  f.dirty_blocks(8);
  REQUIRE(alarms() == 1);
  f.run(); // the round the alarm woke
  REQUIRE(f.written(write_source::bgwriter) == 0);
  f.dirty_blocks(8);
  CHECK(alarms() == 1); // still sounded: these allocations woke nobody
  f.dirty_blocks(200);  // the pool turns over: dirty victims the sessions write themselves
  f.advance(std::chrono::milliseconds(5)); // the next round, not 50 ms away
  CHECK(f.written(write_source::bgwriter) > 0);
  f.advance(std::chrono::milliseconds(5)); // its writes done, the supply is at its mark
  CHECK(f.engine.store.pool->supply_size() >= f.engine.store.pool->supply_low_water());
  f.dirty_blocks(f.engine.store.pool->supply_size()); // they drain it below the mark
  CHECK(alarms() == 2);                               // rearmed by the refill: sounded again
}

} // namespace
} // namespace tidemark
