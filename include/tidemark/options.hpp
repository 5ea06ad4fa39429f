// How a data directory is created and opened: settings, the initial data, an observer of
// the engine's background work, and the test hooks (fault injection, message tracing).
//
// Settings are KEY=VALUE texts with PostgreSQL's units ("shared_buffers=256MB",
// "checkpoint_timeout=30s"); describe_settings() (tidemark/settings.hpp) lists them all
// with their defaults, ranges and meanings, as does a new directory's tidemark.conf
// (docs/embedding.md, "Settings"). create() writes them to the
// directory's tidemark.conf; open() reads that file and applies its own settings on top,
// for that run only. A setting that is unknown, malformed or out of range is a
// config_error naming it, and nothing is created or opened.
#pragma once

#include <tidemark/types.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tidemark {

/// Test hook: run on the fault-injecting I/O engine, which remembers every write not yet
/// made durable and can lose or tear them as a power loss would.
enum class crash_mode {
  lose_unsynced, // a crash loses a random part of the unsynced writes
  torn,          // ... and tears some of the others at a 512-byte or 4 KiB boundary
  process,       // the process ends with every write in place (as kill -9)
};

/// Test hook: how a bad read of freshly fsynced bytes looks (fault_injection::bad_read).
enum class read_fault {
  none,
  zeros,      // the bytes read as zeros and the read looks complete (a stale cached page)
  short_read, // the read ends early, the rest zero-filled (as at end of file)
  error,      // the read fails with EIO
};

struct fault_injection {
  std::uint64_t crash_after_writes = 0; // the N-th write crashes (0: never); the process
                                        // exits with status 3 after the simulated loss
  crash_mode mode = crash_mode::lose_unsynced;
  bool tear_every_write = false;      // torn mode: every write that can tear does
  std::uint64_t seed = 1;             // which writes are lost or torn
  std::uint64_t fail_fsync_after = 0; // the N-th fsync fails with EIO (0: never)
  std::string fail_fsync_match;       // ... counting only files whose path contains this
  std::string journal_path;           // keep unsynced writes across runs in this file
  /// Bad reads of bytes this run wrote and fsynced (a standby's received WAL, when
  /// bad_read_match is "/wal/"): counting only reads of such bytes in files whose path
  /// contains bad_read_match, the bad_read_after-th one (0: none) and the next
  /// bad_read_repeats - 1 reads of the same bytes (0: every later one) go bad as bad_read
  /// says; later reads return the file's bytes. The files themselves are not changed.
  read_fault bad_read = read_fault::none;
  std::uint64_t bad_read_after = 0;
  std::string bad_read_match;
  std::uint32_t bad_read_repeats = 1;
};

/// The checkpointer's progress, as it goes.
struct checkpoint_event {
  checkpoint_phase phase = checkpoint_phase::idle;
  const char* reason = "";         // "timed", "wal", "requested", "shutdown", ...
  std::uint64_t buffers_total = 0; // dirty buffers the checkpoint writes
  std::uint64_t buffers_written = 0;
  double progress = 0;  // buffers_written / buffers_total
  double schedule = 0;  // where the paced schedule says it should be
  bool napping = false; // ahead of the schedule: pausing
};

/// One fsync the sync worker performed for a checkpoint.
struct file_sync_event {
  enum class file_kind { relation_segment, commit_log_segment } kind = file_kind::relation_segment;
  relation_id relation = 0;  // relation segments
  std::uint32_t segment = 0; // segment number (of the relation, or of the commit-status log)
};

/// Receives events from the engine's background actors. Called on the engine's own
/// threads: keep each call short, and do not call back into the database from it.
class observer {
public:
  virtual ~observer() = default;
  virtual void on_checkpoint(const checkpoint_event&) {}
  virtual void on_file_synced(const file_sync_event&) {}
};

struct open_options {
  std::vector<std::string> settings; // KEY=VALUE, for this run
  std::shared_ptr<observer> events;  // optional
  /// Receives each log line (checkpoints with log_checkpoints=on, the end of a recovery),
  /// on a Tidemark thread; empty: lines go to stderr. Like the observer's callbacks it must
  /// not call database::checkpoint() or close() (usage_error).
  std::function<void(const std::string& line)> log;
  /// Opens a cleanly shut down directory for reading only: no lock, no recovery, no file
  /// written or created (a directory without write permission opens). Sessions may read
  /// and run read-only transactions; any change is a usage_error. A directory that needs
  /// recovery is refused with a config_error.
  bool read_only = false;
  /// Opens a standby (a directory database::base_backup() made): crash recovery, then redo
  /// follows the WAL its primary streams, until promote() or close(). Sessions only read.
  /// A standby directory opens only this way (config_error otherwise).
  bool standby = false;
  /// The standby's primary as HOST:PORT; empty: the one its base backup came from.
  std::string primary;
  /// Off: the standby does not connect; redo replays the WAL it has and stops there (to
  /// promote a standby whose primary is gone).
  bool stream = true;
  std::optional<fault_injection> faults; // test hook
  bool trace = false;                    // test hook: record every write-path message
};

/// Writes a new directory's initial data straight into its files, before the first
/// checkpoint: nothing is logged, and a crash before create() returns leaves a directory
/// that open() refuses. Given to create_options::initial_data.
class initial_loader {
public:
  virtual ~initial_loader() = default;
  virtual std::size_t page_size() const = 0;
  /// Appends `count` rows of `row_size` bytes (`rows` holds them back to back) to
  /// relation `relation`, packed as types.hpp describes. Every append to one relation uses
  /// the same row size.
  virtual void append_rows(relation_id relation, const void* rows, std::size_t row_size,
                           std::size_t count) = 0;
  /// Writes a file of the application's own into the data directory (made durable with
  /// it). `name` is a plain file name, not a path.
  virtual void write_file(const std::string& name, const std::string& contents) = 0;
};

struct create_options {
  std::vector<std::string> settings;                 // KEY=VALUE, written to tidemark.conf
  std::function<void(initial_loader&)> initial_data; // optional
  std::optional<fault_injection> faults;             // test hook
};

/// database::base_backup's options.
struct base_backup_options {
  /// The standby's name (1 to 64 letters, digits, '.', '_' or '-'); empty: a generated one.
  /// The primary keeps WAL for a standby by its name, and a name is one standby's: the
  /// copy gets an id of its own, and the primary refuses a name that belongs to another.
  std::string name;
  /// The name may belong to another standby: this copy takes it over, and the primary
  /// refuses the standby that had it from then on (it was lost, or is being replaced).
  bool take_over = false;
  /// Receives a line every second (optional).
  std::function<void(const std::string&)> progress;
};

/// database::promote's options.
struct promote_options {
  /// Promote even when the primary last said another of its standbys had flushed more WAL
  /// than this one (that standby is gone for good; what only it held is lost).
  bool force = false;
};

} // namespace tidemark
