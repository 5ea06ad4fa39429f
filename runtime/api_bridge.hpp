// The library's own view behind the public API: the runtime database a public database
// wraps. For the library's tests (traces, counters, engine internals), never for
// applications: it is not installed.
#pragma once

#include "runtime/instance.hpp"

#include <tidemark/database.hpp>

namespace tidemark {

struct internal_access {
  static runtime::instance& of(database& db);
  static table make_table(std::shared_ptr<const table::state> state) {
    return table(std::move(state));
  }
};

} // namespace tidemark
