// tidemark_point_reads: point reads of one cached keyed table through Tidemark's public API
// only (<tidemark/database.hpp>), for bench/point_reads.sh (not a test).
//
//   tidemark_point_reads load -D DIR [-n KEYS] [--set KEY=VALUE]...
//     creates DIR (the --set settings, e.g. shared_buffers=512MB, go to its tidemark.conf)
//     with one table "kv" holding keys 0..KEYS-1 (default 1 000 000; point_reads_common.hpp),
//     put in key order, 10 000 a transaction or fewer when max_commit_pages() says so
//     (leaves that splits leave half full); every commit durable. Closes cleanly.
//   tidemark_point_reads run -D DIR [-t THREADS] [-T SECONDS] [--json FILE]
//     opens DIR, walks the table once with a cursor (every page into the buffer pool,
//     every entry checked), then THREADS threads (default 1), one session each, call
//     session::get outside a transaction on uniformly random keys for SECONDS (default
//     10). Prints one JSON line: gets per second, and the buffers the run had to allocate
//     for pages not in the pool (0: the table stayed cached).
#include "point_reads_common.hpp"

#include <tidemark/database.hpp>

#include <algorithm>
#include <exception>
#include <optional>

namespace {

using point_reads::die;
using point_reads::key_bytes;

constexpr const char* table_name = "kv";
// What an entry takes in a leaf: its key, its value and about 16 bytes of slot and lengths.
constexpr std::size_t entry_bytes = key_bytes + point_reads::value_bytes + 16;

void load(const point_reads::options& o) {
  tidemark::create_options create;
  create.settings = o.sets;
  tidemark::database::create(o.dir, create);
  auto db = tidemark::database::open(o.dir);
  tidemark::table kv = db->create_table(table_name);
  tidemark::session s = db->open_session();
  // A commit latches every leaf it changes, the table's meta page and one page more.
  std::uint64_t per_leaf_half_full = db->page_size() / entry_bytes / 2;
  std::uint64_t per_commit =
    std::min<std::uint64_t>(point_reads::keys_per_commit,
                            std::max<std::uint64_t>(1, (db->max_commit_pages() - 2) *
                                                         per_leaf_half_full));
  point_reads::load_in_order(
    "tidemark", o.keys, per_commit,
    [&](const char* key, const std::string& value) {
      if (!s.in_transaction())
        s.begin();
      s.put(kv, std::string_view(key, key_bytes), value);
    },
    [&] { s.commit(); });
  db->close();
}

void run(const point_reads::options& o) {
  auto db = tidemark::database::open(o.dir);
  tidemark::table kv = db->open_table(table_name);
  point_reads::scan_check scan;
  {
    tidemark::session s = db->open_session();
    tidemark::table_cursor c = s.cursor(kv);
    while (c.next())
      scan.seen(c.key().data(), c.key().size(), c.value().data(), c.value().size());
  }
  if (scan.count() == 0)
    die("table \"" + std::string(table_name) + "\" in " + o.dir + " is empty");
  std::uint64_t allocated_before = db->stats().buffers.allocated;
  point_reads::run_result r = point_reads::timed_gets(o.threads, o.seconds, scan.count(), [&](int) {
    return [s = db->open_session(), kv](const char* key) mutable {
      try {
        std::optional<std::string> value = s.get(kv, std::string_view(key, key_bytes));
        if (!value)
          die("key " + std::string(key, key_bytes) + " is missing");
        point_reads::check_value(key, value->data(), value->size());
      } catch (const std::exception& e) {
        die(std::string("session::get: ") + e.what());
      }
    };
  });
  std::uint64_t allocated = db->stats().buffers.allocated - allocated_before;
  std::uint64_t table_pages = 0;
  for (const tidemark::table_info& t : db->tables())
    if (t.name == table_name)
      table_pages = t.pages;
  std::string details = "{\"read\": \"session::get outside a transaction, a session per thread\", "
                        "\"shared_buffers\": \"" +
                        db->setting("shared_buffers") +
                        "\", \"page_size\": " + std::to_string(db->page_size()) +
                        ", \"table_pages\": " + std::to_string(table_pages) +
                        ", \"buffers_allocated_during_run\": " + std::to_string(allocated) + "}";
  db->close();
  point_reads::emit("tidemark", scan.count(), r, details, o.json);
}

} // namespace

int main(int argc, char** argv) {
  point_reads::options o = point_reads::parse(argc, argv, true);
  try {
    if (o.command == "load")
      load(o);
    else
      run(o);
  } catch (const std::exception& e) {
    die(o.command + " -D " + o.dir + ": " + e.what());
  }
  return 0;
}
