// checkpointer and sync_worker together on the deterministic scheduler, checked from the
// message trace: requests during a checkpoint merge into one next checkpoint (C3), every
// file registered before a checkpoint began is fsynced before its record is written (C1),
// the commit-status log's pages go to the sync worker and are fsynced there before the
// record (never inline), phases reach subscribers in order, a failed fsync stops the checkpoint
// (W3), and while recovery replays WAL no checkpoint but the end-of-recovery one runs.
#include "actors/bgwriter.hpp"
#include "actors/checkpointer.hpp"
#include "actors/dw_batcher.hpp"
#include "actors/sync_worker.hpp"

#include "checkpoint_fixture.hpp"
#include "tests/storage/delegating_engine.hpp"

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tidemark {
namespace {

using messages::trace_type;

using messages::checkpoint_reason;

// The write-order probe for C5: records, in order, the offset and length of every write to
// a relation segment file with the file's name ("3.0"), while recording is on.
class segment_write_probe final : public storage::test::delegating_engine {
public:
  using delegating_engine::delegating_engine;
  void write(int fd, const void* data, std::size_t length, std::uint64_t offset) override {
    note(fd, offset, length);
    delegating_engine::write(fd, data, length, offset);
  }
  void write_batch(const storage::io_write* writes, std::size_t count) override {
    for (std::size_t i = 0; i < count; ++i)
      note(writes[i].fd, writes[i].offset, writes[i].length);
    delegating_engine::write_batch(writes, count);
  }
  void record(bool on) {
    std::lock_guard<std::mutex> guard(mutex_);
    recording_ = on;
  }
  struct file_write_seen {
    std::string file;
    std::uint64_t offset = 0, length = 0;
  };
  std::vector<file_write_seen> writes() {
    std::lock_guard<std::mutex> guard(mutex_);
    return writes_;
  }

private:
  void note(int fd, std::uint64_t offset, std::uint64_t length) {
    std::string path = inner().path_of(fd);
    std::size_t base = path.rfind("/base/");
    std::lock_guard<std::mutex> guard(mutex_);
    if (recording_ && base != std::string::npos)
      writes_.push_back({path.substr(base + 6), offset, length});
  }
  std::mutex mutex_;
  bool recording_ = false;
  std::vector<file_write_seen> writes_;
};

TEST_CASE("checkpointer: requests arriving during a checkpoint are merged into the next one") {
  test::checkpoint_fixture f;
  for (storage::block_id b = 0; b < 20; ++b)
    f.touch(3, b);
  test::checkpoint_fixture::answer a, b, c;
  f.request(a);
  f.run_one_job();
  f.request(b);
  f.request(c);
  f.run();
  REQUIRE(a.done);
  REQUIRE(b.done);
  REQUIRE(c.done);
  CHECK(f.events(trace_type::checkpoint_request).size() == 3);
  CHECK(f.events(trace_type::checkpoint_begin).size() == 2);
  CHECK(a.done->checkpoint_lsn != b.done->checkpoint_lsn);
  CHECK(b.done->checkpoint_lsn == c.done->checkpoint_lsn); // one checkpoint answered both
  CHECK(a.done->buffers_written == 20);
  CHECK(f.engine.control().checkpoint_lsn == b.done->checkpoint_lsn);
}

TEST_CASE("checkpointer: files registered before a checkpoint are fsynced before its record (C1)") {
  test::checkpoint_fixture f;
  f.dirty_files({5, 6});
  for (storage::block_id block = 0; block < 300; block += 30)
    f.touch(3, block); // dirty pages the checkpoint itself writes and registers
  test::checkpoint_fixture::answer a;
  f.request(a);
  f.run();
  REQUIRE(a.done);
  auto all = f.engine.store.trace->events();
  std::size_t begin = f.index_of(all, trace_type::checkpoint_begin);
  std::size_t record = f.index_of(all, trace_type::checkpoint_record);
  REQUIRE(record < all.size());
  std::size_t checked = 0;
  for (std::size_t i = 0; i < record; ++i) {
    if (all[i].type != trace_type::sync_register)
      continue;
    CHECK_MESSAGE(f.fsynced_between(all, i, record),
                  "file " << all[i].a << "." << all[i].b << " registered at event " << i
                          << (i < begin ? " (before BEGIN)" : " (during WRITE)")
                          << " was not fsynced before the checkpoint record");
    ++checked;
  }
  CHECK(checked >= 2 + 1); // the two earlier files and at least one written by the checkpoint
}

TEST_CASE("checkpointer: the commit-status log's writes are fsynced by the sync worker before the "
          "checkpoint record, never inline") {
  storage::fault_config count_log_syncs;
  count_log_syncs.fail_sync_match = "/xact/"; // counts them (fail_sync_after 0: none fails)
  test::checkpoint_fixture f({}, {}, count_log_syncs);
  for (storage::block_id b = 0; b < 20; ++b)
    f.touch(3, b); // each commit sets its status in the log's buffered page
  // Commits log their status in WAL; the page waits for a checkpoint.
  CHECK(f.engine.faults->syncs_issued() == 0);
  test::checkpoint_fixture::answer a;
  f.request(a);
  f.run();
  REQUIRE(a.done);
  auto all = f.engine.store.trace->events();
  std::size_t record = f.index_of(all, trace_type::checkpoint_record);
  const auto commit_log_kind = std::uint64_t(storage::file_kind::commit_log);
  std::size_t registered = 0, synced_before_record = 0, synced = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].c != commit_log_kind)
      continue;
    if (all[i].type == trace_type::sync_register && i < record) {
      ++registered;
      CHECK(all[i].sender == messages::actor_role::checkpointer); // its write at the sync phase
      CHECK_MESSAGE(f.fsynced_between(all, i, record), "commit-log segment "
                                                         << all[i].b << " registered at event " << i
                                                         << " was not fsynced before the record");
    }
    if (all[i].type == trace_type::fsync) {
      CHECK(all[i].sender == messages::actor_role::sync_worker);
      ++synced;
      synced_before_record += i < record;
    }
  }
  CHECK(registered >= 1);
  CHECK(synced_before_record >= 1);
  CHECK(f.engine.faults->syncs_issued() ==
        synced); // every fsync of the log is one the sync worker traced
}

