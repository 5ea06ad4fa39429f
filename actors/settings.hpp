// The settings of DESIGN §8 as one plain value: what an open data directory runs with.
// The actors read their own settings from it (through their context); the runtime parses,
// range-checks and renders it (runtime/config.hpp) and decides which settings are fixed
// when a data directory is created.
//
// Invariants:
//  - A plain value: nothing here parses or checks it. The runtime opens a data directory
//    only with settings that runtime::validate() accepted (every range and cross-setting
//    rule, for example D7: doublewrite requires data_checksums).
#pragma once

#include "actors/standby_quorum.hpp"
#include "storage/directory_sync.hpp"
#include "storage/io_engine.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tidemark::messages {
struct settings_reload; // messages/types.hpp
} // namespace tidemark::messages

namespace tidemark::actors {

enum class torn_page_protection { full_page_writes, doublewrite, off };
const char* to_string(torn_page_protection mode);

struct settings {
  /// The WAL insert buffer: wal_buffers, or (auto) room for one commit record holding a
  /// full-page image of a quarter of the pool (the most pages a table commit may hold,
  /// access/pool_page_store.hpp), and never under 16 MB.
  std::uint64_t wal_buffer_size() const {
    return wal_buffers != 0
             ? wal_buffers
             : std::max<std::uint64_t>(16ull << 20, shared_buffers / 4 + (1ull << 20));
  }
  // fixed at init
  std::size_t page_size = 8192;
  bool data_checksums = true;
  std::uint64_t segment_size = 1ull << 30;
  std::uint64_t wal_segment_size = 16ull << 20;
  // per run
  std::uint64_t shared_buffers = 128ull << 20; // bytes
  std::uint64_t wal_buffers = 0;               // bytes; 0: auto (wal_buffer_size())
  torn_page_protection protection = torn_page_protection::full_page_writes;
  std::chrono::milliseconds checkpoint_timeout{300'000};
  std::uint64_t max_wal_size = 1ull << 30; // bytes
  double checkpoint_completion_target = 0.9;
  // PostgreSQL's defaults (200 ms, 100 pages) cap cleaning at 500 pages/s, which is why its
  // sessions write most victims themselves; these allow 20 000 pages/s.
  std::chrono::milliseconds bgwriter_delay{50};
  std::uint32_t bgwriter_lru_maxpages = 1000;
  double bgwriter_lru_multiplier = 2.0;
  // A cap, in bytes a second, on what a paced checkpoint's write phase and the bgwriter's
  // rounds each write (0: none). As PostgreSQL 8.3's load-distributed checkpoint discussion
  // found, a spread checkpoint of a large pool may still write tens of MB/s, too much for
  // a small server's disk. An immediate checkpoint
  // (shutdown, requested, end of recovery), or one hurried, is not capped.
  std::uint64_t background_write_limit = 0;
  // One write-back pass over every data file written since its last fsync, a megabyte at
  // a time (0: leave write-back to the kernel). The kernel writes an inode's whole dirty
  // set at once when it is 30 s old (vm.dirty_expire_centisecs): under pgbench that is the
  // whole accounts file, ~440 MB in one second, and commits stall behind it for ~100 ms.
  std::chrono::milliseconds write_back_sweep{10'000};
  bool synchronous_commit = true;
  // fdatasyncs of the WAL that group commit keeps in flight at once. Concurrent fdatasyncs
  // overlap in the kernel and the device (measured here: 1 thread 5 300/s, 2 threads
  // 7 900/s), so a commit waits for one fsync instead of the end of the one before it too.
  std::uint32_t wal_sync_concurrency = 2;
  // Spin on otherwise idle CPUs at SCHED_IDLE while commits are in flight
  // (runtime/idle_poller.hpp). Off by default: a library must not burn its host's CPUs.
  // Measured through sessions (bench/NOTEBOOK.md): one client gains 1.36 x tps, eight gain
  // nothing and see a worse p99; either way the process uses about 2 x the CPU per commit.
  bool idle_poll = false;
  storage::io_method io = storage::io_method::io_uring;
  // How a start after anything but a clean shutdown makes the data directory durable
  // before recovery writes (PostgreSQL's recovery_init_sync_method): every file fsynced,
  // or one syncfs per file system.
  storage::directory_sync_method recovery_init_sync_method = storage::directory_sync_method::fsync;
  // Redo reads the blocks of the records ahead of it in the background, up to this many
  // bytes of WAL ahead (storage/wal_prefetcher.hpp).
  bool recovery_prefetch = true;
  std::uint64_t recovery_prefetch_distance = 512ull << 10; // bytes of WAL
  // A recovery prints where it is this often (0: never).
  std::chrono::milliseconds recovery_progress_interval{3'000};
  // Streaming replication (actors/wal_sender.hpp): where the primary's WAL sender listens
  // ("HOST:PORT"; empty: no replication), how much WAL it keeps for a standby that has
  // fallen behind before that standby must be seeded again, and how far a commit waits
  // for the synchronous standby.
  std::string replication_listen;
  std::uint64_t max_standby_wal_size = 1ull << 30; // bytes
  enum class standby_wait { off, remote_write, remote_flush, remote_apply };
  standby_wait synchronous_standby = standby_wait::off;
  // Which standbys, and how many, a synchronous commit waits for (standby_quorum.hpp).
  standby_quorum synchronous_standby_names;
  // A standby not heard from for this long no longer counts for synchronous commits
  // (PostgreSQL's wal_sender_timeout): one frozen (SIGSTOP) stays connected, silent.
  std::chrono::milliseconds wal_sender_timeout{10'000};
  std::uint32_t doublewrite_batch_pages = 64;
  // How long the batcher may hold a small batch of the bgwriter's or the checkpointer's so
  // that later ones share its ring fdatasync (0: every group is synced at once).
  std::chrono::milliseconds doublewrite_flush_delay{5};
  std::uint32_t doublewrite_ring_pages = 0; // 0: derived
  bool log_checkpoints = true;
  // CAF's scheduler for the actors that run on shared threads (sessions, stats). The
  // work-stealing policy polls idle workers with 50 µs sleeps, which costs a 2-core machine
  // a quarter of its CPU; the sharing policy waits on a condition variable.
  bool scheduler_sharing = true;
  std::uint32_t scheduler_threads = 0; // 0: one per CPU core

  std::size_t buffer_count() const { return static_cast<std::size_t>(shared_buffers / page_size); }
};

const char* to_string(settings::standby_wait wait);

/// The settings a running engine may change (database::reload()), as the actors that use
/// them receive them, and their values put back into an actor's copy.
messages::settings_reload reloadable_part(const settings& s);
void apply_reload(settings& s, const messages::settings_reload& reload);

} // namespace tidemark::actors
