// wal_sender: a primary's side of streaming replication and base backups, published on
// replication_listen through caf::io (messages/replication.hpp for the protocol).
//
// Who talks to it: standbys (stream_open, then wal_fetch one after another, and
// standby_feedback), base backups (backup_begin, file_fetch, backup_finish, then WAL by
// wal_fetch under the same name), the WAL's flush listener (wake_atom after each WAL
// fdatasync), itself (tick_atom every second), status views (standbys_atom) and other
// primaries asking which generation runs here (generation_probe).
//
// Rules it keeps:
//  - It sends only WAL that is durable on the primary (below the flushed LSN). A standby
//    therefore never holds WAL that a crash of the primary could lose, so a restarted
//    primary and its standby never disagree about history, at the price of one more
//    network round after the primary's fdatasync before a synchronous standby has it.
//  - A fetch it cannot serve yet waits (its response promise is kept) until WAL past it
//    is durable, or at most a second: then it is answered with an empty chunk, the
//    heartbeat by which a standby knows its primary is alive.
//  - Each standby (and base backup) has a slot by name that outlives its connection:
//    WAL from the lowest flushed position of the slots is kept (context::sender.keep_from),
//    except for a slot more than max_standby_wal_size behind, which is dropped with a
//    warning; that standby must be seeded again, and says so when WAL it needs is gone.
//  - Slots are kept on disk too (storage/standby_slots.hpp), written when one is made or
//    a standby disconnects, and within a second of any other change, so that a restarted primary
//    keeps its standbys' WAL; the runtime reads them before its first checkpoint and hands them
//    over at spawn.
//  - A standby of another system or generation is refused with an error naming both. One
//    of a newer generation means a copy of this primary was promoted since: the primary
//    is an old one. So is a primary that, restarting, finds a newer generation of its
//    system at an address where one of its standbys said it would serve once promoted
//    (generation_probe, asked of every slot's address at start; until every probe has
//    ended, no standby counts for synchronous commits). An old primary logs a warning,
//    stops acknowledging synchronous commits for good (they end in
//    commit_outcome_unknown), serves no standby or base backup, and records it
//    (global/superseded) so that its restarts know too: the old and the new primary never
//    both acknowledge commits as held by a standby.
//  - Base backup pages are verified as they are copied; a page that fails (it was being
//    written) is copied again through the buffer pool, which never holds a torn page.
//  - Every ten seconds it logs each connected standby's positions and lag.
//  - The position the quorum of synchronous_standby_names has reached (written, flushed or
//    replayed WAL, as synchronous_standby says) among the live standbys — connected and
//    heard from within wal_sender_timeout — is published to waiting commits
//    (context::sender.acknowledged; actors/standby_quorum.hpp), on every report and every
//    second.
//
// It reads WAL and data files (blocking pread) on a scheduler thread, not detached: a
// detached actor's thread lives until the last reference to the actor is gone, and CAF's
// network layer can keep one to a published actor past its end, so that the actor
// system's shutdown waited for it forever (a primary's close hung, about once in fifty
// with a standby connected). Its reads are short; nothing else on a primary's scheduler
// waits long behind them.
#pragma once

#include "actors/context.hpp"
#include "messages/interfaces.hpp"
#include "storage/standby_slots.hpp"

#include <caf/actor_system.hpp>

namespace tidemark::actors {

messages::wal_sender_actor spawn_wal_sender(caf::actor_system& system, context& ctx,
                                            messages::checkpointer_actor checkpointer,
                                            std::vector<storage::standby_slot_record> slots);

} // namespace tidemark::actors
