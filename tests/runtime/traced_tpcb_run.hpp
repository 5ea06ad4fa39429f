// Runs the whole runtime (real threads, detached I/O actors) under the TPC-B-like load on a
// fresh data directory (scale 1 unless asked) with message tracing on, closes it cleanly, and hands
// the closed database to the caller for its trace and counters. For trace tests whose assertions
// depend on the order of events, not on timing.
#pragma once

#include "runtime/api_bridge.hpp"
#include "workload/tpcb/bench.hpp"
#include "workload/tpcb/tpcb.hpp"

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace tidemark::test {

/// Creates a directory of `scale` (1 by default) with `settings` through the public API.
inline void create_tpcb_directory(const std::string& dir, const std::vector<std::string>& settings,
                                  std::uint32_t scale = 1) {
  create_options create;
  create.settings = settings;
  create.initial_data = [scale](initial_loader& loader) {
    workload::tpcb::load(loader, workload::tpcb::layout(loader.page_size(), scale),
                         [](std::uint64_t, std::uint64_t) {});
  };
  tidemark::database::create(dir, create);
}

/// Runs the load for `seconds`, and again for `seconds` at a time while `until` (when given)
/// does not yet hold of the open database, at most `max_rounds` rounds in all: a test whose
/// assertions need an event to have happened (a timed checkpoint to have completed) waits
/// for it however slow the machine, not for a time that is enough on a fast one.
inline void traced_tpcb_run(const std::vector<std::string>& settings, std::uint32_t clients,
                            double seconds, const std::function<void(runtime::instance&)>& inspect,
                            std::uint32_t scale = 1,
                            const std::function<bool(runtime::instance&)>& until = nullptr,
                            int max_rounds = 1) {
  char pattern[] = "/tmp/tidemark-traced-run-XXXXXX";
  std::string root = mkdtemp(pattern);
  std::string dir = root + "/data";
  create_tpcb_directory(dir, settings, scale);
  open_options options;
  options.settings = settings;
  options.trace = true;
  auto db = tidemark::database::open(dir, options);
  workload::bench_options bench;
  bench.clients = clients;
  bench.duration_s = seconds;
  for (int round = 0; round < max_rounds; ++round) {
    workload::run_bench(*db, workload::tpcb::layout(db->page_size(), scale), bench, nullptr);
    if (!until || until(internal_access::of(*db)))
      break;
  }
  db->close();
  inspect(internal_access::of(*db));
  std::filesystem::remove_all(root);
}

inline bool is(const messages::trace_event& e, messages::trace_type type) { return e.type == type; }

} // namespace tidemark::test
