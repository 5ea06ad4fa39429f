// The reports the Tidemark API returns: what a start recovered, what a file check found,
// a standby's stream, a primary's standbys, a base backup. Plain structs; the three that
// the tidemark program writes as JSON list their fields once, with their published names
// (visit_fields), for every writer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tidemark {

/// What the start did before the database accepted work.
struct recovery_report {
  bool needed = false;                  // the last stop was not clean
  std::string previous_state;           // as the control file said
  std::string protection;               // the torn-page protection recovery ran in
  bool protection_switched = false;     // recovered in the crashed run's mode, then reopened
  std::uint64_t startup_sync_files = 0; // fsynced before recovery wrote (0 with syncfs)
  double startup_sync_seconds = 0;
  std::uint64_t redo_lsn = 0, end_lsn = 0;
  std::string end_reason;    // why redo stopped where it did
  std::uint64_t records = 0; // WAL records replayed
  std::uint64_t blocks_applied = 0;
  std::uint64_t images_restored = 0;   // full-page images written back
  std::uint64_t pages_repaired = 0;    // restored from the doublewrite buffer
  std::uint64_t repaired_checksum = 0; // of which the on-disk page failed verification
  std::uint64_t repaired_lsn = 0;      // of which it was valid but older
  std::uint64_t repaired_bytes = 0;    // of which it had the same LSN but other bytes
  std::uint64_t ring_images_read = 0;  // doublewrite images the repair read
  std::uint64_t ring_records_read = 0; // of intact records
  std::uint64_t ring_bytes_read = 0;   // of the ring file, in all its passes
  bool ring_bounded = false;           // the ring's header bounded the repair to live records
  double repair_seconds = 0;           // the doublewrite repair
  std::uint64_t wal_bytes = 0;         // from the redo point to where redo stopped
  std::uint64_t pages_read = 0;        // read by redo itself
  std::uint64_t pages_prefetched = 0;  // read ahead of redo (recovery_prefetch)
  std::uint64_t prefetch_hits = 0;     // of which redo used before they were evicted
  std::uint64_t pages_advised = 0; // left to the kernel to read ahead (a pool under 128 buffers)
  std::string prefetch_error;      // why prefetch stopped early (redo read for itself)
  std::uint64_t pages_written_by_redo = 0;       // victims redo (or its prefetch) wrote itself
  std::uint64_t pages_written_by_bgwriter = 0;   // during redo
  std::uint64_t pages_written_by_checkpoint = 0; // by the end-of-recovery checkpoint
  double checkpoint_seconds = 0;                 // the end-of-recovery checkpoint
  double seconds = 0;                            // redo

  /// Calls visit(name, field) for every field, in order, with its published name (its path in
  /// `tidemark recover --json`): writers (JSON, logs) and tests go through this list, so a new
  /// field is added here and where it is set. tests/runtime/reports_test.cpp checks that it names
  /// every field.
  template <class Visit>
  void visit_fields(Visit&& visit) {
    visit_all(*this, visit);
  }
  template <class Visit>
  void visit_fields(Visit&& visit) const {
    visit_all(*this, visit);
  }

private:
  template <class Self, class Visit>
  static void visit_all(Self& r, Visit& visit) {
    visit("recovery.needed", r.needed);
    visit("recovery.previous_state", r.previous_state);
    visit("recovery.protection", r.protection);
    visit("recovery.protection_switched", r.protection_switched);
    visit("recovery.startup_sync_files", r.startup_sync_files);
    visit("recovery.startup_sync_seconds", r.startup_sync_seconds);
    visit("recovery.redo_lsn", r.redo_lsn);
    visit("recovery.end_lsn", r.end_lsn);
    visit("recovery.wal_end", r.end_reason);
    visit("recovery.records", r.records);
    visit("recovery.blocks_applied", r.blocks_applied);
    visit("recovery.images_restored", r.images_restored);
    visit("pages_repaired", r.pages_repaired);
    visit("repair.checksum_failed", r.repaired_checksum);
    visit("repair.older_lsn", r.repaired_lsn);
    visit("repair.same_lsn_other_bytes", r.repaired_bytes);
    visit("repair.images_read", r.ring_images_read);
    visit("repair.records_read", r.ring_records_read);
    visit("repair.bytes_read", r.ring_bytes_read);
    visit("repair.bounded", r.ring_bounded);
    visit("repair.seconds", r.repair_seconds);
    visit("recovery.wal_bytes", r.wal_bytes);
    visit("recovery.pages_read", r.pages_read);
    visit("recovery.pages_prefetched", r.pages_prefetched);
    visit("recovery.prefetch_hits", r.prefetch_hits);
    visit("recovery.pages_advised", r.pages_advised);
    visit("recovery.prefetch_error", r.prefetch_error);
    visit("recovery.pages_written_by_redo", r.pages_written_by_redo);
    visit("recovery.pages_written_by_bgwriter", r.pages_written_by_bgwriter);
    visit("recovery.pages_written_by_checkpoint", r.pages_written_by_checkpoint);
    visit("recovery.checkpoint_seconds", r.checkpoint_seconds);
    visit("recovery.seconds", r.seconds);
  }
};