struct phase_log {
  std::vector<std::uint8_t> phases;
};

TEST_CASE("checkpointer: subscribers observe every phase change in order") {
  test::checkpoint_fixture f;
  phase_log log;
  auto observer = f.system.spawn([&log]() -> messages::checkpoint_observer_actor::behavior_type {
    return {[&log](const messages::checkpoint_event& e) {
      if (log.phases.empty() || log.phases.back() != e.phase)
        log.phases.push_back(e.phase);
    }};
  });
  caf::anon_send(f.checkpointer, messages::subscribe_atom::value, observer);
  f.run();
  f.touch(3, 1);
  test::checkpoint_fixture::answer a;
  f.request(a);
  f.run();
  REQUIRE(a.done);
  using messages::checkpoint_phase;
  std::vector<std::uint8_t> expected = {std::uint8_t(checkpoint_phase::write),
                                        std::uint8_t(checkpoint_phase::sync),
                                        std::uint8_t(checkpoint_phase::finish),
                                        std::uint8_t(checkpoint_phase::idle)};
  CHECK(log.phases == expected);
  caf::anon_send_exit(observer, caf::exit_reason::user_shutdown);
}

TEST_CASE("checkpointer: a failed fsync stops the checkpoint before its record (W3)") {
  test::checkpoint_fixture f;
  f.touch(3, 1);
  storage::lsn_t previous = f.engine.control().checkpoint_lsn;
  f.engine.faults->fail_syncs_from_now();
  test::checkpoint_fixture::answer a;
  f.request(a);
  f.run();
  CHECK(a.error);
  CHECK(f.engine.failed());
  CHECK(f.events(trace_type::checkpoint_record).empty());
  CHECK(f.events(trace_type::checkpoint_failed).size() == 1);
  CHECK(f.engine.control().checkpoint_lsn == previous); // the control file never moved on
  test::checkpoint_fixture::answer later;
  f.request(later);
  f.run();
  CHECK(later.error);
}

