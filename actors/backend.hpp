// backend: one benchmark session. It runs TPC-B-like transactions back to back: execute
// the transaction on the shared buffer pool, ask the wal_writer to make its commit record
// durable, and only then acknowledge it (latency recorded, id appended to the ack log) and
// start the next (W4). With synchronous_commit=off it acknowledges at once.
//
// Who talks to it: the bench driver sends run to start it and stop to end it; stop is
// answered with a backend_summary once the backend is idle (after its quota of
// transactions, when it has one). It sends progress_report batches to the stats actor.
//
// If a transaction fails (a page fails verification, the engine failed after an fsync
// error) the backend stops and reports the error in its summary; nothing it did not
// acknowledge is promised to anyone.
#pragma once

#include "messages/interfaces.hpp"
#include "runtime/ack_log.hpp"
#include "runtime/engine.hpp"
#include "runtime/tpcb.hpp"

#include <caf/actor_system.hpp>

namespace tidemark::actors {

struct backend_params {
  runtime::engine* engine = nullptr;
  const runtime::tpcb::layout* shape = nullptr;
  messages::wal_writer_actor wal_writer;
  messages::stats_actor stats;
  runtime::ack_log* acks = nullptr; // optional
  std::uint64_t transaction_quota = 0; // 0: until stopped
  std::uint64_t seed = 1;
};

messages::backend_actor spawn_backend(caf::actor_system& system, backend_params params);

} // namespace tidemark::actors
