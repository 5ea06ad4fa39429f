// Typed actor interfaces, one alias per role. The replies_to/reacts_to spelling is CAF
// 0.17's; keeping every interface here makes a move to CAF 0.18+ a one-file change.
// Self-messages an actor uses for its own steps (flush, step, tick) are part of its
// interface because typed actors can only receive what their interface names.
#pragma once

#include "messages/type_ids.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace tidemark::messages {

/// Group commit: answers flush requests once WAL is durable past them, and starts syncs
/// for the flushes sessions want (they wait on the WAL itself).
using wal_writer_actor =
  caf::typed_actor<caf::replies_to<flush_request>::with<flush_done>, caf::reacts_to<flush_wanted>,
                   caf::reacts_to<flush_atom>, caf::reacts_to<tick_atom>>;

/// One of the wal_writer's syncers: makes written-out WAL durable (one fdatasync per
/// segment), several syncers at once.
using wal_syncer_actor = caf::typed_actor<caf::replies_to<wal_sync_request>::with<flush_done>>;

/// The one owner of fsync requests: absorbs registrations, runs the checkpoint's sync phase,
/// fsyncs on demand and tells the doublewrite batcher when its files were covered (D2).
/// tick_atom: the next piece of its paced write-back sweep. (sync_step_atom, generation):
/// the sync phase's next step, ignored once a re-plan or hurry made a newer one. sync_deadline:
/// the checkpointer shortens the running phase. hurry_atom: finish the running sync phase
/// unpaced (a shutdown, an immediate checkpoint or too much WAL is waiting).
using sync_worker_actor = caf::typed_actor<
  caf::reacts_to<sync_register>, caf::reacts_to<sync_forget>,
  caf::replies_to<sync_phase_request>::with<sync_phase_done>, caf::reacts_to<sync_notify>,
  caf::replies_to<synced_chunks_request>::with<chunks_synced>, caf::reacts_to<sync_now>,
  caf::reacts_to<sync_deadline>, caf::reacts_to<sync_step_atom, std::uint64_t>,
  caf::reacts_to<tick_atom>, caf::reacts_to<hurry_atom>, caf::reacts_to<settings_reload>>;

/// The doublewrite ring's owner: writes handed-over batches to the ring, fsyncs it once for
/// the batches that arrived together (drain_atom: its own drain message; (gathered_atom,
/// generation): the wait for small batches to share a ring fdatasync is over), writes the
/// pages in place, and frees chunks once their files are fsynced.
using dw_batcher_actor =
  caf::typed_actor<caf::reacts_to<dw_batch_ready>,
                   caf::replies_to<dw_flush_request>::with<dw_flushed>,
                   caf::reacts_to<flush_atom, std::uint32_t>, caf::reacts_to<drain_atom>,
                   caf::reacts_to<gathered_atom, std::uint64_t>, caf::reacts_to<settings_reload>>;

/// Anyone who wants to watch checkpoints: receives a checkpoint_event per phase change and
/// write step.
using checkpoint_observer_actor = caf::typed_actor<caf::reacts_to<checkpoint_event>>;

/// Checkpoint schedule: time and WAL-volume triggers (tick), explicit requests, the write
/// phase's steps (write_step_atom), and subscriptions to phase events.
using checkpointer_actor =
  caf::typed_actor<caf::replies_to<checkpoint_request>::with<checkpoint_done>,
                   caf::reacts_to<write_step_atom>, caf::reacts_to<tick_atom>,
                   caf::reacts_to<subscribe_atom, checkpoint_observer_actor>,
                   caf::reacts_to<settings_reload>>;

/// LRU cleaning ahead of the clock hand: a round per tick (ticks carry a generation so a
/// wake-up makes older pending ticks stale); wake ends hibernation.
using bgwriter_actor = caf::typed_actor<caf::reacts_to<tick_atom, std::uint64_t>,
                                        caf::reacts_to<wake_atom>, caf::reacts_to<settings_reload>>;

/// A primary's WAL sender, published on replication_listen for standbys and base backups
/// (messages/replication.hpp): streams durable WAL on request, keeps what its standbys
/// still need, serves base backups. wake_atom: WAL became durable (the WAL's flush
/// listener). (standbys_atom): the standbys it knows, for status views. generation_probe:
/// which system and generation it serves (another primary asking whether it is an old one).
using wal_sender_actor = caf::typed_actor<
  caf::replies_to<stream_open>::with<primary_position>, caf::replies_to<wal_fetch>::with<wal_chunk>,
  caf::reacts_to<standby_feedback>, caf::replies_to<backup_begin>::with<backup_manifest>,
  caf::replies_to<file_fetch>::with<file_chunk>, caf::replies_to<backup_finish>::with<backup_end>,
  caf::replies_to<standbys_atom>::with<std::vector<standby_view>>, caf::reacts_to<wake_atom>,
  caf::reacts_to<tick_atom>, caf::replies_to<generation_probe>::with<generation_answer>>;

/// A standby's WAL receiver: tick_atom connects (or retries after a lost connection);
/// wake_atom: redo has replayed everything flushed (report it now). It is stopped with an
/// exit message.
using wal_receiver_actor = caf::typed_actor<caf::reacts_to<tick_atom>, caf::reacts_to<wake_atom>>;

} // namespace tidemark::messages