/// What check_files() found. failures counts every problem of every kind.
struct file_check_report {
  bool control_file_ok = false;
  bool needs_recovery = false;                  // the last stop was not clean (pages may be torn)
  std::uint64_t wal_records = 0, wal_bytes = 0; // valid WAL from the redo point on
  std::string wal_end;                          // why that WAL ends where it does
  std::uint64_t pages_checked = 0;
  /// Keyed tables whose tree was checked (the catalog's included; a directory that needs
  /// recovery has its trees checked only after it).
  std::uint64_t tables_checked = 0;
  std::uint64_t ring_images = 0; // doublewrite ring images in intact records
  std::uint64_t failures = 0;
  std::vector<std::string> first_failures; // "bad checksum in base/3.0 block 17", ...
};

/// What a simulated power loss did (fault injection only).
struct power_loss_report {
  std::uint64_t unsynced_writes = 0, survived = 0, lost = 0, torn = 0;
};

/// A standby's stream as it stands (database::standby()). LSNs are WAL byte positions.
struct standby_status {
  bool connected = false; // streaming from its primary now
  std::string primary;    // HOST:PORT
  std::string error;      // why it is not streaming, when it is not; why it stopped
  /// The standby stopped after a failure (error says why and where redo stopped, e.g. WAL
  /// fsynced here that could not be read back): it neither replays nor confirms WAL to its
  /// primary, and promote() refuses. Close it and open it again (or promote it offline):
  /// redo then reads its WAL afresh.
  bool failed = false;
  /// The primary refused this standby for good (another system, another generation, or WAL
  /// it no longer has: error says which): it neither streams nor retries. Seed it again.
  bool refused = false;
  std::uint64_t primary_flushed = 0; // durable on the primary, as it last said
  std::uint64_t received = 0;        // written here
  std::uint64_t flushed = 0;         // ... and fsynced here
  std::uint64_t replayed = 0;        // ... and applied by redo
  std::uint64_t backup_end = 0;      // promotable once flushed reaches it
  std::uint64_t records = 0;         // replayed since this open
  std::uint64_t restartpoints = 0;   // made since this open
  std::uint64_t restart_redo = 0;    // a restart replays from here (its last restartpoint)
  std::uint64_t wal_rereads = 0;     // WAL redo (or its prefetch) read again after it read back
                                     // wrong (zeros, short, an error) where it had been fsynced
  /// Replay delay: seconds since the primary wrote the oldest WAL not replayed here yet (by
  /// the primary's clock in its answers, so clocks apart add their difference); 0 once replay
  /// has all the primary last said was durable.
  double seconds_behind = 0;
  std::uint64_t pages_read = 0, prefetched = 0, prefetch_hits = 0; // by replay
  /// WAL the primary's synchronous standbys' quorum had confirmed, as the primary last said:
  /// a standby whose `flushed` is below it lacks acknowledged commits.
  std::uint64_t primary_acknowledged = 0;
  /// Of the primary's other standbys, as it last heard of them, the one furthest ahead of
  /// this one ("" when none is) and how far it had flushed: promote() refuses this one.
  std::string peer_ahead;
  std::uint64_t peer_ahead_flushed = 0;

