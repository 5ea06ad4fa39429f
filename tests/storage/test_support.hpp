// Helpers shared by the storage tests: the page size they run with, a temporary directory
// that removes itself, and deterministic page-sized byte patterns.
//
// Invariants:
//  - Every temp_dir is a fresh mkdtemp directory under /tmp, removed with its contents when
//    the object goes out of scope (also when the test fails).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace tidemark::storage::test {

/// The page size the storage tests run with.
constexpr std::size_t page_size = 8192;

class temp_dir {
public:
  temp_dir() {
    std::string pattern = "/tmp/tidemark-storage-test-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

/// `length` pseudo-random bytes, the same for the same seed.
inline std::vector<unsigned char> random_bytes(std::size_t length, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<unsigned char> bytes(length);
  for (auto& byte : bytes)
    byte = static_cast<unsigned char>(random());
  return bytes;
}

} // namespace tidemark::storage::test
