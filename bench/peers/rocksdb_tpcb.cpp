// rocksdb_tpcb: pgbench's tpcb-like workload on RocksDB, for bench/compare.sh (not a test).
//
//   rocksdb_tpcb init  -D DIR [-s SCALE]          loads branches, tellers, accounts
//   rocksdb_tpcb run   -D DIR [-c CLIENTS] [-T SECONDS] [--cache-mb MB] [--json FILE]
//   rocksdb_tpcb check -D DIR [--json FILE]       balance invariant only
//
// Schema as key/value pairs (ids big-endian so each table is one ordered key range):
//   'b' bid  -> balance i64                         (pgbench: filler NULL)
//   't' tid  -> balance i64, bid u32                (pgbench: filler NULL)
//   'a' aid  -> balance i64, bid u32, 84 blank bytes (pgbench's char(84) filler)
//   'h' seq  -> tid u32, bid u32, aid u32, delta i64, mtime i64
// A transaction locks its account, teller and branch (in that order, so no deadlock: an
// exact mutex per branch and per teller, 1 << 16 striped mutexes for accounts), reads the
// three balances (the read of the account is the tpcb "SELECT abalance"), writes the three
// new balances and a history row in ONE WriteBatch with WriteOptions::sync = true (WAL
// fsynced before the write returns; RocksDB groups concurrent writers into one WAL write
// and fsync) and only then unlocks — as row locks held to commit — so no update is lost.
//
// Configuration: RocksDB defaults (leveled compaction, 64 MB memtables, snappy, crc32c block
// checksums, 2 background jobs) plus a --cache-mb (default 128) LRU block cache and a
// 10-bit Bloom filter. One thread per client, all sharing one DB handle.
// Measurements: latency per transaction (lock wait to durable write); log bytes =
// statistics ticker rocksdb.wal.bytes (bytes appended to the WAL); flush and compaction
// bytes and times from the statistics too (RocksDB's "checkpoint" is a memtable flush).
// At the end it checks sum(account) = sum(teller) = sum(branch) = sum(history delta) and
// that history grew by exactly the number of committed transactions. Prints one JSON line.
#include "tpcb_common.hpp"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/statistics.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <memory>
#include <mutex>

