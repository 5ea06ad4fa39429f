// bgwriter: keeps the buffers the clock sweep is about to hand out clean, so sessions
// almost never write a dirty victim themselves (PostgreSQL's BgBufferSync).
//
// Each bgwriter_delay it reads the allocation counter and the clock hand, keeps a smoothed
// estimate of allocations per round (jumps up at once, decays with weight 1/16) and of
// buffers scanned per allocation, and cleans buffers ahead of the hand — writing those that
// are dirty, unpinned and not recently used — until bgwriter_lru_multiplier × the estimate
// of reusable buffers lie ahead, writing at most bgwriter_lru_maxpages per round. It also
// sweeps the whole pool at least once per two minutes. After two idle rounds it hibernates
// (50 × bgwriter_delay) and asks the pool to wake it at the next allocation. Each round it
// also faults in fresh memory ahead of its first use, so that sessions do not pay the first
// touch: never-used buffers ahead of the hand's first pass (buffer_pool::fault_in_ahead),
// and the WAL insert buffer ahead of the inserts in its first pass (wal_log::fault_in_ahead).
//
// While the victim supply's alarm stays sounded (sessions found it below its low-water
// mark, and it was not refilled to the mark since), it runs every tenth of bgwriter_delay.
//
// Who talks to it: only itself (ticks) and the pool's allocation wake-up. It is a separate
// actor from the checkpointer, so it keeps cleaning while a checkpoint writes or syncs, and
// it runs during crash recovery. Its writes go through the same page writer (W1, W2).
//
// How it stops: told to exit with the runtime. A write failure marks the engine failed
// (W3 applies to its writes' fsyncs later); if it dies, sessions write their own victims.
//
// It writes pages (blocking pwrite), so the runtime spawns it detached unless tests run the
// deterministic scheduler.
#pragma once

#include "actors/context.hpp"
#include "messages/interfaces.hpp"

#include <caf/actor_system.hpp>

namespace tidemark::actors {

messages::bgwriter_actor spawn_bgwriter(caf::actor_system& system, context& ctx, bool detached);

} // namespace tidemark::actors
