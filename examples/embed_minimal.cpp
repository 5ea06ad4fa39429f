// The smallest useful embedding of Tidemark: create a data directory, change pages in
// atomic transactions, commit durably, reopen (recovering if the last stop was a crash)
// and read the result back.   usage: embed_minimal [DIR]
#include "runtime/database.hpp"

#include <cstdio>
#include <filesystem>

using tidemark::runtime::database;

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "/tmp/tidemark-embed-example";
  std::filesystem::remove_all(dir);
  database::create(dir, {"shared_buffers=1MB", "log_checkpoints=off"},
                   [](auto&, const auto&) {}); // no initial pages

  const tidemark::storage::page_id counters{10, 0}; // relation 10, block 0
  const std::uint16_t hits = 64, misses = 72;        // two i64 fields on that page
  {
    auto db = database::open(dir, {});
    auto session = db->open_session();
    for (int i = 0; i < 100; ++i) {
      session.begin();
      session.add_i64(counters, hits, 1);
      if (i % 10 == 0)
        session.add_i64(counters, misses, 1); // same transaction: both or neither
      const char note[] = "committed";
      session.append_row(11, note, sizeof note);   // an append-only log relation
      session.commit();                            // durable when it returns
    }
    db->close(); // shutdown checkpoint
  }

  auto db = database::open(dir, {}); // runs crash recovery first if needed
  auto session = db->open_session();
  session.begin();
  std::printf("hits=%lld misses=%lld (recovery needed: %s)\n",
              static_cast<long long>(session.read_i64(counters, hits)),
              static_cast<long long>(session.read_i64(counters, misses)),
              db->recovery().needed ? "yes" : "no");
  session.rollback();
  db->close();
  return 0;
}
