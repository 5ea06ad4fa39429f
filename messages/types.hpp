// Every message that crosses an actor boundary in Tidemark, as plain structs with an
// inspect() that names each field (CAF 0.17 style). Registered once in type_ids.hpp.
//
// Pages never travel in messages: the buffer pool is shared memory. Messages carry the
// write path's control flow: flush up to an LSN, run a checkpoint, report progress.
#pragma once

#include "runtime/latency_histogram.hpp"

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tidemark::messages {

// ---- wal_writer ----------------------------------------------------------------------------

/// A backend asks for WAL to be durable up to `lsn` (the end of its commit record).
struct flush_request {
  std::uint64_t lsn = 0;
};

/// WAL is durable up to `flushed_lsn` (>= the requested lsn).
struct flush_done {
  std::uint64_t flushed_lsn = 0;
};

// ---- checkpointer --------------------------------------------------------------------------

enum class checkpoint_reason : std::uint8_t {
  time = 1,            // checkpoint_timeout elapsed
  wal = 2,             // WAL since the redo point reached its share of max_wal_size
  requested = 3,       // explicit request (API, tests)
  shutdown = 4,        // clean shutdown
  end_of_recovery = 5, // crash recovery finished
};

const char* to_string(checkpoint_reason reason);

struct checkpoint_request {
  std::uint8_t reason = static_cast<std::uint8_t>(checkpoint_reason::requested);
  bool immediate = true;
};

struct checkpoint_done {
  std::uint64_t checkpoint_lsn = 0;
  std::uint64_t redo_lsn = 0;
  std::uint64_t buffers_written = 0;
};

// ---- backends and stats --------------------------------------------------------------------

/// A backend's work since its last report: committed transactions and their latencies.
struct progress_report {
  std::uint64_t transactions = 0;
  runtime::latency_histogram latency;
};

/// What a backend did over its whole life, sent when it stops.
struct backend_summary {
  std::uint64_t transactions = 0;
  std::string error; // empty unless the backend stopped on an error
};

/// Totals the stats actor holds.
struct stats_snapshot {
  std::uint64_t transactions = 0;
  runtime::latency_histogram latency;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, flush_request& x) {
  return f(caf::meta::type_name("flush_request"), x.lsn);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, flush_done& x) {
  return f(caf::meta::type_name("flush_done"), x.flushed_lsn);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_request& x) {
  return f(caf::meta::type_name("checkpoint_request"), x.reason, x.immediate);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_done& x) {
  return f(caf::meta::type_name("checkpoint_done"), x.checkpoint_lsn, x.redo_lsn,
           x.buffers_written);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, progress_report& x) {
  return f(caf::meta::type_name("progress_report"), x.transactions, x.latency.buckets,
           x.latency.count, x.latency.sum_us, x.latency.max_us);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backend_summary& x) {
  return f(caf::meta::type_name("backend_summary"), x.transactions, x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stats_snapshot& x) {
  return f(caf::meta::type_name("stats_snapshot"), x.transactions, x.latency.buckets,
           x.latency.count, x.latency.sum_us, x.latency.max_us);
}

} // namespace tidemark::messages
