// The vocabulary of the Tidemark API: pages, relations, transactions, the limits of keyed
// tables.
//
// Keyed tables hold byte-string keys and values in key order (database::create_table).
// Pages are the lower level an application may also use: page data lives in relations
// (numbered 1..max_relation) of fixed-size pages (page_size, 8 KiB by default, fixed when
// the directory is created). A page starts with a page_header_bytes header that Tidemark
// owns (LSN, checksum, identity, row count); an application's data starts at byte
// page_header_bytes. Offsets in the API count from the start of the page.
//
// Rows appended to a relation are packed into its pages in order: with row size R, a page
// holds rows_per_page(page_size, R) rows, the n-th row of a page starting at byte
// page_header_bytes + n * R.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tidemark {

using relation_id = std::uint32_t;
using block_number = std::uint32_t;
using transaction_id = std::uint64_t;

constexpr relation_id max_relation = 63;
constexpr std::size_t page_header_bytes = 32;

/// Keyed tables (session::get and the rest): keys compare as bytes (memcmp; a key that is
/// a prefix of another sorts first; the empty key is a key). Longer keys, values and
/// table names are refused when the call is made (usage_error).
constexpr std::size_t max_key_bytes = 1024;
constexpr std::size_t max_value_bytes = std::size_t{4} << 20;
constexpr std::size_t max_table_name_bytes = 128;

/// One page: block `block` of relation `relation`.
struct page_id {
  relation_id relation = 0;
  block_number block = 0;
};

inline std::size_t rows_per_page(std::size_t page_size, std::size_t row_size) {
  return row_size == 0 ? 0 : (page_size - page_header_bytes) / row_size;
}

/// Where the checkpointer is: idle, writing dirty buffers (paced), waiting for the fsyncs
/// it asked for (paced), or writing its record and the control file.
enum class checkpoint_phase : int { idle = 0, write = 1, sync = 2, finish = 3 };

inline const char* to_string(checkpoint_phase phase) {
  switch (phase) {
    case checkpoint_phase::write:
      return "write";
    case checkpoint_phase::sync:
      return "sync";
    case checkpoint_phase::finish:
      return "finish";
    case checkpoint_phase::idle:
      break;
  }
  return "idle";
}

/// What the commit-status log says about a transaction.
enum class transaction_status { unknown, committed, aborted };

} // namespace tidemark