namespace {

using rocksdb::Slice;

std::string key(char table, std::uint64_t id) {
  std::string k(9, '\0');
  k[0] = table;
  for (int i = 0; i < 8; ++i)
    k[1 + i] = char((id >> (56 - 8 * i)) & 0xff);
  return k;
}

std::uint64_t key_id(const Slice& k) {
  std::uint64_t id = 0;
  for (int i = 0; i < 8; ++i)
    id = (id << 8) | std::uint8_t(k[1 + i]);
  return id;
}

std::int64_t get_i64(const char* p) {
  std::int64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void put_i64(std::string& s, std::size_t at, std::int64_t v) { std::memcpy(&s[at], &v, 8); }

std::string row(std::int64_t balance, std::int64_t bid, std::size_t filler) {
  std::string v(8 + (bid ? 4 : 0) + filler, ' ');
  put_i64(v, 0, balance);
  if (bid) {
    std::uint32_t b = std::uint32_t(bid);
    std::memcpy(&v[8], &b, 4);
  }
  return v;
}

void ok(const rocksdb::Status& s, const char* what) {
  if (!s.ok())
    tpcb::die(std::string(what) + ": " + s.ToString());
}

rocksdb::Options make_options(int cache_mb) {
  rocksdb::Options opt;
  opt.create_if_missing = true;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(std::size_t(cache_mb) << 20);
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  opt.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  opt.statistics = rocksdb::CreateDBStatistics();
  return opt;
}

std::unique_ptr<rocksdb::DB> open_db(const std::string& dir, const rocksdb::Options& opt) {
  rocksdb::DB* db = nullptr;
  ok(rocksdb::DB::Open(opt, dir, &db), "open");
  return std::unique_ptr<rocksdb::DB>(db);
}

struct sums : tpcb::balance_sums {
  std::uint64_t last_history = 0, scale = 0;
};

sums read_sums(rocksdb::DB& db) {
  sums s;
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    Slice k = it->key(), v = it->value();
    switch (k[0]) {
      case 'a':
        s.accounts += get_i64(v.data());
        break;
      case 't':
        s.tellers += get_i64(v.data());
        break;
      case 'b':
        s.branches += get_i64(v.data());
        s.scale += 1;
        break;
      case 'h':
        s.history += get_i64(v.data() + 12);
        s.history_rows += 1;
        s.last_history = std::max(s.last_history, key_id(k));
        break;
    }
  }
  ok(it->status(), "scan");
  return s;
}

void init(const tpcb::options& o) {
  rocksdb::Options opt = make_options(o.cache_mb);
  ok(rocksdb::DestroyDB(o.dir, opt), "destroy");
  auto db = open_db(o.dir, opt);
  rocksdb::WriteOptions load;
  load.disableWAL = true; // bulk load; flushed and compacted below
  rocksdb::WriteBatch batch;
  auto put = [&](const std::string& k, const std::string& v) {
    batch.Put(k, v);
    if (batch.Count() >= 10000) {
      ok(db->Write(load, &batch), "load");
      batch.Clear();
    }
  };
  for (std::int64_t b = 1; b <= o.scale; ++b)
    put(key('b', b), row(0, 0, 0));
  for (std::int64_t t = 1; t <= tpcb::tellers_per_branch * o.scale; ++t)
    put(key('t', t), row(0, (t - 1) / tpcb::tellers_per_branch + 1, 0));
  std::int64_t n = tpcb::accounts_per_branch * o.scale;
  for (std::int64_t a = 1; a <= n; ++a)
    put(key('a', a), row(0, (a - 1) / tpcb::accounts_per_branch + 1, 84));
  ok(db->Write(load, &batch), "load");
  ok(db->Flush(rocksdb::FlushOptions()), "flush");
  ok(db->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr), "compact");
  ok(db->Close(), "close");
  std::fprintf(stderr, "rocksdb_tpcb: %s loaded at scale %d (%" PRId64 " accounts)\n",
               o.dir.c_str(), o.scale, n);
}

