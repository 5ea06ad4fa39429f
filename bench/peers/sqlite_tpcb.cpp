// sqlite_tpcb: pgbench's tpcb-like workload on SQLite, for bench/compare.sh (not a test).
//
//   sqlite_tpcb init  -D DIR [-s SCALE]          creates DIR/tpcb.db with pgbench's schema
//   sqlite_tpcb run   -D DIR [-c CLIENTS] [-T SECONDS] [--cache-mb MB] [--json FILE]
//   sqlite_tpcb check -D DIR [--json FILE]       balance invariant only
//
// Configuration: WAL journal mode, synchronous=FULL (every commit fsyncs the WAL), a page
// cache of --cache-mb (default 128) per connection (SQLite caches are private to a
// connection, and in WAL mode a connection drops its cache whenever another one has
// committed, so in practice reads are served by the OS page cache), default page size
// (4 KiB) and default auto-checkpoint (1000 WAL frames, PASSIVE, run by the committing
// connection). One connection and one thread per client; each transaction is
// BEGIN IMMEDIATE ... COMMIT, so writers serialize on SQLite's single write lock; a busy
// writer waits in a 100 µs sleep loop (up to 30 s) rather than SQLite's default
// millisecond back-off. SQLite has no page checksums.
//
// Measurements: latency of each transaction (BEGIN IMMEDIATE to COMMIT returned, waits for
// the write lock and any checkpoint the commit ran included); log bytes = bytes written to
// the -wal file, counted exactly by a pass-through VFS (frames are page size + 24 bytes);
// "checkpoint" pages / write / sync time = writes to and fsyncs of the main database file,
// which in WAL mode only checkpoints do (time is time spent inside those calls).
// After the run it checks sum(abalance) = sum(tbalance) = sum(bbalance) = sum(history
// delta) and that the history grew by exactly the number of committed transactions.
// Prints one JSON line.
#include "tpcb_common.hpp"

#include <sqlite3.h>

#include <filesystem>
#include <mutex>

