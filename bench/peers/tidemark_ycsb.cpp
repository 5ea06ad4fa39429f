// tidemark_ycsb: the durable YCSB driver for Tidemark, through its public API only
// (<tidemark/database.hpp>), for bench/ycsb.sh (not a test). Commands and records:
// ycsb_common.hpp.
//
// The store: one keyed table "usertable" in DIR. `load` creates DIR with the settings
// given by --set (tidemark.conf; ycsb.sh passes shared_buffers and torn_page_protection)
// and shared_buffers from --cache unless a --set names it; `run` and `verify` open it.
// Every commit is durable before it returns (synchronous_commit=on, the default). A read
// is session::get outside a transaction (a read of committed data); a scan is a cursor
// from the key on; update, insert and read-modify-write are each a transaction of their
// own; a commit refused with conflict_error is retried. The load writes each batch with
// put (a blind write, as RocksDB's WriteBatch::Put; the verify afterwards checks every
// record): session::insert would read each key first to answer whether it was absent, a
// read the load has no use for. Workload E's inserts use insert (an existing key is an
// error there).
#include "ycsb_common.hpp"

#include <tidemark/database.hpp>
#include <tidemark/errors.hpp>

#include <exception>
#include <memory>

namespace {

constexpr const char* table_name = "usertable";

struct opened {
  std::unique_ptr<tidemark::database> db;
  tidemark::table table;
};

class tidemark_worker final : public ycsb::worker {
public:
  explicit tidemark_worker(opened& store)
    : session_(store.db->open_session()), table_(store.table) {}

  std::optional<std::string> read(const std::string& key) override {
    return session_.get(table_, key);
  }
  void update(const std::string& key, const std::string& value) override {
    in_transaction([&] { session_.put(table_, key, value); });
  }
  void insert(const std::string& key, const std::string& value) override {
    in_transaction([&] {
      if (!session_.insert(table_, key, value))
        ycsb::die("insert: key " + key + " exists");
    });
  }
  std::size_t
  scan(const std::string& start, std::size_t count,
       const std::function<void(const std::string&, const std::string&)>& visit) override {
    tidemark::key_range range;
    range.low = start;
    tidemark::table_cursor c = session_.cursor(table_, range);
    std::size_t seen = 0;
    while (seen < count && c.next()) {
      visit(c.key(), c.value());
      ++seen;
    }
    return seen;
  }
  void read_modify_write(const std::string& key,
                         const std::function<std::string(const std::string&)>& change) override {
    in_transaction([&] {
      std::optional<std::string> old = session_.get(table_, key);
      if (!old)
        ycsb::die("read-modify-write: key " + key + " is missing");
      session_.put(table_, key, change(*old));
    });
  }
  void insert_batch(const std::vector<std::pair<std::string, std::string>>& batch) override {
    in_transaction([&] {
      for (const auto& [key, value] : batch) // blind writes: see the header
        session_.put(table_, key, value);
    });
  }

private:
  // Runs `changes` in a transaction and commits it; a conflict becomes ycsb::conflict.
  template <class Changes>
  void in_transaction(Changes changes) {
    session_.begin();
    try {
      changes();
      session_.commit();
    } catch (const tidemark::conflict_error&) {
      throw ycsb::conflict{};
    } catch (...) {
      session_.rollback();
      throw;
    }
  }

  tidemark::session session_;
  tidemark::table table_;
};

std::shared_ptr<opened> open_store(const ycsb::options& o) {
  auto store = std::make_shared<opened>();
  if (o.command == "load") {
    tidemark::create_options create;
    create.settings = o.sets;
    bool sized = false;
    for (const std::string& s : o.sets)
      sized = sized || s.rfind("shared_buffers=", 0) == 0;
    if (!sized)
      create.settings.push_back("shared_buffers=" + std::to_string(o.cache_bytes / 1024) + "kB");
    tidemark::database::create(o.dir, create);
  }
  store->db = tidemark::database::open(o.dir);
  store->table = o.command == "load" ? store->db->create_table(table_name)
                                     : store->db->open_table(table_name);
  return store;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return ycsb::main_of("tidemark", argc, argv, [](const ycsb::options& o) {
      std::shared_ptr<opened> store = open_store(o);
      std::string config = "keyed table; shared_buffers=" + store->db->setting("shared_buffers") +
                           " torn_page_protection=" + store->db->setting("torn_page_protection") +
                           " synchronous_commit=" + store->db->setting("synchronous_commit") +
                           " page_size=" + std::to_string(store->db->page_size());
      return ycsb::workers_of<tidemark_worker>(store, config);
    });
  } catch (const std::exception& e) {
    ycsb::die(e.what());
  }
}