TEST_CASE("checkpointer: no automatic checkpoint starts while crash recovery replays WAL") {
  test::checkpoint_fixture f({"wal_segment_size=64kB", "max_wal_size=128kB"});
  const storage::lsn_t start = f.engine.store.wal->inserted_lsn();
  for (storage::block_id b = 0; f.engine.store.wal->inserted_lsn() - start < (256u << 10); ++b)
    f.touch(3, b % 40); // far more WAL than the trigger allows
  f.engine.recovering.store(true);
  f.scheduler.advance_time(std::chrono::milliseconds(200)); // the 100 ms tick fires
  f.run();
  CHECK(f.events(trace_type::checkpoint_begin).empty()); // redo point and WAL left alone
  f.engine.recovering.store(false);
  f.scheduler.advance_time(std::chrono::milliseconds(200));
  f.run();
  auto begins = f.events(trace_type::checkpoint_begin);
  REQUIRE(begins.size() == 1);
  CHECK(begins[0].c == std::uint64_t(checkpoint_reason::wal));
}

TEST_CASE("checkpointer: while recovering, only the end-of-recovery checkpoint may run") {
  test::checkpoint_fixture f;
  for (storage::block_id b = 0; b < 5; ++b)
    f.touch(3, b);
  const storage::lsn_t previous = f.engine.control().checkpoint_lsn;
  f.engine.recovering.store(true);
  test::checkpoint_fixture::answer requested, shutdown, end_of_recovery;
  f.request(requested, checkpoint_reason::requested);
  f.request(shutdown, checkpoint_reason::shutdown);
  f.run();
  CHECK(requested.error);
  CHECK(shutdown.error);
  CHECK(f.events(trace_type::checkpoint_begin).empty());
  CHECK(f.engine.control().checkpoint_lsn == previous); // redo point and WAL left alone
  CHECK_FALSE(f.engine.failed());                       // refused, not a failure: recovery goes on
  f.request(end_of_recovery, checkpoint_reason::end_of_recovery);
  f.run();
  REQUIRE(end_of_recovery.done);
  CHECK(end_of_recovery.done->buffers_written == 5);
  CHECK(f.engine.control().checkpoint_lsn != previous);
}

// A paced checkpoint waits on the actor clock, which these tests never advance: it can
// only finish if something hurries it.
TEST_CASE("checkpointer: an immediate request hurries a paced checkpoint out of its sync phase") {
  test::checkpoint_fixture f({"checkpoint_timeout=300s", "checkpoint_completion_target=0.9"});
  f.dirty_files({5, 6, 7, 8});
  test::checkpoint_fixture::answer paced, shutdown;
  f.request(paced, checkpoint_reason::time, false);
  f.run();
  REQUIRE_FALSE(paced.done); // in its sync phase, the next fsync minutes away
  CHECK(f.engine.counters.checkpoints.phase.load() == messages::checkpoint_phase::sync);
  CHECK(f.events(trace_type::fsync).size() < 4);
  f.request(shutdown, checkpoint_reason::shutdown);
  f.run();
  REQUIRE(paced.done);
  REQUIRE(shutdown.done);
  CHECK(f.events(trace_type::sync_phase_hurried).size() == 1);
  CHECK(f.events(trace_type::checkpoint_hurried_by_request).size() == 1);
  CHECK(f.events(trace_type::fsync).size() >= 4);
}

TEST_CASE("checkpointer: an immediate request hurries a paced checkpoint out of its write phase") {
  test::checkpoint_fixture f({"checkpoint_timeout=300s", "checkpoint_completion_target=0.9"});
  for (storage::block_id b = 0; b < 50; ++b)
    f.touch(3, b);
  test::checkpoint_fixture::answer paced, requested;
  f.request(paced, checkpoint_reason::time, false);
  f.run();
  REQUIRE_FALSE(paced.done); // napping between write steps
  CHECK(f.engine.counters.checkpoints.phase.load() == messages::checkpoint_phase::write);
  f.request(requested);
  f.run();
  REQUIRE(paced.done);
  REQUIRE(requested.done);
  CHECK(paced.done->buffers_written == 50);
  CHECK(f.events(trace_type::sync_phase_hurried).empty()); // its sync phase was asked for unpaced
}

