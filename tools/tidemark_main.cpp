// The tidemark program (DESIGN §9): init, bench, verify, recover, check, and the
// replication commands (tools/replication_commands.hpp).
// Exit status: 0 success; 1 runtime error or failed verification; 2 bad usage or
// configuration; 3 simulated crash (raised inside the fault-injecting engine).
// A client of the public API (include/tidemark/) and the workload module, like any
// embedding application.
#include "tools/cli_args.hpp"
#include "tools/fault_flags.hpp"
#include "tools/replication_commands.hpp"
#include "workload/ack_log.hpp"
#include "workload/json.hpp"
#include "workload/tpcb/bench.hpp"
#include "workload/tpcb/tpcb.hpp"

#include <tidemark/database.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>

using namespace tidemark;
using namespace tidemark::workload;
using tidemark::tools::cli_args;
using tidemark::tools::faults_of;
using tidemark::tools::options_with_faults;
using tidemark::tools::with_fault_flags;

#ifndef TIDEMARK_VERSION
#error "TIDEMARK_VERSION is defined by CMakeLists.txt from project(tidemark VERSION ...)"
#endif

namespace {

constexpr int exit_ok = 0, exit_failure = 1, exit_usage = 2;

const char* usage_text =
  "usage:\n"
  "  tidemark init    -D DIR [-s SCALE] [--set KEY=VALUE]...\n"
  "  tidemark bench   -D DIR [-c CLIENTS] [-T SECONDS | -t TXNS] [-P SECONDS] [--json FILE]\n"
  "                   [--ack-log FILE] [--set KEY=VALUE]...\n"
  "                   [FAULTS] [--trace FILE] [--timeline FILE.csv]\n"
  "  tidemark verify  -D DIR [--ack-log FILE] [--json FILE] [--set KEY=VALUE]... [FAULTS]\n"
  "  tidemark recover -D DIR [--json FILE] [--set KEY=VALUE]... [FAULTS]\n"
  "  tidemark check   -D DIR [--json FILE]     check every file, changing nothing\n"
  "  tidemark basebackup -D NEWDIR --primary HOST:PORT [--name NAME] [--json FILE]\n"
  "  tidemark standby -D DIR [--primary HOST:PORT] [--json FILE] [--status-interval SECONDS]\n"
  "                   [--set KEY=VALUE]... [FAULTS]  stream and replay until promoted or stopped\n"
  "  tidemark promote -D DIR [--timeout SECONDS] [--set KEY=VALUE]... [FAULTS]\n"
  "                   make a standby a primary (FAULTS apply when no standby runs in DIR)\n"
  "  tidemark --version\n"
  "FAULTS (run on the fault-injecting I/O engine, for crash tests):\n"
  "  [--crash-after-writes N [--crash-mode lose-unsynced|torn|process] [--seed N]]\n"
  "  [--fail-fsync-after N [--fail-fsync-match PATH-PART]] [--fault-journal FILE]\n"
  "  [--bad-read-after N [--bad-read zeros|short|error] [--bad-read-repeats N]\n"
  "   [--bad-read-match PATH-PART]]\n"
  "  process: the N-th write ends the process with every write in place (as kill -9);\n"
  "  --fault-journal keeps the writes not yet fsynced across runs, so that a later\n"
  "  simulated power loss loses or tears them too.\n"
  "  --bad-read-after: the N-th read of bytes this run wrote and fsynced, in files whose\n"
  "  path contains PATH-PART (default /wal/), and the next N-1 reads of them (0: every\n"
  "  later one; default 1) read zeros, end short or fail with EIO (a stale cache).\n";

constexpr const char* workload_file_name = "workload.conf";

// The scale `init` recorded in the directory's workload.conf.
std::uint32_t read_scale(const std::string& dir) {
  std::string path = dir + "/" + workload_file_name;
  std::ifstream in(path);
  std::string key, eq;
  std::uint32_t scale = 0;
  if (!(in >> key >> eq >> scale) || key != "tpcb_scale" || scale == 0)
    throw data_error(path + " is missing or malformed (expected \"tpcb_scale = N\"; was the "
                     "directory made by tidemark init?)");
  return scale;
}

int cmd_init(int argc, char** argv) {
  cli_args args(argc, argv, 2, with_fault_flags({"-D", "-s", "--set"}));
  std::string dir = args.required("-D");
  auto scale = static_cast<std::uint32_t>(args.count("-s", 1, 1, 100000));
  auto last_report = std::chrono::steady_clock::now();
  create_options options;
  options.settings = args.sets();
  options.faults = faults_of(args);
  options.initial_data = [&](initial_loader& loader) {
    tpcb::layout shape(loader.page_size(), scale);
    tpcb::load(loader, shape, [&](std::uint64_t done, std::uint64_t total) {
      auto now = std::chrono::steady_clock::now();
      if (now - last_report >= std::chrono::seconds(1) || done == total) {
        std::fprintf(stderr, "init: %llu of %llu rows loaded (%.0f%%)\n",
                     static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                     100.0 * double(done) / double(total));
        last_report = now;
      }
    });
    loader.write_file(workload_file_name, "tpcb_scale = " + std::to_string(scale) + "\n");
  };
  database::create(dir, options);
  std::fprintf(stderr, "init: data directory %s ready (scale %u)\n", dir.c_str(), scale);
  return exit_ok;
}

int cmd_bench(int argc, char** argv) {
  cli_args args(argc, argv, 2,
                with_fault_flags({"-D", "-c", "-T", "-t", "-P", "--json", "--ack-log", "--set",
                                  "--trace", "--timeline"}));
  std::string dir = args.required("-D");
  if (args.has("-T") && args.has("-t"))
    throw config_error("-T and -t are exclusive");
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
  tpcb::layout shape(db->page_size(), read_scale(dir));
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

void fill_recovery(json_object& r, const recovery_report& rec) {
  r.set("recovery.needed", rec.needed);
  r.set("recovery.previous_state", rec.previous_state);
  r.set("recovery.protection", rec.protection);
  r.set("recovery.protection_switched", rec.protection_switched);
  r.set("recovery.startup_sync_files", rec.startup_sync_files);
  r.set("recovery.startup_sync_seconds", rec.startup_sync_seconds);
  r.set("recovery.records", rec.records);
  r.set("recovery.blocks_applied", rec.blocks_applied);
  r.set("recovery.images_restored", rec.images_restored);
  r.set("recovery.seconds", rec.seconds);
  r.set("recovery.wal_bytes", rec.wal_bytes);
  r.set("recovery.pages_read", rec.pages_read);
  r.set("recovery.pages_prefetched", rec.pages_prefetched);
  r.set("recovery.prefetch_hits", rec.prefetch_hits);
  r.set("recovery.pages_advised", rec.pages_advised);
  r.set("recovery.prefetch_error", rec.prefetch_error);
  r.set("recovery.pages_written_by_redo", rec.pages_written_by_redo);
  r.set("recovery.pages_written_by_bgwriter", rec.pages_written_by_bgwriter);
  r.set("recovery.pages_written_by_checkpoint", rec.pages_written_by_checkpoint);
  r.set("recovery.checkpoint_seconds", rec.checkpoint_seconds);
  r.set("repair.images_read", rec.ring_images_read);
  r.set("repair.records_read", rec.ring_records_read);
  r.set("repair.bytes_read", rec.ring_bytes_read);
  r.set("repair.bounded", rec.ring_bounded);
  r.set("repair.seconds", rec.repair_seconds);
  r.set("recovery.records_per_second", rec.seconds > 0 ? double(rec.records) / rec.seconds : 0.0);
  r.set("recovery.wal_end", rec.end_reason);
  r.set("pages_repaired", rec.pages_repaired);
  r.set("repair.checksum_failed", rec.repaired_checksum);
  r.set("repair.older_lsn", rec.repaired_lsn);
  r.set("repair.same_lsn_other_bytes", rec.repaired_bytes);
}

// Writes the fault-injecting engine issued (crash tests pick crash points from it).
void fill_faults(json_object& r, database& db, const cli_args& args) {
  if (faults_of(args))
    r.set("faults.writes_issued", db.stats().fault_writes_issued);
}

// Opens (recovering when needed), reads the workload back through a session, closes
// cleanly, then checks every page on disk.
int cmd_verify(int argc, char** argv) {
  cli_args args(argc, argv, 2, with_fault_flags({"-D", "--ack-log", "--json", "--set"}));
  std::string dir = args.required("-D");
  std::vector<transaction_id> acknowledged;
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
    report = tpcb::verify(*db, tpcb::layout(db->page_size(), read_scale(dir)), acknowledged);
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
  std::uint64_t lost_commits = report.lost.size() + report.not_committed.size();
  bool ok = error.empty() && files.failures == 0 && report.unreadable.empty() &&
            lost_commits == 0 && report.balances_consistent();
  r.set("ok", ok);
  r.set("pages_checked", files.pages_checked);
  r.set("checksum_failures", files.failures);
  r.set("unreadable_pages", std::uint64_t(report.unreadable.size()));
  r.set_list("failures", failures);
  r.set("acknowledged", std::uint64_t(acknowledged.size()));
  r.set("lost_commits", lost_commits);
  r.set("not_committed_in_commit_log", std::uint64_t(report.not_committed.size()));
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
  for (std::size_t i = 0; i < report.not_committed.size() && i < 20; ++i)
    std::fprintf(stderr, "verify: acknowledged transaction %llu is not committed in the "
                 "commit-status log\n", static_cast<unsigned long long>(report.not_committed[i]));
  if (!error.empty())
    std::fprintf(stderr, "verify: %s\n", error.c_str());
  std::fprintf(stderr, "verify: %s\n", ok ? "OK" : "FAILED");
  return ok ? exit_ok : exit_failure;
}

int cmd_recover(int argc, char** argv) {
  cli_args args(argc, argv, 2, with_fault_flags({"-D", "--json", "--set"}));
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
// CRCs, every page's checksum and identity, the doublewrite ring (as pg_checksums --check).
int cmd_check(int argc, char** argv) {
  cli_args args(argc, argv, 2, {"-D", "--json"});
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

int dispatch(int argc, char** argv) {
  std::string command = argv[1];
  if (command == "init")
    return cmd_init(argc, argv);
  if (command == "bench")
    return cmd_bench(argc, argv);
  if (command == "verify")
    return cmd_verify(argc, argv);
  if (command == "recover")
    return cmd_recover(argc, argv);
  if (command == "check")
    return cmd_check(argc, argv);
  if (command == "basebackup")
    return tidemark::tools::cmd_basebackup(argc, argv);
  if (command == "standby")
    return tidemark::tools::cmd_standby(argc, argv);
  if (command == "promote")
    return tidemark::tools::cmd_promote(argc, argv);
  if (command == "--version") {
    std::printf("tidemark %s\n", TIDEMARK_VERSION);
    return exit_ok;
  }
  if (command == "-h" || command == "--help" || command == "help") {
    std::printf("%s", usage_text);
    return exit_ok;
  }
  throw config_error("unknown command \"" + command + "\"");
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "%s", usage_text);
    return exit_usage;
  }
  try {
    return dispatch(argc, argv);
  } catch (const config_error& e) {
    std::fprintf(stderr, "tidemark: %s\n%s", e.what(), usage_text);
    return exit_usage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tidemark: error: %s\n", e.what());
    return exit_failure;
  }
}