  /// Calls visit(name, field) for every field, in order, with its published name (its key in
  /// `tidemark standby --json`): writers (JSON, logs) and tests go through this list, so a new
  /// field is added here and where it is set. tests/runtime/reports_test.cpp checks that it names
  /// every field.
  template <class Visit>
  void visit_fields(Visit&& visit) {
    visit_all(*this, visit);
  }
  template <class Visit>
  void visit_fields(Visit&& visit) const {
    visit_all(*this, visit);
  }

private:
  template <class Self, class Visit>
  static void visit_all(Self& r, Visit& visit) {
    visit("connected", r.connected);
    visit("primary", r.primary);
    visit("error", r.error);
    visit("failed", r.failed);
    visit("refused", r.refused);
    visit("primary_flushed", r.primary_flushed);
    visit("received", r.received);
    visit("flushed", r.flushed);
    visit("replayed", r.replayed);
    visit("backup_end", r.backup_end);
    visit("records", r.records);
    visit("restartpoints", r.restartpoints);
    visit("restart_redo", r.restart_redo);
    visit("wal_rereads", r.wal_rereads);
    visit("seconds_behind", r.seconds_behind);
    visit("pages_read", r.pages_read);
    visit("pages_prefetched", r.prefetched);
    visit("prefetch_hits", r.prefetch_hits);
    visit("primary_acknowledged", r.primary_acknowledged);
    visit("peer_ahead", r.peer_ahead);
    visit("peer_ahead_flushed", r.peer_ahead_flushed);
  }
};

/// One standby as its primary sees it (database::standbys()).
struct standby_info {
  std::string name;
  bool connected = false;
  std::uint64_t sent = 0, written = 0, flushed = 0, replayed = 0; // WAL positions
  std::uint64_t pages_read = 0, prefetch_hits = 0;                // by its replay
  double seconds_since_heard = 0;
};

/// What database::base_backup() copied.
/// What database::reload() did.
struct reload_report {
  /// Reloadable settings now in effect with a new value, as "checkpoint_timeout = 30s".
  std::vector<std::string> changed;
  /// Settings whose value in tidemark.conf differs from the running one but which only a
  /// restart takes: they keep their value, as "shared_buffers = 1GB".
  std::vector<std::string> need_restart;
};

struct base_backup_report {
  std::string standby_name;
  std::uint64_t files = 0, bytes = 0;
  std::uint64_t pages_reread = 0; // torn while being copied: copied again from memory
  std::uint64_t wal_bytes = 0;
  std::uint64_t redo_lsn = 0, end_lsn = 0; // replay from redo_lsn; consistent at end_lsn
  double seconds = 0;

  /// Calls visit(name, field) for every field, in order, with its published name (its key in
  /// `tidemark basebackup --json`): writers (JSON, logs) and tests go through this list, so a new
  /// field is added here and where it is set. tests/runtime/reports_test.cpp checks that it names
  /// every field.
  template <class Visit>
  void visit_fields(Visit&& visit) {
    visit_all(*this, visit);
  }
  template <class Visit>
  void visit_fields(Visit&& visit) const {
    visit_all(*this, visit);
  }

private:
  template <class Self, class Visit>
  static void visit_all(Self& r, Visit& visit) {
    visit("standby_name", r.standby_name);
    visit("files", r.files);
    visit("bytes", r.bytes);
    visit("pages_reread", r.pages_reread);
    visit("wal_bytes", r.wal_bytes);
    visit("redo_lsn", r.redo_lsn);
    visit("end_lsn", r.end_lsn);
    visit("seconds", r.seconds);
  }
};

} // namespace tidemark
