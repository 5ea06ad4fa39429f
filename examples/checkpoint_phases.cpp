// A live timeline of spread checkpoints, for someone new to them. A TPC-B-like load runs
// against an embedded runtime while this program watches the checkpointer (it subscribes
// to its phase events) and the sync worker (it follows the message trace) and prints:
//
//   BEGIN  the redo point is taken and the dirty buffers are listed
//   WRITE  progress (buffers written) against the schedule; "nap" when ahead of it
//   SYNC   each fsync the sync worker performs, spread over the rest of the target
//   FINISH the checkpoint record and control file are written
//
//   usage: checkpoint_phases [SECONDS]      (default 12; checkpoint_timeout is 4 s)
#include "runtime/bench.hpp"
#include "runtime/database.hpp"
#include "runtime/tpcb.hpp"

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

using namespace tidemark;
using clock_type = std::chrono::steady_clock;

namespace {

const clock_type::time_point program_start = clock_type::now();
double now_s() { return std::chrono::duration<double>(clock_type::now() - program_start).count(); }

const char* bar(double fraction) {
  static thread_local char text[24];
  int filled = static_cast<int>(fraction * 20 + 0.5);
  for (int i = 0; i < 20; ++i)
    text[i] = i < filled ? '#' : '.';
  text[20] = 0;
  return text;
}

messages::checkpoint_observer_actor::behavior_type observer() {
  auto last_printed = std::make_shared<double>(-1.0);
  return {[last_printed](const messages::checkpoint_event& e) {
    using runtime::checkpoint_phase;
    auto phase = static_cast<checkpoint_phase>(e.phase);
    auto reason = messages::to_string(static_cast<messages::checkpoint_reason>(e.reason));
    if (phase == checkpoint_phase::write && e.buffers_written == 0 && *last_printed < 0) {
      std::printf("%7.2fs  BEGIN   (%s) %llu dirty buffers to write in file/block order\n", now_s(),
                  reason, static_cast<unsigned long long>(e.buffers_total));
      *last_printed = 0;
    } else if (phase == checkpoint_phase::write && e.progress - *last_printed >= 0.1) {
      std::printf("%7.2fs  WRITE   [%s] %3.0f%% written, schedule at %3.0f%%%s\n", now_s(),
                  bar(e.progress), 100 * e.progress, 100 * e.schedule,
                  e.napping ? "  -> ahead: nap 100 ms" : "");
      *last_printed = e.progress;
    } else if (phase == checkpoint_phase::sync) {
      std::printf("%7.2fs  SYNC    all %llu buffers written; asking the sync worker to fsync\n",
                  now_s(), static_cast<unsigned long long>(e.buffers_written));
    } else if (phase == checkpoint_phase::finish) {
      std::printf("%7.2fs  FINISH  checkpoint record, control file, WAL recycling\n", now_s());
    } else if (phase == checkpoint_phase::idle) {
      std::printf("%7.2fs  IDLE\n", now_s());
      *last_printed = -1;
    }
    std::fflush(stdout);
  }};
}

// Prints each fsync the sync worker records, as it happens.
void follow_fsyncs(const messages::trace_sink& trace, const std::atomic<bool>& done) {
  std::size_t seen = 0;
  while (!done.load()) {
    auto events = trace.events();
    for (; seen < events.size(); ++seen)
      if (std::string(events[seen].type) == "fsync") {
        const messages::trace_event& e = events[seen];
        if (e.c == static_cast<std::uint64_t>(storage::file_kind::commit_log))
          std::printf("%7.2fs  SYNC      fsync xact/%04llX\n", now_s(),
                      static_cast<unsigned long long>(e.b));
        else
          std::printf("%7.2fs  SYNC      fsync base/%llu.%llu\n", now_s(),
                      static_cast<unsigned long long>(e.a), static_cast<unsigned long long>(e.b));
      }
    std::this_thread::sleep_for(std::chrono::milliseconds(20)); // polling a display, not syncing
  }
}

} // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 12;
  char pattern[] = "/tmp/tidemark-checkpoint-phases-XXXXXX";
  std::string dir = std::string(mkdtemp(pattern)) + "/data";
  std::vector<std::string> settings = {"checkpoint_timeout=4s", "shared_buffers=4MB",
                                       "checkpoint_completion_target=0.9", "segment_size=8MB"};
  std::printf("loading a scale-2 TPC-B-like database into %s ...\n", dir.c_str());
  runtime::database::create(dir, settings, [](storage::relation_files& files, const runtime::settings& s) {
    runtime::tpcb::load(files, runtime::tpcb::layout(s.page_size, 2), s.data_checksums,
                        [](std::uint64_t, std::uint64_t) {});
  });
  runtime::open_options options;
  options.overrides = settings;
  options.trace = true;
  auto db = runtime::database::open(dir, options);
  auto watcher = db->system().spawn(observer);
  caf::anon_send(db->checkpointer(), messages::subscribe_atom::value, watcher);
  std::printf("running 4 sessions for %.0f s; checkpoint_timeout 4 s, completion target 0.9:\n"
              "writes spread over 80%% of 3.6 s, fsyncs over the rest\n\n", seconds);
  std::atomic<bool> done{false};
  std::thread fsyncs(follow_fsyncs, std::cref(*db->internals().trace), std::cref(done));
  runtime::bench_options bench;
  bench.clients = 4;
  bench.duration_s = seconds;
  runtime::bench_result result =
    runtime::run_bench(*db, runtime::tpcb::layout(db->internals().config.page_size, 2), bench, nullptr);
  done = true;
  fsyncs.join();
  caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
  db->close();
  std::printf("\n%llu transactions committed meanwhile\n",
              static_cast<unsigned long long>(result.transactions));
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
  return 0;
}
