// The smallest useful embedding of Tidemark: create a data directory, change pages in
// atomic transactions, commit durably, reopen (recovering if the last stop was a crash)
// and read the result back.   usage: embed_minimal [DIR]
#include <tidemark/database.hpp>

#include <cstdio>
#include <filesystem>

using tidemark::database;

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "/tmp/tidemark-embed-example";
  std::filesystem::remove_all(dir);
  tidemark::create_options create;
  create.settings = {"shared_buffers=1MB", "log_checkpoints=off"};
  database::create(dir, create); // no initial data

  const tidemark::page_id counters{10, 0};    // relation 10, block 0
  const std::uint32_t hits = 64, misses = 72; // two i64 fields on that page
  {
    auto db = database::open(dir);
    auto session = db->open_session();
    for (int i = 0; i < 100; ++i) {
      session.begin();
      session.add_i64(counters, hits, 1);
      if (i % 10 == 0)
        session.add_i64(counters, misses, 1); // same transaction: both or neither
      const char note[] = "committed";
      session.append_row(11, note, sizeof note); // an append-only log relation
      session.commit();                          // durable when it returns
    }
    db->close(); // shutdown checkpoint
  }

  auto db = database::open(dir); // runs crash recovery first if needed
  auto session = db->open_session();
  std::printf("hits=%lld misses=%lld, %u rows logged (recovery needed: %s)\n",
              static_cast<long long>(session.read_i64(counters, hits)),
              static_cast<long long>(session.read_i64(counters, misses)),
              session.row_count({11, 0}), db->recovery().needed ? "yes" : "no");
  db->close();
  return 0;
}