namespace {

// ---- counting VFS: forwards everything to the default VFS, counts WAL / main-db I/O ----

struct io_counters {
  std::atomic<std::uint64_t> wal_bytes{0}, wal_writes{0}, wal_syncs{0};
  std::atomic<std::uint64_t> db_bytes{0}, db_writes{0}, db_syncs{0};
  std::atomic<std::uint64_t> db_write_ns{0}, db_sync_ns{0};
} counters;

enum file_kind { other_file, main_db_file, wal_file };

struct count_file {
  sqlite3_file base;
  file_kind kind;
  sqlite3_file* real; // the default VFS's file object, allocated right after this struct
};

sqlite3_vfs* real_vfs = nullptr;

std::uint64_t elapsed_ns(tpcb::clock_type::time_point t0) {
  return std::uint64_t(
    std::chrono::duration_cast<std::chrono::nanoseconds>(tpcb::clock_type::now() - t0).count());
}

sqlite3_file* R(sqlite3_file* f) { return reinterpret_cast<count_file*>(f)->real; }
file_kind K(sqlite3_file* f) { return reinterpret_cast<count_file*>(f)->kind; }

int c_close(sqlite3_file* f) {
  int rc = R(f)->pMethods ? R(f)->pMethods->xClose(R(f)) : SQLITE_OK;
  return rc;
}
int c_read(sqlite3_file* f, void* p, int n, sqlite3_int64 off) {
  return R(f)->pMethods->xRead(R(f), p, n, off);
}
int c_write(sqlite3_file* f, const void* p, int n, sqlite3_int64 off) {
  auto t0 = tpcb::clock_type::now();
  int rc = R(f)->pMethods->xWrite(R(f), p, n, off);
  if (K(f) == wal_file) {
    counters.wal_bytes += std::uint64_t(n);
    counters.wal_writes += 1;
  } else if (K(f) == main_db_file) {
    counters.db_bytes += std::uint64_t(n);
    counters.db_writes += 1;
    counters.db_write_ns += elapsed_ns(t0);
  }
  return rc;
}
int c_truncate(sqlite3_file* f, sqlite3_int64 size) {
  return R(f)->pMethods->xTruncate(R(f), size);
}
int c_sync(sqlite3_file* f, int flags) {
  auto t0 = tpcb::clock_type::now();
  int rc = R(f)->pMethods->xSync(R(f), flags);
  if (K(f) == wal_file)
    counters.wal_syncs += 1;
  else if (K(f) == main_db_file) {
    counters.db_syncs += 1;
    counters.db_sync_ns += elapsed_ns(t0);
  }
  return rc;
}
int c_size(sqlite3_file* f, sqlite3_int64* s) { return R(f)->pMethods->xFileSize(R(f), s); }
int c_lock(sqlite3_file* f, int l) { return R(f)->pMethods->xLock(R(f), l); }
int c_unlock(sqlite3_file* f, int l) { return R(f)->pMethods->xUnlock(R(f), l); }
int c_check(sqlite3_file* f, int* out) { return R(f)->pMethods->xCheckReservedLock(R(f), out); }
int c_fcntl(sqlite3_file* f, int op, void* arg) {
  return R(f)->pMethods->xFileControl(R(f), op, arg);
}
int c_sector(sqlite3_file* f) { return R(f)->pMethods->xSectorSize(R(f)); }
int c_devchar(sqlite3_file* f) { return R(f)->pMethods->xDeviceCharacteristics(R(f)); }
int c_shmmap(sqlite3_file* f, int pg, int sz, int ext, void volatile** pp) {
  return R(f)->pMethods->xShmMap(R(f), pg, sz, ext, pp);
}
int c_shmlock(sqlite3_file* f, int off, int n, int flags) {
  return R(f)->pMethods->xShmLock(R(f), off, n, flags);
}
void c_shmbarrier(sqlite3_file* f) { R(f)->pMethods->xShmBarrier(R(f)); }
int c_shmunmap(sqlite3_file* f, int del) { return R(f)->pMethods->xShmUnmap(R(f), del); }
int c_fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** pp) {
  return R(f)->pMethods->xFetch(R(f), off, n, pp);
}
int c_unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return R(f)->pMethods->xUnfetch(R(f), off, p);
}

const sqlite3_io_methods count_methods = {3,          c_close,  c_read,    c_write,
                                          c_truncate, c_sync,   c_size,    c_lock,
                                          c_unlock,   c_check,  c_fcntl,   c_sector,
                                          c_devchar,  c_shmmap, c_shmlock, c_shmbarrier,
                                          c_shmunmap, c_fetch,  c_unfetch};

int c_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out_flags) {
  auto* cf = reinterpret_cast<count_file*>(f);
  cf->real = reinterpret_cast<sqlite3_file*>(cf + 1);
  cf->kind = (flags & SQLITE_OPEN_WAL)       ? wal_file
             : (flags & SQLITE_OPEN_MAIN_DB) ? main_db_file
                                             : other_file;
  int rc = real_vfs->xOpen(real_vfs, name, cf->real, flags, out_flags);
  // The real methods must be version 3 (shared memory, memory mapping) for WAL mode.
  cf->base.pMethods = cf->real->pMethods ? &count_methods : nullptr;
  return rc;
}

void register_counting_vfs() {
  real_vfs = sqlite3_vfs_find(nullptr);
  if (!real_vfs)
    tpcb::die("no default SQLite VFS");
  static sqlite3_vfs vfs = *real_vfs;
  vfs.zName = "tpcbcount";
  vfs.szOsFile = int(sizeof(count_file)) + real_vfs->szOsFile;
  vfs.xOpen = c_open;
  vfs.pNext = nullptr;
  if (sqlite3_vfs_register(&vfs, 1) != SQLITE_OK)
    tpcb::die("cannot register the counting VFS");
}

// ---- helpers ----

