// wal_receiver: a standby's side of streaming replication. It connects to the primary's
// WAL sender (caf::io remote_actor), opens a stream from the end of the WAL it has
// flushed, and then fetches WAL chunk after chunk: each chunk is appended to the local
// WAL (wal_log::append_received), written and fdatasynced, and only then published to redo
// (storage::received_wal) and reported to the primary (standby_feedback).
//
// Rules it keeps:
//  - Chunks are appended in order and only where the local WAL ends; the next fetch is
//    sent before a chunk is written, so the network and the local fdatasync overlap.
//  - A lost connection (the primary's actor goes down, or no answer for ten seconds: the
//    primary answers an idle fetch within a second) is retried every second from the
//    flushed position; nothing received is lost by a reconnect.
//  - Its reports to the primary (standby_feedback: written, flushed, replayed) go after
//    each chunk is stored, with each heartbeat, and whenever redo has replayed all that was
//    flushed (storage::received_wal's caught-up callback), so remote_apply commits are
//    acknowledged as soon as the standby applied them.
//  - A refusal (another system, another generation, WAL no longer on the primary) stops
//    streaming for good and is kept in standby_state::error() for the status views.
//  - Once the engine failed (redo stopped on WAL it cannot read back, or storing WAL
//    failed) it stores no more WAL and confirms no further flush: a stopped standby does
//    not let its primary acknowledge commits it could not promote with.
//
// It writes and fsyncs WAL (blocking) on a scheduler thread, not detached: a detached
// actor's thread lives until the last reference to the actor is gone, and CAF's network
// layer can keep one past the actor's end, so that the actor system's shutdown waited for
// it forever (a refused or stopped standby's close hung, about once in a hundred). On a
// standby the scheduler's threads have little else to run. It never blocks in a network
// call: connections are requested from the middleman actor with a timeout.
#pragma once

#include "actors/context.hpp"
#include "messages/interfaces.hpp"
#include "storage/received_wal.hpp"

#include <caf/actor_system.hpp>

namespace tidemark::actors {

struct receiver_options {
  std::string host;
  std::uint16_t port = 0;
  messages::standby_position identity; // name, system, generation
};

messages::wal_receiver_actor spawn_wal_receiver(caf::actor_system& system, context& ctx,
                                                storage::received_wal& arrival,
                                                receiver_options options);

} // namespace tidemark::actors
