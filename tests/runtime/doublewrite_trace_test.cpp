// The doublewrite write path under load (real threads, a two-batch ring, a 16-page pool,
// no checkpoint during the run), checked afterwards from its message trace:
//  - every chunk follows FREE → ALLOCATED → WRITTEN → DWB_FSYNCED → DATA_WRITTEN →
//    DATA_FSYNCED → FREE exactly, so a slot is never overwritten while live and the ring is
//    never reset under a writer (review failures 1 and 2);
//  - D1: a batch's in-place writes start only after its ring fsync;
//  - D2: a chunk is freed only after every file of its batch had an fsync that began after
//    the batch's in-place writes (after its notify request);
//  - D3 / review failure 3: at most one ring fsync per batch (batches handed over
//    together share one), never one per page, also after many wraps; beside those, an
//    fsync of the ring header alone only for a batch that found no room (ring space
//    freed behind a horizon not yet durable);
//  - D4: writers that found no free chunk waited and went on; nothing was skipped.
#include "traced_tpcb_run.hpp"

#include <doctest/doctest.h>

#include <map>

namespace tidemark {
namespace {

using messages::trace_type;

struct traced_result {
  std::vector<messages::trace_event> events;
  std::uint64_t batches = 0, ring_fsyncs = 0, horizon_fsyncs = 0, ring_full = 0, slot_waits = 0;
};

traced_result run_doublewrite(double seconds) {
  traced_result result;
  test::traced_tpcb_run({"torn_page_protection=doublewrite", "doublewrite_batch_pages=8",
                         "doublewrite_ring_pages=16", "shared_buffers=16", "checkpoint_timeout=1h",
                         "max_wal_size=1GB", "segment_size=1MB", "log_checkpoints=off"},
                        4, seconds, [&](runtime::instance& db) {
                          // Read after close: the shutdown checkpoint writes through the ring too.
                          auto& counters = db.internals().store.ring->counters();
                          result.batches = counters.batches.load();
                          result.ring_fsyncs = counters.fsyncs.load();
                          result.horizon_fsyncs = counters.horizon_fsyncs.load();
                          result.ring_full = counters.ring_full.load();
                          result.slot_waits = counters.slot_waits.load();
                          result.events = db.internals().store.trace->events();
                        });
  return result;
}

using test::is;

// The chunk a doublewrite event is about, or -1 for other events.
std::int64_t chunk_of(const messages::trace_event& e) {
  for (trace_type type :
       {trace_type::dw_acquire, trace_type::dw_give_back, trace_type::dw_batch_ready,
        trace_type::dw_written, trace_type::dw_fsynced, trace_type::dw_inplace_write,
        trace_type::dw_data_written, trace_type::sync_notify, trace_type::files_synced,
        trace_type::dw_data_fsynced, trace_type::dw_free})
    if (is(e, type))
      return static_cast<std::int64_t>(e.a);
  return -1;
}

TEST_CASE("doublewrite trace: chunk lifecycle, D1, D2, D3 and D4 hold under load with a two-batch "
          "ring") {
  traced_result run = run_doublewrite(2.0);
  const auto& events = run.events;
  const std::vector<trace_type> cycle = {trace_type::dw_acquire,       trace_type::dw_batch_ready,
                                         trace_type::dw_written,       trace_type::dw_fsynced,
                                         trace_type::dw_inplace_write, trace_type::dw_data_written,
                                         trace_type::sync_notify,      trace_type::files_synced,
                                         trace_type::dw_data_fsynced,  trace_type::dw_free};
  std::map<std::int64_t, std::size_t> position;    // chunk -> index in `cycle` of its last event
  std::map<std::int64_t, std::size_t> notified_at; // chunk -> event index of its notify request
  std::map<std::int64_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>>
    files; // chunk -> files
  std::size_t completed_cycles = 0, checked_files = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    std::int64_t chunk = chunk_of(events[i]);
    if (is(events[i], trace_type::notify_file))
      files[static_cast<std::int64_t>(events[i].a)].push_back({events[i].b, events[i].c});
    if (chunk < 0)
      continue;
    if (is(events[i], trace_type::dw_give_back)) { // an empty chunk went straight back
      CHECK(position.count(chunk));
      CHECK(position[chunk] == 0);
      position.erase(chunk);
      continue;
    }
    std::size_t expected = position.count(chunk) ? position[chunk] + 1 : 0;
    REQUIRE_MESSAGE(expected < cycle.size(), "chunk " << chunk << " event after FREE: "
                                                      << messages::to_string(events[i].type));
    CHECK_MESSAGE(cycle[expected] == events[i].type,
                  "chunk " << chunk << " at event " << i << ": "
                           << messages::to_string(events[i].type) << ", expected "
                           << messages::to_string(cycle[expected]));
    position[chunk] = expected;
    if (is(events[i], trace_type::sync_notify))
      notified_at[chunk] = i;
    if (is(events[i], trace_type::files_synced)) {
      // D2: each file of the batch had an fsync that began after the notify request.
      for (const auto& [rel, segno] : files[chunk]) {
        bool covered = false;
        for (std::size_t j = notified_at[chunk]; j < i && !covered; ++j)
          covered = is(events[j], trace_type::fsync) && events[j].a == rel && events[j].b == segno;
        CHECK_MESSAGE(covered,
                      "chunk " << chunk << " freed without an fsync of " << rel << "." << segno);
        ++checked_files;
      }
      files[chunk].clear();
    }
    if (is(events[i], trace_type::dw_free)) {
      position.erase(chunk);
      ++completed_cycles;
    }
  }
  CHECK(completed_cycles >= 10); // the two-chunk ring wrapped many times
  CHECK(checked_files >= completed_cycles);
  CHECK(run.ring_fsyncs > 0); // D3: one ring fsync per group of batches, never per page,
  CHECK(run.ring_fsyncs - run.horizon_fsyncs <= run.batches);
  CHECK(run.horizon_fsyncs <= run.ring_full); // and one of a header alone per batch kept waiting
  CHECK(run.slot_waits > 0);                  // D4 happened, and the run went on
  std::size_t waits = 0;
  for (const auto& e : events)
    waits += is(e, trace_type::dw_slot_wait);
  CHECK(waits == run.slot_waits);
}

} // namespace
} // namespace tidemark
