// What happens to a torn page in each torn-page protection mode. For each mode: commit
// changes to a page and checkpoint; change it again; evict it so it is written in place but
// not yet fsynced; lose power with the fault engine tearing every unsynced write at a
// 512-byte or 4 KiB boundary; then look at the page on disk and reopen the data directory:
//   off               the tear is detected and reported, naming file and block
//   full_page_writes  redo restores the page from its full-page image in the WAL
//   doublewrite       startup repair restores the page from the doublewrite ring
//
// It uses the public test hooks: open_options::faults (the fault-injecting I/O engine),
// database::simulate_power_loss() and database::check_files().
#include <tidemark/database.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

using namespace tidemark;

namespace {

constexpr page_id page{10, 0};
constexpr std::uint32_t counter = 64;       // in the first sector of the page
constexpr std::uint32_t far_counter = 8000; // in the last: any tear mixes two versions

void run_until_torn(const std::string& dir, const std::string& mode) {
  std::vector<std::string> settings = {
    "torn_page_protection=" + mode, "shared_buffers=16",         "checkpoint_timeout=1h",
    "bgwriter_lru_maxpages=0",      "doublewrite_batch_pages=1", "doublewrite_ring_pages=1024",
    "log_checkpoints=off"}; // a ring with room: no retirement fsync
  create_options create;
  create.settings = settings;
  database::create(dir, create);
  open_options options;
  options.settings = settings;
  options.faults = fault_injection{};
  options.faults->mode = crash_mode::torn;
  options.faults->tear_every_write = true;
  auto db = database::open(dir, options);
  auto s = db->open_session();
  s.begin();
  s.add_i64(page, counter, 41);
  s.add_i64(page, far_counter, 41);
  s.commit();
  db->checkpoint(); // version 1 is durable
  s.begin();
  s.add_i64(page, counter, 1); // version 2: 42 and 42
  s.add_i64(page, far_counter, 1);
  s.commit();
  for (block_number b = 0; b < 200; ++b) { // push the page out of the 16-page pool
    s.begin();
    s.add_i64({11, b}, counter, 1);
    s.commit();
  }
  // In doublewrite mode sessions' victims are written by the batcher, a moment later.
  while (db->stats().buffers.written_by_sessions < 20)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  power_loss_report loss = db->simulate_power_loss();
  std::printf("  power lost: %llu unsynced writes, %llu torn\n",
              static_cast<unsigned long long>(loss.unsynced_writes),
              static_cast<unsigned long long>(loss.torn));
} // the database is abandoned here: the fault engine refuses all I/O after the power loss

void inspect_on_disk(const std::string& dir) {
  file_check_report check = database::check_files(dir);
  std::printf("  on disk: %llu pages checked, %llu failed verification\n",
              static_cast<unsigned long long>(check.pages_checked),
              static_cast<unsigned long long>(check.failures));
  for (const std::string& failure : check.first_failures)
    std::printf("  on disk: %s\n", failure.c_str());
}

void reopen(const std::string& dir) {
  try {
    auto db = database::open(dir);
    const recovery_report& r = db->recovery();
    auto s = db->open_session();
    std::printf("  reopened: %llu pages repaired from the ring, %llu full-page images restored "
                "by redo; the counters read %lld and %lld\n",
                static_cast<unsigned long long>(r.pages_repaired),
                static_cast<unsigned long long>(r.images_restored),
                static_cast<long long>(s.read_i64(page, counter)),
                static_cast<long long>(s.read_i64(page, far_counter)));
    db->close();
  } catch (const page_corrupt_error& error) {
    std::printf("  reopened: recovery stopped, as it must: %s\n", error.what());
  }
}

} // namespace

int main() {
  for (const char* mode : {"off", "full_page_writes", "doublewrite"}) {
    std::string pattern = std::string("/tmp/tidemark-torn-") + mode + "-XXXXXX";
    std::string dir = std::string(mkdtemp(pattern.data())) + "/data";
    std::printf("torn_page_protection = %s\n", mode);
    run_until_torn(dir, mode);
    inspect_on_disk(dir);
    reopen(dir);
    std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
  }
  return 0;
}
