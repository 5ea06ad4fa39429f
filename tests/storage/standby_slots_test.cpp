// The standby slots file: names, positions and owners read back as written; a file from
// before owners (two columns) reads with owner 0; a malformed line is a data_error naming
// the file and line; the superseded mark read back as written.
#include "test_support.hpp"

#include "storage/standby_slots.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace tidemark::storage;

TEST_CASE("standby_slots: written slots read back, owners included") {
  test::temp_dir dir;
  std::filesystem::create_directories(dir.path() + "/global");
  auto io = make_io_engine(io_method::sync);
  CHECK(read_standby_slots(dir.path()).empty());
  const std::vector<standby_slot_record> slots = {{"a", 4096, 0x0123456789abcdefull,
                                                   "10.0.0.2:5433"},
                                                  {"b.2", 8192, 1, ""}};
  write_standby_slots(*io, dir.path(), slots);
  CHECK(read_standby_slots(dir.path()) == slots);
}

TEST_CASE("standby_slots: a file from before owners, and malformed lines") {
  test::temp_dir dir;
  std::filesystem::create_directories(dir.path() + "/global");
  const std::string path = dir.path() + "/global/standby_slots";
  std::ofstream(path) << "old 4096\n";
  const std::vector<standby_slot_record> legacy = {{"old", 4096, 0, ""}};
  CHECK(read_standby_slots(dir.path()) == legacy);
  std::ofstream(path) << "older 4096 ab\n";
  const std::vector<standby_slot_record> owner_only = {{"older", 4096, 0xab, ""}};
  CHECK(read_standby_slots(dir.path()) == owner_only);
  for (const char* bad : {"x", "x 12 zz", "x 12 ab h:1 extra", "x y", "x -12"}) {
    std::ofstream(path) << "a 1 2\n" << bad << "\n";
    CHECK_THROWS_WITH_AS(read_standby_slots(dir.path()), doctest::Contains("line 2"), data_error);
  }
}

TEST_CASE("standby_slots: the superseded mark") {
  test::temp_dir dir;
  std::filesystem::create_directories(dir.path() + "/global");
  auto io = make_io_engine(io_method::sync);
  CHECK_FALSE(read_superseded_mark(dir.path()));
  write_superseded_mark(*io, dir.path(), "generation 3 runs at 10.0.0.2:5433");
  CHECK(read_superseded_mark(dir.path()) == "generation 3 runs at 10.0.0.2:5433");
}
