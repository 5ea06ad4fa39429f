// relation_files::write_pages: a run of consecutive blocks of one segment whose page
// copies follow one another in memory goes to the engine as one write; a gap in the
// blocks, pages apart in memory, or a segment boundary starts a new write; what reaches
// the files is the same either way.
#include "storage/relation_files.hpp"

#include "delegating_engine.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <vector>

namespace tidemark::storage {
namespace {

using test::page_size;
constexpr std::uint64_t segment_size = 16 * page_size; // 16 blocks a segment

// Records the length of every write it passes on.
class write_lengths final : public test::delegating_engine {
public:
  using delegating_engine::delegating_engine;
  void write_batch(const io_write* writes, std::size_t count) override {
    for (std::size_t i = 0; i < count; ++i)
      lengths.push_back(writes[i].length / page_size);
    delegating_engine::write_batch(writes, count);
  }
  std::vector<std::size_t> lengths; // in pages
};

struct files_fixture {
  test::temp_dir dir;
  write_lengths* engine = nullptr;
  std::unique_ptr<io_engine> owned;
  std::unique_ptr<relation_files> files;
  files_fixture() {
    auto watching = std::make_unique<write_lengths>(make_io_engine(io_method::sync));
    engine = watching.get();
    owned = std::move(watching);
    files = std::make_unique<relation_files>(*owned, dir.path(), page_size, segment_size);
  }
};

// `count` pages for blocks `blocks[i]` of relation 3, each filled with its block number.
std::vector<page_write> pages_at(std::vector<unsigned char>& memory,
                                 const std::vector<block_id>& blocks) {
  std::vector<page_write> out;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    std::memset(&memory[i * page_size], int(blocks[i] % 251), page_size);
    out.push_back({{3, blocks[i]}, &memory[i * page_size]});
  }
  return out;
}

TEST_CASE("relation files: consecutive blocks from consecutive memory are one write") {
  files_fixture f;
  std::vector<unsigned char> memory(20 * page_size);
  // 0-3 one run; 5-6 another (a gap before it); 14-15 | 16-17 split at the segment
  // boundary; 18 and 19 follow in blocks but are written from memory out of order below.
  auto pages = pages_at(memory, {0, 1, 2, 3, 5, 6, 14, 15, 16, 17, 18, 19});
  std::swap(pages[10].data, pages[11].data); // block 18's bytes after block 19's in memory
  std::memset(const_cast<void*>(pages[10].data), 18, page_size);
  std::memset(const_cast<void*>(pages[11].data), 19, page_size);
  f.files->write_pages(pages.data(), pages.size());
  CHECK(f.engine->lengths == std::vector<std::size_t>{4, 2, 2, 2, 1, 1});
  std::vector<unsigned char> read(page_size);
  for (block_id b : {0u, 3u, 5u, 15u, 16u, 18u, 19u}) {
    CAPTURE(b);
    f.files->read_pages(std::vector<page_read>{{{3, b}, read.data()}}.data(), 1);
    CHECK(read[0] == b % 251);
    CHECK(read[page_size - 1] == b % 251);
  }
}

} // namespace
} // namespace tidemark::storage
