// The tidemark commands on a data directory (DESIGN §9): init, bench, verify, recover and
// check. Clients of the public API (include/tidemark/) and the workload module, like any
// embedding application; their flags and --help are in tools/commands.cpp.
#include "tools/directory_commands.hpp"

#include "tools/fault_flags.hpp"
#include "tools/reload_on_hangup.hpp"
#include "tools/settings_command.hpp"
#include "workload/ack_log.hpp"
#include "workload/json.hpp"
#include "workload/tpcb/bench.hpp"
#include "workload/tpcb/tpcb.hpp"

#include <tidemark/database.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace tidemark::tools {

using namespace tidemark::workload;

namespace {

constexpr const char* workload_file_name = "workload.conf";

// The workload `init` recorded in the directory's workload.conf: "tpcb_scale = N" and
// (since keyed tables) "tpcb_schema = tables|pages"; without it, pages.
tpcb::layout read_workload(database& db, const std::string& dir) {
  std::string path = dir + "/" + workload_file_name;
  std::ifstream in(path);
  std::string key, eq, schema = "pages";
  std::uint32_t scale = 0;
  if (!(in >> key >> eq >> scale) || key != "tpcb_scale" || eq != "=" || scale == 0)
    throw data_error(path + " is missing or malformed (expected \"tpcb_scale = N\"; was the "
                            "directory made by tidemark init?)");
  if (in >> key && !(key == "tpcb_schema" && in >> eq >> schema && eq == "="))
    throw data_error(path + " is malformed (expected \"tpcb_schema = tables\" or \"= pages\" "
                            "after the scale)");
  tpcb::layout shape(db.page_size(), scale, tpcb::parse_schema(schema));
  if (shape.kind() == tpcb::schema::tables)
    shape.open_tables(db);
  return shape;
}

void fill_recovery(json_object& r, const recovery_report& rec) {
  set_fields(r, rec);
  r.set("recovery.records_per_second", rec.seconds > 0 ? double(rec.records) / rec.seconds : 0.0);
}

// Writes the fault-injecting engine issued (crash tests pick crash points from it).
void fill_faults(json_object& r, database& db, const cli_args& args) {
  if (faults_of(args))
    r.set("faults.writes_issued", db.stats().fault_writes_issued);
}

} // namespace

int cmd_init(const cli_args& args) {
  std::string dir = args.required("-D");
  auto scale = static_cast<std::uint32_t>(args.count("-s", 1, 1, 100000));
  tpcb::schema kind;
  try {
    kind = tpcb::parse_schema(args.text("--schema", "tables"));
  } catch (const usage_error& e) {
    throw bad_usage(std::string("--schema: ") + e.what());
  }
  auto last_report = std::chrono::steady_clock::now();
  auto progress = [&](std::uint64_t done, std::uint64_t total) {
    auto now = std::chrono::steady_clock::now();
    if (now - last_report >= std::chrono::seconds(1) || done == total) {
      std::fprintf(stderr, "init: %llu of %llu rows loaded (%.0f%%)\n",
                   static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                   100.0 * double(done) / double(total));
      last_report = now;
    }
  };
  create_options options;
  options.settings = checked_sets(args);
  options.faults = faults_of(args);
  options.initial_data = [&](initial_loader& loader) {
    if (kind == tpcb::schema::pages)
      tpcb::load(loader, tpcb::layout(loader.page_size(), scale), progress);
    loader.write_file(workload_file_name, "tpcb_scale = " + std::to_string(scale) +
                                            "\ntpcb_schema = " + tpcb::to_string(kind) + "\n");
  };
  database::create(dir, options);
  if (kind == tpcb::schema::tables) {
    try {
      auto db = database::open(dir, options_with_faults(args));
      tpcb::load_tables(*db, tpcb::layout(db->page_size(), scale, kind), progress);
      db->close();
    } catch (const std::exception& e) {
      throw data_error(std::string("loading the tables failed (remove ") + dir +
                       " and run init again): " + e.what());
    }
  }
  std::fprintf(stderr, "init: data directory %s ready (scale %u, %s)\n", dir.c_str(), scale,
               tpcb::to_string(kind));
  return exit_ok;
}

