// The engine's counters as the public statistics snapshot (include/tidemark/statistics.hpp).
#pragma once

#include "runtime/engine.hpp"

#include <tidemark/statistics.hpp>

namespace tidemark {

/// Everything but `commits`, which the public sessions count.
statistics collect_statistics(runtime::engine& e);

} // namespace tidemark
