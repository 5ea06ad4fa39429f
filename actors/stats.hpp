// stats: collects benchmark clients' progress reports (committed transactions and their latency
// histograms, sent in batches about every 100 ms) and answers snapshots for progress lines
// and the final report. It holds no durable state; if it dies only reporting is lost.
#pragma once

#include "messages/interfaces.hpp"

#include <caf/actor_system.hpp>

namespace tidemark::actors {

messages::stats_actor spawn_stats(caf::actor_system& system);

} // namespace tidemark::actors