TEST_CASE("checkpointer: WAL reaching the trigger budget hurries a paced checkpoint (C4)") {
  test::checkpoint_fixture f({"checkpoint_timeout=300s", "checkpoint_completion_target=0.9",
                              "wal_segment_size=256kB", "max_wal_size=1MB"});
  for (storage::block_id b = 0; b < 20; ++b)
    f.touch(3, b);
  test::checkpoint_fixture::answer paced;
  f.request(paced, checkpoint_reason::time, false);
  f.run();
  REQUIRE_FALSE(paced.done); // napping: by time, the schedule is barely under way
  for (storage::block_id b = 0;
       f.engine.store.wal->inserted_lsn() - f.engine.control().redo_lsn < (1200u << 10); ++b)
    f.touch(4, b % 200); // WAL past max_wal_size / (1 + target) since the redo point
  caf::anon_send(f.checkpointer, messages::tick_atom::value);
  f.run();
  REQUIRE(paced.done);
  CHECK(f.events(trace_type::checkpoint_hurried_by_wal).size() == 1);
}

TEST_CASE("checkpointer: WAL consumed faster than the time budget re-plans the sync phase (C4)") {
  test::checkpoint_fixture f({"checkpoint_timeout=300s", "checkpoint_completion_target=0.9",
                              "wal_segment_size=256kB", "max_wal_size=4MB"});
  f.dirty_files({5, 6}); // 16 s of paced sync phase at the slowest rate
  test::checkpoint_fixture::answer paced;
  f.request(paced, checkpoint_reason::time, false);
  f.run();
  REQUIRE_FALSE(paced.done);
  REQUIRE(f.engine.counters.checkpoints.phase.load() == messages::checkpoint_phase::sync);
  // WAL to 90 % of what the checkpoint may consume (completion_target of the trigger's
  // budget, max_wal_size / (1 + target)), in far less real time than the phase was given:
  // at that rate the rest is due within a ninth of the time taken so far.
  double allowed = 0.9 * (4.0 * (1u << 20)) / 1.9;
  storage::lsn_t redo = f.engine.control().redo_lsn;
  for (storage::block_id b = 0; double(f.engine.store.wal->inserted_lsn() - redo) < 0.9 * allowed;
       ++b)
    f.touch(3, b % 200);
  f.advance(std::chrono::seconds(1)); // the tick: that WAL took 1 s, the rest is due in 0.11 s
  CHECK(f.events(trace_type::sync_phase_replanned).size() == 1);
  CHECK(f.events(trace_type::checkpoint_hurried_by_wal).empty()); // re-planned, not hurried
  // Done within the little time left: far short of the 16 s first planned.
  for (int step = 0; step < 3 && !paced.done; ++step)
    f.advance(std::chrono::milliseconds(100));
  REQUIRE(paced.done);
  CHECK(f.events(trace_type::fsync).size() >= 2);
}

TEST_CASE("checkpointer: dirty buffers are written in file and block order, runs of blocks as one "
          "write (C5)") {
  segment_write_probe* probe = nullptr;
  test::checkpoint_fixture f({"segment_size=64kB", "shared_buffers=1MB"},
                             [&probe](std::unique_ptr<storage::io_engine> real) {
                               auto watching =
                                 std::make_unique<segment_write_probe>(std::move(real));
                               probe = watching.get();
                               return watching;
                             });
  REQUIRE(probe != nullptr);
  // 3 relations x 30 blocks (4 segments each), dirtied in a scrambled order.
  std::vector<storage::page_id> pages;
  for (storage::rel_id rel : {5u, 3u, 4u})
    for (storage::block_id b = 0; b < 30; ++b)
      pages.push_back({rel, (b * 7) % 30});
  for (std::size_t i = 0; i < pages.size(); ++i)
    f.touch(pages[(i * 37) % pages.size()].rel, pages[(i * 37) % pages.size()].block);
  probe->record(true);
  test::checkpoint_fixture::answer a;
  f.request(a);
  f.run();
  probe->record(false);
  REQUIRE(a.done);
  CHECK(a.done->buffers_written == 90);
  const std::uint64_t blocks_per_segment = (64u << 10) / f.engine.config.page_size;
  std::vector<storage::page_id> written;
  const std::size_t page_size = f.engine.config.page_size;
  const auto writes = probe->writes();
  for (const auto& w : writes) {
    std::size_t dot = w.file.find('.');
    auto rel = static_cast<storage::rel_id>(std::stoul(w.file.substr(0, dot)));
    std::uint64_t segno = std::stoull(w.file.substr(dot + 1));
    for (std::uint64_t at = w.offset; at < w.offset + w.length; at += page_size)
      written.push_back(
        {rel, static_cast<storage::block_id>(segno * blocks_per_segment + at / page_size)});
  }
  REQUIRE(written.size() == 90);
  // Consecutive blocks of a segment went out together: a write per run, not per page (3
  // relations of 4 segments each, a batch boundary or two).
  CHECK(writes.size() <= 16);
  for (std::size_t i = 1; i < written.size(); ++i)
    CHECK_MESSAGE(written[i - 1] < written[i], "write " << i << ": relation " << written[i].rel
                                                        << " block " << written[i].block
                                                        << " after relation " << written[i - 1].rel
                                                        << " block " << written[i - 1].block);
}

