// The library's own view behind the public API: the runtime database a public database
// wraps. For the library's tests (traces, counters, engine internals), never for
// applications: it is not installed.
#pragma once

#include "runtime/database.hpp"

#include <tidemark/database.hpp>

namespace tidemark {

struct internal_access {
  static runtime::database& of(database& db);
};

} // namespace tidemark
