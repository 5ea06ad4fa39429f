// checkpointer: decides when to checkpoint and runs the checkpoint
// (DESIGN §4 "Checkpoint": IDLE → BEGIN → WRITE → SYNC → FINISH → IDLE).
//
// Who talks to it: a tick it sends itself every 100 ms checks the triggers — time since the
// last checkpoint began ≥ checkpoint_timeout, or WAL since the redo point ≥
// max_wal_size / (1 + checkpoint_completion_target) (C3). Anyone may send a
// checkpoint_request (explicit, shutdown, end of recovery); requests that arrive while a
// checkpoint runs are merged into the next one, and each is answered when a checkpoint
// that began after it completes.
//
// This version runs every checkpoint immediately (unpaced): write every dirty buffer in
// file/block order (C5), fsync every segment registered for sync (C1), insert and flush the
// checkpoint record, replace the control file, then recycle WAL before the redo point (C2).
//
// How it stops: the shutdown checkpoint is the last thing it does for an engine; it is
// then told to exit. If a write or fsync fails it marks the engine failed (W3) and answers
// with an error; the control file is left pointing at the previous checkpoint, so the next
// start runs crash recovery. If it dies, no further checkpoint happens and WAL grows: the
// runtime treats that as fatal.
#pragma once

#include "messages/interfaces.hpp"
#include "runtime/engine.hpp"

#include <caf/actor_system.hpp>

namespace tidemark::actors {

messages::checkpointer_actor spawn_checkpointer(caf::actor_system& system, runtime::engine& engine,
                                                bool detached);

} // namespace tidemark::actors
