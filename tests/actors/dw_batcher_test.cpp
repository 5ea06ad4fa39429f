// dw_batcher on the deterministic scheduler. Batches handed over together share one ring
// fdatasync (D3), and none is written in place before it (D1). With a ring that holds one
// batch of incompressible pages: a batch that finds no room waits at the batcher, hurries
// the retirement of the batch in the ring, and is written into the space that retirement
// frees (never before: D2), once a header past it is durable; the checkpointer's flush
// request sent meanwhile is answered only after the waiting batch is written. A writer's flush
// request while batches merely wait for the next drain (the ring has room) hurries no retirement
// fsync. Small batches of the bgwriter wait doublewrite_flush_delay for company while sessions have
// victims, and go at once when a session's victims, a flush request or a full batch's pages arrive,
// or when the victim supply runs nearly dry. A writer's sink that staged nothing keeps no chunk.
#include "actors/dw_batcher.hpp"
#include "actors/page_sinks.hpp"
#include "actors/sync_worker.hpp"

#include "deterministic_fixture.hpp"
#include "engine_fixture.hpp"
#include "storage/doublewrite_record.hpp"
#include "tests/storage/test_support.hpp"

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <optional>

namespace tidemark {
namespace {

using messages::trace_type;

constexpr storage::rel_id rel = 3;
constexpr std::uint32_t batch = 8;

struct batcher_fixture : test::deterministic_fixture, test::engine_fixture {
  messages::sync_worker_actor worker;
  messages::dw_batcher_actor batcher;

  explicit batcher_fixture(const char* ring_pages = "16", std::vector<std::string> more = {})
    : engine_fixture(
        with(std::move(more),
             {"torn_page_protection=doublewrite", "doublewrite_batch_pages=8",
              std::string("doublewrite_ring_pages=") + ring_pages, "write_back_sweep=0"})) {
    worker = actors::spawn_sync_worker(system, engine, false);
    batcher = actors::spawn_dw_batcher(system, engine, worker, false);
  }
  ~batcher_fixture() {
    caf::anon_send_exit(batcher, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    run();
  }

  static std::vector<std::string> with(std::vector<std::string> more,
                                       std::vector<std::string> base) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  }

  // Commits a change to each of `pages` pages from `first` (for a real LSN), fills each
  // page past its header with random bytes unless `compressible` (so the batch does not
  // compress, and two records do not fit a 16-page ring), and stages them into a chunk as
  // a writer would.
  std::uint32_t stage(storage::block_id first, unsigned seed, bool compressible = false,
                      std::uint32_t pages = batch) {
    storage::buffer_pool& pool = *engine.store.pool;
    const std::size_t page_size = pool.page_size();
    std::uint32_t chunk = engine.store.ring->acquire({});
    for (std::uint32_t i = 0; i < pages; ++i) {
      storage::page_id id{rel, first + i};
      touch(rel, id.block);
      if (compressible) {
        storage::buffer_id buffer = pool.pin(id);
        stage_buffer(chunk, i, buffer);
        pool.unpin(buffer);
        continue;
      }
      auto noise =
        storage::test::random_bytes(page_size - storage::page_header_size, seed * 100 + i);
      storage::buffer_id buffer = pool.pin(id);
      pool.lock_exclusive(buffer);
      std::memcpy(static_cast<unsigned char*>(pool.page(buffer)) + storage::page_header_size,
                  noise.data(), noise.size());
      pool.mark_dirty(buffer);
      pool.unlock_exclusive(buffer);
      pool.unpin(buffer);
      stage_buffer(chunk, i, buffer);
    }
    return chunk;
  }

  void stage_buffer(std::uint32_t chunk, std::uint32_t slot, storage::buffer_id buffer) {
    storage::dw_entry entry;
    entry.buffer = buffer;
    REQUIRE(engine.store.pool->start_write(buffer, engine.store.ring->slot_memory(chunk, slot),
                                           &entry.id, &entry.lsn));
    engine.store.ring->entries(chunk).push_back(entry);
  }

  void hand_over(std::uint32_t chunk,
                 messages::actor_role source = messages::actor_role::bgwriter) {
    auto pages = static_cast<std::uint32_t>(engine.store.ring->entries(chunk).size());
    caf::anon_send(batcher,
                   messages::dw_batch_ready{chunk, pages, static_cast<std::uint8_t>(source)});
  }

  // Puts clean, unpinned buffers nobody used lately into the victim supply, as the
  // bgwriter does: sessions have victims, so no one waits for a batch being written.
  void fill_supply(storage::rel_id other) {
    storage::buffer_pool& pool = *engine.store.pool;
    for (storage::block_id b = 0; b < 3 * pool.size(); ++b) // sweeps age buffers to usage 0
      pool.unpin(pool.pin({other, b}));
    for (storage::buffer_id b = 0; b < pool.size(); ++b)
      if (pool.is_reusable(b))
        pool.offer_victim(b);
    REQUIRE(pool.supply_size() >= pool.supply_low_water() / 4);
  }

