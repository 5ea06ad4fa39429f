// Tests of storage/crc32c: published check values, composition of crc32c_extend(), and
// agreement of the hardware and software paths on many lengths and alignments.
#include "storage/crc32c.hpp"
#include "tests/storage/test_support.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

using namespace tidemark::storage;

namespace {

struct vector_case {
  std::vector<unsigned char> bytes;
  std::uint32_t crc;
};

// RFC 3720 appendix B.4 and the usual "123456789" check value.
std::vector<vector_case> known_vectors() {
  std::vector<vector_case> cases;
  const std::string check = "123456789";
  cases.push_back({{check.begin(), check.end()}, 0xE3069283u});
  cases.push_back({{}, 0x00000000u});
  cases.push_back({std::vector<unsigned char>(32, 0x00), 0x8A9136AAu});
  cases.push_back({std::vector<unsigned char>(32, 0xFF), 0x62A8AB43u});
  std::vector<unsigned char> ascending(32);
  std::iota(ascending.begin(), ascending.end(), 0);
  cases.push_back({ascending, 0x46DD794Eu});
  std::vector<unsigned char> descending(ascending.rbegin(), ascending.rend());
  cases.push_back({descending, 0x113FDB5Cu});
  return cases;
}

} // namespace

TEST_CASE("crc32c: known vectors on both paths") {
  const std::string path = crc32c_hardware() ? "hardware (SSE4.2)" : "software";
  MESSAGE("crc32c path in use: " << path);
  for (const auto& c : known_vectors()) {
    CAPTURE(c.bytes.size());
    CHECK(crc32c(c.bytes.data(), c.bytes.size()) == c.crc);
    CHECK(detail::crc32c_software(0, c.bytes.data(), c.bytes.size()) == c.crc);
  }
}

TEST_CASE("crc32c: extending composes at every split point") {
  const auto bytes = test::random_bytes(300, 7);
  const std::uint32_t whole = crc32c(bytes.data(), bytes.size());
  for (std::size_t split = 0; split <= bytes.size(); ++split) {
    CAPTURE(split);
    const std::uint32_t head = crc32c(bytes.data(), split);
    CHECK(crc32c_extend(head, bytes.data() + split, bytes.size() - split) == whole);
    const std::uint32_t soft_head = detail::crc32c_software(0, bytes.data(), split);
    CHECK(detail::crc32c_software(soft_head, bytes.data() + split, bytes.size() - split) == whole);
  }
}

TEST_CASE("crc32c: hardware and software agree on random buffers of many lengths and alignments") {
  const auto bytes = test::random_bytes(70000, 42);
  std::vector<std::size_t> lengths;
  for (std::size_t length = 0; length <= 300; ++length)
    lengths.push_back(length);
  for (std::size_t length : {511u, 512u, 513u, 4095u, 4096u, 4097u, 8192u, 32768u, 65536u})
    lengths.push_back(length);
  for (std::size_t alignment = 0; alignment < 16; ++alignment)
    for (std::size_t length : lengths) {
      const unsigned char* start = bytes.data() + alignment;
      const std::uint32_t seed = static_cast<std::uint32_t>(length * 2654435761u);
      if (crc32c_extend(seed, start, length) != detail::crc32c_software(seed, start, length)) {
        FAIL_CHECK("mismatch at alignment " << alignment << ", length " << length);
      }
    }
}

TEST_CASE("crc32c: a single flipped bit changes the value") {
  auto bytes = test::random_bytes(8192, 3);
  const std::uint32_t original = crc32c(bytes.data(), bytes.size());
  for (std::size_t bit = 0; bit < bytes.size() * 8; bit += 997) {
    bytes[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    CHECK(crc32c(bytes.data(), bytes.size()) != original);
    bytes[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
  }
}
