// The benchmark driver behind `tidemark bench`: one application thread per client, each
// running the TPC-B-like transaction through its own public session (as any embedding
// application would), progress lines, a per-second timeline, and the figures of the JSON
// report (DESIGN §9). Engine counters come from database::stats() and are reported as
// differences over the run (recovery and the final shutdown checkpoint are not counted);
// transaction latencies are measured by the clients, from begin() to commit()'s return.
#pragma once

#include "workload/json.hpp"
#include "workload/tpcb/tpcb.hpp"

#include <cstdio>
#include <string>

namespace tidemark::workload {

struct bench_options {
  std::uint32_t clients = 1;
  double duration_s = 10; // used when transactions_per_client == 0
  std::uint64_t transactions_per_client = 0;
  double progress_interval_s = 0; // 0: no progress lines
  std::string ack_log_path;       // empty: none
  std::string timeline_path;      // empty: none; else one CSV row per second
  std::uint64_t seed = 1;
};

struct bench_result {
  json_object report;
  std::vector<std::string> errors; // one per client that stopped on an error
  std::uint64_t transactions = 0;
};

bench_result run_bench(database& db, const tpcb::layout& shape, const bench_options& options,
                       std::FILE* progress);

} // namespace tidemark::workload
