// bdb_ycsb: the durable YCSB driver for Berkeley DB 5.3, for bench/ycsb.sh (not a test).
// Commands and records: ycsb_common.hpp.
//
// Configuration: a transactional environment in DIR (DB_INIT_TXN, DB_INIT_LOCK,
// DB_INIT_LOG, DB_INIT_MPOOL, DB_THREAD, DB_RECOVER at open) with a --cache byte memory
// pool, deadlock detection on every conflict (DB_LOCK_DEFAULT) and lock tables sized for
// the load's batches; one B-tree database ycsb.db. Every write is a transaction committed
// with the environment's default, a synchronous log flush (DB_TXN_SYNC). A read is a get
// without a transaction (read committed, as the other stores read); a scan is a cursor
// in a transaction of its own; a read-modify-write takes the record's write lock at the
// read (DB_RMW). A transaction chosen as a deadlock victim is aborted and retried.
#include "ycsb_common.hpp"

#include <db_cxx.h>

#include <memory>
#include <sys/stat.h>

namespace {

struct store {
  DbEnv env{0};
  std::unique_ptr<Db> db;
  ~store() {
    if (db)
      db->close(0);
    env.close(0);
  }
};

std::string string_of(const Dbt& d) {
  return std::string(static_cast<const char*>(d.get_data()), d.get_size());
}

// A Dbt over a string's bytes, for keys and values given to Berkeley DB.
Dbt dbt_of(const std::string& s) { return Dbt(const_cast<char*>(s.data()), u_int32_t(s.size())); }

class bdb_worker final : public ycsb::worker {
public:
  explicit bdb_worker(store& s) : s_(s) {}

  std::optional<std::string> read(const std::string& key) override {
    return guarded([&] { return get(nullptr, key, 0); });
  }
  void update(const std::string& key, const std::string& value) override {
    in_transaction([&](DbTxn* txn) { put(txn, key, value, 0); });
  }
  void insert(const std::string& key, const std::string& value) override {
    in_transaction([&](DbTxn* txn) { put(txn, key, value, DB_NOOVERWRITE); });
  }
  std::size_t
  scan(const std::string& start, std::size_t count,
       const std::function<void(const std::string&, const std::string&)>& visit) override {
    std::size_t seen = 0;
    in_transaction([&](DbTxn* txn) {
      seen = 0;
      Dbc* c = nullptr;
      s_.db->cursor(txn, &c, 0);
      Dbt k = dbt_of(start), v;
      k.set_flags(DB_DBT_MALLOC); // the found key replaces ours
      v.set_flags(DB_DBT_MALLOC);
      try {
        for (int rc = c->get(&k, &v, DB_SET_RANGE); rc == 0 && seen < count;
             rc = c->get(&k, &v, DB_NEXT), ++seen) {
          visit(string_of(k), string_of(v));
          std::free(k.get_data());
          std::free(v.get_data());
        }
      } catch (...) {
        c->close();
        throw;
      }
      c->close();
    });
    return seen;
  }
  void read_modify_write(const std::string& key,
                         const std::function<std::string(const std::string&)>& change) override {
    in_transaction([&](DbTxn* txn) {
      std::optional<std::string> old = get(txn, key, DB_RMW);
      if (!old)
        ycsb::die("read-modify-write: key " + key + " is missing");
      put(txn, key, change(*old), 0);
    });
  }
  void insert_batch(const std::vector<std::pair<std::string, std::string>>& batch) override {
    in_transaction([&](DbTxn* txn) {
      for (const auto& [key, value] : batch)
        put(txn, key, value, DB_NOOVERWRITE);
    });
  }

private:
  std::optional<std::string> get(DbTxn* txn, const std::string& key, u_int32_t flags) {
    Dbt k = dbt_of(key), v;
    v.set_flags(DB_DBT_MALLOC);
    if (s_.db->get(txn, &k, &v, flags) == DB_NOTFOUND)
      return std::nullopt;
    std::string value = string_of(v);
    std::free(v.get_data());
    return value;
  }
  void put(DbTxn* txn, const std::string& key, const std::string& value, u_int32_t flags) {
    Dbt k = dbt_of(key), v = dbt_of(value);
    if (s_.db->put(txn, &k, &v, flags) == DB_KEYEXIST)
      ycsb::die("insert: key " + key + " exists");
  }
  // Runs `body`; a deadlock becomes ycsb::conflict, any other Berkeley DB error dies.
  template <class Body>
  auto guarded(Body body) -> decltype(body()) {
    try {
      return body();
    } catch (const DbDeadlockException&) {
      throw ycsb::conflict{};
    } catch (const DbException& e) {
      ycsb::die(std::string("berkeley db: ") + e.what());
    }
  }
  template <class Body>
  void in_transaction(Body body) {
    guarded([&] {
      DbTxn* txn = nullptr;
      s_.env.txn_begin(nullptr, &txn, 0);
      try {
        body(txn);
      } catch (...) {
        txn->abort();
        throw;
      }
      txn->commit(0); // the environment's default: DB_TXN_SYNC
    });
  }

  store& s_;
};

} // namespace

int main(int argc, char** argv) {
  return ycsb::main_of("bdb", argc, argv, [](const ycsb::options& o) {
    if (o.command == "load" && ::mkdir(o.dir.c_str(), 0755) != 0)
      ycsb::die("cannot create " + o.dir);
    auto s = std::make_shared<store>();
    try {
      s->env.set_cachesize(u_int32_t(o.cache_bytes >> 30),
                           u_int32_t(o.cache_bytes & ((1u << 30) - 1)), 1);
      s->env.set_lk_detect(DB_LOCK_DEFAULT);
      s->env.set_lk_max_locks(1000000);
      s->env.set_lk_max_objects(1000000);
      s->env.set_lk_max_lockers(10000);
      s->env.open(o.dir.c_str(),
                  DB_CREATE | DB_INIT_LOCK | DB_INIT_LOG | DB_INIT_MPOOL | DB_INIT_TXN | DB_THREAD |
                    DB_RECOVER,
                  0644);
      s->db = std::make_unique<Db>(&s->env, 0);
      s->db->open(nullptr, "ycsb.db", nullptr, DB_BTREE, DB_CREATE | DB_AUTO_COMMIT | DB_THREAD,
                  0644);
    } catch (const DbException& e) {
      ycsb::die(std::string("berkeley db open: ") + e.what());
    }
    std::string config = std::string(DbEnv::version(nullptr, nullptr, nullptr)) +
                         "; transactional environment, B-tree, DB_TXN_SYNC commits, " +
                         std::to_string(o.cache_bytes >> 20) +
                         " MB memory pool, deadlock detection on conflict, reads without a "
                         "transaction, DB_RMW for read-modify-write";
    return ycsb::workers_of<bdb_worker>(s, config);
  });
}
