// sync_worker on the deterministic scheduler, checked from its message trace: repeated
// registrations are absorbed into one fsync; a sync phase covers exactly what was
// registered before it (C1) and writes each relation file back a piece at a time before
// its fsync, paced by the bytes written (small files at once, a re-plan shortening the
// rest); the write-back sweep passes over pending files and stops when none is left; an
// fsync failure fails the phase and every later one (W3).
#include "actors/sync_worker.hpp"

#include "deterministic_fixture.hpp"
#include "engine_fixture.hpp"

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include <optional>

namespace tidemark {
namespace {

using messages::trace_type;

using messages::file_ref;

struct sync_fixture : test::deterministic_fixture, test::engine_fixture {
  explicit sync_fixture(std::string sweep = "0") : engine_fixture({"write_back_sweep=" + sweep}) {}
  messages::sync_worker_actor worker = actors::spawn_sync_worker(system, engine, false);

  ~sync_fixture() {
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    run();
  }

  // Registers a write of `bytes` from the file's start, `times` times.
  void register_file(std::uint32_t rel, std::uint32_t segno, int times = 1,
                     std::uint64_t bytes = 8192) {
    for (int i = 0; i < times; ++i)
      caf::anon_send(worker,
                     messages::sync_register{
                       {messages::file_written{file_ref{1, rel, segno}, bytes, 0, bytes}}, 0});
  }

  // Makes rel's first segment `blocks` pages long (one page written at its end).
  void grow_file(std::uint32_t rel, std::uint32_t blocks) {
    std::vector<unsigned char> page(engine.config.page_size, 0);
    storage::finalize_page_for_write(page.data(), page.size(), {rel, blocks - 1}, true);
    engine.store.files->write_page({rel, blocks - 1}, page.data());
  }

