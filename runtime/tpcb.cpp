// The TPC-B-like workload: see tpcb.hpp.
#include "runtime/tpcb.hpp"

#include "storage/page.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

namespace tidemark::runtime::tpcb {

layout::layout(std::size_t page_size, std::uint32_t scale)
  : page_size_(page_size), scale_(scale), rows_per_page_(storage::rows_per_page(page_size, row_size)) {}

std::uint64_t layout::rows(storage::rel_id rel) const {
  switch (rel) {
    case branches:
      return scale_;
    case tellers:
      return 10ull * scale_;
    case accounts:
      return 100'000ull * scale_;
    default:
      return 0;
  }
}

storage::block_id layout::blocks(storage::rel_id rel) const {
  return static_cast<storage::block_id>((rows(rel) + rows_per_page_ - 1) / rows_per_page_);
}

storage::page_id layout::page_of(storage::rel_id rel, std::uint64_t row) const {
  return {rel, static_cast<storage::block_id>(row / rows_per_page_)};
}

std::uint16_t layout::balance_offset(std::uint64_t row) const {
  return static_cast<std::uint16_t>(storage::page_header_size + (row % rows_per_page_) * row_size +
                                    balance_offset_in_row);
}

namespace {

void fill_page(unsigned char* page, const layout& shape, storage::rel_id rel, storage::block_id block) {
  std::memset(page, 0, shape.page_size());
  std::uint64_t first = std::uint64_t(block) * shape.rows_per_page();
  std::uint64_t last = std::min(first + shape.rows_per_page(), shape.rows(rel));
  storage::header_of(page)->item_count = static_cast<std::uint16_t>(last - first);
  for (std::uint64_t row = first; row < last; ++row) {
    unsigned char* at = page + storage::page_header_size + (row - first) * row_size;
    std::memcpy(at, &row, sizeof row);
    std::memset(at + 16, 'a' + static_cast<int>(rel), row_size - 16);
  }
}

} // namespace

void load(storage::relation_files& files, const layout& shape, bool checksums,
          const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  constexpr std::size_t batch = 64;
  std::unique_ptr<unsigned char[]> pages(new unsigned char[batch * shape.page_size()]);
  storage::page_write writes[batch];
  std::uint64_t total = shape.rows(branches) + shape.rows(tellers) + shape.rows(accounts);
  std::uint64_t done = 0;
  for (storage::rel_id rel : {branches, tellers, accounts}) {
    storage::block_id blocks = shape.blocks(rel);
    for (storage::block_id start = 0; start < blocks; start += batch) {
      std::size_t n = std::min<std::size_t>(batch, blocks - start);
      for (std::size_t i = 0; i < n; ++i) {
        unsigned char* page = pages.get() + i * shape.page_size();
        storage::page_id id{rel, static_cast<storage::block_id>(start + i)};
        fill_page(page, shape, rel, id.block);
        storage::finalize_page_for_write(page, shape.page_size(), id, checksums);
        writes[i] = {id, page};
        done += storage::header_of(page)->item_count;
      }
      files.write_pages(writes, n);
      progress(done, total);
    }
    for (std::uint32_t segno = 0; segno < files.segment_count(rel); ++segno)
      files.sync_segment({rel, segno});
  }
}

transaction_input random_input(const layout& shape, std::mt19937_64& random) {
  transaction_input in;
  in.bid = random() % shape.rows(branches);
  in.tid = random() % shape.rows(tellers);
  in.aid = random() % shape.rows(accounts);
  in.delta = static_cast<std::int64_t>(random() % 10001) - 5000;
  return in;
}

storage::xid_t run_transaction(session& s, const layout& shape, const transaction_input& in) {
  s.begin();
  storage::page_id account = shape.page_of(accounts, in.aid);
  s.add_i64(account, shape.balance_offset(in.aid), in.delta);
  (void)s.read_i64(account, shape.balance_offset(in.aid)); // "read it back", as pgbench does
  s.add_i64(shape.page_of(tellers, in.tid), shape.balance_offset(in.tid), in.delta);
  s.add_i64(shape.page_of(branches, in.bid), shape.balance_offset(in.bid), in.delta);
  history_row row{};
  row.xid = s.transaction_id();
  row.delta = in.delta;
  row.aid = static_cast<std::uint32_t>(in.aid);
  row.tid = static_cast<std::uint32_t>(in.tid);
  row.bid = static_cast<std::uint32_t>(in.bid);
  row.time_us = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  s.append_row(history, &row, history_row_size);
  return s.commit();
}

namespace {

constexpr std::size_t failures_listed = 20;

bool check_page(storage::relation_files& files, storage::page_id id, bool checksums,
                unsigned char* page, verify_report& report) {
  files.read_page(id, page);
  ++report.pages_checked;
  storage::page_verdict verdict = storage::verify_page(page, files.page_size(), id, checksums);
  if (verdict == storage::page_verdict::ok || verdict == storage::page_verdict::all_zero)
    return true;
  ++report.checksum_failures;
  if (report.failures.size() < failures_listed)
    report.failures.push_back(std::string(storage::to_string(verdict)) + " in " + files.describe(id));
  return false;
}

void sum_fixed_relation(storage::relation_files& files, const layout& shape, storage::rel_id rel,
                        bool checksums, unsigned char* page, std::int64_t& sum, verify_report& report) {
  for (storage::block_id block = 0; block < shape.blocks(rel); ++block) {
    if (!check_page(files, {rel, block}, checksums, page, report))
      continue;
    std::uint64_t first = std::uint64_t(block) * shape.rows_per_page();
    std::uint64_t last = std::min(first + shape.rows_per_page(), shape.rows(rel));
    for (std::uint64_t row = first; row < last; ++row) {
      const unsigned char* at = page + storage::page_header_size + (row - first) * row_size;
      std::uint64_t id;
      std::int64_t balance;
      std::memcpy(&id, at, 8);
      std::memcpy(&balance, at + balance_offset_in_row, 8);
      if (id != row)
        ++report.misplaced_rows;
      sum = static_cast<std::int64_t>(std::uint64_t(sum) + std::uint64_t(balance));
    }
  }
}

void scan_history(storage::relation_files& files, bool checksums, unsigned char* page,
                  std::vector<storage::xid_t>& xids, verify_report& report) {
  storage::block_id blocks = files.nblocks(history);
  std::size_t capacity = storage::rows_per_page(files.page_size(), history_row_size);
  for (storage::block_id block = 0; block < blocks; ++block) {
    if (!check_page(files, {history, block}, checksums, page, report))
      continue;
    std::size_t count = std::min<std::size_t>(storage::header_of(page)->item_count, capacity);
    for (std::size_t i = 0; i < count; ++i) {
      history_row row;
      std::memcpy(&row, page + storage::page_header_size + i * history_row_size, sizeof row);
      xids.push_back(row.xid);
      report.sum_history = static_cast<std::int64_t>(std::uint64_t(report.sum_history) +
                                                     std::uint64_t(row.delta));
    }
  }
}

} // namespace

verify_report verify(storage::relation_files& files, const layout& shape, bool checksums,
                     const std::vector<storage::xid_t>& acknowledged) {
  verify_report report;
  std::unique_ptr<unsigned char[]> page(new unsigned char[shape.page_size()]);
  sum_fixed_relation(files, shape, branches, checksums, page.get(), report.sum_branches, report);
  sum_fixed_relation(files, shape, tellers, checksums, page.get(), report.sum_tellers, report);
  sum_fixed_relation(files, shape, accounts, checksums, page.get(), report.sum_accounts, report);
  std::vector<storage::xid_t> xids;
  scan_history(files, checksums, page.get(), xids, report);
  std::sort(xids.begin(), xids.end());
  report.history_rows = xids.size();
  for (std::size_t i = 1; i < xids.size(); ++i)
    if (xids[i] == xids[i - 1])
      ++report.duplicate_history_xids;
  report.acknowledged = acknowledged.size();
  for (storage::xid_t xid : acknowledged) {
    if (!std::binary_search(xids.begin(), xids.end(), xid)) {
      ++report.lost_commits;
      report.lost.push_back(xid);
    }
  }
  return report;
}

} // namespace tidemark::runtime::tpcb
