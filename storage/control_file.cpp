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
#include <filesystem>
#include <type_traits>

namespace tidemark::storage {

static_assert(std::is_trivially_copyable_v<control_data>, "control_data is written as raw bytes");
static_assert(sizeof(control_data) == 88, "control file layout is part of the on-disk format");
static_assert(offsetof(control_data, crc) == 80, "the CRC covers every byte before it");

namespace {

std::string global_dir(const std::string& data_dir) {
  return data_dir + "/global";
}

std::uint32_t control_crc(const control_data& data) {
  return crc32c(&data, offsetof(control_data, crc));
}

void check_control_data(const std::string& path, const control_data& data, std::size_t length) {
  if (length >= sizeof data.magic && data.magic != control_magic)
    throw data_error(path + ": not a Tidemark control file");
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