void check(sqlite3* db, int rc, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
    tpcb::die(std::string(what) + ": " + sqlite3_errmsg(db));
}

void exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = std::string(sql) + ": " + (err ? err : "?");
    sqlite3_free(err);
    tpcb::die(msg);
  }
}

std::int64_t query_i64(sqlite3* db, const char* sql) {
  sqlite3_stmt* st = nullptr;
  check(db, sqlite3_prepare_v2(db, sql, -1, &st, nullptr), sql);
  int rc = sqlite3_step(st);
  check(db, rc, sql);
  std::int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  return v;
}

sqlite3* open_db(const std::string& path, bool create) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, "tpcbcount") != SQLITE_OK)
    tpcb::die("open " + path + ": " + (db ? sqlite3_errmsg(db) : "?"));
  return db;
}

int busy_wait(void*, int count) { // 100 µs naps, give up after ~30 s
  if (count > 300000)
    return 0;
  std::this_thread::sleep_for(std::chrono::microseconds(100));
  return 1;
}

using sums = tpcb::balance_sums;

sums read_sums(sqlite3* db) {
  sums s;
  s.accounts = query_i64(db, "SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts");
  s.tellers = query_i64(db, "SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers");
  s.branches = query_i64(db, "SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches");
  s.history = query_i64(db, "SELECT coalesce(sum(delta), 0) FROM pgbench_history");
  s.history_rows = query_i64(db, "SELECT count(*) FROM pgbench_history");
  return s;
}

