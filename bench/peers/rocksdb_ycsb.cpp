// rocksdb_ycsb: the durable YCSB driver for RocksDB, for bench/ycsb.sh (not a test).
// Commands and records: ycsb_common.hpp.
//
// Configuration: RocksDB's defaults (leveled compaction, snappy, crc32c block checksums)
// with an LRU block cache of --cache bytes, a 10-bit Bloom filter and memtables of at most
// a quarter of --cache (the default 64 MB from a 256 MB cache on);
// every write with WriteOptions::sync = true (the WAL is fsynced before the write returns;
// concurrent writers share one WAL write and fsync). A read is DB::Get, a scan an
// iterator from the key on. RocksDB has no transactions on a plain DB, so a
// read-modify-write holds a striped lock on its key (1 << 16 stripes) from its Get to its
// durable Put, as a row lock held to commit. The load writes each batch of records as one
// WriteBatch.
#include "ycsb_common.hpp"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <functional>
#include <memory>
#include <mutex>

namespace {

void ok(const rocksdb::Status& s, const char* what) {
  if (!s.ok())
    ycsb::die(std::string("rocksdb ") + what + ": " + s.ToString());
}

struct store {
  std::unique_ptr<rocksdb::DB> db;
  rocksdb::WriteOptions durable;
  std::vector<std::mutex> stripes = std::vector<std::mutex>(1 << 16);
};

class rocksdb_worker final : public ycsb::worker {
public:
  explicit rocksdb_worker(store& s) : s_(s) {}

  std::optional<std::string> read(const std::string& key) override {
    std::string value;
    rocksdb::Status st = s_.db->Get(rocksdb::ReadOptions(), key, &value);
    if (st.IsNotFound())
      return std::nullopt;
    ok(st, "get");
    return value;
  }
  void update(const std::string& key, const std::string& value) override {
    ok(s_.db->Put(s_.durable, key, value), "put");
  }
  void insert(const std::string& key, const std::string& value) override {
    ok(s_.db->Put(s_.durable, key, value), "put");
  }
  std::size_t
  scan(const std::string& start, std::size_t count,
       const std::function<void(const std::string&, const std::string&)>& visit) override {
    std::unique_ptr<rocksdb::Iterator> it(s_.db->NewIterator(rocksdb::ReadOptions()));
    std::size_t seen = 0;
    for (it->Seek(start); it->Valid() && seen < count; it->Next(), ++seen)
      visit(it->key().ToString(), it->value().ToString());
    ok(it->status(), "scan");
    return seen;
  }
  void read_modify_write(const std::string& key,
                         const std::function<std::string(const std::string&)>& change) override {
    std::lock_guard<std::mutex> row(s_.stripes[std::hash<std::string>()(key) % s_.stripes.size()]);
    std::optional<std::string> old = read(key);
    if (!old)
      ycsb::die("read-modify-write: key " + key + " is missing");
    update(key, change(*old));
  }
  void insert_batch(const std::vector<std::pair<std::string, std::string>>& batch) override {
    rocksdb::WriteBatch b;
    for (const auto& [key, value] : batch)
      ok(b.Put(key, value), "batch");
    ok(s_.db->Write(s_.durable, &b), "write");
  }

private:
  store& s_;
};

} // namespace

int main(int argc, char** argv) {
  return ycsb::main_of("rocksdb", argc, argv, [](const ycsb::options& o) {
    auto s = std::make_shared<store>();
    rocksdb::Options opt;
    opt.create_if_missing = o.command == "load";
    opt.error_if_exists = o.command == "load";
    rocksdb::BlockBasedTableOptions table;
    table.block_cache = rocksdb::NewLRUCache(o.cache_bytes);
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    opt.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    // Memtables count against the memory the run may use: at most a quarter of the cache
    // each (RocksDB's default, 64 MB, when the cache is 256 MB or more).
    opt.write_buffer_size = std::min<std::size_t>(opt.write_buffer_size, o.cache_bytes / 4);
    rocksdb::DB* db = nullptr;
    ok(rocksdb::DB::Open(opt, o.dir, &db), "open");
    s->db.reset(db);
    s->durable.sync = true;
    std::string config = "RocksDB defaults; block cache " + std::to_string(o.cache_bytes >> 20) +
                         " MB LRU, 10-bit Bloom filter; memtables of " +
                         std::to_string(opt.write_buffer_size >> 20) +
                         " MB; WriteOptions::sync=true; "
                         "read-modify-write under a striped key lock";
    return ycsb::workers_of<rocksdb_worker>(s, config);
  });
}