int cmd_bench(const cli_args& args) {
  std::string dir = args.required("-D");
  if (args.has("-T") && args.has("-t"))
    throw bad_usage("-T and -t are exclusive");
  bench_options options;
  options.clients = static_cast<std::uint32_t>(args.count("-c", 1, 1, 1024));
  options.duration_s = args.real("-T", 10, 0.1, 86400 * 365.0);
  options.transactions_per_client = args.count("-t", 0, 1, 1ull << 40);
  options.progress_interval_s = args.real("-P", 0, 0.1, 3600);
  options.ack_log_path = args.text("--ack-log");
  options.timeline_path = args.text("--timeline");
  options.seed = args.count("--seed", 1, 0, ~0ull >> 12);
  open_options open = options_with_faults(args);
  auto db = database::open(dir, open);
  reload_on_hangup reloads(*db);
  tpcb::layout shape = read_workload(*db, dir);
  if (args.has("--history-bytes")) {
    if (shape.kind() != tpcb::schema::tables)
      throw bad_usage("--history-bytes needs a directory with keyed tables (init --schema "
                      "tables)");
    shape.set_history_bytes(
      static_cast<std::uint32_t>(args.count("--history-bytes", 64, 64, max_value_bytes)));
  }
  if (db->recovery().needed)
    std::fprintf(stderr,
                 "recovery (%s%s): data directory made durable in %.3f s (%llu files), "
                 "replayed %llu records in %.3f s (WAL ended: %s)\n",
                 db->recovery().protection.c_str(),
                 db->recovery().protection_switched ? ", the crashed run's mode" : "",
                 db->recovery().startup_sync_seconds,
                 static_cast<unsigned long long>(db->recovery().startup_sync_files),
                 static_cast<unsigned long long>(db->recovery().records), db->recovery().seconds,
                 db->recovery().end_reason.c_str());
  bench_result result = run_bench(*db, shape, options, stderr);
  std::string close_error;
  try {
    db->close();
  } catch (const std::exception& e) {
    close_error = e.what();
  }
  if (args.has("--trace"))
    db->write_trace(args.text("--trace"));
  json_object& r = result.report;
  std::string rendered = r.render();
  std::printf("%s\n", rendered.c_str());
  if (args.has("--json"))
    r.write_file(args.text("--json"));
  for (const std::string& error : result.errors)
    std::fprintf(stderr, "error: session stopped: %s\n", error.c_str());
  if (!close_error.empty())
    std::fprintf(stderr, "error: %s\n", close_error.c_str());
  return result.errors.empty() && close_error.empty() ? exit_ok : exit_failure;
}

