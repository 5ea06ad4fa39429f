// Doublewrite records (storage/doublewrite_record.hpp): a batch's record round-trips
// compressible and incompressible pages, and yields nothing when torn or partly
// overwritten by a later record; a scan of part of a record stops at its start.
#include "storage/doublewrite_record.hpp"

#include "doublewrite_support.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tidemark::storage {
namespace {

using test::page_size;

std::vector<std::vector<unsigned char>> ring_images(const std::vector<unsigned char>& ring) {
  std::vector<std::vector<unsigned char>> images;
  for_each_ring_image(ring.data(), ring.size(), ring.size(), page_size,
                      [&](const ring_image& image) {
                        const unsigned char* page = image.page();
                        REQUIRE(page != nullptr);
                        images.emplace_back(page, page + page_size);
                      });
  return images;
}

TEST_CASE("doublewrite record: compressible and incompressible pages round-trip") {
  test::page_images f;
  auto text = f.page({1, 0}, 10, 'a');           // mostly zeros: compresses
  auto noise = test::random_bytes(page_size, 9); // does not
  auto record = f.encoded({text, noise, text});
  CHECK(record.size() % ring_record_alignment == 0);
  CHECK(record.size() < 2 * page_size + 4096); // the text pages were compressed
  CHECK(record.size() <= max_record_bytes(3, page_size));
  auto images = ring_images(record);
  REQUIRE(images.size() == 3);
  CHECK(images[0] == text);
  CHECK(images[1] == noise);
  CHECK(images[2] == text);
}

TEST_CASE("doublewrite record: a torn record, or one partly overwritten by a later one, yields "
          "nothing") {
  test::page_images f;
  std::vector<std::vector<unsigned char>> noise;
  for (unsigned i = 0; i < 4; ++i)
    noise.push_back(test::random_bytes(page_size, 20 + i));
  auto older = f.encoded(noise);                     // about 32 kB
  auto newer = f.encoded({f.page({1, 1}, 20, 'b')}); // one 4 kB block
  std::vector<unsigned char> ring = older;
  CHECK(ring_images(ring).size() == 4);
  std::copy(newer.begin(), newer.end(), ring.begin()); // the newer record over the older's head
  auto images = ring_images(ring);
  REQUIRE(images.size() == 1);
  CHECK(images[0] == f.page({1, 1}, 20, 'b'));
  // Only part of a record in the buffer: the scan stops at its start, to go on from there.
  std::size_t seen = 0;
  std::vector<unsigned char> two = newer;
  two.insert(two.end(), older.begin(), older.end());
  const std::size_t cut = newer.size() + 3 * page_size; // inside the older record
  CHECK(for_each_ring_image(two.data(), cut, cut, page_size, [&](const ring_image&) { ++seen; }) ==
        newer.size());
  CHECK(seen == 1);
  for (std::size_t at : {std::size_t(40), older.size() / 2, std::size_t(4 * page_size)}) {
    auto torn = older;
    std::fill(torn.begin() + static_cast<long>(at), torn.end(), 0); // lost from `at` on
    CHECK(ring_images(torn).empty());
  }
}

} // namespace
} // namespace tidemark::storage
