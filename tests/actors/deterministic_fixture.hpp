// A doctest fixture for deterministic actor tests: an actor system on CAF's testing
// scheduler (one job at a time, in a reproducible order, time advanced by hand), with
// Tidemark's message types registered. Actors under test must be spawned non-detached.
#pragma once

#include "messages/type_ids.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>

namespace tidemark::test {

struct deterministic_config : caf::actor_system_config {
  deterministic_config() {
    set("scheduler.policy", caf::atom("testing"));
    set("logger.verbosity", caf::atom("quiet"));
    add_message_types<caf::id_block::tidemark>();
  }
};

struct deterministic_fixture {
  deterministic_config config;
  caf::actor_system system{config};
  caf::scheduler::test_coordinator& scheduler =
    dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler());

  /// Runs every ready job until none is left; returns how many ran.
  std::size_t run() { return scheduler.run(); }

  /// Runs the next ready job only (for example a spawned client sending its request),
  /// leaving what it caused queued.
  void run_one_job() { scheduler.run_once(); }
};

} // namespace tidemark::test
