// wiredtiger_ycsb: the durable YCSB driver for WiredTiger 3.2, for bench/ycsb.sh (not a
// test). Commands and records: ycsb_common.hpp.
//
// Configuration: a connection on DIR with cache_size=--cache,
// log=(enabled=true),transaction_sync=(enabled=true,method=fsync): every commit returns
// after the log is fsynced (this version rejects method=fdatasync). One row-store table,
// key_format=u,value_format=u, uncompressed (Debian ships WiredTiger's compressors only as
// extensions). A session and its cursors per thread. A read is a cursor search without an
// explicit transaction (its own snapshot); update, insert, read-modify-write and the load's
// batches are explicit transactions; a scan runs in a read-only transaction. A commit
// refused with WT_ROLLBACK (a write conflict) is rolled back and retried.
#include "ycsb_common.hpp"

#include <wiredtiger.h>

#include <memory>
#include <sys/stat.h>

namespace {

constexpr const char* table_uri = "table:usertable";

void ok(int rc, const char* what) {
  if (rc != 0)
    ycsb::die(std::string("wiredtiger ") + what + ": " + wiredtiger_strerror(rc));
}

WT_ITEM item_of(const std::string& s) {
  WT_ITEM i{};
  i.data = s.data();
  i.size = s.size();
  return i;
}

std::string string_of(const WT_ITEM& i) {
  return std::string(static_cast<const char*>(i.data), i.size);
}

struct store {
  WT_CONNECTION* conn = nullptr;
  ~store() {
    if (conn != nullptr)
      conn->close(conn, nullptr);
  }
};

class wiredtiger_worker final : public ycsb::worker {
public:
  explicit wiredtiger_worker(store& s) {
    ok(s.conn->open_session(s.conn, nullptr, nullptr, &session_), "session");
    ok(session_->open_cursor(session_, table_uri, nullptr, nullptr, &cursor_), "cursor");
    ok(session_->open_cursor(session_, table_uri, nullptr, "overwrite=false", &inserter_),
       "cursor");
  }
  ~wiredtiger_worker() override { session_->close(session_, nullptr); }

  std::optional<std::string> read(const std::string& key) override {
    std::optional<std::string> v = get(key);
    cursor_->reset(cursor_);
    return v;
  }
  void update(const std::string& key, const std::string& value) override {
    in_transaction([&] { put(cursor_, key, value); });
  }
  void insert(const std::string& key, const std::string& value) override {
    in_transaction([&] { put(inserter_, key, value); });
  }
  std::size_t
  scan(const std::string& start, std::size_t count,
       const std::function<void(const std::string&, const std::string&)>& visit) override {
    std::size_t seen = 0;
    in_transaction([&] {
      seen = 0;
      WT_ITEM k = item_of(start);
      cursor_->set_key(cursor_, &k);
      int exact = 0;
      int rc = cursor_->search_near(cursor_, &exact);
      if (rc == 0 && exact < 0)
        rc = cursor_->next(cursor_);
      for (; rc == 0 && seen < count; rc = cursor_->next(cursor_), ++seen) {
        WT_ITEM key, value;
        ok(cursor_->get_key(cursor_, &key), "get_key");
        ok(cursor_->get_value(cursor_, &value), "get_value");
        visit(string_of(key), string_of(value));
      }
      checked(rc == WT_NOTFOUND ? 0 : rc, "scan");
      cursor_->reset(cursor_);
    });
    return seen;
  }
  void read_modify_write(const std::string& key,
                         const std::function<std::string(const std::string&)>& change) override {
    in_transaction([&] {
      std::optional<std::string> old = get(key);
      if (!old)
        ycsb::die("read-modify-write: key " + key + " is missing");
      put(cursor_, key, change(*old));
    });
  }
  void insert_batch(const std::vector<std::pair<std::string, std::string>>& batch) override {
    in_transaction([&] {
      for (const auto& [key, value] : batch)
        put(inserter_, key, value);
    });
  }

private:
  // A write conflict (WT_ROLLBACK) becomes ycsb::conflict; any other error dies.
  static void checked(int rc, const char* what) {
    if (rc == WT_ROLLBACK)
      throw ycsb::conflict{};
    ok(rc, what);
  }
  std::optional<std::string> get(const std::string& key) {
    WT_ITEM k = item_of(key);
    cursor_->set_key(cursor_, &k);
    int rc = cursor_->search(cursor_);
    if (rc == WT_NOTFOUND)
      return std::nullopt;
    checked(rc, "search");
    WT_ITEM v;
    ok(cursor_->get_value(cursor_, &v), "get_value");
    return string_of(v);
  }
  void put(WT_CURSOR* c, const std::string& key, const std::string& value) {
    WT_ITEM k = item_of(key), v = item_of(value);
    c->set_key(c, &k);
    c->set_value(c, &v);
    int rc = c->insert(c);
    if (rc == WT_DUPLICATE_KEY)
      ycsb::die("insert: key " + key + " exists");
    checked(rc, "insert");
  }
  template <class Body>
  void in_transaction(Body body) {
    ok(session_->begin_transaction(session_, nullptr), "begin");
    try {
      body();
    } catch (...) {
      session_->rollback_transaction(session_, nullptr);
      throw;
    }
    checked(session_->commit_transaction(session_, nullptr), "commit");
  }

  WT_SESSION* session_ = nullptr;
  WT_CURSOR* cursor_ = nullptr;   // overwrite=true: update
  WT_CURSOR* inserter_ = nullptr; // overwrite=false: insert, refusing an existing key
};

} // namespace

int main(int argc, char** argv) {
  return ycsb::main_of("wiredtiger", argc, argv, [](const ycsb::options& o) {
    if (o.command == "load" && ::mkdir(o.dir.c_str(), 0755) != 0)
      ycsb::die("cannot create " + o.dir);
    auto s = std::make_shared<store>();
    std::string config = "create,cache_size=" + std::to_string(o.cache_bytes >> 20) +
                         "MB,log=(enabled=true),transaction_sync=(enabled=true,method=fsync)";
    ok(wiredtiger_open(o.dir.c_str(), nullptr, config.c_str(), &s->conn), "open");
    if (o.command == "load") {
      WT_SESSION* session = nullptr;
      ok(s->conn->open_session(s->conn, nullptr, nullptr, &session), "session");
      ok(session->create(session, table_uri, "key_format=u,value_format=u"), "create");
      session->close(session, nullptr);
    }
    std::string stated = std::string(wiredtiger_version(nullptr, nullptr, nullptr)) + "; " +
                         config +
                         "; key_format=u,value_format=u, uncompressed; a session per thread";
    return ycsb::workers_of<wiredtiger_worker>(s, stated);
  });
}
