// sync_worker: the one owner of fsync requests (PostgreSQL's pendingOps, in an actor).
//
// Who talks to it: every writer of data or commit-status-log pages sends sync_register
// after its writes completed and before it reports the buffers clean (W2), saying how many
// bytes it wrote to each file and where; the same file registered many times is absorbed
// into one entry that adds up what was written. The checkpointer sends sync_phase_request in
// its SYNC phase and is answered once every file registered before that request has been
// fsynced (C1).
//
// Pacing by what is dirty: before a relation segment's fsync the phase writes the range its
// registrations covered back a megabyte at a time, waiting for each piece, so the fsync
// never queues the whole checkpoint cycle's writes in front of commits at once. The steps
// are spread over the requested time in proportion to the bytes written to each file since
// its last fsync (not to file length), and never slower than a floor rate, so a few small
// files are fsynced at once instead of minutes apart. While the phase runs the checkpointer
// sends sync_deadline each tick; when WAL is being consumed faster than the time budget
// foresaw, the rest of the phase is re-planned into the shorter time. A hurry_atom makes the
// rest run one after another without write-back.
//
// Between checkpoints the same piece-by-piece write-back sweeps the written ranges of every
// file registered since its last fsync once per write_back_sweep (tick_atom), so the
// kernel's 30 s writeback never finds a whole file dirty. The worker keeps absorbing
// registrations between steps. sync_forget cancels a file's entry (truncated or dropped
// files).
//
// Failure: an fsync error is never retried and never forgotten (W3): the engine is marked
// failed, the checkpoint is answered with an error (so no checkpoint record is written and
// the control file keeps pointing at the previous checkpoint), and the next start runs
// crash recovery. If the worker dies, pending fsyncs are lost with it: the runtime must
// not complete another checkpoint, which it ensures because checkpoints wait for its answer.
//
// It does blocking fsyncs, so the runtime spawns it detached unless tests run the
// deterministic scheduler.
#pragma once

#include "actors/context.hpp"
#include "messages/interfaces.hpp"

#include <caf/actor_system.hpp>

namespace tidemark::actors {

messages::sync_worker_actor spawn_sync_worker(caf::actor_system& system, context& ctx,
                                              bool detached);

} // namespace tidemark::actors