void init(const tpcb::options& o) {
  std::filesystem::create_directories(o.dir);
  std::string path = o.dir + "/tpcb.db";
  for (const char* suffix : {"", "-wal", "-shm"})
    std::filesystem::remove(path + suffix);
  sqlite3* db = open_db(path, true);
  exec(db, "PRAGMA journal_mode=WAL");
  exec(db, "PRAGMA synchronous=OFF"); // bulk load only; runs use FULL
  exec(db, "CREATE TABLE pgbench_branches (bid INTEGER PRIMARY KEY, bbalance INTEGER NOT NULL, "
           "filler TEXT);"
           "CREATE TABLE pgbench_tellers (tid INTEGER PRIMARY KEY, bid INTEGER NOT NULL, tbalance "
           "INTEGER NOT NULL, filler TEXT);"
           "CREATE TABLE pgbench_accounts (aid INTEGER PRIMARY KEY, bid INTEGER NOT NULL, abalance "
           "INTEGER NOT NULL, filler TEXT);"
           "CREATE TABLE pgbench_history (tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER, "
           "mtime INTEGER, filler TEXT);");
  exec(db, "BEGIN");
  // As pgbench -i: branch and teller fillers NULL, account filler char(84) (blank padded).
  for (std::int64_t b = 1; b <= o.scale; ++b)
    exec(db, ("INSERT INTO pgbench_branches VALUES (" + std::to_string(b) + ", 0, NULL)").c_str());
  for (std::int64_t t = 1; t <= tpcb::tellers_per_branch * o.scale; ++t)
    exec(db, ("INSERT INTO pgbench_tellers VALUES (" + std::to_string(t) + ", " +
              std::to_string((t - 1) / tpcb::tellers_per_branch + 1) + ", 0, NULL)")
               .c_str());
  sqlite3_stmt* ins = nullptr;
  check(db,
        sqlite3_prepare_v2(db, "INSERT INTO pgbench_accounts VALUES (?1, ?2, 0, ?3)", -1, &ins,
                           nullptr),
        "prepare");
  const std::string filler(84, ' ');
  std::int64_t n = tpcb::accounts_per_branch * o.scale;
  for (std::int64_t a = 1; a <= n; ++a) {
    sqlite3_bind_int64(ins, 1, a);
    sqlite3_bind_int64(ins, 2, (a - 1) / tpcb::accounts_per_branch + 1);
    sqlite3_bind_text(ins, 3, filler.data(), int(filler.size()), SQLITE_STATIC);
    check(db, sqlite3_step(ins), "insert account");
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  exec(db, "COMMIT");
  exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  sqlite3_close(db);
  std::fprintf(stderr, "sqlite_tpcb: %s loaded at scale %d (%" PRId64 " accounts)\n", path.c_str(),
               o.scale, n);
}

struct client {
  sqlite3* db = nullptr;
  sqlite3_stmt *begin, *commit, *rollback, *upd_a, *sel_a, *upd_t, *upd_b, *ins_h;
};

void run(const tpcb::options& o) {
  std::string path = o.dir + "/tpcb.db";
  if (!std::filesystem::exists(path))
    tpcb::die(path + " does not exist (run init first)");
  int scale;
  sums before;
  {
    sqlite3* db = open_db(path, false);
    scale = int(query_i64(db, "SELECT count(*) FROM pgbench_branches"));
    before = read_sums(db);
    sqlite3_close(db);
  }
  std::vector<client> clients(o.clients);
  auto setup = [&](int c) {
    client& cl = clients[c];
    cl.db = open_db(path, false);
    // Before the pragmas: another client's connection may hold the lock while they run.
    sqlite3_busy_handler(cl.db, busy_wait, nullptr);
    exec(cl.db, "PRAGMA synchronous=FULL");
    exec(cl.db, ("PRAGMA cache_size=-" + std::to_string(o.cache_mb * 1024)).c_str());
    auto prep = [&](const char* sql) {
      sqlite3_stmt* st = nullptr;
      check(cl.db, sqlite3_prepare_v3(cl.db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr),
            sql);
      return st;
    };
    cl.begin = prep("BEGIN IMMEDIATE");
    cl.commit = prep("COMMIT");
    cl.rollback = prep("ROLLBACK");
    cl.upd_a = prep("UPDATE pgbench_accounts SET abalance = abalance + ?1 WHERE aid = ?2");
    cl.sel_a = prep("SELECT abalance FROM pgbench_accounts WHERE aid = ?1");
    cl.upd_t = prep("UPDATE pgbench_tellers SET tbalance = tbalance + ?1 WHERE tid = ?2");
    cl.upd_b = prep("UPDATE pgbench_branches SET bbalance = bbalance + ?1 WHERE bid = ?2");
    cl.ins_h =
      prep("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (?1, ?2, ?3, ?4, ?5)");
  };
  auto txn = [&](int c, std::mt19937_64& rng) -> unsigned {
    client& cl = clients[c];
    tpcb::input in = tpcb::random_input(rng, scale);
    unsigned retries = 0;
    for (;;) {
      auto step = [&](sqlite3_stmt* st) {
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        return rc;
      };
      int rc = step(cl.begin);
      if (rc == SQLITE_BUSY) {
        ++retries;
        continue;
      }
      check(cl.db, rc, "BEGIN IMMEDIATE");
      sqlite3_bind_int64(cl.upd_a, 1, in.delta);
      sqlite3_bind_int64(cl.upd_a, 2, in.aid);
      check(cl.db, step(cl.upd_a), "update account");
      sqlite3_bind_int64(cl.sel_a, 1, in.aid);
      rc = sqlite3_step(cl.sel_a);
      check(cl.db, rc, "select account");
      if (rc == SQLITE_ROW)
        (void)sqlite3_column_int64(cl.sel_a, 0);
      sqlite3_reset(cl.sel_a);
      sqlite3_bind_int64(cl.upd_t, 1, in.delta);
      sqlite3_bind_int64(cl.upd_t, 2, in.tid);
      check(cl.db, step(cl.upd_t), "update teller");
      sqlite3_bind_int64(cl.upd_b, 1, in.delta);
      sqlite3_bind_int64(cl.upd_b, 2, in.bid);
      check(cl.db, step(cl.upd_b), "update branch");
      sqlite3_bind_int64(cl.ins_h, 1, in.tid);
      sqlite3_bind_int64(cl.ins_h, 2, in.bid);
      sqlite3_bind_int64(cl.ins_h, 3, in.aid);
      sqlite3_bind_int64(cl.ins_h, 4, in.delta);
      sqlite3_bind_int64(cl.ins_h, 5, tpcb::now_epoch_us());
      check(cl.db, step(cl.ins_h), "insert history");
      rc = step(cl.commit);
      if (rc == SQLITE_BUSY) { // cannot happen with BEGIN IMMEDIATE in WAL mode; be safe
        step(cl.rollback);
        ++retries;
        continue;
      }
      check(cl.db, rc, "COMMIT");
      return retries;
    }
  };
  // Counters cover the timed run only (opening connections reads, never writes).
  tpcb::run_result r = tpcb::run_clients(o.clients, o.seconds, setup, txn);
  std::uint64_t wal_bytes = counters.wal_bytes, wal_syncs = counters.wal_syncs;
  std::uint64_t db_bytes = counters.db_bytes, db_writes = counters.db_writes,
                db_syncs = counters.db_syncs;
  double db_write_ms = double(counters.db_write_ns) / 1e6,
         db_sync_ms = double(counters.db_sync_ns) / 1e6;
  int page_size = int(query_i64(clients[0].db, "PRAGMA page_size"));
  for (client& cl : clients) {
    for (sqlite3_stmt* st :
         {cl.begin, cl.commit, cl.rollback, cl.upd_a, cl.sel_a, cl.upd_t, cl.upd_b, cl.ins_h})
      sqlite3_finalize(st);
    sqlite3_close(cl.db);
  }
  sqlite3* db = open_db(path, false);
  sums after = read_sums(db);
  sqlite3_close(db);
  bool ok = after.equal() &&
            after.history_rows - before.history_rows == std::int64_t(r.transactions);
  double n = double(std::max<std::uint64_t>(r.transactions, 1));
  tpcb::emit(tpcb::json_line()
               .str("system", "sqlite")
               .str("version", sqlite3_libversion())
               .num("tps", double(r.transactions) / r.duration_s)
               .u64("transactions", r.transactions)
               .u64("retries", r.retries)
               .num("duration_s", r.duration_s)
               .i64("clients", o.clients)
               .i64("scale", scale)
               .i64("cache_mb_per_connection", o.cache_mb)
               .i64("page_size", page_size)
               .raw("latency_ms", tpcb::latency_json(r))
               .u64("log_bytes", wal_bytes)
               .num("log_bytes_per_transaction", double(wal_bytes) / n)
               .str("log_measure", "bytes written to the -wal file (frames of page size + 24), "
                                   "counted by a VFS shim")
               .u64("wal_fsyncs", wal_syncs)
               .num("checkpoint_pages_written", double(db_bytes) / page_size)
               .u64("checkpoint_write_calls", db_writes)
               .u64("checkpoint_fsyncs", db_syncs)
               .num("checkpoint_write_ms", db_write_ms)
               .num("checkpoint_sync_ms", db_sync_ms)
               .raw("sums", after.json())
               .boolean("invariant_ok", ok)
               .text(),
             o.json);
  if (!ok)
    std::exit(1);
}

void check_only(const tpcb::options& o) {
  sqlite3* db = open_db(o.dir + "/tpcb.db", false);
  sums s = read_sums(db);
  sqlite3_close(db);
  tpcb::emit(tpcb::json_line()
               .str("system", "sqlite")
               .raw("sums", s.json())
               .boolean("invariant_ok", s.equal())
               .text(),
             o.json);
  if (!s.equal())
    std::exit(1);
}

} // namespace

int main(int argc, char** argv) {
  tpcb::options o = tpcb::parse(argc, argv, "");
  register_counting_vfs();
  if (o.command == "init")
    init(o);
  else if (o.command == "run")
    run(o);
  else
    check_only(o);
  return 0;
}
