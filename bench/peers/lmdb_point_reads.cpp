// lmdb_point_reads: point reads on LMDB, the same keys as tidemark_point_reads, for
// bench/point_reads.sh (not a test).
//
//   lmdb_point_reads load -D DIR [-n KEYS]
//     creates DIR and an LMDB environment in it (map size 1 GiB, or 512 bytes a key when
//     that is more) whose unnamed database holds keys 0..KEYS-1 (default 1 000 000;
//     point_reads_common.hpp), put in key order with MDB_APPEND, 10 000 a write
//     transaction, with LMDB's default sync settings (every commit fsynced).
//   lmdb_point_reads run -D DIR [-t THREADS] [-T SECONDS] [--json FILE]
//     opens the environment, walks the database once with a cursor (every page into the
//     page cache, every entry checked), then THREADS threads (default 1) call mdb_get on
//     uniformly random keys for SECONDS (default 10), each in a read transaction of its
//     own: a thread begins one read-only transaction and, for every get, renews it, reads
//     and resets it (mdb_txn_renew / mdb_txn_reset, LMDB's idiom for frequent short
//     reads), so each get reads the latest committed snapshot, as a Tidemark get outside a
//     transaction reads the latest committed value. mdb_get returns a pointer into the
//     map: the value is checked there, not copied. Prints one JSON line.
//
// LMDB has no cache of its own: its reads go through the memory map, so through the
// operating system's page cache.
#include "point_reads_common.hpp"

#include <lmdb.h>

#include <algorithm>
#include <cerrno>
#include <sys/stat.h>

namespace {

using point_reads::die;
using point_reads::key_bytes;

void ok(int rc, const char* what) {
  if (rc != MDB_SUCCESS)
    die(std::string(what) + ": " + mdb_strerror(rc));
}

MDB_env* open_env(const std::string& dir, unsigned flags, std::uint64_t keys) {
  MDB_env* env = nullptr;
  ok(mdb_env_create(&env), "mdb_env_create");
  ok(mdb_env_set_mapsize(env, std::max<std::uint64_t>(std::uint64_t{1} << 30, keys * 512)),
     "mdb_env_set_mapsize");
  ok(mdb_env_open(env, dir.c_str(), flags, 0644), ("mdb_env_open " + dir).c_str());
  return env;
}

MDB_val val(const void* data, std::size_t size) { return MDB_val{size, const_cast<void*>(data)}; }

void load(const point_reads::options& o) {
  if (mkdir(o.dir.c_str(), 0755) != 0)
    die("mkdir " + o.dir + ": " + std::strerror(errno));
  MDB_env* env = open_env(o.dir, 0, o.keys);
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  point_reads::load_in_order(
    "lmdb", o.keys, point_reads::keys_per_commit,
    [&](const char* key, const std::string& value) {
      if (!txn) {
        ok(mdb_txn_begin(env, nullptr, 0, &txn), "mdb_txn_begin");
        ok(mdb_dbi_open(txn, nullptr, 0, &dbi), "mdb_dbi_open");
      }
      MDB_val k = val(key, key_bytes), v = val(value.data(), value.size());
      ok(mdb_put(txn, dbi, &k, &v, MDB_APPEND), "mdb_put");
    },
    [&] {
      ok(mdb_txn_commit(txn), "mdb_txn_commit");
      txn = nullptr;
    });
  mdb_env_close(env);
}

void run(const point_reads::options& o) {
  MDB_env* env = open_env(o.dir, MDB_RDONLY, 0);
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  MDB_cursor* cursor = nullptr;
  point_reads::scan_check scan;
  ok(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), "mdb_txn_begin");
  ok(mdb_dbi_open(txn, nullptr, 0, &dbi), "mdb_dbi_open");
  ok(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open");
  MDB_val k, v;
  for (int rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc != MDB_NOTFOUND;
       rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
    ok(rc, "mdb_cursor_get");
    scan.seen(static_cast<const char*>(k.mv_data), k.mv_size, v.mv_data, v.mv_size);
  }
  mdb_cursor_close(cursor);
  ok(mdb_txn_commit(txn), "mdb_txn_commit"); // keeps the dbi handle open for the readers
  if (scan.count() == 0)
    die("the LMDB database in " + o.dir + " is empty");

  struct reader {
    MDB_txn* txn;
    MDB_dbi dbi;
    void operator()(const char* key) {
      ok(mdb_txn_renew(txn), "mdb_txn_renew");
      MDB_val k = val(key, key_bytes), v;
      int rc = mdb_get(txn, dbi, &k, &v);
      if (rc == MDB_NOTFOUND)
        die("key " + std::string(key, key_bytes) + " is missing");
      ok(rc, "mdb_get");
      point_reads::check_value(key, v.mv_data, v.mv_size);
      mdb_txn_reset(txn);
    }
  };
  std::vector<MDB_txn*> txns(o.threads);
  point_reads::run_result r =
    point_reads::timed_gets(o.threads, o.seconds, scan.count(), [&](int t) {
      ok(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txns[t]), "mdb_txn_begin");
      mdb_txn_reset(txns[t]);
      return reader{txns[t], dbi};
    });
  for (MDB_txn* t : txns)
    mdb_txn_abort(t);
  MDB_stat stat;
  MDB_envinfo info;
  ok(mdb_env_stat(env, &stat), "mdb_env_stat");
  ok(mdb_env_info(env, &info), "mdb_env_info");
  std::string details = std::string("{\"read\": \"mdb_get, a read transaction renewed and reset "
                                    "per get, one per thread\", \"version\": \"") +
                        mdb_version(nullptr, nullptr, nullptr) +
                        "\", \"page_size\": " + std::to_string(stat.ms_psize) +
                        ", \"pages_used\": " + std::to_string(info.me_last_pgno + 1) +
                        ", \"depth\": " + std::to_string(stat.ms_depth) + "}";
  mdb_env_close(env);
  point_reads::emit("lmdb", scan.count(), r, details, o.json);
}

} // namespace

int main(int argc, char** argv) {
  point_reads::options o = point_reads::parse(argc, argv, false);
  if (o.command == "load")
    load(o);
  else
    run(o);
  return 0;
}
