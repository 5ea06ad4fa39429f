// Typed actor interfaces, one alias per role. The replies_to/reacts_to spelling is CAF
// 0.17's; keeping every interface here makes a move to CAF 0.18+ a one-file change.
#pragma once

#include "messages/type_ids.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace tidemark::messages {

/// Group commit: answers flush requests once WAL is durable past them.
using wal_writer_actor = caf::typed_actor<caf::replies_to<flush_request>::with<flush_done>,
                                          caf::reacts_to<flush_atom>, caf::reacts_to<tick_atom>>;

/// Checkpoint schedule: time and WAL-volume triggers (tick), explicit requests.
using checkpointer_actor =
  caf::typed_actor<caf::replies_to<checkpoint_request>::with<checkpoint_done>,
                   caf::reacts_to<run_atom>, caf::reacts_to<tick_atom>>;

/// Collects backends' progress; answers snapshots.
using stats_actor = caf::typed_actor<caf::reacts_to<progress_report>,
                                     caf::replies_to<get_atom>::with<stats_snapshot>>;

/// A benchmark session: runs transactions until stopped.
using backend_actor = caf::typed_actor<caf::reacts_to<run_atom>,
                                       caf::replies_to<stop_atom>::with<backend_summary>>;

} // namespace tidemark::messages
