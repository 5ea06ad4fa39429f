// Runs the whole runtime (real threads, detached I/O actors) under the TPC-B-like load on a
// fresh scale-1 data directory with message tracing on, closes it cleanly, and hands the
// closed database to the caller for its trace and counters. For trace tests whose
// assertions depend on the order of events, not on timing.
#pragma once

#include "runtime/bench.hpp"
#include "runtime/database.hpp"
#include "runtime/tpcb.hpp"

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace tidemark::test {

inline void traced_tpcb_run(const std::vector<std::string>& settings, std::uint32_t clients,
                            double seconds, const std::function<void(runtime::database&)>& inspect) {
  char pattern[] = "/tmp/tidemark-traced-run-XXXXXX";
  std::string root = mkdtemp(pattern);
  std::string dir = root + "/data";
  runtime::database::create(dir, settings, [](storage::relation_files& files, const runtime::settings& s) {
    runtime::tpcb::load(files, runtime::tpcb::layout(s.page_size, 1), s.data_checksums,
                        [](std::uint64_t, std::uint64_t) {});
  });
  runtime::open_options options;
  options.overrides = settings;
  options.trace = true;
  auto db = runtime::database::open(dir, options);
  runtime::bench_options bench;
  bench.clients = clients;
  bench.duration_s = seconds;
  runtime::run_bench(*db, runtime::tpcb::layout(db->internals().config.page_size, 1), bench, nullptr);
  db->close();
  inspect(*db);
  std::filesystem::remove_all(root);
}

inline bool is(const messages::trace_event& e, const char* type) { return std::string(e.type) == type; }

} // namespace tidemark::test
