// What the page transaction, redo and WAL prefetch tests share: a storage engine without
// actors over a temporary directory (relation files, a WAL, a 64-page pool, append tails),
// the transfer workload sessions run on it (random add_i64 changes to relation 1, a running
// total in relation 2 block 0, one appended row per transaction in relation 3), and a copy
// of a page as the pool holds it.
#pragma once

#include "storage/buffer_pool.hpp"
#include "storage/io_engine.hpp"
#include "storage/page_transaction.hpp"
#include "storage/relation_files.hpp"
#include "storage/wal_log.hpp"

#include "test_support.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace tidemark::storage::test {

constexpr std::uint64_t wal_segment = 256 * 1024;

/// The storage objects a session and redo need, with no actor and no checkpoint.
struct engine_fixture {
  temp_dir dir;
  std::unique_ptr<io_engine> io = make_io_engine(io_method::sync);
  relation_files files{*io, dir.path(), page_size, 16 * page_size};
  wal_log wal{*io, wal_options{dir.path(), wal_segment, 1 << 20}, 0, 0};
  buffer_pool pool{64, files, true};
  append_tails tails{files};
};

/// The row each transfer appends to relation 3: its xid.
struct row {
  std::uint64_t xid;
  std::uint64_t filler[7];
};

/// `threads` sessions, each on a thread of its own, commit `per_thread` transfers each; xids
/// 1, 2, ... are handed out as transactions begin.
inline void run_transfers(engine_fixture& f, int threads, int per_thread, bool full_page_writes) {
  std::vector<std::thread> sessions;
  std::atomic<xid_t> next_xid{1};
  for (int t = 0; t < threads; ++t) {
    sessions.emplace_back([&, t] {
      page_transaction txn(f.pool, &f.wal, f.tails, full_page_writes);
      std::mt19937 random(t);
      for (int i = 0; i < per_thread; ++i) {
        txn.begin(next_xid++);
        std::int64_t delta = static_cast<std::int64_t>(random() % 100) - 50;
        block_id block = random() % 30;
        std::uint16_t offset = static_cast<std::uint16_t>(64 + 8 * (random() % 100));
        txn.add_i64({1, block}, offset, delta);
        txn.add_i64({2, 0}, 64, delta);
        row r{txn.xid(), {}};
        txn.append_row(3, &r, sizeof r);
        txn.commit();
      }
    });
  }
  for (auto& s : sessions)
    s.join();
}

/// Page `id` as `pool` holds it (read in if it is not there).
inline std::vector<unsigned char> snapshot(buffer_pool& pool, page_id id) {
  buffer_id b = pool.pin(id);
  std::vector<unsigned char> bytes(static_cast<unsigned char*>(pool.page(b)),
                                   static_cast<unsigned char*>(pool.page(b)) + page_size);
  pool.unpin(b);
  return bytes;
}

} // namespace tidemark::storage::test
