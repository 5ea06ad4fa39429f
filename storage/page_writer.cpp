// Page write mechanism: W1 (WAL first), stamping, write, W2 (register for sync).
#include "storage/page_writer.hpp"

#include "storage/page.hpp"

#include <algorithm>

namespace tidemark::storage {

void page_writer::prepare(page_copy* pages, std::size_t count) {
  lsn_t needed = 0;
  for (std::size_t i = 0; i < count; ++i) {
    needed = std::max(needed, pages[i].lsn);
    finalize_page_for_write(pages[i].data, files_.page_size(), pages[i].id, checksums_);
  }
  if (needed > wal_.flushed_lsn())
    wal_.flush(needed);
}

void page_writer::write(page_copy* pages, std::size_t count, write_source source) {
  prepare(pages, count);
  constexpr std::size_t chunk = 64;
  page_write writes[chunk];
  file_write segments[chunk];
  for (std::size_t start = 0; start < count; start += chunk) {
    std::size_t n = std::min(chunk, count - start);
    std::size_t segment_count = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const page_copy& p = pages[start + i];
      writes[i] = page_write{p.id, p.data};
      segment_count = note_write(segments, segment_count,
                                 {file_kind::relation, files_.segment_of(p.id)},
                                 files_.offset_in_segment(p.id), files_.page_size());
    }
    files_.write_pages(writes, n);
    registry_.register_files(segments, segment_count, source);
    written_[static_cast<std::size_t>(source)].fetch_add(n, std::memory_order_relaxed);
  }
}

} // namespace tidemark::storage
