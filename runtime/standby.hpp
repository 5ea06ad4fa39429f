// Streaming replication's runtime side (standby.cpp): the base backup client, and the
// types the instance's standby methods report. An instance starts a WAL sender
// (replication_listen) or, opened as a standby, a receiver and continuous redo; its methods
// for that (start_replication, start_standby, promote, standby, standbys) are declared in
// instance.hpp and defined in standby.cpp, whose header comment lists the rules they keep.
#pragma once

#include <tidemark/options.hpp>
#include <tidemark/reports.hpp>

#include <functional>
#include <string>

namespace tidemark::runtime {

/// A standby's stream, as it stands: the public report itself.
using standby_status = tidemark::standby_status;

/// Copies a running primary's data directory into `new_dir` (which must not exist or be
/// empty) for a standby, as options say. Throws config_error (bad
/// directory or name), replication_error (the primary cannot be reached or refuses),
/// data_error (the primary sent an inconsistent copy), io_error.
using base_backup_report = tidemark::base_backup_report;
base_backup_report base_backup(const std::string& new_dir, const std::string& primary,
                               const tidemark::base_backup_options& options);

} // namespace tidemark::runtime
