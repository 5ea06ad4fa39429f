// The control file: reading with full validation, and atomic replacement (temporary file,
// fsync, rename, directory fsync). See control_file.hpp.
//
// Invariants:
//  - The on-disk format is control_data's bytes as they are; the CRC covers every byte
//    before the crc field, so any damaged byte of the meaningful part is detected.
//  - The file at control_file_path() is only ever replaced by rename of a fully written and
//    fsynced temporary file: a reader sees the old or the new contents.
#include "storage/control_file.hpp"

#include "storage/crc32c.hpp"
#include "storage/types.hpp"

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <type_traits>

namespace tidemark::storage {

static_assert(std::is_trivially_copyable_v<control_data>, "control_data is written as raw bytes");
static_assert(sizeof(control_data) == 96, "control file layout is part of the on-disk format");
static_assert(offsetof(control_data, crc) == 88, "the CRC covers every byte before it");

namespace {

std::string global_dir(const std::string& data_dir) { return data_dir + "/global"; }

// Version 1's layout: as version 2 without generation.
struct control_data_v1 {
  std::uint32_t magic, version;
  std::uint64_t system_id;
  std::uint32_t page_size, data_checksums;
  std::uint64_t segment_size, wal_segment_size;
  std::uint32_t state, protection;
  std::uint64_t checkpoint_lsn, redo_lsn, next_xid, checkpoint_time_unix_ms;
  std::uint32_t crc, padding;
};

static_assert(sizeof(control_data_v1) == 88, "version 1 layout");

template <class Data>
std::uint32_t control_crc(const Data& data) {
  return crc32c(&data, offsetof(Data, crc));
}

// A version 1 file read into `data`: checked and converted (generation 0).
void upgrade_version_1(const std::string& path, control_data& data, std::size_t length) {
  control_data_v1 old;
  static_assert(sizeof old <= sizeof data);
  std::memcpy(&old, &data, sizeof old);
  if (length < sizeof old)
    throw data_error(path + ": control file is truncated (" + std::to_string(length) + " of " +
                     std::to_string(sizeof old) + " bytes)");
  if (control_crc(old) != old.crc)
    throw data_error(path + ": control file checksum mismatch: the file is corrupt");
  data = control_data{};
  data.system_id = old.system_id;
  data.page_size = old.page_size;
  data.data_checksums = old.data_checksums;
  data.segment_size = old.segment_size;
  data.wal_segment_size = old.wal_segment_size;
  data.state = old.state;
  data.protection = old.protection;
  data.checkpoint_lsn = old.checkpoint_lsn;
  data.redo_lsn = old.redo_lsn;
  data.next_xid = old.next_xid;
  data.checkpoint_time_unix_ms = old.checkpoint_time_unix_ms;
  data.crc = control_crc(data);
}

void check_control_data(const std::string& path, control_data& data, std::size_t length) {
  if (length >= sizeof data.magic && data.magic != control_magic)
    throw data_error(path + ": not a Tidemark control file");
  if (length >= 2 * sizeof data.magic && data.version == 1)
    return upgrade_version_1(path, data, length);
  if (length < sizeof data)
    throw data_error(path + ": control file is truncated (" + std::to_string(length) + " of " +
                     std::to_string(sizeof data) + " bytes)");
  if (data.version != control_version)
    throw data_error(path + ": control file version " + std::to_string(data.version) +
                     " is not supported (this build reads version " +
                     std::to_string(control_version) + ")");
  if (control_crc(data) != data.crc)
    throw data_error(path + ": control file checksum mismatch: the file is corrupt");
}

} // namespace

const char* to_string(cluster_state state) {
  switch (state) {
    case cluster_state::shut_down:
      return "shut down";
    case cluster_state::in_production:
      return "in production";
    case cluster_state::in_recovery:
      return "in recovery";
  }
  return "unknown";
}

std::string control_file_path(const std::string& data_dir) {
  return global_dir(data_dir) + "/tidemark.control";
}

control_data read_control_file(io_engine& io, const std::string& data_dir) {
  std::string path = control_file_path(data_dir);
  if (!std::filesystem::exists(path))
    throw data_error(path + ": no control file (not a Tidemark data directory?)");
  int fd = io.open_file(path, false);
  control_data data;
  std::size_t length = 0;
  try {
    length = io.read(fd, &data, sizeof data, 0);
  } catch (...) {
    io.close_file(fd);
    throw;
  }
  io.close_file(fd);
  check_control_data(path, data, length);
  return data;
}

void write_control_file(io_engine& io, const std::string& data_dir, control_data data) {
  std::string dir = global_dir(data_dir);
  std::error_code error;
  if (std::filesystem::create_directories(dir, error))
    io.sync_directory(data_dir);
  if (error)
    throw io_error(dir + ": cannot create directory: " + error.message(), error.value());
  data.crc = control_crc(data);
  std::string path = control_file_path(data_dir);
  std::string temp_path = path + ".tmp";
  int fd = io.open_file(temp_path, true);
  try {
    io.truncate(fd, 0);
    io.write(fd, &data, sizeof data, 0);
    io.sync(fd, sync_kind::full);
  } catch (...) {
    io.close_file(fd);
    throw;
  }
  io.close_file(fd);
  io.rename(temp_path, path);
  io.sync_directory(dir);
}

} // namespace tidemark::storage
