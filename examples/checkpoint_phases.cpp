// A live timeline of spread checkpoints, for someone new to them. Four threads update
// counters on 2 000 pages while this program watches the engine through the public
// observer (tidemark/options.hpp): the checkpointer's progress and each fsync the sync
// worker performs. It prints:
//
//   BEGIN  the redo point is taken and the dirty buffers are listed
//   WRITE  progress (buffers written) against the schedule; "nap" when ahead of it
//   SYNC   each fsync the sync worker performs, spread over the rest of the target
//   FINISH the checkpoint record and control file are written
//
//   usage: checkpoint_phases [SECONDS]      (default 12; checkpoint_timeout is 4 s)
#include <tidemark/database.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

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

class timeline final : public observer {
public:
  void on_checkpoint(const checkpoint_event& e) override {
    std::lock_guard<std::mutex> guard(mutex_);
    if (e.phase == checkpoint_phase::write && e.buffers_written == 0 && last_printed_ < 0) {
      std::printf("%7.2fs  BEGIN   (%s) %llu dirty buffers to write in file/block order\n", now_s(),
                  e.reason, static_cast<unsigned long long>(e.buffers_total));
      last_printed_ = 0;
    } else if (e.phase == checkpoint_phase::write && e.progress - last_printed_ >= 0.1) {
      std::printf("%7.2fs  WRITE   [%s] %3.0f%% written, schedule at %3.0f%%%s\n", now_s(),
                  bar(e.progress), 100 * e.progress, 100 * e.schedule,
                  e.napping ? "  -> ahead: nap 100 ms" : "");
      last_printed_ = e.progress;
    } else if (e.phase == checkpoint_phase::sync) {
      std::printf("%7.2fs  SYNC    all %llu buffers written; asking the sync worker to fsync\n",
                  now_s(), static_cast<unsigned long long>(e.buffers_written));
    } else if (e.phase == checkpoint_phase::finish) {
      std::printf("%7.2fs  FINISH  checkpoint record, control file, WAL recycling\n", now_s());
    } else if (e.phase == checkpoint_phase::idle) {
      std::printf("%7.2fs  IDLE\n", now_s());
      last_printed_ = -1;
    }
    std::fflush(stdout);
  }

  void on_file_synced(const file_sync_event& e) override {
    std::lock_guard<std::mutex> guard(mutex_);
    if (e.kind == file_sync_event::file_kind::commit_log_segment)
      std::printf("%7.2fs  SYNC      fsync xact/%04X\n", now_s(), e.segment);
    else
      std::printf("%7.2fs  SYNC      fsync base/%u.%u\n", now_s(), e.relation, e.segment);
    std::fflush(stdout);
  }

private:
  std::mutex mutex_;
  double last_printed_ = -1;
};

constexpr relation_id counters = 1;
constexpr block_number pages = 2000;

// One application thread: transactions that add to three random counters each.
std::uint64_t update_counters(database& db, unsigned seed, const std::atomic<bool>& stop) {
  std::mt19937 random(seed);
  session s = db.open_session();
  std::uint64_t committed = 0;
  while (!stop.load()) {
    s.begin();
    for (int i = 0; i < 3; ++i)
      s.add_i64({counters, static_cast<block_number>(random() % pages)},
                static_cast<std::uint32_t>(page_header_bytes + 8 * (random() % 100)), 1);
    s.commit();
    ++committed;
  }
  return committed;
}

} // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 12;
  char pattern[] = "/tmp/tidemark-checkpoint-phases-XXXXXX";
  std::string dir = std::string(mkdtemp(pattern)) + "/data";
  std::vector<std::string> settings = {"checkpoint_timeout=4s", "shared_buffers=4MB",
                                       "checkpoint_completion_target=0.9", "segment_size=8MB"};
  std::printf("creating %s with %u pages of counters ...\n", dir.c_str(), pages);
  create_options create;
  create.settings = settings;
  create.initial_data = [](initial_loader& loader) {
    std::vector<std::int64_t> zeros((loader.page_size() - page_header_bytes) / 8 * pages, 0);
    loader.append_rows(counters, zeros.data(), 8, zeros.size());
  };
  database::create(dir, create);
  open_options options;
  options.settings = settings;
  options.events = std::make_shared<timeline>();
  auto db = database::open(dir, options);
  std::printf("running 4 sessions for %.0f s; checkpoint_timeout 4 s, completion target 0.9:\n"
              "writes spread over 80%% of 3.6 s, fsyncs over the rest\n\n",
              seconds);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  std::atomic<std::uint64_t> committed{0};
  for (unsigned i = 0; i < 4; ++i)
    threads.emplace_back([&, i] { committed += update_counters(*db, i + 1, stop); });
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); // the demo's length
  stop = true;
  for (std::thread& t : threads)
    t.join();
  db->close();
  std::printf("\n%llu transactions committed meanwhile\n",
              static_cast<unsigned long long>(committed.load()));
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
  return 0;
}
