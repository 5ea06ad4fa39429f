// The runtime's database: what the public API (include/tidemark/, implemented in api.cpp)
// wraps. It creates or opens a data directory (running crash recovery when it needs it),
// boots and stops the actors, and gives sessions (session.hpp: the commit path).
// Not installed: the library's own tests use it directly (the deterministic scheduler,
// traces, engine counters); applications use <tidemark/database.hpp>.
//
// Boot order: control file → WAL validated end to end (nothing is modified if it is
// corrupt) → WAL made durable → doublewrite repair → storage objects → actors (sync
// worker first, so every write can register; then the doublewrite batcher; the bgwriter
// cleans during redo) → redo (when the last stop was not clean) → end-of-recovery
// checkpoint, or the control file marked "in production" → sessions admitted.
// Shutdown order: sessions stop → shutdown checkpoint → bgwriter and checkpointer exit
// (the batcher and sync worker still retire chunks they may wait for) → the rest exit.
#pragma once

#include <tidemark/database.hpp>

#include "messages/interfaces.hpp"
#include "runtime/config.hpp"
#include "runtime/directory_lock.hpp"
#include "runtime/engine.hpp"
#include "runtime/session.hpp"
#include "runtime/standby.hpp"
#include "runtime/standby_file.hpp"
#include "runtime/supervision.hpp"
#include "storage/received_wal.hpp"
#include "storage/standby_slots.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tidemark::runtime {

struct instance_options {
  std::vector<std::string> overrides;            // KEY=VALUE, as --set
  std::optional<storage::fault_config> faults;   // run on the fault-injecting engine
  bool detach_io_actors = true;                  // off under the deterministic test scheduler
  bool trace = false;                            // record every write-path message
  messages::trace_sink::listener trace_listener; // sees every write-path message (trace or not)
  std::function<void(const std::string&)> log;   // log lines; empty: stderr
  /// Opens a standby (a directory with standby.conf): recovery, then redo follows the WAL
  /// the primary streams until promote() or close(); sessions only read.
  bool standby = false;
  bool stream = true;  // standby: connect to the primary (off: replay local WAL only)
  std::string primary; // standby: HOST:PORT instead of standby.conf's
};

/// What recovery did (the public report) and where redo stopped, which a standby needs to
/// restart its WAL there.
struct recovery_outcome : tidemark::recovery_report {
  storage::lsn_t last_record_lsn = 0; // the start of the last record replayed
  /// A standby's redo ended where its stream ended (the record at end_lsn was cut off
  /// there), not at a record that failed to read.
  bool ended_at_stream_end = false;
};

class instance {
public:
  /// Creates an empty data directory: configuration, control file, WAL with a first
  /// checkpoint. `populate` may write initial pages, and files of its own in `dir`,
  /// through the relation files (and their io()). When it returns, every file and
  /// directory entry is made durable, and only then the control file is written: a
  /// directory without one was not completely created. Throws config_error if `dir`
  /// exists and is not empty. `faults` runs it on the fault-injecting engine (tests).
  static void create(const std::string& dir, const std::vector<std::string>& overrides,
                     const std::function<void(storage::relation_files&, const settings&)>& populate,
                     const std::optional<storage::fault_config>& faults = std::nullopt);

  /// Opens a data directory, running crash recovery when the last stop was not clean.
  /// Recovery runs in the torn-page protection the crashed run recorded; when the settings
  /// ask for another, the directory is recovered and shut down cleanly in the recorded
  /// mode first, then opened in the new one. If recovery fails, nothing marks the
  /// directory clean: the next open retries it.
  static std::unique_ptr<instance> open(const std::string& dir, const instance_options& options);
  /// Opens a cleanly shut down directory for reading: no actors, no WAL, no recovery, no
  /// file created or written (the engine opens files O_RDONLY). A shared lock is taken on
  /// the lock file when there is one, so no writer opens the directory meanwhile; a
  /// directory that needs recovery is refused (config_error).
  static std::unique_ptr<instance> open_read_only(const std::string& dir,
                                                  const instance_options& options);

  ~instance();
  instance(const instance&) = delete;
  instance& operator=(const instance&) = delete;

  instance_session open_session();
  /// Runs an immediate checkpoint and waits for it.
  void checkpoint();
  /// See database::reload() (runtime/reload.cpp).
  tidemark::reload_report reload();
  /// The value of `key` for this run, a reload's included.
  std::string setting(const std::string& key) const;
  /// Shutdown checkpoint, then stops the actors. Idempotent. Throws if the engine failed.
  void close();
  /// Calls `on_event` (on an actor's thread) for every checkpoint event from now until
  /// the actors stop, the shutdown checkpoint's included.
  void observe_checkpoints(std::function<void(const messages::checkpoint_event&)> on_event);

