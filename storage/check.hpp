// Always-on invariant checks. TIDEMARK_CHECK(condition, rule) costs one branch and stays
// in every build (assert() is compiled out of Release and RelWithDebInfo): a violated
// invariant aborts at once with file, line, the condition and the rule it breaks, instead
// of going on with state nothing can trust, or throwing inside an actor where nothing
// catches it. For broken invariants only; bad input and I/O failures are exceptions
// (errors.hpp), and an application's mistake never reaches one of these.
//
//   TIDEMARK_CHECK(condition, rule)                  always on
//   TIDEMARK_CHECK_DETAIL(condition, rule, detail)   always on; `detail` (anything a
//                                                    std::string is made from) is built only
//                                                    when the check fails
//   TIDEMARK_UNREACHABLE(rule)                       a branch that no valid state reaches
//   TIDEMARK_DEBUG_CHECK(condition, rule)            hot loops only: on unless NDEBUG
//   checked_downcast<T>(base, rule)                  a static_cast the check confirms
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tidemark::storage::detail {

[[noreturn]] inline void check_failed(const char* file, int line, const char* condition,
                                      const char* rule, const std::string& detail = {}) {
  std::fprintf(stderr, "tidemark: invariant violated at %s:%d: %s (%s)%s%s\n", file, line,
               condition, rule, detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stderr);
  std::abort();
}

} // namespace tidemark::storage::detail

namespace tidemark::storage {

// The object behind `base` as the derived type the caller's configuration guarantees (for
// example the doublewrite victim writer in doublewrite mode); a wrong guess aborts instead
// of reading a different object as T.
template <class T, class Base>
T& checked_downcast(Base* base, const char* rule) {
  T* derived = dynamic_cast<T*>(base);
  if (derived == nullptr)
    detail::check_failed(__FILE__, __LINE__, "dynamic_cast succeeds", rule);
  return *derived;
}

} // namespace tidemark::storage

#define TIDEMARK_CHECK(condition, rule) \
  ((condition) ? static_cast<void>(0) \
               : ::tidemark::storage::detail::check_failed(__FILE__, __LINE__, #condition, rule))

#define TIDEMARK_CHECK_DETAIL(condition, rule, what) \
  ((condition) ? static_cast<void>(0) \
               : ::tidemark::storage::detail::check_failed(__FILE__, __LINE__, #condition, rule, \
                                                           std::string(what)))

#define TIDEMARK_UNREACHABLE(rule) \
  ::tidemark::storage::detail::check_failed(__FILE__, __LINE__, "unreachable", rule)

#ifdef NDEBUG
#define TIDEMARK_DEBUG_CHECK(condition, rule) static_cast<void>(0)
#else
#define TIDEMARK_DEBUG_CHECK(condition, rule) TIDEMARK_CHECK(condition, rule)
#endif
