// The two real I/O engines as types, for the tests whose every body runs against both
// (TEST_CASE_TEMPLATE(..., M, sync_method, uring_method)): M::method makes the engine,
// M::name is the name it gives itself. The test names end in <sync_method> or
// <uring_method>.
#pragma once

#include "storage/io_engine.hpp"

#include <doctest/doctest.h>

namespace tidemark::storage::test {

struct sync_method {
  static constexpr io_method method = io_method::sync;
  static constexpr const char* name = "sync";
};
struct uring_method {
  static constexpr io_method method = io_method::io_uring;
  static constexpr const char* name = "io_uring";
};

} // namespace tidemark::storage::test

TYPE_TO_STRING_AS("sync_method", tidemark::storage::test::sync_method);
TYPE_TO_STRING_AS("uring_method", tidemark::storage::test::uring_method);