  const recovery_outcome& recovery() const { return recovery_; }
  /// Standby only: ends streaming, replays what arrived, runs the end-of-recovery
  /// checkpoint in the next generation and accepts writes. usage_error before the copy is
  /// consistent (backup_end_lsn not yet received) or when not a standby. The files of
  /// tables the primary dropped go then, after `before_removing(relations)` returns (the
  /// public API marks their handles and waits for the calls in flight).
  /// With `force` false, it also refuses (usage_error) when the primary last said that
  /// another of its standbys had flushed more WAL than this one.
  void promote(bool force,
               const std::function<void(const std::vector<storage::rel_id>&)>& before_removing);
  bool is_standby() const { return standby_.has_value(); }
  standby_status standby() const;
  /// The primary's view of its standbys (empty without replication_listen).
  std::vector<messages::standby_view> standbys();
  /// HOST:PORT the WAL sender listens on (the port the system chose for port 0); empty
  /// when none listens.
  const std::string& replication_address() const { return replication_address_; }
  bool read_only() const { return read_only_; }
  engine& internals() { return *engine_; }
  caf::actor_system& system() { return *system_; }
  messages::wal_writer_actor wal_writer() const { return wal_writer_; }
  messages::checkpointer_actor checkpointer() const { return checkpointer_; }
  messages::sync_worker_actor sync_worker() const { return sync_worker_; }
  messages::bgwriter_actor bgwriter() const { return bgwriter_; }
  messages::dw_batcher_actor dw_batcher() const { return dw_batcher_; }
  bool detached_io() const { return detach_io_actors_; }
  /// Test hook: ends a core actor (supervision.hpp names them) as a crash would; the
  /// engine fails as it must when a core actor dies.
  void end_actor_abnormally(const std::string& name);
  std::vector<std::string> watched_actors() const;

private:
  instance() = default;
  static std::unique_ptr<instance> open_once(const std::string& dir,
                                             const instance_options& options);
  void request_checkpoint(messages::checkpoint_reason reason);
  void log_recovery() const;
  /// usage_error naming the peer when another standby of the primary is further ahead.
  void refuse_if_behind_a_peer() const;
  /// After recovery (open for writing, promote): files of dropped tables a crash left (or,
  /// on a standby, its primary's drops), once `before_removing` has been told of them.
  void remove_leftover_tables(
    const std::function<void(const std::vector<storage::rel_id>&)>& before_removing = {});
  void start_actors();
  void stop_actors();
  bool uses_network() const;
  void start_replication(); // publishes the WAL sender on replication_listen
  void start_standby(const instance_options& options);
  void end_standby_stream();                 // ends the stream and redo; rethrows redo's failure
  void stop_standby(const std::string& why); // redo cannot go on: fail the standby, loudly

  std::unique_ptr<engine> engine_;
  std::vector<std::string> overrides_; // given at open: a reload keeps them over the file
  std::mutex reload_mutex_;            // one reload() at a time
  mutable std::mutex settings_mutex_;  // current_: replaced by reload(), read by setting()
  settings current_;                   // the engine's, with what reloads changed
  std::unique_ptr<caf::actor_system_config> system_config_;
  std::unique_ptr<caf::actor_system> system_;
  messages::wal_writer_actor wal_writer_;
  messages::checkpointer_actor checkpointer_;
  messages::sync_worker_actor sync_worker_;
  messages::bgwriter_actor bgwriter_;
  messages::dw_batcher_actor dw_batcher_;
  std::unique_ptr<actor_watch> watch_; // every core actor, while the actors run
  messages::checkpoint_observer_actor checkpoint_watcher_;
  messages::wal_sender_actor wal_sender_;
  std::string replication_address_;                          // where wal_sender_ is published
  std::vector<storage::standby_slot_record> recorded_slots_; // read at open, for the sender
  // A standby's: its file, the stream redo follows, the receiver, the redo thread.
  std::optional<standby_file> standby_;
  std::string standby_primary_;
  std::unique_ptr<storage::received_wal> arrival_;
  messages::wal_receiver_actor wal_receiver_;
  std::thread standby_redo_;
  std::exception_ptr standby_redo_error_;
  recovery_outcome standby_redo_report_; // the redo thread's until it is joined
  recovery_outcome recovery_;
  bool detach_io_actors_ = true;
  bool read_only_ = false;
  bool closed_ = false;
  directory_lock lock_;
};

} // namespace tidemark::runtime
