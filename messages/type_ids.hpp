// The project's one CAF type-ID block: every message type and atom, registered together
// with cfg.add_message_types<caf::id_block::tidemark>(). Atom texts stay within CAF 0.17's
// ten characters.
#pragma once

#include "messages/replication.hpp"
#include "messages/types.hpp"

#include <caf/atom.hpp>
#include <caf/type_id.hpp>

CAF_BEGIN_TYPE_ID_BLOCK(tidemark, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::checkpoint_done))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::checkpoint_event))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::checkpoint_request))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::flush_done))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::dw_batch_ready))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::dw_flush_request))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::dw_flushed))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::file_ref))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::chunks_synced))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::file_written))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::flush_request))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::flush_wanted))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::sync_deadline))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::settings_reload))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::sync_forget))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::sync_notify))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::synced_chunks_request))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::sync_now))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::sync_phase_done))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::sync_phase_request))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::sync_register))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::wal_sync_request))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::standby_position))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::stream_open))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::primary_position))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::wal_fetch))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::wal_chunk))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::standby_feedback))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::standby_view))
  CAF_ADD_TYPE_ID(tidemark, (std::vector<tidemark::messages::standby_view>))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::backup_begin))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::backup_file))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::backup_manifest))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::file_fetch))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::file_chunk))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::backup_finish))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::backup_end))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::standby_peer))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::generation_probe))
  CAF_ADD_TYPE_ID(tidemark, (tidemark::messages::generation_answer))
CAF_END_TYPE_ID_BLOCK(tidemark)

CAF_ADD_ATOM(tidemark, tidemark::messages, flush_atom, "flush")
CAF_ADD_ATOM(tidemark, tidemark::messages, tick_atom, "tick")
CAF_ADD_ATOM(tidemark, tidemark::messages, write_step_atom, "writestep")
CAF_ADD_ATOM(tidemark, tidemark::messages, sync_step_atom, "syncstep")
CAF_ADD_ATOM(tidemark, tidemark::messages, drain_atom, "drain")
CAF_ADD_ATOM(tidemark, tidemark::messages, gathered_atom, "gathered")
CAF_ADD_ATOM(tidemark, tidemark::messages, wake_atom, "wake")
CAF_ADD_ATOM(tidemark, tidemark::messages, subscribe_atom, "subscribe")
CAF_ADD_ATOM(tidemark, tidemark::messages, hurry_atom, "hurry")
CAF_ADD_ATOM(tidemark, tidemark::messages, standbys_atom, "standbys")
