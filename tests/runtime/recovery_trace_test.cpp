// Crash recovery through a 16-page pool, checked from its message trace. A TPC-B-like load
// runs on the fault engine with no checkpoint (checkpoint_timeout=1h, max_wal_size=1GB),
// the power is lost, and the directory is reopened with tracing on, shared_buffers=16 and
// bgwriter_delay=10ms, so redo replays the whole load through a pool far smaller than the
// pages it dirties and evicts dirty victims all the time:
//  - the bgwriter cleans while redo runs, in full_page_writes and in doublewrite mode:
//    bgwriter_write events between the redo_begin and redo_end that startup.cpp records
//    (database.hpp: "the bgwriter cleans during redo"); redo is not left to write every
//    victim itself;
//  - in doublewrite mode every page written during recovery (the redo loop's victims, the
//    bgwriter's cleaning during redo, the end-of-recovery checkpoint) goes through the
//    batcher. Each in-place write of a batch follows that batch's ring write and ring fsync
//    (D1). Every data-file sync registration up to the end-of-recovery checkpoint record
//    comes from a batch's in-place write and names exactly that batch's files: a page
//    written directly, which a second crash during recovery could tear with no image in the
//    ring to repair it from, would show as a registration of its own. Every batch handed
//    over before that checkpoint (and the checkpoint's own) is in place before its record,
//    and each kind of writer handed over at least one batch, so all of them were checked.
// (Startup's repair from the ring, before redo, writes images that are in the ring already;
// it is not traced and not checked here.) The assertions depend on the order of events, not
// on timing, except that redo must last a few bgwriter rounds: on a 2-core machine redo
// takes 0.3–0.45 s (full_page_writes, 40 000 transactions) and 0.4–1 s (doublewrite,
// 6 000), and the bgwriter wrote in 20–60 of its rounds, also with three runs at once.
#include "traced_tpcb_run.hpp"