void run(const tpcb::options& o) {
  rocksdb::Options opt = make_options(o.cache_mb);
  opt.create_if_missing = false;
  auto db = open_db(o.dir, opt);
  sums before = read_sums(*db);
  int scale = int(before.scale);
  if (scale < 1)
    tpcb::die(o.dir + " has no branches (run init first)");
  std::atomic<std::uint64_t> next_history{before.last_history + 1};

  constexpr std::size_t account_stripes = 1 << 16;
  std::vector<std::mutex> branch_locks(std::size_t(scale) + 1);
  std::vector<std::mutex> teller_locks(std::size_t(tpcb::tellers_per_branch * scale) + 1);
  std::vector<std::mutex> account_locks(account_stripes);

  rocksdb::WriteOptions durable;
  durable.sync = true;
  opt.statistics->Reset();
  auto txn = [&](int, std::mt19937_64& rng) -> unsigned {
    tpcb::input in = tpcb::random_input(rng, scale);
    std::string ka = key('a', std::uint64_t(in.aid)), kt = key('t', std::uint64_t(in.tid)),
                kb = key('b', std::uint64_t(in.bid));
    std::lock_guard<std::mutex> la(account_locks[std::size_t(in.aid) % account_stripes]);
    std::lock_guard<std::mutex> lt(teller_locks[std::size_t(in.tid)]);
    std::lock_guard<std::mutex> lb(branch_locks[std::size_t(in.bid)]);
    std::string va, vt, vb;
    rocksdb::ReadOptions ro;
    ok(db->Get(ro, ka, &va), "get account");
    std::int64_t abalance = get_i64(va.data()) + in.delta; // the balance the SELECT returns
    put_i64(va, 0, abalance);
    ok(db->Get(ro, kt, &vt), "get teller");
    put_i64(vt, 0, get_i64(vt.data()) + in.delta);
    ok(db->Get(ro, kb, &vb), "get branch");
    put_i64(vb, 0, get_i64(vb.data()) + in.delta);
    std::string h(28, '\0');
    std::uint32_t ids[3] = {std::uint32_t(in.tid), std::uint32_t(in.bid), std::uint32_t(in.aid)};
    std::memcpy(&h[0], ids, 12);
    put_i64(h, 12, in.delta);
    put_i64(h, 20, tpcb::now_epoch_us());
    rocksdb::WriteBatch batch;
    batch.Put(ka, va);
    batch.Put(kt, vt);
    batch.Put(kb, vb);
    batch.Put(key('h', next_history.fetch_add(1)), h);
    ok(db->Write(durable, &batch), "write");
    return 0;
  };
  tpcb::run_result r = tpcb::run_clients(
    o.clients, o.seconds, [](int) {}, txn);
  auto& st = *opt.statistics;
  std::uint64_t wal_bytes = st.getTickerCount(rocksdb::WAL_FILE_BYTES);
  std::uint64_t wal_syncs = st.getTickerCount(rocksdb::WAL_FILE_SYNCED);
  std::uint64_t flush_bytes = st.getTickerCount(rocksdb::FLUSH_WRITE_BYTES);
  std::uint64_t compact_bytes = st.getTickerCount(rocksdb::COMPACT_WRITE_BYTES);
  std::uint64_t stall_us = st.getTickerCount(rocksdb::STALL_MICROS);
  rocksdb::HistogramData flush_time, compaction_time;
  st.histogramData(rocksdb::FLUSH_TIME, &flush_time);
  st.histogramData(rocksdb::COMPACTION_TIME, &compaction_time);

  sums after = read_sums(*db);
  ok(db->Close(), "close");
  bool good = after.equal() &&
              after.history_rows - before.history_rows == std::int64_t(r.transactions);
  double n = double(std::max<std::uint64_t>(r.transactions, 1));
  tpcb::emit(tpcb::json_line()
               .str("system", "rocksdb")
               .str("version", std::to_string(ROCKSDB_MAJOR) + "." + std::to_string(ROCKSDB_MINOR) +
                                 "." + std::to_string(ROCKSDB_PATCH))
               .num("tps", double(r.transactions) / r.duration_s)
               .u64("transactions", r.transactions)
               .num("duration_s", r.duration_s)
               .i64("clients", o.clients)
               .i64("scale", scale)
               .i64("block_cache_mb", o.cache_mb)
               .raw("latency_ms", tpcb::latency_json(r))
               .u64("log_bytes", wal_bytes)
               .num("log_bytes_per_transaction", double(wal_bytes) / n)
               .str("log_measure",
                    "statistics ticker rocksdb.wal.bytes (bytes appended to the WAL)")
               .u64("wal_syncs", wal_syncs)
               .u64("flushes", flush_time.count)
               .u64("flush_bytes", flush_bytes)
               .num("flush_ms", double(flush_time.sum) / 1000)
               .u64("compactions", compaction_time.count)
               .u64("compaction_bytes", compact_bytes)
               .num("compaction_ms", double(compaction_time.sum) / 1000)
               .num("stall_ms", double(stall_us) / 1000)
               .raw("sums", after.json())
               .boolean("invariant_ok", good)
               .text(),
             o.json);
  if (!good)
    std::exit(1);
}

void check_only(const tpcb::options& o) {
  rocksdb::Options opt = make_options(o.cache_mb);
  opt.create_if_missing = false;
  auto db = open_db(o.dir, opt);
  sums s = read_sums(*db);
  ok(db->Close(), "close");
  tpcb::emit(tpcb::json_line()
               .str("system", "rocksdb")
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
  if (o.command == "init")
    init(o);
  else if (o.command == "run")
    run(o);
  else
    check_only(o);
  return 0;
}