  // Asks for a sync phase; the answer lands in `done` or `error`.
  void sync_phase(std::optional<messages::sync_phase_done>& done, bool& error,
                  std::uint64_t pace_ms = 0) {
    system.spawn([=, &done, &error](caf::event_based_actor* self) {
      self->request(worker, caf::infinite, messages::sync_phase_request{pace_ms})
        .then([&done](const messages::sync_phase_done& d) { done = d; },
              [&error](const caf::error&) { error = true; });
    });
  }
};

TEST_CASE("sync worker: many registrations of one segment cost one fsync") {
  sync_fixture f;
  f.create_file(3);
  f.create_file(4);
  f.register_file(3, 0, 100);
  f.register_file(4, 0, 10);
  std::optional<messages::sync_phase_done> done;
  bool error = false;
  f.sync_phase(done, error);
  f.run();
  REQUIRE(done);
  CHECK_FALSE(error);
  CHECK(done->files == 2);
  CHECK(f.engine.counters.syncs.requests.load() == 110);
  CHECK(f.engine.counters.syncs.absorbed.load() == 108);
  CHECK(f.events(trace_type::fsync).size() == 2);
}

TEST_CASE("sync worker: a sync phase covers what was registered before it, later ones wait") {
  sync_fixture f;
  f.create_file(3);
  f.create_file(4);
  f.register_file(3, 0);
  std::optional<messages::sync_phase_done> first;
  bool error = false;
  f.sync_phase(first, error);
  f.run();               // the spawned client's request is now queued behind the first registration
  f.register_file(4, 0); // after the phase began
  f.run();
  REQUIRE(first);
  CHECK(first->files == 1);
  auto fsyncs = f.events(trace_type::fsync);
  REQUIRE(fsyncs.size() == 1);
  CHECK(fsyncs[0].a == 3);
  std::optional<messages::sync_phase_done> second;
  f.sync_phase(second, error);
  f.run();
  REQUIRE(second);
  CHECK(second->files == 1);
  fsyncs = f.events(trace_type::fsync);
  REQUIRE(fsyncs.size() == 2);
  CHECK(fsyncs[1].a == 4);
  CHECK_FALSE(error);
}

TEST_CASE("sync worker: a sync phase writes a file back a megabyte at a time, then fsyncs it") {
  sync_fixture f;
  std::uint32_t blocks = static_cast<std::uint32_t>((3u << 20) / f.engine.config.page_size) + 1;
  f.grow_file(3, blocks); // 3 MiB and a page: four pieces
  f.register_file(3, 0, 1, std::uint64_t(blocks) * f.engine.config.page_size);
  std::optional<messages::sync_phase_done> done;
  bool error = false;
  f.sync_phase(done, error);
  f.run();
  REQUIRE(done);
  std::vector<std::uint64_t> offsets;
  bool fsynced_after_pieces = false;
  for (const auto& e : f.engine.store.trace->events()) {
    if (e.type == trace_type::write_back && e.a == 3)
      offsets.push_back(e.c);
    if (e.type == trace_type::fsync && e.a == 3)
      fsynced_after_pieces = offsets.size() == 4;
  }
  CHECK(offsets == std::vector<std::uint64_t>{0, 1u << 20, 2u << 20, 3u << 20});
  CHECK(fsynced_after_pieces);
}

TEST_CASE("sync worker: a paced sync phase fsyncs small files at once and spreads a large one by "
          "its bytes") {
  sync_fixture f;
  for (std::uint32_t rel : {3u, 4u, 5u})
    f.create_file(rel);
  f.register_file(3, 0); // a page each: their fsyncs must not wait for the budget
  f.register_file(4, 0);
  f.register_file(5, 0, 1, 64u << 20); // 64 MiB written: 8 s at the slowest rate
  std::optional<messages::sync_phase_done> done;
  bool error = false;
  f.sync_phase(done, error, 100000); // a budget of 100 s
  f.run();
  f.scheduler.advance_time(std::chrono::milliseconds(2));
  f.run();
  auto fsyncs = f.events(trace_type::fsync);
  REQUIRE(fsyncs.size() == 2); // within 2 ms, the two small files; not the large one
  CHECK(fsyncs[0].a == 3);
  CHECK(fsyncs[1].a == 4);
  auto pieces_of_large = [&f] {
    std::size_t n = 0;
    for (const auto& e : f.events(trace_type::write_back))
      n += e.a == 5;
    return n;
  };
  CHECK(pieces_of_large() < 2);
  // The large file's 64 pieces go evenly over the 8 s the slowest rate allows, not the 100 s.
  f.scheduler.advance_time(std::chrono::seconds(4));
  f.run();
  std::size_t halfway = pieces_of_large();
  CHECK(halfway >= 30);
  CHECK(halfway <= 36);
  CHECK_FALSE(done);
  f.scheduler.advance_time(std::chrono::seconds(4));
  f.run();
  REQUIRE(done);
  CHECK(done->files == 3);
  CHECK(pieces_of_large() == 64);
  CHECK_FALSE(error);
}

TEST_CASE("sync worker: a sooner deadline re-plans the rest of a sync phase, a later one changes "
          "nothing") {
  sync_fixture f;
  f.create_file(3);
  f.register_file(3, 0, 1, 64u << 20); // 8 s at the slowest rate
  std::optional<messages::sync_phase_done> done;
  bool error = false;
  f.sync_phase(done, error, 100000);
  f.run();
  f.scheduler.advance_time(std::chrono::seconds(1));
  f.run();
  caf::anon_send(f.worker, messages::sync_deadline{60000}); // later than the plan's 7 s left
  f.run();
  CHECK(f.events(trace_type::sync_phase_replanned).empty());
  std::size_t before = f.events(trace_type::write_back).size();
  CHECK(before <= 10);
  caf::anon_send(f.worker, messages::sync_deadline{1000}); // WAL ran ahead: 1 s left
  f.run();
  CHECK(f.events(trace_type::sync_phase_replanned).size() == 1);
  CHECK_FALSE(done);
  f.scheduler.advance_time(std::chrono::milliseconds(1000));
  f.run();
  REQUIRE(done);
  CHECK(f.events(trace_type::write_back).size() == 64);
  CHECK(f.events(trace_type::fsync).size() == 1);
  CHECK_FALSE(error);
}

TEST_CASE("sync worker: the write-back sweep passes over pending files until an fsync covers "
          "them") {
  sync_fixture f("1s");
  std::uint32_t blocks = static_cast<std::uint32_t>((2u << 20) / f.engine.config.page_size);
  f.grow_file(3, blocks); // two pieces
  f.run();
  CHECK(f.events(trace_type::write_back).empty()); // nothing pending: the sweep waits
  f.register_file(3, 0, 1, 2u << 20);
  f.scheduler.advance_time(std::chrono::milliseconds(100)); // the idle sweep looks again
  f.run();
  f.scheduler.advance_time(std::chrono::seconds(1)); // the rest of the pass, and a new one
  f.run();
  auto pieces = f.events(trace_type::write_back);
  REQUIRE(pieces.size() >= 3);
  CHECK(pieces[0].c == 0);
  CHECK(pieces[1].c == 1u << 20);
  CHECK(pieces[2].c == 0); // the second pass starts over: the file is still pending
  std::optional<messages::sync_phase_done> done;
  bool error = false;
  f.sync_phase(done, error);
  f.run();
  REQUIRE(done);
  std::size_t after_fsync = f.events(trace_type::write_back).size();
  for (int i = 0; i < 5; ++i) {
    f.scheduler.advance_time(std::chrono::seconds(1));
    f.run();
  }
  // The pass in progress finishes its file (the phase wrote it too); then nothing is pending.
  CHECK(f.events(trace_type::write_back).size() <= after_fsync + 2);
}

TEST_CASE("sync worker: a forgotten file (truncated or dropped) is not fsynced") {
  sync_fixture f;
  f.create_file(3);
  f.create_file(4);
  f.register_file(3, 0, 3);
  f.register_file(4, 0);
  caf::anon_send(f.worker, messages::sync_forget{file_ref{1, 3, 0}});
  std::optional<messages::sync_phase_done> done;
  bool error = false;
  f.sync_phase(done, error);
  f.run();
  REQUIRE(done);
  CHECK(done->files == 1);
  auto fsyncs = f.events(trace_type::fsync);
  REQUIRE(fsyncs.size() == 1);
  CHECK(fsyncs[0].a == 4);
}

TEST_CASE("sync worker: a failed fsync fails the checkpoint's sync phase and is not retried (W3)") {
  sync_fixture f;
  f.create_file(3);
  f.register_file(3, 0);
  f.engine.faults->fail_syncs_from_now();
  std::optional<messages::sync_phase_done> done;
  bool error = false;
  f.sync_phase(done, error);
  f.run();
  CHECK(error);
  CHECK_FALSE(done);
  CHECK(f.engine.failed());
  CHECK(f.events(trace_type::fsync_failed).size() == 1);
  bool again = false;
  f.sync_phase(done, again);
  f.run();
  CHECK(again);                                          // refused: the engine failed
  CHECK(f.events(trace_type::fsync_failed).size() == 1); // no second attempt at the file
}

} // namespace
} // namespace tidemark
