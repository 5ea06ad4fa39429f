// The fault-injecting I/O engine: wraps a real engine and models a disk with a volatile
// write cache, so that tests can simulate power loss inside one process.
//
// Fault model:
//  - Every write not yet covered by a completed sync of its file is "unsynced". The engine
//    keeps, per unsynced write, the bytes it overwrote (its undo image).
//  - A sync covers exactly the writes to that file that completed before the sync began.
//    The wrapped engine's real sync is not called: durability is what this engine says.
//  - At a simulated power loss each unsynced write independently survives or is lost
//    (lose_unsynced); with torn, a write may instead survive only in part: its bytes before
//    or after a 512-byte or 4 KiB boundary inside it are kept, the rest reverts.
//    Reverting restores the undo image, except for bytes a later surviving write owns.
//  - write_back() makes nothing durable (a real disk's volatile cache may still lose it).
//  - Directory operations (create, rename, unlink) are durable at once.
//  - With crash_after_writes = N, the N-th write completes and then the power is lost:
//    losses and tears are applied to the files and the crash handler runs (default:
//    _exit(3), the command-line contract's "simulated crash"). All engine calls are
//    serialised by one mutex, so no other thread's write slips in after the crash.
//  - With mode process, the N-th write completes and the process "crashes" with every
//    write in place, synced or not, as kill -9 leaves them in the page cache.
//  - The record of unsynced writes can outlive the process (journal_path): it is loaded
//    when the engine is made, saved at a process crash and when the engine is destroyed,
//    and emptied by a power loss. So a later run can crash a process, restart, and then
//    lose power: the writes the killed process never synced are lost or torn too. Paths
//    are recorded as the runs spell them; runs sharing a journal name files alike.
//  - sync_file_system() covers every unsynced write (syncfs of the one file system).
//  - With fail_sync_after = N, the N-th sync fails with EIO (and every later one too), and
//    the file's unsynced writes are lost at once, as the kernel may drop dirty pages it
//    failed to write back (fsyncgate): the W3 test double. From then on every read
//    throws (sync_failure_latch.hpp), as it does in the real engines; the drop and the
//    latch happen under one lock, so no read sees the dropped state.
//  - With bad_reads, reads of bytes just written and synced go bad as read_fault_plan.hpp
//    describes (stale zeros, a short read, EIO) — a file system whose cache returns old
//    bytes. Writes and durability are unaffected: the file holds the right bytes.
#pragma once

#include "storage/io_engine.hpp"
#include "storage/read_fault_plan.hpp"
#include "storage/sync_failure_latch.hpp"

#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace tidemark::storage {

enum class crash_mode { lose_unsynced, torn, process };

struct fault_config {
  std::uint64_t crash_after_writes = 0; // 0: never crash
  crash_mode mode = crash_mode::lose_unsynced;
  std::uint64_t seed = 1;
  std::uint64_t fail_sync_after = 0; // 0: syncs never fail
  std::string fail_sync_match;       // if set, only syncs of paths containing it count and fail
  bool tear_every_write = false;     // torn mode: every unsynced write that can tear does
  std::string journal_path;          // if set, unsynced writes are kept there across runs
  read_fault_config bad_reads;       // reads of freshly synced bytes that go bad
};

/// What a simulated power loss did, for tests and the crash report.
struct power_loss_report {
  std::uint64_t unsynced_writes = 0;
  std::uint64_t survived = 0;
  std::uint64_t lost = 0;
  std::uint64_t torn = 0;
  bool process_crash = false; // crash_mode::process: every write was left in place
};

class fault_engine final : public io_engine {
public:
  /// Loads config.journal_path when it exists (throws io_error if it is malformed).
  fault_engine(std::unique_ptr<io_engine> inner, fault_config config);
  /// Saves the unsynced writes to config.journal_path unless the power was lost.
  ~fault_engine() override;

  std::string name() const override;
  int open_file(const std::string& path, bool create) override;
  void close_file(int fd) override;
  std::size_t read(int fd, void* data, std::size_t length, std::uint64_t offset) override;
  void write(int fd, const void* data, std::size_t length, std::uint64_t offset) override;
  void write_batch(const io_write* writes, std::size_t count) override;
  void sync(int fd, sync_kind kind) override;
  void write_back(int fd, std::uint64_t offset, std::uint64_t length, bool wait) override;
  void will_need(int fd, std::uint64_t offset, std::uint64_t length) override;
  void forget_cached(int fd, std::uint64_t offset, std::uint64_t length) override;
  std::uint64_t file_size(int fd) override;
  void truncate(int fd, std::uint64_t length) override;
  void rename(const std::string& from, const std::string& to) override;
  void unlink(const std::string& path) override;
  void sync_directory(const std::string& dir) override;
  void sync_file_system(const std::string& dir) override;
  std::string path_of(int fd) const override;

  /// Applies a power loss to the files now (without running the crash handler).
  power_loss_report simulate_power_loss();

  /// Replaces the default crash handler (which calls _exit(3)). Runs under the engine lock,
  /// after the power loss (or, in process mode, after the journal was saved).
  void on_crash(std::function<void(const power_loss_report&)> handler);

  std::uint64_t writes_issued() const;
  /// Syncs asked for so far: of paths containing config.fail_sync_match, when it is set.
  std::uint64_t syncs_issued() const;
  /// Reads that config.bad_reads made go bad so far.
  std::uint64_t reads_faulted() const;

  /// From now on every sync fails with EIO (as fail_sync_after would from the next one).
  void fail_syncs_from_now();

private:
  struct unsynced_write {
    std::string path;
    std::uint64_t offset = 0;
    std::vector<unsigned char> before; // bytes the write replaced (zeros past old EOF)
    std::vector<unsigned char> after;  // bytes the write put there
  };

  void write_locked(int fd, const void* data, std::size_t length, std::uint64_t offset);
  power_loss_report power_loss_locked();
  power_loss_report crash_locked();
  void load_journal();
  void save_journal() const;
  void drop_unsynced_locked(const std::string& path);
  void throw_if_crashed(const char* operation, bool is_sync = false) const;
  const std::string& tracked_path(int fd) const;
  void forget_path(const std::string& path);

  std::unique_ptr<io_engine> inner_;
  fault_config config_;
  mutable std::mutex mutex_;
  std::mt19937_64 random_;
  std::vector<unsynced_write> unsynced_;
  // fd -> the path its writes are recorded under; follows renames, empty once the file was
  // unlinked or replaced (its bytes no longer matter after a power loss).
  std::map<int, std::string> paths_;
  std::uint64_t writes_issued_ = 0;
  std::uint64_t syncs_issued_ = 0;
  bool crashed_ = false;
  sync_failure_latch sync_failure_;
  read_fault_plan bad_reads_;
  std::function<void(const power_loss_report&)> crash_handler_;
};

} // namespace tidemark::storage
