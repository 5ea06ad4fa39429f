// Control file: round trip through atomic replacement, and a clear data_error for every way
// the file can be unusable (corrupt, missing, foreign, truncated, unknown version).
#include "test_support.hpp"

#include "storage/control_file.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>

using namespace tidemark::storage;

namespace {

control_data sample() {
  control_data data;
  data.system_id = 0x1234567890ABCDEFu;
  data.page_size = 8192;
  data.data_checksums = 1;
  data.segment_size = 1u << 30;
  data.wal_segment_size = 16u << 20;
  data.state = static_cast<std::uint32_t>(cluster_state::in_production);
  data.checkpoint_lsn = 0x2000;
  data.redo_lsn = 0x1800;
  data.next_xid = 77;
  data.checkpoint_time_unix_ms = 1700000000000;
  return data;
}

void overwrite(const std::string& path, std::size_t offset, const std::string& bytes) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(file);
  file.seekp(static_cast<std::streamoff>(offset));
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

} // namespace

TEST_CASE("control_file: written contents read back exactly") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  write_control_file(*io, dir.path(), sample());
  control_data read = read_control_file(*io, dir.path());
  CHECK(read.magic == control_magic);
  CHECK(read.version == control_version);
  CHECK(read.system_id == sample().system_id);
  CHECK(read.page_size == 8192);
  CHECK(read.wal_segment_size == 16u << 20);
  CHECK(read.checkpoint_lsn == 0x2000);
  CHECK(read.redo_lsn == 0x1800);
  CHECK(read.next_xid == 77);
  CHECK(static_cast<cluster_state>(read.state) == cluster_state::in_production);
  CHECK_FALSE(std::filesystem::exists(control_file_path(dir.path()) + ".tmp"));

  control_data next = read;
  next.state = static_cast<std::uint32_t>(cluster_state::shut_down);
  next.redo_lsn = 0x4000;
  write_control_file(*io, dir.path(), next);
  read = read_control_file(*io, dir.path());
  CHECK(read.redo_lsn == 0x4000);
  CHECK(static_cast<cluster_state>(read.state) == cluster_state::shut_down);
}

TEST_CASE("control_file: a corrupt byte is a checksum data_error") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  write_control_file(*io, dir.path(), sample());
  overwrite(control_file_path(dir.path()), offsetof(control_data, redo_lsn), "\x7f");
  CHECK_THROWS_WITH_AS(read_control_file(*io, dir.path()),
                       doctest::Contains("control file checksum mismatch"), data_error);
}

TEST_CASE("control_file: a missing file names the path") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  CHECK_THROWS_WITH_AS(
    read_control_file(*io, dir.path()),
    (control_file_path(dir.path()) + ": no control file (not a Tidemark data directory?)").c_str(),
    data_error);
}

TEST_CASE("control_file: foreign, truncated and future-version files are refused") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  std::filesystem::create_directories(dir.path() + "/global");
  const std::string path = control_file_path(dir.path());

  SUBCASE("foreign file") {
    write_file(path, std::string(200, 'x'));
    CHECK_THROWS_WITH_AS(read_control_file(*io, dir.path()),
                         doctest::Contains("not a Tidemark control file"), data_error);
  }
  SUBCASE("truncated file") {
    write_control_file(*io, dir.path(), sample());
    std::filesystem::resize_file(path, 40);
    CHECK_THROWS_WITH_AS(read_control_file(*io, dir.path()), doctest::Contains("truncated"),
                         data_error);
  }
  SUBCASE("unknown version") {
    write_control_file(*io, dir.path(), sample());
    overwrite(path, offsetof(control_data, version), std::string("\x09\0\0\0", 4));
    CHECK_THROWS_WITH_AS(read_control_file(*io, dir.path()), doctest::Contains("version 9"),
                         data_error);
  }
}

TEST_CASE("control_file: cluster states have names") {
  CHECK(std::string(to_string(cluster_state::shut_down)) == "shut down");
  CHECK(std::string(to_string(cluster_state::in_production)) == "in production");
  CHECK(std::string(to_string(cluster_state::in_recovery)) == "in recovery");
}
