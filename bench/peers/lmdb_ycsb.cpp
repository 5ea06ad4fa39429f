// lmdb_ycsb: the durable YCSB driver for LMDB, for bench/ycsb.sh (not a test).
// Commands and records: ycsb_common.hpp.
//
// Configuration: one environment in DIR with a 64 GB map (address space only) and its
// default durability: mdb_txn_commit returns after the data and the meta page are synced
// (no MDB_NOSYNC, MDB_NOMETASYNC or MDB_WRITEMAP). LMDB has one writer at a time by design,
// so concurrent updates queue for the write lock; each write is its own transaction. Its
// reads are copy-free from the memory map: a read or scan runs in a read-only transaction
// that each thread keeps and renews per operation (mdb_txn_reset / mdb_txn_renew). LMDB
// has no cache of its own: --cache does not apply (the OS page cache holds the map).
#include "ycsb_common.hpp"

#include <lmdb.h>

#include <memory>
#include <sys/stat.h>

namespace {

void ok(int rc, const char* what) {
  if (rc != MDB_SUCCESS)
    ycsb::die(std::string("lmdb ") + what + ": " + mdb_strerror(rc));
}

MDB_val val_of(const std::string& s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }

std::string string_of(const MDB_val& v) {
  return std::string(static_cast<const char*>(v.mv_data), v.mv_size);
}

struct store {
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;
  ~store() {
    if (env != nullptr)
      mdb_env_close(env);
  }
};

class lmdb_worker final : public ycsb::worker {
public:
  explicit lmdb_worker(store& s) : s_(s) {
    ok(mdb_txn_begin(s_.env, nullptr, MDB_RDONLY, &reader_), "read txn");
    mdb_txn_reset(reader_);
  }
  ~lmdb_worker() override { mdb_txn_abort(reader_); }

  std::optional<std::string> read(const std::string& key) override {
    ok(mdb_txn_renew(reader_), "renew");
    std::optional<std::string> v = get(reader_, key);
    mdb_txn_reset(reader_);
    return v;
  }
  void update(const std::string& key, const std::string& value) override {
    write([&](MDB_txn* txn) { put(txn, key, value, 0); });
  }
  void insert(const std::string& key, const std::string& value) override {
    write([&](MDB_txn* txn) { put(txn, key, value, MDB_NOOVERWRITE); });
  }
  std::size_t
  scan(const std::string& start, std::size_t count,
       const std::function<void(const std::string&, const std::string&)>& visit) override {
    ok(mdb_txn_renew(reader_), "renew");
    MDB_cursor* c = nullptr;
    ok(mdb_cursor_open(reader_, s_.dbi, &c), "cursor");
    MDB_val k = val_of(start), v;
    std::size_t seen = 0;
    for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == MDB_SUCCESS && seen < count;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT), ++seen)
      visit(string_of(k), string_of(v));
    mdb_cursor_close(c);
    mdb_txn_reset(reader_);
    return seen;
  }
  void read_modify_write(const std::string& key,
                         const std::function<std::string(const std::string&)>& change) override {
    write([&](MDB_txn* txn) {
      std::optional<std::string> old = get(txn, key);
      if (!old)
        ycsb::die("read-modify-write: key " + key + " is missing");
      put(txn, key, change(*old), 0);
    });
  }
  void insert_batch(const std::vector<std::pair<std::string, std::string>>& batch) override {
    write([&](MDB_txn* txn) {
      for (const auto& [key, value] : batch)
        put(txn, key, value, MDB_NOOVERWRITE);
    });
  }

private:
  std::optional<std::string> get(MDB_txn* txn, const std::string& key) {
    MDB_val k = val_of(key), v;
    int rc = mdb_get(txn, s_.dbi, &k, &v);
    if (rc == MDB_NOTFOUND)
      return std::nullopt;
    ok(rc, "get");
    return string_of(v);
  }
  void put(MDB_txn* txn, const std::string& key, const std::string& value, unsigned flags) {
    MDB_val k = val_of(key), v = val_of(value);
    ok(mdb_put(txn, s_.dbi, &k, &v, flags), "put");
  }
  template <class Body>
  void write(Body body) {
    MDB_txn* txn = nullptr;
    ok(mdb_txn_begin(s_.env, nullptr, 0, &txn), "write txn");
    body(txn);
    ok(mdb_txn_commit(txn), "commit");
  }

  store& s_;
  MDB_txn* reader_ = nullptr;
};

} // namespace

int main(int argc, char** argv) {
  return ycsb::main_of("lmdb", argc, argv, [](const ycsb::options& o) {
    if (o.command == "load" && ::mkdir(o.dir.c_str(), 0755) != 0)
      ycsb::die("cannot create " + o.dir);
    auto s = std::make_shared<store>();
    ok(mdb_env_create(&s->env), "env");
    ok(mdb_env_set_mapsize(s->env, std::size_t(64) << 30), "mapsize");
    ok(mdb_env_set_maxreaders(s->env, 1024), "maxreaders");
    ok(mdb_env_open(s->env, o.dir.c_str(), MDB_NOTLS, 0644), "open");
    MDB_txn* txn = nullptr;
    ok(mdb_txn_begin(s->env, nullptr, 0, &txn), "txn");
    ok(mdb_dbi_open(txn, nullptr, 0, &s->dbi), "dbi");
    ok(mdb_txn_commit(txn), "commit");
    std::string config = std::string(mdb_version(nullptr, nullptr, nullptr)) +
                         "; default sync (fsync on commit), MDB_NOTLS, 64 GB map; one writer at "
                         "a time; reads in a renewed read-only transaction per thread";
    return ycsb::workers_of<lmdb_worker>(s, config);
  });
}
