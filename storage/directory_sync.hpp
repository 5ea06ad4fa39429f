// Making a whole data directory durable: every file and every directory under it, by one
// fsync each (`fsync`) or by one syncfs of each file system it spans (`syncfs`).
//
// Used at startup after anything but a clean shutdown (a process crash leaves writes that
// reached only the page cache: they must be durable before recovery overwrites the ring,
// writes pages or moves the redo point — PostgreSQL's recovery_init_sync_method), and by
// init, which reports success only once everything it wrote is durable.
//
// Invariants:
//  - With `fsync`, a directory is fsynced after every entry below it, so a file's name is
//    durable no earlier than its contents.
//  - Every failure (open, fsync, syncfs) throws io_error naming the path; a failed fsync
//    is fsync_failed() (W3: never retried).
//  - Only regular files and directories are visited; symbolic links are followed (a WAL
//    directory may live on another device), each file system is synced once with syncfs.
#pragma once

#include "storage/io_engine.hpp"

#include <cstdint>
#include <string>

namespace tidemark::storage {

enum class directory_sync_method { fsync, syncfs };

struct directory_sync_report {
  std::uint64_t files = 0;        // files fsynced (fsync method)
  std::uint64_t directories = 0;  // directories fsynced (fsync method)
  std::uint64_t file_systems = 0; // file systems synced (syncfs method)
  double seconds = 0;
};

directory_sync_report sync_directory_tree(io_engine& io, const std::string& root,
                                          directory_sync_method method);

} // namespace tidemark::storage
