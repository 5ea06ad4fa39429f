// Startup: settings resolution for a data directory and crash recovery (DESIGN §6 steps
// 1–5), in the opening thread. prepare_storage() runs before any actor exists; replay()
// runs once the actors are up, so the bgwriter cleans and the sync worker absorbs during
// redo, and pages written by redo take the normal write path (doublewrite included); with
// recovery_prefetch, a WAL prefetcher reads ahead of redo (storage/wal_prefetcher.hpp), and
// a long redo logs its progress every recovery_progress_interval.
//
// Rules it keeps:
//  - Nothing on disk is modified until the WAL from the redo point has been read to its
//    end and checked for corruption of durable WAL; a corrupt control file or WAL leaves
//    the directory exactly as it was.
//  - After anything but a clean shutdown, the whole data directory (WAL, data files,
//    commit-status log, doublewrite ring) is made durable before anything is overwritten
//    (recovery_init_sync_method): what a killed process left only in the page cache must
//    not be lost by a later power loss once the ring is reused, redo skipped the page as
//    already newer, or the redo point moved past the WAL that could rebuild it.
//  - Doublewrite repair (step 3) runs after the WAL is validated and before redo reads any
//    page whenever the crashed run wrote through the ring, whatever the current setting.
//  - The redo point does not move until the end-of-recovery checkpoint completes.
#pragma once

#include "runtime/engine.hpp"
#include "runtime/instance.hpp"
#include "storage/received_wal.hpp"

#include <optional>

namespace tidemark::runtime {

std::string config_file_path(const std::string& data_dir);

/// Defaults, then the directory's tidemark.conf, then overrides; checked against the
/// init-time settings the control file recorded. Throws config_error.
settings resolve_settings(const std::string& data_dir, const std::vector<std::string>& overrides,
                          const storage::control_data& control);

storage::recorded_protection record_of(torn_page_protection mode);
/// The mode a control file recorded; nothing for directories from before it was recorded.
std::optional<torn_page_protection> protection_of(storage::recorded_protection recorded);

/// True unless the last stop was clean.
bool needs_recovery(const storage::control_data& control);

/// Validates WAL from the redo point (modifying nothing), makes it durable when recovery
/// is needed, and builds the engine's storage objects. Throws data_error naming what is
/// corrupt. Then the actors start, and replay() runs redo with them (the bgwriter cleans
/// and the sync worker absorbs during recovery).
recovery_outcome prepare_storage(engine& e);

/// Redo from the redo point (DESIGN §6 step 4), when report.needed. With `arrival` (a
/// standby) redo follows the WAL as it arrives and returns only once the stream ended
/// (promotion or stop); report.end_lsn and last_record_lsn then say where it stopped.
void replay(engine& e, recovery_outcome& report, storage::received_wal* arrival = nullptr);

} // namespace tidemark::runtime
