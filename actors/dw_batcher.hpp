// dw_batcher: owns the doublewrite ring's write path and every chunk's life
// (DESIGN §4 "Doublewrite slot"; the batch-lifetime design of the seed review).
//
// Who talks to it: writers — the bgwriter, the checkpointer and sessions evicting dirty
// victims — stage pages straight into a ring chunk and send dw_batch_ready. For each batch
// it: makes WAL durable up to the batch's highest LSN (W1); writes the chunk to the ring
// with one sequential write of its compressed record; fdatasyncs the ring once for all the
// batches that arrived together (D3: WRITTEN, DWB_FSYNCED; a drain message to itself,
// behind them in the mailbox, marks the group; a small batch of the bgwriter's or the
// checkpointer's that no one waits for — sessions still find victims in the supply — waits
// up to doublewrite_flush_delay for company, so the bgwriter's small rounds do not each
// put a ring fdatasync between the WAL's); only then writes the pages in place (D1:
// DATA_WRITTEN; the staging memory is free again), registers their files with the
// sync_worker and finishes the buffers' writes (W2); and asks the sync_worker (sync_notify)
// to tell it when each file has had an fsync that began after those writes completed. It
// keeps one synced_chunks_request outstanding, answered with every chunk covered since the
// last answer: an fsync that covers the chunks of half a ring costs one message, not one
// per chunk (measured: a 2.3 s stall while 59 000 answers were handled one at a time). On
// that answer the chunk is DATA_FSYNCED and FREE again (D2); its ring space is reusable
// once a ring header past it is durable — the next group's fdatasync carries that header,
// or, when a batch waits for that space and no group is there, an fdatasync of the header
// alone. When the span the ring may not reuse passes half the ring, or a batch finds no
// room (it then waits, in order, at the batcher), it asks the sync_worker to fsync the
// files of its waiting batches now, so retirement never waits for a checkpoint but usually
// rides on one; a writer finding no free chunk or staging memory waits (D4, counted).
// dw_flush_request is answered once every batch handed over before it is DATA_WRITTEN (the
// checkpointer asks before its sync phase). Sessions' victims share one chunk, taken 1 ms
// after its first page or when full.
//
// Failure: any write or fsync error marks the engine failed (W3), leaves the batch's
// buffers dirty, and fails the ring so waiting writers stop; the next start repairs from
// the ring and runs recovery. If the batcher dies, no chunk is ever freed and writers
// stop at D4: the runtime treats that as fatal.
//
// It does blocking I/O, so the runtime spawns it detached unless tests run the
// deterministic scheduler.
#pragma once

#include "actors/context.hpp"
#include "messages/interfaces.hpp"

#include <caf/actor_system.hpp>

namespace tidemark::actors {

messages::dw_batcher_actor spawn_dw_batcher(caf::actor_system& system, context& ctx,
                                            messages::sync_worker_actor sync_worker, bool detached);

} // namespace tidemark::actors