TEST_CASE("checkpointer: the bgwriter keeps cleaning while a checkpoint is in its sync phase") {
  test::checkpoint_fixture f({"checkpoint_timeout=300s", "checkpoint_completion_target=0.9",
                              "shared_buffers=256kB", "bgwriter_delay=10ms"});
  auto bgwriter = actors::spawn_bgwriter(f.system, f.engine, false);
  f.dirty_files({5, 6}); // 16 s of paced sync phase
  test::checkpoint_fixture::answer paced;
  f.request(paced, checkpoint_reason::time, false);
  f.run();
  REQUIRE(f.engine.counters.checkpoints.phase.load() == messages::checkpoint_phase::sync);
  // Sessions go on dirtying more blocks than the pool holds; the bgwriter's rounds clean
  // ahead of their clock sweep meanwhile.
  storage::block_id next = 0;
  for (int round = 0; round < 30 && f.events(trace_type::bgwriter_write).empty(); ++round) {
    for (int i = 0; i < 20; ++i)
      f.touch(3, next++);
    f.scheduler.advance_time(std::chrono::milliseconds(10));
    f.run();
  }
  CHECK_FALSE(f.events(trace_type::bgwriter_write).empty());
  CHECK(f.engine.counters.checkpoints.phase.load() == messages::checkpoint_phase::sync);
  CHECK_FALSE(paced.done);
  caf::anon_send_exit(bgwriter, caf::exit_reason::user_shutdown);
  f.run();
}

TEST_CASE("checkpointer: checkpoint_completion_target = 0 makes a timed checkpoint unpaced") {
  test::checkpoint_fixture f({"checkpoint_timeout=300s", "checkpoint_completion_target=0"});
  f.dirty_files({5});
  for (storage::block_id b = 0; b < 30; ++b)
    f.touch(3, b);
  test::checkpoint_fixture::answer timed;
  f.request(timed, checkpoint_reason::time, false);
  f.run(); // the clock never moves: only an unpaced checkpoint can finish
  REQUIRE(timed.done);
  CHECK(timed.done->buffers_written == 30);
  CHECK(f.events(trace_type::sync_phase_hurried).empty());
}

TEST_CASE("checkpointer: the log_checkpoints line names what the checkpoint did") {
  test::checkpoint_fixture f({"log_checkpoints=on"});
  std::vector<std::string> lines;
  f.engine.log_sink = [&lines](const std::string& line) { lines.push_back(line); };
  f.dirty_files({5});
  for (storage::block_id b = 0; b < 12; ++b)
    f.touch(3, b);
  test::checkpoint_fixture::answer a;
  f.request(a);
  f.run();
  REQUIRE(a.done);
  REQUIRE(lines.size() == 1);
  const std::string& line = lines[0];
  CAPTURE(line);
  CHECK(line.rfind("LOG:  checkpoint complete (requested): wrote 12 buffers (", 0) == 0);
  for (const char* field :
       {"write=", "sync=", "total=", "sync files=", "longest=", "average=", "distance="})
    CHECK(line.find(field) != std::string::npos);
  // The files it fsynced: relation 5's and relation 3's first segments at least.
  std::size_t at = line.find("sync files=");
  REQUIRE(at != std::string::npos);
  CHECK(std::stoul(line.substr(at + 11)) >= 2);
}

