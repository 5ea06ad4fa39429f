// A temporary directory for a test's data directory (`dir`, not yet created: create()
// makes it), removed with everything in it when the test ends. Public-API tests only.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace tidemark::test {

struct scratch_directory {
  std::string root, dir;
  explicit scratch_directory(const std::string& name = "tidemark-test") {
    std::string pattern = "/tmp/" + name + "-XXXXXX";
    root = mkdtemp(pattern.data());
    dir = root + "/data";
  }
  ~scratch_directory() { std::filesystem::remove_all(root); }
  scratch_directory(const scratch_directory&) = delete;
  scratch_directory& operator=(const scratch_directory&) = delete;
};

} // namespace tidemark::test
