// stats: see stats.hpp.
#include "actors/stats.hpp"

#include <caf/all.hpp>

namespace tidemark::actors {

namespace {

using namespace messages;

struct stats_state {
  stats_snapshot totals;
  static inline const char* name = "stats";
};

stats_actor::behavior_type stats(stats_actor::stateful_pointer<stats_state> self) {
  return {
    [=](progress_report& report) {
      self->state.totals.transactions += report.transactions;
      self->state.totals.latency.merge(report.latency);
    },
    [=](get_atom) -> stats_snapshot { return self->state.totals; },
  };
}

} // namespace

stats_actor spawn_stats(caf::actor_system& system) { return system.spawn(stats); }

} // namespace tidemark::actors
