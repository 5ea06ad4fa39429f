// A C++20 application's source: test_consumer.py compiles it with
// `g++ -std=c++20 $(pkg-config --cflags tidemark)`. The flags pkg-config gives must leave the
// application's language standard alone (a -std=c++17 among them would win, being last).
#include <tidemark/database.hpp>

static_assert(__cplusplus >= 202002L,
              "pkg-config's Cflags for tidemark turned a C++20 build into an older standard");

int main() { return tidemark::max_relation > 0 ? 0 : 1; }