  // Trace events of `type`.
  std::size_t events(trace_type type) const {
    const auto& all = engine.store.trace->events();
    return static_cast<std::size_t>(
      std::count_if(all.begin(), all.end(), [&](const auto& event) { return type == event.type; }));
  }

  // Index of the first trace event of `type` for `chunk`. A missing event fails the test:
  // an order check must never pass because one of its events did not happen.
  std::size_t first_event(trace_type type, std::uint32_t chunk) const {
    const auto& all = engine.store.trace->events();
    for (std::size_t i = 0; i < all.size(); ++i)
      if (type == all[i].type && all[i].a == chunk)
        return i;
    FAIL("no " << messages::to_string(type) << " event for " << chunk);
    return all.size();
  }
};

TEST_CASE("dw_batcher: batches handed over together share one ring fsync, before any in-place "
          "write") {
  batcher_fixture f("64");
  f.create_file(rel);
  std::vector<std::uint32_t> chunks;
  for (unsigned i = 0; i < 3; ++i)
    chunks.push_back(f.stage(i * batch, i, true));
  for (std::uint32_t chunk : chunks)
    f.hand_over(chunk);
  f.run();
  const auto& counters = f.engine.store.ring->counters();
  CHECK(counters.batches.load() == 3);
  CHECK(counters.fsyncs.load() == 1);
  std::size_t last_written = 0;
  for (std::uint32_t chunk : chunks)
    last_written = std::max(last_written, f.first_event(trace_type::dw_written, chunk));
  for (std::uint32_t chunk : chunks) {
    CHECK(last_written <
          f.first_event(trace_type::dw_fsynced, chunk)); // one sync after every record
    CHECK(f.first_event(trace_type::dw_fsynced, chunk) <
          f.first_event(trace_type::dw_inplace_write, chunk)); // D1
  }
  f.hand_over(f.stage(3 * batch, 3, true)); // alone: its own fsync
  f.run();
  CHECK(counters.batches.load() == 4);
  CHECK(counters.fsyncs.load() == 2);
  CHECK_FALSE(f.engine.failed());
}

TEST_CASE("dw_batcher: a batch that finds the ring full waits until a retirement frees room") {
  batcher_fixture f;
  f.create_file(rel);
  REQUIRE(f.engine.store.ring->capacity_bytes() <
          2 * storage::max_record_bytes(batch, f.engine.store.pool->page_size()));
  std::uint32_t first = f.stage(0, 1);
  std::uint32_t second = f.stage(batch, 2);
  f.hand_over(first);
  f.hand_over(second);
  std::optional<messages::dw_flushed> flushed;
  f.system.spawn([&](caf::event_based_actor* self) {
    self->request(f.batcher, caf::infinite, messages::dw_flush_request{})
      .then([&](const messages::dw_flushed& done) { flushed = done; });
  });
  f.run();

  const auto& ring = *f.engine.store.ring;
  CHECK(f.engine.store.ring->counters().ring_full.load() >= 1);
  CHECK(f.engine.store.ring->counters().batches.load() == 2);
  // The second record went into the first's space only after the first was FREE (D2) and
  // a header past it was durable: a header alone, as no other batch was there to carry it.
  CHECK(f.first_event(trace_type::dw_free, first) <
        f.first_event(trace_type::dw_horizon_synced, 0));
  CHECK(f.first_event(trace_type::dw_horizon_synced, 0) <
        f.first_event(trace_type::dw_written, second));
  CHECK(f.engine.store.ring->counters().horizon_fsyncs.load() == 1);
  CHECK(f.engine.store.ring->counters().fsyncs.load() == 3);
  REQUIRE(flushed.has_value());
  CHECK(flushed->batches == 2); // answered after the waiting batch was written
  CHECK(ring.state(first) == storage::dw_state::free); // and both retired in the end
  CHECK(ring.state(second) == storage::dw_state::free);
  CHECK_FALSE(f.engine.failed());
}

TEST_CASE("dw_batcher: a writer waiting for staging while batches are queued hurries no fsync") {
  batcher_fixture f("64");
  f.create_file(rel);
  std::uint32_t written = f.stage(0, 1, true);
  f.hand_over(written);
  f.run(); // written in place: DATA_WRITTEN, waiting for an fsync of its file
  REQUIRE(f.engine.store.ring->state(written) == storage::dw_state::data_written);
  // Two more batches queued for the next drain, and the flush request a writer sends when it
  // finds no staging memory. The ring has room: retiring the first batch would free
  // nothing anyone waits for, and would cost an fsync of the data file.
  f.hand_over(f.stage(batch, 2, true));
  f.hand_over(f.stage(2 * batch, 3, true));
  caf::anon_send(f.batcher, messages::dw_flush_request{});
  f.run();
  CHECK(f.engine.store.ring->counters().batches.load() == 3);
  CHECK(f.events(trace_type::sync_now) == 0);
  CHECK(f.engine.counters.syncs.fsyncs.load() == 0);
  CHECK(f.engine.store.ring->state(written) == storage::dw_state::data_written);
  CHECK_FALSE(f.engine.failed());
}

TEST_CASE("dw_batcher: small background batches wait doublewrite_flush_delay to share one ring "
          "fsync, unless someone waits for them") {
  batcher_fixture f("64", {"doublewrite_flush_delay=5ms", "shared_buffers=256"});
  f.create_file(rel);
  const auto& counters = f.engine.store.ring->counters();
  std::vector<std::uint32_t> chunks;
  for (unsigned i = 0; i < 6; ++i) // two pages each; the last, a full batch
    chunks.push_back(f.stage(i * batch, i, true, i == 5 ? batch : 2));
  f.fill_supply(rel + 1);
  const std::uint64_t fsyncs = counters.fsyncs.load();

  f.hand_over(chunks[0]);
  f.run();
  f.hand_over(chunks[1]);
  f.run();
  CHECK(f.events(trace_type::dw_written) == 0); // held: sessions have victims, no one waits
  f.scheduler.advance_time(std::chrono::milliseconds(4));
  f.run();
  CHECK(f.events(trace_type::dw_written) == 0);
  f.scheduler.advance_time(std::chrono::milliseconds(1)); // the first batch's delay is over
  f.run();
  CHECK(counters.batches.load() == 2);
  CHECK(counters.fsyncs.load() == fsyncs + 1); // one fdatasync for both (D3)
  CHECK(f.first_event(trace_type::dw_written, chunks[1]) <
        f.first_event(trace_type::dw_fsynced, chunks[0]));

  // A session's victims are not held, and take a held batch along.
  f.hand_over(chunks[2]);
  f.run();
  CHECK(counters.batches.load() == 2);
  f.hand_over(chunks[3], messages::actor_role::backend);
  f.run();
  CHECK(counters.batches.load() == 4);
  CHECK(counters.fsyncs.load() == fsyncs + 2);

  // A flush request (the checkpointer before its sync phase, a writer finding no chunk)
  // drains at once; so does a full batch's worth of pages.
  f.hand_over(chunks[4]);
  f.run();
  CHECK(counters.batches.load() == 4);
  caf::anon_send(f.batcher, messages::dw_flush_request{});
  f.run();
  CHECK(counters.batches.load() == 5);
  f.hand_over(chunks[5]);
  f.run();
  CHECK(counters.batches.load() == 6);
  CHECK(counters.fsyncs.load() == fsyncs + 4);
  f.scheduler.advance_time(std::chrono::milliseconds(10)); // stale timers change nothing
  f.run();
  CHECK(counters.fsyncs.load() == fsyncs + 4);
  CHECK_FALSE(f.engine.failed());
}

TEST_CASE("dw_batcher: with the victim supply nearly empty, a small background batch is "
          "synced at once") {
  batcher_fixture f("64", {"doublewrite_flush_delay=5ms", "shared_buffers=256"});
  f.create_file(rel);
  REQUIRE(f.engine.store.pool->supply_size() < f.engine.store.pool->supply_low_water() / 4);
  f.hand_over(f.stage(0, 1, true, 2));
  f.run();
  CHECK(f.engine.store.ring->counters().batches.load() == 1);
  CHECK_FALSE(f.engine.failed());
}

TEST_CASE("dw_batcher: a writer's sink that staged nothing holds no ring chunk after its flush") {
  // A 16-page ring of 8-page batches has two staging areas. An idle bgwriter and an idle
  // checkpointer each keeping an empty chunk once left redo waiting for one forever.
  batcher_fixture f;
  f.create_file(rel);
  auto bgwriter = actors::make_buffer_sink(f.engine, storage::write_source::bgwriter);
  auto checkpointer = actors::make_buffer_sink(f.engine, storage::write_source::checkpointer);
  storage::buffer_pool& pool = *f.engine.store.pool;
  storage::buffer_id clean = pool.pin({rel, 100}); // never written: nothing to write
  pool.unpin(clean);
  CHECK_FALSE(bgwriter->add(clean, true));
  CHECK_FALSE(checkpointer->add(clean, false));
  bgwriter->flush();
  checkpointer->flush();
  std::uint32_t first = 0, second = 0;
  CHECK(f.engine.store.ring->try_acquire(&first));
  CHECK(f.engine.store.ring->try_acquire(&second));
  f.engine.store.ring->give_back(first);
  f.engine.store.ring->give_back(second);
  CHECK_FALSE(f.engine.failed());
}

} // namespace
} // namespace tidemark
