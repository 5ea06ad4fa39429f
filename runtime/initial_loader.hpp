// The public initial_loader (tidemark/options.hpp) over a new directory's relation files:
// rows packed into pages in order, pages written in batches with identity and checksum
// stamped, every touched segment fsynced by finish(). Runs inside database::create,
// before the first checkpoint; nothing is logged.
//
// Invariants:
//  - The n-th row appended to a relation lands on block n / rows_per_page(R), at byte
//    page_header_bytes + (n % rows_per_page(R)) * R: the layout types.hpp documents.
//  - Every append to one relation uses one row size; a different size is a usage_error
//    and writes nothing.
//  - write_file() names a plain file that is none of the directory's own entries.
#pragma once

#include "storage/relation_files.hpp"

#include <tidemark/options.hpp>

#include <memory>
#include <string>
#include <vector>

namespace tidemark::runtime {

class relation_loader final : public tidemark::initial_loader {
public:
  relation_loader(storage::relation_files& files, std::string dir, bool checksums);
  std::size_t page_size() const override { return files_.page_size(); }
  void append_rows(relation_id relation, const void* rows, std::size_t row_size,
                   std::size_t count) override;
  void write_file(const std::string& name, const std::string& contents) override;
  /// Writes the partly filled last pages and fsyncs every relation loaded.
  void finish();

private:
  struct relation_tail {
    std::size_t row_size = 0; // 0: nothing appended yet
    block_number block = 0;   // the page being filled
    std::size_t rows_on_page = 0;
    std::vector<unsigned char> page;
  };
  void write_page(relation_id relation, relation_tail& tail);
  void flush();

  storage::relation_files& files_;
  std::string dir_;
  bool checksums_;
  std::vector<relation_tail> tails_; // by relation id
  std::vector<unsigned char> batch_; // finalized pages waiting to be written
  std::vector<storage::page_id> batch_ids_;
};

} // namespace tidemark::runtime