TEST_CASE("checkpointer: waiting for another writer's write, it holds no ring chunk that writer "
          "needs") {
  // A two-batch ring has two chunks of staging memory. A writer of the test's holds one;
  // redo is writing a victim that the checkpoint must write too, and needs a chunk to
  // finish it. The checkpoint waits for that write: it must not hold the other chunk
  // meanwhile (the deadlock a promoted doublewrite standby once hung in).
  test::checkpoint_fixture f({"torn_page_protection=doublewrite", "doublewrite_batch_pages=8",
                              "doublewrite_ring_pages=16", "write_back_sweep=0"});
  f.engine.store.batcher = actors::spawn_dw_batcher(f.system, f.engine, f.worker, false);
  storage::buffer_pool& pool = *f.engine.store.pool;
  storage::doublewrite_ring& ring = *f.engine.store.ring;
  for (storage::block_id b = 0; b < 4; ++b)
    f.touch(3, b);
  const storage::buffer_id victim = pool.pin({3, 0}); // first in file and block order (C5)
  pool.unpin(victim);
  std::vector<unsigned char> copy(pool.page_size());
  storage::page_id id;
  storage::lsn_t lsn;
  REQUIRE(pool.start_write(victim, copy.data(), &id, &lsn)); // redo's write, in progress
  std::uint32_t held = ring.acquire({});
  int waits = 0;
  bool chunk_for_redo = false;
  f.on_trace = [&](const messages::trace_event& event) {
    if (event.type != trace_type::checkpoint_awaits_write)
      return;
    ++waits;
    CHECK(event.a == victim);
    std::uint32_t chunk;
    chunk_for_redo = ring.try_acquire(&chunk); // redo's next step
    if (chunk_for_redo)
      ring.give_back(chunk);
    ring.give_back(held);
    pool.finish_write(victim, false); // redo's write ends; the buffer stays dirty
  };
  test::checkpoint_fixture::answer a;
  f.request(a);
  f.run();
  f.on_trace = nullptr;
  REQUIRE(a.done);
  CHECK(waits == 1);
  CHECK(chunk_for_redo);
  CHECK(a.done->buffers_written == 4); // the victim too, once redo's write ended
  for (storage::block_id b = 0; b < 4; ++b) {
    storage::buffer_id buffer = pool.pin({3, b});
    CHECK_FALSE(pool.is_dirty(buffer));
    pool.unpin(buffer);
  }
  caf::anon_send_exit(f.engine.store.batcher, caf::exit_reason::user_shutdown);
  f.run();
}

TEST_CASE("checkpointer: WAL before the redo point goes only after the control file points past it "
          "(C2)") {
  test::checkpoint_fixture f({"wal_segment_size=256kB", "max_wal_size=64MB"});
  const std::uint64_t segment = f.engine.config.wal_segment_size;
  for (storage::block_id b = 0; f.engine.store.wal->inserted_lsn() < 3 * segment; ++b)
    f.touch(3, b % 500); // WAL over several segments
  storage::lsn_t oldest = storage::wal_log::list_segments(f.engine.data_dir + "/wal").front();
  test::checkpoint_fixture::answer a;
  f.request(a);
  f.run();
  REQUIRE(a.done);
  auto all = f.engine.store.trace->events();
  std::size_t control = f.index_of(all, trace_type::control_file_written);
  std::size_t recycled = f.index_of(all, trace_type::wal_recycled);
  REQUIRE(control < all.size());
  REQUIRE(recycled < all.size());
  CHECK(control < recycled);
  storage::lsn_t redo = f.engine.control().redo_lsn;
  CHECK(redo - oldest >= 2 * segment); // there was WAL to recycle
  for (storage::lsn_t start : storage::wal_log::list_segments(f.engine.data_dir + "/wal"))
    CHECK_MESSAGE(start + segment > redo - redo % segment,
                  "segment " << start << " lies wholly before the redo point " << redo);
}

} // namespace
} // namespace tidemark
