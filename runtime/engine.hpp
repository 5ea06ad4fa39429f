// The engine: the actors' context (actors/context.hpp: storage mechanisms, settings,
// counters, failure state) plus what only the runtime and its sessions use: the fault
// engine under fault injection, the append-only relations' tails, the keyed tables' page
// store, and the idle poller.
// The database owns it; it outlives every actor and session.
//
// Invariants:
//  - Those of the context: failed() stays true once set (W3); next_xid is larger than
//    every xid in WAL or on disk.
//  - tables is the one page store of the buffer pool (access/pool_page_store.hpp hands
//    out new blocks): every session's table transactions go through it.
//  - commit_activity feeds idle_poll for the engine's whole life, so the poller hears of
//    every commit the wal_writer is asked to sync (a no-op while its threads are stopped).
#pragma once

#include "access/pool_page_store.hpp"
#include "actors/context.hpp"
#include "runtime/idle_poller.hpp"
#include "storage/fault_engine.hpp"
#include "storage/page_transaction.hpp"

#include <memory>

namespace tidemark::runtime {

/// The checkpointer's phases, as the embedding API's users know them (messages/types.hpp).
using messages::checkpoint_phase;

struct engine : actors::context {
  engine() {
    commit_activity = [this] { idle_poll.note_activity(); };
  }

  storage::fault_engine* faults = nullptr;         // io, when fault injection is on
  std::unique_ptr<storage::append_tails> tails;    // sessions' append_row
  std::unique_ptr<access::pool_page_store> tables; // sessions' keyed tables
  idle_poller idle_poll; // running while actors run, when config.idle_poll
};

} // namespace tidemark::runtime
