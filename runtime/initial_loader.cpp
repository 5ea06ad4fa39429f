// The initial loader: see initial_loader.hpp.
#include "runtime/initial_loader.hpp"

#include "storage/page.hpp"

#include <cstring>
#include <set>

namespace tidemark::runtime {

namespace {

constexpr std::size_t pages_per_write = 64;

void check_relation(relation_id relation) {
  if (relation == 0 || relation > max_relation)
    throw usage_error("relation id " + std::to_string(relation) + " is out of range 1.." +
                      std::to_string(max_relation));
}

} // namespace

relation_loader::relation_loader(storage::relation_files& files, std::string dir, bool checksums)
  : files_(files), dir_(std::move(dir)), checksums_(checksums), tails_(max_relation + 1) {}

void relation_loader::append_rows(relation_id relation, const void* rows, std::size_t row_size,
                                  std::size_t count) {
  check_relation(relation);
  std::size_t per_page = tidemark::rows_per_page(page_size(), row_size);
  if (row_size == 0 || per_page == 0)
    throw usage_error("row size " + std::to_string(row_size) + " does not fit a " +
                      std::to_string(page_size()) + "-byte page");
  relation_tail& tail = tails_[relation];
  if (tail.row_size != 0 && tail.row_size != row_size)
    throw usage_error("relation " + std::to_string(relation) + " was loaded with " +
                      std::to_string(tail.row_size) + "-byte rows, not " +
                      std::to_string(row_size));
  if (tail.row_size == 0) {
    tail.row_size = row_size;
    tail.page.assign(page_size(), 0);
  }
  const auto* from = static_cast<const unsigned char*>(rows);
  for (std::size_t i = 0; i < count; ++i, from += row_size) {
    std::memcpy(tail.page.data() + page_header_bytes + tail.rows_on_page * row_size, from,
                row_size);
    if (++tail.rows_on_page == per_page)
      write_page(relation, tail);
  }
}

void relation_loader::write_page(relation_id relation, relation_tail& tail) {
  storage::page_id id{relation, tail.block};
  storage::header_of(tail.page.data())->item_count = static_cast<std::uint16_t>(tail.rows_on_page);
  storage::header_of(tail.page.data())->row_size = static_cast<std::uint16_t>(tail.row_size);
  storage::finalize_page_for_write(tail.page.data(), page_size(), id, checksums_);
  batch_.insert(batch_.end(), tail.page.begin(), tail.page.end());
  batch_ids_.push_back(id);
  std::fill(tail.page.begin(), tail.page.end(), 0);
  tail.rows_on_page = 0;
  ++tail.block;
  if (batch_ids_.size() == pages_per_write)
    flush();
}

void relation_loader::flush() {
  if (batch_ids_.empty())
    return;
  std::vector<storage::page_write> writes;
  for (std::size_t i = 0; i < batch_ids_.size(); ++i)
    writes.push_back({batch_ids_[i], batch_.data() + i * page_size()});
  files_.write_pages(writes.data(), writes.size());
  batch_.clear();
  batch_ids_.clear();
}

void relation_loader::write_file(const std::string& name, const std::string& contents) {
  static const std::set<std::string> reserved = {
    "base",          "wal",           "global", "xact", "doublewrite",
    "tidemark.conf", "tidemark.lock", "",       ".",    ".."};
  if (name.find('/') != std::string::npos || reserved.count(name) != 0)
    throw usage_error("\"" + name +
                      "\" is not a file name an application may write in the "
                      "data directory");
  storage::write_whole_file(files_.io(), dir_ + "/" + name, contents);
}

void relation_loader::finish() {
  for (relation_id relation = 1; relation <= max_relation; ++relation)
    if (tails_[relation].rows_on_page > 0)
      write_page(relation, tails_[relation]);
  flush();
  for (relation_id relation = 1; relation <= max_relation; ++relation)
    if (tails_[relation].row_size != 0)
      for (std::uint32_t segno = 0; segno < files_.segment_count(relation); ++segno)
        files_.sync_segment({relation, segno});
}

} // namespace tidemark::runtime
