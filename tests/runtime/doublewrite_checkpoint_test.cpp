// The doublewrite phase-1 hang of the first doublewrite proposal: a checkpoint whose dirty
// pages are many times what the ring holds, none of them compressible, with no bgwriter
// cleaning, so that the checkpointer itself must wait for ring space again and again
// while the batcher retires batches behind it. Twenty fresh runs; each checkpoint must
// complete, with every page written by the checkpointer and the checkpointer seen waiting.
#include "runtime/api_bridge.hpp"
#include "scratch_directory.hpp"

#include <tidemark/database.hpp>

#include <doctest/doctest.h>

#include <random>
#include <vector>

namespace tidemark {
namespace {

constexpr std::uint32_t pages = 400; // 25 times the ring's 16 pages
constexpr std::uint32_t pages_per_transaction = 8;

// Fills relation 1's first `pages` blocks with random bytes, committed, left dirty.
void dirty_uncompressible_pages(session& s, std::uint32_t page_size, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<unsigned char> bytes(page_size - 64);
  for (std::uint32_t first = 0; first < pages; first += pages_per_transaction) {
    s.begin();
    for (std::uint32_t block = first; block < first + pages_per_transaction; ++block) {
      for (unsigned char& b : bytes)
        b = static_cast<unsigned char>(random());
      s.write_bytes({1, block}, 64, bytes.data(), static_cast<std::uint32_t>(bytes.size()));
    }
    s.commit();
  }
}

TEST_CASE("doublewrite: a checkpoint of uncompressible pages 25 times the ring completes, the "
          "checkpointer waiting for ring space (20 runs)") {
  const std::vector<std::string> settings = {"torn_page_protection=doublewrite",
                                             "doublewrite_ring_pages=16",
                                             "doublewrite_batch_pages=8",
                                             "shared_buffers=1024",
                                             "bgwriter_lru_maxpages=0",
                                             "checkpoint_timeout=1h",
                                             "max_wal_size=1GB",
                                             "log_checkpoints=off"};
  for (int run = 0; run < 20; ++run) {
    CAPTURE(run);
    test::scratch_directory scratch("tidemark-dw-checkpoint");
    create_options create;
    create.settings = settings;
    database::create(scratch.dir, create);
    open_options options;
    options.settings = settings;
    options.trace = true;
    auto db = database::open(scratch.dir, options);
    {
      session s = db->open_session();
      dirty_uncompressible_pages(s, db->page_size(), 20261206 + run);
    }
    runtime::instance& engine = internal_access::of(*db);
    const std::uint64_t before = db->stats().buffers.written_by_checkpointer;
    db->checkpoint();
    CHECK(db->stats().buffers.written_by_checkpointer - before >= pages);
    std::size_t checkpointer_waits = 0;
    for (const messages::trace_event& e : engine.internals().store.trace->events())
      checkpointer_waits += e.type == messages::trace_type::dw_slot_wait &&
                            e.sender == messages::actor_role::checkpointer;
    CHECK(checkpointer_waits > 0);
    CHECK(engine.internals().store.ring->counters().ring_full.load() > 0);
    db->close();
  }
}

} // namespace
} // namespace tidemark
