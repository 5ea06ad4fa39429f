// Tests of storage/directory_sync: after a whole-tree sync by either method, a simulated
// power loss finds no unsynced write anywhere in the tree (nested directories included);
// the fsync method counts every file and directory it synced; a missing tree is an error
// naming it.
#include "storage/directory_sync.hpp"
#include "storage/fault_engine.hpp"
#include "tests/storage/test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>

namespace tidemark::storage {
namespace {

// Three files in two directory levels, each with one unsynced write.
void write_tree(io_engine& io, const test::temp_dir& dir) {
  std::filesystem::create_directories(dir.file("base/inner"));
  for (const char* name : {"top", "base/a", "base/inner/b"}) {
    const int fd = io.open_file(dir.file(name), true);
    const auto bytes = test::random_bytes(4096, 9);
    io.write(fd, bytes.data(), bytes.size(), 0);
    io.close_file(fd);
  }
}

} // namespace

TEST_CASE("directory_sync: both methods leave nothing unsynced in the tree") {
  for (directory_sync_method method :
       {directory_sync_method::fsync, directory_sync_method::syncfs}) {
    test::temp_dir dir;
    fault_engine io(make_io_engine(io_method::sync), {});
    write_tree(io, dir);
    const directory_sync_report report = sync_directory_tree(io, dir.path(), method);
    if (method == directory_sync_method::fsync) {
      CHECK(report.files == 3);
      CHECK(report.directories == 3); // the root, base, base/inner
    } else {
      CHECK(report.file_systems == 1);
    }
    CHECK(io.simulate_power_loss().unsynced_writes == 0);
  }
}

TEST_CASE("directory_sync: without it the same tree loses its writes") {
  test::temp_dir dir;
  fault_engine io(make_io_engine(io_method::sync), {});
  write_tree(io, dir);
  CHECK(io.simulate_power_loss().unsynced_writes == 3);
}

TEST_CASE("directory_sync: a missing directory is an error naming it") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  for (directory_sync_method method : {directory_sync_method::fsync, directory_sync_method::syncfs})
    CHECK_THROWS_WITH_AS(sync_directory_tree(*io, dir.file("missing"), method),
                         doctest::Contains("missing"), io_error);
}

} // namespace tidemark::storage