#include "storage/sync_table.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tidemark {
namespace {

using messages::trace_type;

using test::is;

constexpr std::uint32_t load_clients = 4;

// Creates a scale-1 directory, runs the load on the fault engine with no checkpoint, loses
// the power and abandons the database (every I/O after the power loss fails, so nothing
// marks the directory shut down); then reopens it with tracing on, a 16-page pool and
// 10 ms bgwriter rounds, and returns the trace of the recovery and of the clean shutdown
// after it.
std::vector<messages::trace_event> recover_traced(const std::vector<std::string>& mode_settings,
                                                  std::uint64_t transactions) {
  std::vector<std::string> settings = {"checkpoint_timeout=1h", "max_wal_size=1GB",
                                       "segment_size=1MB", "log_checkpoints=off"};
  settings.insert(settings.end(), mode_settings.begin(), mode_settings.end());
  char pattern[] = "/tmp/tidemark-recovery-trace-XXXXXX";
  std::string root = mkdtemp(pattern);
  std::string dir = root + "/data";
  test::create_tpcb_directory(dir, settings);
  {
    open_options options;
    options.settings = settings;
    options.faults = fault_injection{}; // fsyncs cost nothing; lose_unsynced at the end
    auto db = tidemark::database::open(dir, options);
    workload::bench_options bench;
    bench.clients = load_clients;
    bench.transactions_per_client = transactions / load_clients;
    workload::tpcb::layout shape(db->page_size(), 1);
    workload::bench_result result = workload::run_bench(*db, shape, bench, nullptr);
    REQUIRE(result.errors.empty());
    REQUIRE(result.transactions == transactions);
    statistics stats = db->stats();
    REQUIRE(stats.checkpoints.timed + stats.checkpoints.requested == 0); // redo replays it all
    db->simulate_power_loss();
  } // abandoned: its shutdown checkpoint fails on the dead engine
  std::vector<std::string> reopen = settings;
  reopen.insert(reopen.end(), {"shared_buffers=16", "bgwriter_delay=10ms"});
  runtime::instance_options options;
  options.overrides = reopen;
  options.trace = true;
  auto db = runtime::instance::open(dir, options);
  REQUIRE(db->recovery().needed);
  CHECK(db->recovery().records > transactions); // every committed transaction was replayed
  db->close();
  CHECK(db->internals().store.trace->dropped() == 0);
  std::vector<messages::trace_event> events = db->internals().store.trace->events();
  db.reset();
  std::filesystem::remove_all(root);
  return events;
}

std::size_t find(const std::vector<messages::trace_event>& events, std::size_t from,
                 trace_type type) {
  while (from < events.size() && !is(events[from], type))
    ++from;
  return from;
}

// Indices of redo_begin, redo_end, the end-of-recovery checkpoint_begin and its record.
struct recovery_bounds {
  std::size_t redo_begin, redo_end, checkpoint_begin, checkpoint_record;
};

recovery_bounds bounds_of(const std::vector<messages::trace_event>& events) {
  recovery_bounds r;
  r.redo_begin = find(events, 0, trace_type::redo_begin);
  r.redo_end = find(events, r.redo_begin, trace_type::redo_end);
  r.checkpoint_begin = r.redo_end;
  do
    r.checkpoint_begin = find(events, r.checkpoint_begin + 1, trace_type::checkpoint_begin);
  while (r.checkpoint_begin < events.size() &&
         events[r.checkpoint_begin].c !=
           std::uint64_t(messages::checkpoint_reason::end_of_recovery));
  r.checkpoint_record = find(events, r.checkpoint_begin, trace_type::checkpoint_record);
  REQUIRE(r.redo_begin < events.size());
  REQUIRE(r.redo_end < events.size());
  REQUIRE(r.checkpoint_record < events.size());
  return r;
}

// Property 2: the bgwriter wrote buffers while redo ran.
void check_bgwriter_cleans_during_redo(const std::vector<messages::trace_event>& events,
                                       const recovery_bounds& r) {
  std::size_t rounds = 0;
  std::uint64_t pages = 0;
  for (std::size_t i = r.redo_begin; i < r.redo_end; ++i)
    if (is(events[i], trace_type::bgwriter_write)) {
      ++rounds;
      pages += events[i].a;
    }
  MESSAGE("redo: " << events[r.redo_end].a << " records in "
                   << (events[r.redo_end].time_ns - events[r.redo_begin].time_ns) / 1000000
                   << " ms; the bgwriter wrote " << pages << " pages in " << rounds << " rounds");
  CHECK(rounds >= 1);
}

TEST_CASE("recovery trace: the bgwriter cleans during redo in full_page_writes mode") {
  std::vector<messages::trace_event> events =
    recover_traced({"torn_page_protection=full_page_writes"}, 40000);
  check_bgwriter_cleans_during_redo(events, bounds_of(events));
}

// A two-batch ring of 8-page batches (as in doublewrite_trace_test): redo's victim sweep
// often finds no free chunk (some 500 waits in one redo) and leaves dirty buffers to the
// bgwriter, which then writes in most of its rounds during redo. With the default 64-page batches
// and 512 MB ring the sweep, waiting for its victims' in-place writes, hands every dirty buffer it
// passes to the batcher, and the bgwriter found a buffer to write in only 0–2 of the 90–270 rounds
// of a redo (none in some runs): too few to assert on.
const std::vector<std::string> doublewrite_settings = {"torn_page_protection=doublewrite",
                                                       "doublewrite_batch_pages=8",
                                                       "doublewrite_ring_pages=16"};

// One batch's life in the trace: a chunk from its dw_acquire to the next (chunks are reused
// once freed). Event indices; npos when absent.
struct batch {
  static constexpr std::size_t npos = std::size_t(-1);
  std::uint64_t chunk = 0;
  messages::actor_role source = messages::actor_role::application;
  std::size_t ready = npos, written = npos, fsynced = npos, in_place = npos;
  std::multiset<std::pair<std::uint64_t, std::uint64_t>> registered; // in its in-place window
  std::multiset<std::pair<std::uint64_t, std::uint64_t>> notified;   // its notify_file events
};

// Breaches of one rule: how many, and the first, so a failure reads in one line.
struct breaches {
  std::size_t count = 0;
  std::string first;
  void add(const std::string& what) {
    if (count++ == 0)
      first = what;
  }
};

// (No semicolon in test names: doctest_discover_tests would cut the name there, and ctest
// would run no test case.)
TEST_CASE("recovery trace: in doublewrite mode every page recovery writes goes through the "
          "batcher (D1, no direct write) and the bgwriter cleans during redo") {
  std::vector<messages::trace_event> events = recover_traced(doublewrite_settings, 6000);
  const recovery_bounds r = bounds_of(events);
  check_bgwriter_cleans_during_redo(events, r);

  std::vector<batch> batches;
  std::map<std::uint64_t, std::size_t> latest; // chunk -> its current batch
  auto of = [&](std::uint64_t chunk) -> batch& {
    REQUIRE_MESSAGE(latest.count(chunk), "chunk " << chunk << " used before any dw_acquire");
    return batches[latest[chunk]];
  };
  std::size_t window = batch::npos; // the batch between dw_inplace_write and dw_data_written
  breaches direct;
  // Registrations are checked up to the end-of-recovery checkpoint record; the rest of the
  // trace (the clean shutdown) only completes the batches' notify_file sets.
  for (std::size_t i = 0; i < events.size(); ++i) {
    const messages::trace_event& e = events[i];
    if (is(e, trace_type::dw_acquire)) {
      latest[e.a] = batches.size();
      batches.emplace_back();
      batches.back().chunk = e.a;
    } else if (is(e, trace_type::dw_batch_ready)) {
      of(e.a).ready = i;
      of(e.a).source = e.sender;
    } else if (is(e, trace_type::dw_written)) {
      of(e.a).written = i;
    } else if (is(e, trace_type::dw_fsynced)) {
      of(e.a).fsynced = i;
    } else if (is(e, trace_type::dw_inplace_write)) {
      REQUIRE(window == batch::npos); // the batcher writes one batch at a time
      of(e.a).in_place = i;
      window = latest[e.a];
    } else if (is(e, trace_type::dw_data_written)) {
      REQUIRE(window == latest[e.a]);
      window = batch::npos;
    } else if (is(e, trace_type::notify_file)) {
      of(e.a).notified.insert({e.b, e.c});
    } else if (is(e, trace_type::sync_register) &&
               e.c == std::uint64_t(storage::file_kind::relation) && i < r.checkpoint_record) {
      if (window != batch::npos)
        batches[window].registered.insert({e.a, e.b});
      else
        direct.add("relation " + std::to_string(e.a) + " segment " + std::to_string(e.b) + " by " +
                   messages::to_string(e.sender) + " at event " + std::to_string(i));
    }
  }

  breaches not_in_place, no_ring_write, no_ring_fsync, foreign_registrations;
  std::size_t in_place = 0, victims_in_redo = 0, bgwriter_in_redo = 0, from_checkpoint = 0;
  for (const batch& b : batches) {
    const std::string name =
      "chunk " + std::to_string(b.chunk) + " handed over at event " + std::to_string(b.ready);
    // Handed over during recovery: before the end-of-recovery checkpoint began, or by it.
    bool by_checkpoint = b.source == messages::actor_role::checkpointer &&
                         b.ready > r.checkpoint_begin && b.ready < r.checkpoint_record;
    if (b.ready < r.checkpoint_begin || by_checkpoint) {
      if (!(b.in_place < r.checkpoint_record))
        not_in_place.add(name);
      bool in_redo = b.ready > r.redo_begin && b.ready < r.redo_end;
      victims_in_redo += in_redo && b.source == messages::actor_role::backend;
      bgwriter_in_redo += in_redo && b.source == messages::actor_role::bgwriter;
      from_checkpoint += by_checkpoint;
    }
    if (b.in_place == batch::npos || b.in_place > r.checkpoint_record)
      continue;
    ++in_place;
    // D1: the batch's ring write and ring fsync came before any of its in-place writes.
    if (!(b.written < b.fsynced))
      no_ring_write.add(name);
    if (!(b.fsynced < b.in_place))
      no_ring_fsync.add(name + ", in place at " + std::to_string(b.in_place));
    // Its window registered exactly its own files: no direct write slipped in unseen.
    if (b.registered != b.notified)
      foreign_registrations.add(name + ": " + std::to_string(b.registered.size()) +
                                " registrations for " + std::to_string(b.notified.size()) +
                                " files");
  }
  MESSAGE("recovery: " << in_place << " batches written in place; handed over during redo: "
                       << victims_in_redo << " of redo's victims, " << bgwriter_in_redo
                       << " of the bgwriter; by the end-of-recovery checkpoint: "
                       << from_checkpoint);
  CHECK_MESSAGE(direct.count == 0, direct.count << " data-file writes during recovery did not go "
                                                   "through the batcher; the first: "
                                                << direct.first);
  CHECK_MESSAGE(no_ring_write.count == 0, no_ring_write.count << " batches had a ring fsync but no "
                                                                 "ring write before it; the first: "
                                                              << no_ring_write.first);
  CHECK_MESSAGE(no_ring_fsync.count == 0, no_ring_fsync.count
                                            << " batches were written in place "
                                               "before their ring fsync (D1); the first: "
                                            << no_ring_fsync.first);
  CHECK_MESSAGE(foreign_registrations.count == 0,
                foreign_registrations.count
                  << " in-place windows registered other files than their "
                     "batch's; the first: "
                  << foreign_registrations.first);
  CHECK_MESSAGE(not_in_place.count == 0, not_in_place.count
                                           << " batches of recovery were not in place before the "
                                              "end-of-recovery checkpoint record; the first: "
                                           << not_in_place.first);
  // Every kind of recovery writer handed over batches, so the checks above covered each.
  CHECK(victims_in_redo >= 1);
  CHECK(bgwriter_in_redo >= 1);
  CHECK(from_checkpoint >= 1);
}

// With the bgwriter off, redo writes every dirty victim itself. It hands over up to a batch
// of them (doublewrite_batch_pages=8 here) before it waits for them, so one ring write and
// fdatasync covers several victims; handing over one and waiting for it, as sessions do,
// made one batch per victim and redo many times slower (a 16 MB pool at scale 10: 69 s
// against 8 s). A batch leaves short when redo meets a clean victim before the batch fills
// and its chunk's 1 ms timer sends it.
TEST_CASE("recovery trace: with the bgwriter off, redo's victims share doublewrite batches") {
  std::vector<std::string> settings = doublewrite_settings;
  settings.push_back("bgwriter_lru_maxpages=0");
  std::vector<messages::trace_event> events = recover_traced(settings, 6000);
  const recovery_bounds r = bounds_of(events);
  std::size_t batches = 0, pages = 0, full = 0;
  for (std::size_t i = r.redo_begin; i < r.redo_end; ++i)
    if (is(events[i], trace_type::dw_batch_ready) &&
        events[i].sender == messages::actor_role::backend) {
      ++batches;
      pages += events[i].b;
      full += events[i].b == 8;
    }
  MESSAGE("redo handed over " << pages << " victims in " << batches << " batches, " << full
                              << " of them full");
  REQUIRE(batches >= 10);
  CHECK(pages >= 2 * batches);
}

} // namespace
} // namespace tidemark
