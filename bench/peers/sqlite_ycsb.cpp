// sqlite_ycsb: the durable YCSB driver for SQLite, for bench/ycsb.sh (not a test).
// Commands and records: ycsb_common.hpp.
//
// Configuration: DIR/ycsb.db, one table usertable(key TEXT PRIMARY KEY, value BLOB)
// WITHOUT ROWID (the records in the primary key's B-tree, as the other stores keep
// them); WAL journal mode, synchronous=FULL (every commit fsyncs the WAL), the default
// page size and auto-checkpoint; one connection per thread, each with a page cache of
// --cache / threads (SQLite's caches are private to a connection, and in WAL mode a
// connection drops its cache whenever another has committed, so reads are mostly served
// by the OS page cache). Writes are BEGIN IMMEDIATE ... COMMIT, so writers serialize on
// SQLite's one write lock; a busy connection waits in 100 µs naps. Reads and scans run in
// autocommit. Debian's SQLite is built with SQLITE_SECURE_DELETE (deleted content is
// overwritten with zeros), which costs writes that free space; this workload deletes
// nothing.
#include "ycsb_common.hpp"

#include <sqlite3.h>

#include <memory>
#include <sys/stat.h>

namespace {

[[noreturn]] void fail(sqlite3* db, const std::string& what) {
  ycsb::die("sqlite " + what + ": " + sqlite3_errmsg(db));
}

int busy_wait(void*, int count) { // 100 µs naps, give up after about 30 s
  if (count > 300000)
    return 0;
  std::this_thread::sleep_for(std::chrono::microseconds(100));
  return 1;
}

void exec(sqlite3* db, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK)
    fail(db, sql);
}

sqlite3* open_db(const std::string& path, bool create, std::size_t cache_bytes) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK)
    fail(db, "open " + path);
  sqlite3_busy_handler(db, busy_wait, nullptr);
  exec(db, "PRAGMA journal_mode=WAL");
  exec(db, "PRAGMA synchronous=FULL");
  exec(db, ("PRAGMA cache_size=-" + std::to_string(cache_bytes / 1024)).c_str());
  return db;
}

class statement {
public:
  statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) != SQLITE_OK)
      fail(db, sql);
  }
  ~statement() { sqlite3_finalize(st_); }
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;
  statement& bind(int i, const std::string& text) {
    sqlite3_bind_blob(st_, i, text.data(), int(text.size()), SQLITE_TRANSIENT);
    return *this;
  }
  statement& bind_count(int i, std::size_t count) {
    sqlite3_bind_int64(st_, i, sqlite3_int64(count));
    return *this;
  }
  bool step() { // true on a row
    int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW)
      return true;
    if (rc != SQLITE_DONE)
      fail(db_, "step");
    return false;
  }
  std::string column(int i) {
    return std::string(static_cast<const char*>(sqlite3_column_blob(st_, i)),
                       std::size_t(sqlite3_column_bytes(st_, i)));
  }
  void reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }

private:
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
};

// Where the database is and each connection's page cache.
struct database {
  std::string path;
  std::size_t cache_bytes;
};

class sqlite_worker final : public ycsb::worker {
public:
  explicit sqlite_worker(const database& d)
    : db_(open_db(d.path, false, d.cache_bytes)),
      get_(db_, "SELECT value FROM usertable WHERE key = ?"),
      put_(db_, "UPDATE usertable SET value = ?2 WHERE key = ?1"),
      insert_(db_, "INSERT INTO usertable (key, value) VALUES (?1, ?2)"),
      scan_(db_, "SELECT key, value FROM usertable WHERE key >= ? ORDER BY key LIMIT ?"),
      begin_(db_, "BEGIN IMMEDIATE"), commit_(db_, "COMMIT") {}
  ~sqlite_worker() override { sqlite3_close(db_); }

  std::optional<std::string> read(const std::string& key) override {
    std::optional<std::string> v;
    if (get_.bind(1, key).step())
      v = get_.column(0);
    get_.reset();
    return v;
  }
  void update(const std::string& key, const std::string& value) override {
    transaction([&] { write(put_, key, value); });
  }
  void insert(const std::string& key, const std::string& value) override {
    transaction([&] { write(insert_, key, value); });
  }
  std::size_t
  scan(const std::string& start, std::size_t count,
       const std::function<void(const std::string&, const std::string&)>& visit) override {
    scan_.bind(1, start).bind_count(2, count);
    std::size_t seen = 0;
    while (scan_.step()) {
      visit(scan_.column(0), scan_.column(1));
      ++seen;
    }
    scan_.reset();
    return seen;
  }
  void read_modify_write(const std::string& key,
                         const std::function<std::string(const std::string&)>& change) override {
    transaction([&] {
      std::optional<std::string> old = read(key);
      if (!old)
        ycsb::die("read-modify-write: key " + key + " is missing");
      write(put_, key, change(*old));
    });
  }
  void insert_batch(const std::vector<std::pair<std::string, std::string>>& batch) override {
    transaction([&] {
      for (const auto& [key, value] : batch)
        write(insert_, key, value);
    });
  }

private:
  template <class Body>
  void transaction(Body body) {
    begin_.step();
    begin_.reset();
    body();
    commit_.step();
    commit_.reset();
  }
  static void write(statement& st, const std::string& key, const std::string& value) {
    st.bind(1, key).bind(2, value).step();
    st.reset();
  }

  sqlite3* db_;
  statement get_, put_, insert_, scan_, begin_, commit_;
};

} // namespace

int main(int argc, char** argv) {
  return ycsb::main_of("sqlite", argc, argv, [](const ycsb::options& o) {
    std::string path = o.dir + "/ycsb.db";
    if (o.command == "load") {
      if (::mkdir(o.dir.c_str(), 0755) != 0)
        ycsb::die("cannot create " + o.dir);
      sqlite3* db = open_db(path, true, o.cache_bytes);
      exec(db, "CREATE TABLE usertable (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID");
      sqlite3_close(db);
    }
    std::size_t per_connection = o.cache_bytes / std::size_t(o.threads);
    std::string config = "WAL, synchronous=FULL, WITHOUT ROWID table, a connection per thread "
                         "with a " +
                         std::to_string(per_connection >> 20) +
                         " MB page cache each, BEGIN IMMEDIATE writes; SQLite " +
                         sqlite3_libversion() + " built with SQLITE_SECURE_DELETE";
    return ycsb::workers_of<sqlite_worker>(std::make_shared<database>(
                                             database{path, per_connection}),
                                           config);
  });
}
