// wal_writer: group commit.
//
// Who talks to it: a committing session sends flush_wanted{lsn} after inserting its
// commit record and sleeps in wal_log::wait_for_flush() until a sync covers it (W4); other
// callers send flush_request{lsn} and get flush_done once WAL is durable past it. The writer writes
// out everything inserted and hands it to one of its wal_sync_concurrency syncers
// (wal_sync_request), which fdatasyncs and answers; requests that arrive meanwhile start the next
// sync on an idle syncer at once instead of waiting for the running one to end. One sync answers
// every waiter it covers. A periodic tick flushes WAL for asynchronous commits
// (synchronous_commit=off).
//
// How it stops: with the actor system, after the last session has closed. If it fails to
// fsync (W3) it marks the engine failed, answers every waiter with an error, and answers
// every later request with an error; the next start runs crash recovery.
//
// The writer's own work is short (write-out into the page cache); its syncers block in
// fdatasync. The runtime spawns both detached unless tests run the deterministic scheduler.
#pragma once

#include "actors/context.hpp"
#include "messages/interfaces.hpp"

#include <caf/actor_system.hpp>

namespace tidemark::actors {

messages::wal_writer_actor spawn_wal_writer(caf::actor_system& system, context& ctx, bool detached);

} // namespace tidemark::actors
