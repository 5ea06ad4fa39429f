// dw_batcher on the deterministic scheduler. Batches handed over together share one ring
// fdatasync (D3), and none is written in place before it (D1). With a ring that holds one
// batch of incompressible pages: a batch that finds no room waits at the batcher, hurries
// the retirement of the batch in the ring, and is written into the space that retirement
// frees (never before: D2), once a header past it is durable; the checkpointer's flush
// request sent meanwhile is answered only after the waiting batch is written. A writer's flush request while batches merely
// wait for the next drain (the ring has room) hurries no retirement fsync.
#include "actors/dw_batcher.hpp"
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

constexpr storage::rel_id rel = 3;
constexpr std::uint32_t batch = 8;

struct batcher_fixture : test::deterministic_fixture, test::engine_fixture {
  messages::sync_worker_actor worker;
  messages::dw_batcher_actor batcher;

  explicit batcher_fixture(const char* ring_pages = "16")
    : engine_fixture({"torn_page_protection=doublewrite", "doublewrite_batch_pages=8",
                      std::string("doublewrite_ring_pages=") + ring_pages, "write_back_sweep=0"}) {
    worker = actors::spawn_sync_worker(system, engine, false);
    batcher = actors::spawn_dw_batcher(system, engine, worker, false);
  }
  ~batcher_fixture() {
    caf::anon_send_exit(batcher, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    run();
  }

  // Commits a change to each of `batch` pages from `first` (for a real LSN), fills each
  // page past its header with random bytes unless `compressible` (so the batch does not
  // compress, and two records do not fit a 16-page ring), and stages them into a chunk as
  // a writer would.
  std::uint32_t stage(storage::block_id first, unsigned seed, bool compressible = false) {
    storage::buffer_pool& pool = *engine.pool;
    const std::size_t page_size = pool.page_size();
    std::uint32_t chunk = engine.ring->acquire({});
    for (std::uint32_t i = 0; i < batch; ++i) {
      storage::page_id id{rel, first + i};
      touch(rel, id.block);
      if (compressible) {
        storage::buffer_id buffer = pool.pin(id);
        stage_buffer(chunk, i, buffer);
        pool.unpin(buffer);
        continue;
      }
      auto noise = storage::test::random_bytes(page_size - storage::page_header_size, seed * 100 + i);
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
    REQUIRE(engine.pool->start_write(buffer, engine.ring->slot_memory(chunk, slot), &entry.id,
                                     &entry.lsn));
    engine.ring->entries(chunk).push_back(entry);
  }

  void hand_over(std::uint32_t chunk) {
    caf::anon_send(batcher, messages::dw_batch_ready{
                              chunk, batch, static_cast<std::uint8_t>(messages::actor_role::bgwriter)});
  }

  // Trace events of `type`.
  std::size_t events(const std::string& type) const {
    const auto& all = engine.trace->events();
    return static_cast<std::size_t>(
      std::count_if(all.begin(), all.end(), [&](const auto& event) { return type == event.type; }));
  }

  // Index of the first trace event of `type` for `chunk`, or the event count if none.
  std::size_t first_event(const std::string& type, std::uint32_t chunk) const {
    const auto& all = engine.trace->events();
    for (std::size_t i = 0; i < all.size(); ++i)
      if (type == all[i].type && all[i].a == chunk)
        return i;
    return all.size();
  }
};

TEST_CASE("dw_batcher: batches handed over together share one ring fsync, before any in-place write") {
  batcher_fixture f("64");
  f.create_file(rel);
  std::vector<std::uint32_t> chunks;
  for (unsigned i = 0; i < 3; ++i)
    chunks.push_back(f.stage(i * batch, i, true));
  for (std::uint32_t chunk : chunks)
    f.hand_over(chunk);
  f.run();
  const auto& counters = f.engine.ring->counters();
  CHECK(counters.batches.load() == 3);
  CHECK(counters.fsyncs.load() == 1);
  std::size_t last_written = 0;
  for (std::uint32_t chunk : chunks)
    last_written = std::max(last_written, f.first_event("dw_written", chunk));
  for (std::uint32_t chunk : chunks) {
    CHECK(last_written < f.first_event("dw_fsynced", chunk)); // one sync after every record
    CHECK(f.first_event("dw_fsynced", chunk) < f.first_event("dw_inplace_write", chunk)); // D1
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
  REQUIRE(f.engine.ring->capacity_bytes() < 2 * storage::max_record_bytes(batch, f.engine.pool->page_size()));
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

  const auto& ring = *f.engine.ring;
  CHECK(f.engine.ring->counters().ring_full.load() >= 1);
  CHECK(f.engine.ring->counters().batches.load() == 2);
  // The second record went into the first's space only after the first was FREE (D2) and
  // a header past it was durable: a header alone, as no other batch was there to carry it.
  CHECK(f.first_event("dw_free", first) < f.first_event("dw_horizon_synced", 0));
  CHECK(f.first_event("dw_horizon_synced", 0) < f.first_event("dw_written", second));
  CHECK(f.engine.ring->counters().horizon_fsyncs.load() == 1);
  CHECK(f.engine.ring->counters().fsyncs.load() == 3);
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
  REQUIRE(f.engine.ring->state(written) == storage::dw_state::data_written);
  // Two more batches queued for the next drain, and the flush request a writer sends when it
  // finds no staging memory. The ring has room: retiring the first batch would free
  // nothing anyone waits for, and would cost an fsync of the data file.
  f.hand_over(f.stage(batch, 2, true));
  f.hand_over(f.stage(2 * batch, 3, true));
  caf::anon_send(f.batcher, messages::dw_flush_request{});
  f.run();
  CHECK(f.engine.ring->counters().batches.load() == 3);
  CHECK(f.events("sync_now") == 0);
  CHECK(f.engine.syncs.fsyncs.load() == 0);
  CHECK(f.engine.ring->state(written) == storage::dw_state::data_written);
  CHECK_FALSE(f.engine.failed());
}

} // namespace
} // namespace tidemark