// Opens (recovering when needed), reads the workload back through a session, closes
// cleanly, then checks every page on disk.
int cmd_verify(const cli_args& args) {
  std::string dir = args.required("-D");
  std::vector<acknowledged_transaction> acknowledged;
  if (args.has("--ack-log"))
    acknowledged = ack_log::read_all(args.text("--ack-log"));
  json_object r;
  r.set("pages_repaired", std::uint64_t(0)); // overwritten by the recovery report
  tpcb::verify_report report;
  file_check_report files;
  std::string error;
  try {
    auto db = database::open(dir, options_with_faults(args));
    fill_recovery(r, db->recovery());
    report = tpcb::verify(*db, read_workload(*db, dir), acknowledged);
    db->close();
    fill_faults(r, *db, args);
    files = database::check_files(dir);
  } catch (const page_corrupt_error& e) { // recovery itself met a page it could not repair
    error = e.what();
    files.failures = 1;
    files.first_failures.push_back(e.where());
  }
  std::vector<std::string> failures = files.first_failures;
  failures.insert(failures.end(), report.unreadable.begin(), report.unreadable.end());
  std::uint64_t lost_commits =
    report.lost.size() + report.not_committed.size() + report.diverged.size();
  bool ok = error.empty() && files.failures == 0 && report.unreadable.empty() &&
            lost_commits == 0 && report.balances_consistent();
  r.set("ok", ok);
  r.set("pages_checked", files.pages_checked);
  r.set("tables_checked", files.tables_checked);
  r.set("checksum_failures", files.failures);
  r.set("unreadable_pages", std::uint64_t(report.unreadable.size()));
  r.set_list("failures", failures);
  r.set("acknowledged", std::uint64_t(acknowledged.size()));
  r.set("lost_commits", lost_commits);
  r.set("not_committed_in_commit_log", std::uint64_t(report.not_committed.size()));
  r.set("diverged", std::uint64_t(report.diverged.size()));
  r.set("balances_consistent", error.empty() && report.balances_consistent());
  r.set("sums.accounts", report.sum_accounts);
  r.set("sums.tellers", report.sum_tellers);
  r.set("sums.branches", report.sum_branches);
  r.set("sums.history", report.sum_history);
  r.set("history_rows", report.history_rows);
  r.set("duplicate_history_xids", report.duplicate_history_xids);
  if (!error.empty())
    r.set("error", error);
  std::printf("%s\n", r.render().c_str());
  if (args.has("--json"))
    r.write_file(args.text("--json"));
  for (const std::string& f : failures)
    std::fprintf(stderr, "verify: page failure: %s\n", f.c_str());
  for (std::size_t i = 0; i < report.lost.size() && i < 20; ++i)
    std::fprintf(stderr, "verify: acknowledged transaction %llu is missing\n",
                 static_cast<unsigned long long>(report.lost[i]));
  for (std::size_t i = 0; i < report.diverged.size() && i < 20; ++i)
    std::fprintf(stderr,
                 "verify: acknowledged transaction %llu is another transaction in this "
                 "history (its digest or generation differs: a divergent history)\n",
                 static_cast<unsigned long long>(report.diverged[i]));
  for (std::size_t i = 0; i < report.not_committed.size() && i < 20; ++i)
    std::fprintf(stderr,
                 "verify: acknowledged transaction %llu is not committed in the "
                 "commit-status log\n",
                 static_cast<unsigned long long>(report.not_committed[i]));
  if (!error.empty())
    std::fprintf(stderr, "verify: %s\n", error.c_str());
  std::fprintf(stderr, "verify: %s\n", ok ? "OK" : "FAILED");
  return ok ? exit_ok : exit_failure;
}

int cmd_recover(const cli_args& args) {
  std::string dir = args.required("-D");
  auto db = database::open(dir, options_with_faults(args));
  json_object r;
  fill_recovery(r, db->recovery());
  db->close();
  fill_faults(r, *db, args);
  std::printf("%s\n", r.render().c_str());
  if (args.has("--json"))
    r.write_file(args.text("--json"));
  return exit_ok;
}

// Checks a directory of any layout without opening it for writing: control file, WAL
// CRCs, every page's checksum and identity, the doublewrite ring (as pg_checksums --check),
// and every keyed table's tree.
int cmd_check(const cli_args& args) {
  std::string dir = args.required("-D");
  file_check_report report = database::check_files(dir);
  json_object r;
  r.set("ok", report.failures == 0);
  r.set("control_file_ok", report.control_file_ok);
  r.set("needs_recovery", report.needs_recovery);
  r.set("wal_records", report.wal_records);
  r.set("wal_bytes", report.wal_bytes);
  r.set("wal_end", report.wal_end);
  r.set("pages_checked", report.pages_checked);
  r.set("tables_checked", report.tables_checked);
  r.set("ring_images", report.ring_images);
  r.set("failures", report.failures);
  r.set_list("first_failures", report.first_failures);
  std::printf("%s\n", r.render().c_str());
  if (args.has("--json"))
    r.write_file(args.text("--json"));
  for (const std::string& f : report.first_failures)
    std::fprintf(stderr, "check: %s\n", f.c_str());
  if (report.needs_recovery)
    std::fprintf(stderr, "check: the directory was not shut down cleanly: torn pages are "
                         "expected until recovery (tidemark recover) repairs them\n");
  std::fprintf(stderr, "check: %s\n", report.failures == 0 ? "OK" : "FAILED");
  return report.failures == 0 ? exit_ok : exit_failure;
}

} // namespace tidemark::tools
