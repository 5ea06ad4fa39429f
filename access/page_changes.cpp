// page_changes and page_edit: see page_changes.hpp.
#include "access/page_changes.hpp"

#include "storage/check.hpp"

#include <algorithm>
#include <cstring>

namespace tidemark::access {

void page_changes::append_op(storage::op_kind kind, std::size_t offset, const void* data,
                             std::size_t length) {
  auto op_offset = static_cast<std::uint16_t>(offset);
  auto op_length = static_cast<std::uint16_t>(length);
  unsigned char header[storage::op_header_size];
  header[0] = static_cast<unsigned char>(kind);
  std::memcpy(&header[1], &op_offset, sizeof op_offset);
  std::memcpy(&header[3], &op_length, sizeof op_length);
  std::size_t needed = ops_.size() + sizeof header + length;
  if (needed > ops_.capacity()) // one growth for both parts, geometric
    ops_.reserve(std::max(needed, 2 * ops_.capacity()));
  ops_.insert(ops_.end(), header, header + sizeof header);
  const auto* bytes = static_cast<const unsigned char*>(data);
  ops_.insert(ops_.end(), bytes, bytes + length); // not zeroed first, as resize would
}

void page_changes::record_write(std::size_t offset, const void* bytes, std::size_t length) {
  const auto* from = static_cast<const unsigned char*>(bytes);
  while (length > 0) {
    std::size_t piece = std::min(length, max_op_bytes);
    TIDEMARK_CHECK(offset + piece <= 0xFFFF + 1, "a WAL op's offset fits 16 bits");
    append_op(storage::op_kind::write_bytes, offset, from, piece);
    offset += piece;
    from += piece;
    length -= piece;
  }
}

void page_changes::record_move(std::size_t offset, std::size_t source, std::size_t count) {
  TIDEMARK_CHECK(offset + count <= 0xFFFF + 1 && source + count <= 0xFFFF + 1,
                 "a move's offsets fit 16 bits");
  storage::move_op move{static_cast<std::uint16_t>(source), static_cast<std::uint16_t>(count)};
  append_op(storage::op_kind::move_bytes, offset, &move, sizeof move);
}

void page_changes::collapse(const void* page, std::size_t page_size) {
  std::size_t whole = storage::op_header_size + page_size - storage::page_header_size;
  if (ops_.size() <= whole)
    return;
  ops_.clear();
  record_write(storage::page_header_size,
               static_cast<const unsigned char*>(page) + storage::page_header_size,
               page_size - storage::page_header_size);
}

namespace {
thread_local std::vector<page_changes> kept_changes;
thread_local bool changes_in_use = false;
} // namespace

reused_changes::reused_changes(std::size_t count, std::size_t keep_bytes)
  : logs_(&kept_changes), keep_bytes_(keep_bytes) {
  TIDEMARK_CHECK(!changes_in_use, "a thread's reused_changes serve one commit at a time");
  changes_in_use = true;
  if (logs_->size() < count)
    logs_->resize(count); // the kept ones are empty: cleared when their commit ended
}

reused_changes::~reused_changes() {
  std::size_t kept = 0, count = 0;
  for (page_changes& log : *logs_) {
    kept += sizeof log + log.capacity();
    if (kept > keep_bytes_)
      break;
    log.clear();
    ++count;
  }
  logs_->resize(count); // the rest, and their memory, go
  changes_in_use = false;
}

void page_edit::write(std::size_t offset, const void* bytes, std::size_t length) {
  TIDEMARK_CHECK_DETAIL(offset >= storage::page_header_size && offset + length <= page_size_,
                        "the access layer writes only past the page header, inside the page",
                        "offset " + std::to_string(offset) + " length " + std::to_string(length));
  if (log_ != nullptr) // first: `bytes` may lie in the page itself
    log_->record_write(offset, bytes, length);
  std::memmove(page_ + offset, bytes, length);
}

void page_edit::move(std::size_t offset, std::size_t source, std::size_t count) {
  TIDEMARK_CHECK_DETAIL(offset >= storage::page_header_size &&
                          source >= storage::page_header_size && offset + count <= page_size_ &&
                          source + count <= page_size_,
                        "the access layer moves bytes only past the page header, inside the page",
                        "from " + std::to_string(source) + " to " + std::to_string(offset) +
                          " count " + std::to_string(count));
  if (count == 0 || offset == source)
    return;
  if (log_ != nullptr)
    log_->record_move(offset, source, count);
  std::memmove(page_ + offset, page_ + source, count);
}

} // namespace tidemark::access
