// checkpointer: decides when to checkpoint and runs each checkpoint through
// IDLE → BEGIN → WRITE → SYNC → FINISH → IDLE (DESIGN §4 "Checkpoint").
//
// Who talks to it: a tick it sends itself every 100 ms checks the triggers (C3): time since
// the last checkpoint began ≥ checkpoint_timeout, or WAL since the redo point ≥
// max_wal_size / (1 + checkpoint_completion_target). Anyone may send a checkpoint_request
// (explicit, shutdown, end of recovery); requests arriving during a checkpoint are merged
// into the next one, and each is answered when a checkpoint that began after it completes.
// An immediate request arriving during a paced checkpoint, or WAL since its redo point
// reaching the trigger budget, hurries it: the write phase writes what is left at once, and
// the sync phase's remaining fsyncs run unpaced (hurry_atom to the sync worker), so a
// shutdown never waits out a paced sync phase. Subscribers receive a checkpoint_event at
// every phase change and write step.
//
// A checkpoint: BEGIN takes the redo point and lists the buffers dirty now, sorted by file
// and block (C5). WRITE runs in steps 100 ms apart: each step writes, in batches, the
// buffers the schedule asks for by now — the schedule being the larger of the elapsed
// fraction of checkpoint_timeout and the used fraction of the WAL budget, over the write
// window (C4) — so the write phase spreads over 80 % of checkpoint_completion_target ×
// interval and never runs ahead of it.
// Writes that others began on those buffers are waited for (storage rule 6). SYNC writes
// the dirty commit-status pages, then asks the sync worker to fsync everything registered
// so far (C1), spread over the rest of the target. FINISH inserts and flushes the
// checkpoint record, replaces the control file, then recycles WAL before the redo point
// (C2). Immediate checkpoints (shutdown, end of recovery, explicit) never nap;
// checkpoint_completion_target = 0 makes every checkpoint unpaced, as before spreading.
//
// Its tick also creates the next WAL segments ahead of the insert position, so a group
// commit never waits for a new segment to be zero-filled. While crash recovery replays WAL
// the tick does nothing: an automatic checkpoint then would move the redo point and recycle
// segments the redo reader has not read yet (a slow redo under sanitizers lost commits
// that way in a test run before this rule).
//
// How it stops: the shutdown checkpoint is the last thing it does for an engine; it is then
// told to exit. If a write or fsync fails it marks the engine failed (W3) and answers with
// an error; the control file still points at the previous checkpoint, so the next start
// runs crash recovery. If it dies, no further checkpoint happens and WAL grows without
// bound: the runtime treats that as fatal.
//
// It writes pages (blocking pwrite), so the runtime spawns it detached unless tests run the
// deterministic scheduler.
#pragma once

#include "actors/context.hpp"
#include "messages/interfaces.hpp"

#include <caf/actor_system.hpp>

namespace tidemark::actors {

messages::checkpointer_actor spawn_checkpointer(caf::actor_system& system, context& ctx,
                                                messages::sync_worker_actor sync_worker,
                                                bool detached);

} // namespace tidemark::actors
