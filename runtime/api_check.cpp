// The offline check of a data directory: see api_check.hpp.
#include "runtime/api_check.hpp"

#include "access/catalog.hpp"
#include "access/pool_page_store.hpp"
#include "storage/buffer_pool.hpp"

#include "runtime/data_directory.hpp"
#include "runtime/directory_lock.hpp"
#include "runtime/startup.hpp"
#include "storage/control_file.hpp"
#include "storage/doublewrite_repair.hpp"
#include "storage/relation_files.hpp"
#include "storage/wal_reader.hpp"

#include <unistd.h>

#include <cstdio>

namespace tidemark {

namespace {

constexpr std::size_t failures_listed = 20;

void fail(file_check_report& report, const std::string& what) {
  ++report.failures;
  if (report.first_failures.size() < failures_listed)
    report.first_failures.push_back(what);
}

std::string hex(std::uint64_t lsn) {
  char text[32];
  std::snprintf(text, sizeof text, "%llX", static_cast<unsigned long long>(lsn));
  return text;
}

void check_wal(storage::io_engine& io, const std::string& dir, const storage::control_data& c,
               file_check_report& report) {
  std::string wal = dir + "/wal";
  storage::wal_reader at_checkpoint(io, wal, c.wal_segment_size, c.page_size, c.redo_lsn);
  if (at_checkpoint.read_at(c.checkpoint_lsn) == nullptr)
    fail(report, "WAL: no valid record at the checkpoint " + hex(c.checkpoint_lsn) +
                   " the control file names");
  storage::wal_reader scan(io, wal, c.wal_segment_size, c.page_size, c.redo_lsn);
  while (const storage::record_view* record = scan.next()) {
    ++report.wal_records;
    report.wal_bytes += record->header.total_length;
  }
  report.wal_end = scan.end_description();
  if (auto corruption = scan.find_corruption())
    fail(report, "WAL: corrupt at " + hex(corruption->bad_lsn) + " in " + corruption->segment_path +
                   " (" + corruption->reason + ") although later WAL had been made durable");
}

void check_pages(storage::io_engine& io, const std::string& dir, const storage::control_data& c,
                 file_check_report& report) {
  storage::relation_files files(io, dir + "/base", c.page_size, c.segment_size);
  std::vector<unsigned char> page(c.page_size);
  // Page relations, the table catalog and the tables' relations.
  for (relation_id relation = 1; relation < storage::max_relations; ++relation)
    for (block_number block = 0, blocks = files.nblocks(relation); block < blocks; ++block) {
      storage::page_id id{relation, block};
      files.read_page(id, page.data());
      ++report.pages_checked;
      auto verdict = storage::verify_page(page.data(), page.size(), id, c.data_checksums);
      if (verdict != storage::page_verdict::ok && verdict != storage::page_verdict::all_zero)
        fail(report, std::string(storage::to_string(verdict)) + " in " + files.describe(id));
    }
}

// Each table's tree, read through a small pool of its own: keys ordered in every node,
// separators bounding their children, sibling links, every page reachable once, free
// pages and overflow chains accounted for (access::check_tree). The first violation of
// each table is reported, naming the table.
void check_tables(storage::io_engine& io, const std::string& dir, const storage::control_data& c,
                  file_check_report& report) {
  storage::relation_files files(io, dir + "/base", c.page_size, c.segment_size);
  if (files.nblocks(access::catalog_relation) == 0)
    return; // a directory from before keyed tables, never opened for writing since
  storage::buffer_pool pool(1024, files, c.data_checksums);
  access::pool_page_store store(pool, nullptr, false);
  auto check = [&](const std::string& name, storage::rel_id relation) {
    ++report.tables_checked;
    try {
      if (std::string problem = access::check_tree(store, relation); !problem.empty())
        fail(report, name + ": " + problem);
    } catch (const error& e) { // a page that does not verify, a node that is none
      fail(report, name + ": " + e.what());
    }
  };
  check("the table catalog", access::catalog_relation);
  if (report.failures > 0)
    return;
  access::table_transaction reader(store); // outside a transaction: committed reads
  for (const access::table_info& table : access::catalog::list(reader))
    check("table '" + table.name + "'", table.relation);
}

} // namespace

file_check_report check_data_files(const std::string& dir) {
  runtime::check_data_directory(dir);
  runtime::directory_lock lock = runtime::directory_lock::shared(dir);
  file_check_report report;
  auto io = storage::make_read_only_engine();
  storage::control_data control;
  try {
    control = storage::read_control_file(*io, dir);
    report.control_file_ok = true;
  } catch (const data_error& e) {
    fail(report, std::string("control file: ") + e.what());
  }
  if (report.control_file_ok) {
    report.needs_recovery = runtime::needs_recovery(control);
    check_wal(*io, dir, control, report);
    check_pages(*io, dir, control, report);
    if (!report.needs_recovery && report.failures == 0)
      check_tables(*io, dir, control, report);
    storage::ring_check_report ring =
      storage::check_ring(*io, dir + "/doublewrite/ring", control.page_size);
    report.ring_images = ring.images;
    if (ring.unreadable > 0)
      fail(report, "doublewrite ring: " + std::to_string(ring.unreadable) + " of " +
                     std::to_string(ring.images) + " page images in intact records do not verify");
  }
  return report;
}

} // namespace tidemark
