// Always-on invariant checks. TIDEMARK_CHECK(condition, rule) costs one branch and stays
// in every build (assert() is compiled out of Release and RelWithDebInfo): a violated
// invariant aborts at once with file, line, the condition and the rule it breaks, instead
// of going on with state nothing can trust. For broken invariants only; bad input and I/O
// failures are exceptions (errors.hpp).
#pragma once

#include <cstdio>
#include <cstdlib>

namespace tidemark::storage::detail {

[[noreturn]] inline void check_failed(const char* file, int line, const char* condition,
                                      const char* rule) {
  std::fprintf(stderr, "tidemark: invariant violated at %s:%d: %s (%s)\n", file, line, condition,
               rule);
  std::fflush(stderr);
  std::abort();
}

} // namespace tidemark::storage::detail

#define TIDEMARK_CHECK(condition, rule)                                                            \
  ((condition) ? static_cast<void>(0)                                                             \
               : ::tidemark::storage::detail::check_failed(__FILE__, __LINE__, #condition, rule))
