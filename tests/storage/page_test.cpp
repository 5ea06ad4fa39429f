// Tests of storage/page: checksums catch flipped bits, torn pages and misdirected writes;
// an all-zero page is valid; data_checksums=off checks only the identity.
#include "storage/page.hpp"
#include "tests/storage/test_support.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

using namespace tidemark::storage;

namespace {

constexpr page_id home{17, 42};

std::vector<unsigned char> finalized_page(std::size_t page_size, std::uint64_t seed,
                                          bool checksums = true) {
  auto page = test::random_bytes(page_size, seed);
  std::memset(page.data(), 0, page_header_size);
  set_page_lsn(page.data(), 1000 + seed);
  finalize_page_for_write(page.data(), page_size, home, checksums);
  return page;
}

bool inside_identity(std::size_t byte) {
  return byte >= offsetof(page_header, rel) && byte < offsetof(page_header, item_count);
}

} // namespace

TEST_CASE("page: a finalized page verifies") {
  for (std::size_t size : {4096u, 8192u, 16384u, 32768u}) {
    CAPTURE(size);
    REQUIRE(valid_page_size(size));
    auto page = finalized_page(size, 1);
    CHECK(verify_page(page.data(), size, home, true) == page_verdict::ok);
    CHECK(header_of(page.data())->rel == home.rel);
    CHECK(header_of(page.data())->block == home.block);
    CHECK(header_of(page.data())->checksum == compute_page_checksum(page.data(), size, home));
  }
}

TEST_CASE("page: an all-zero page is valid and any non-zero byte makes it not all-zero") {
  std::vector<unsigned char> page(page_size_default, 0);
  CHECK(page_is_all_zero(page.data(), page.size()));
  CHECK(verify_page(page.data(), page.size(), home, true) == page_verdict::all_zero);
  CHECK(verify_page(page.data(), page.size(), home, false) == page_verdict::all_zero);
  for (std::size_t byte :
       {std::size_t{0}, std::size_t{7}, std::size_t{8}, std::size_t{4095}, page.size() - 1}) {
    page[byte] = 1;
    CHECK_FALSE(page_is_all_zero(page.data(), page.size()));
    page[byte] = 0;
  }
  std::vector<unsigned char> odd(13, 0);
  odd[12] = 1;
  CHECK_FALSE(page_is_all_zero(odd.data(), odd.size()));
  CHECK(page_is_all_zero(odd.data(), 12));
}

TEST_CASE("page: a flipped bit is detected") {
  const auto original = finalized_page(page_size_default, 2);
  for (std::size_t bit = 0; bit < original.size() * 8; bit += 61) {
    if (inside_identity(bit / 8))
      continue;
    CAPTURE(bit);
    auto page = original;
    page[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    CHECK(verify_page(page.data(), page.size(), home, true) == page_verdict::bad_checksum);
    CHECK(verify_page(page.data(), page.size(), home, false) == page_verdict::ok);
  }
}

TEST_CASE("page: a torn page (4 KiB halves of two versions) is detected") {
  for (std::size_t size : {8192u, 16384u, 32768u}) {
    const auto old_version = finalized_page(size, 3);
    const auto new_version = finalized_page(size, 4);
    for (std::size_t boundary = 4096; boundary < size; boundary += 4096) {
      CAPTURE(size);
      CAPTURE(boundary);
      auto head_new = new_version;
      std::memcpy(head_new.data() + boundary, old_version.data() + boundary, size - boundary);
      CHECK(verify_page(head_new.data(), size, home, true) == page_verdict::bad_checksum);
      auto head_old = old_version;
      std::memcpy(head_old.data() + boundary, new_version.data() + boundary, size - boundary);
      CHECK(verify_page(head_old.data(), size, home, true) == page_verdict::bad_checksum);
    }
  }
}

TEST_CASE("page: a page read from the wrong place has the wrong identity") {
  for (bool checksums : {true, false}) {
    const auto page = finalized_page(page_size_default, 5, checksums);
    CHECK(verify_page(page.data(), page.size(), page_id{home.rel, home.block + 1}, checksums) ==
          page_verdict::wrong_identity);
    CHECK(verify_page(page.data(), page.size(), page_id{home.rel + 1, home.block}, checksums) ==
          page_verdict::wrong_identity);
  }
}

TEST_CASE("page: the checksum is seeded with the identity and skips its own field") {
  auto page = finalized_page(page_size_default, 6);
  const std::uint32_t at_home = compute_page_checksum(page.data(), page.size(), home);
  CHECK(compute_page_checksum(page.data(), page.size(), page_id{home.rel, home.block + 1}) !=
        at_home);
  header_of(page.data())->checksum = ~header_of(page.data())->checksum;
  CHECK(compute_page_checksum(page.data(), page.size(), home) == at_home);
}

TEST_CASE("page: without checksums the stored checksum is zero") {
  const auto page = finalized_page(page_size_default, 7, false);
  CHECK(header_of(page.data())->checksum == 0);
  CHECK(verify_page(page.data(), page.size(), home, false) == page_verdict::ok);
  CHECK(verify_page(page.data(), page.size(), home, true) == page_verdict::bad_checksum);
}

TEST_CASE("page: verdicts have names") {
  CHECK(std::string(to_string(page_verdict::ok)) == "ok");
  CHECK(std::string(to_string(page_verdict::all_zero)) == "all_zero");
  CHECK(std::string(to_string(page_verdict::bad_checksum)) == "bad_checksum");
  CHECK(std::string(to_string(page_verdict::wrong_identity)) == "wrong_identity");
}
