// The messages between a primary's WAL sender and its standbys and base backups. Unlike
// the write path's messages these cross the network (caf::io), so every field is a plain
// value and every byte payload a std::string (serialised as one block).
//
// A standby asks, the sender answers (pull): stream_open once, then wal_fetch after wal_fetch
// with up to two in flight; a fetch the sender cannot serve yet is answered when WAL past
// it is durable on the primary. standby_feedback reports progress without a reply.
// A base backup asks for backup_begin, then file chunks and WAL chunks, then backup_finish.
#pragma once

#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tidemark::messages {

/// What a standby (or base backup) is: the system it copies, the generation it follows,
/// its name (the primary keeps its place by name), and what it has.
struct standby_position {
  std::string name;
  std::uint64_t owner = 0; // the standby's id, made by its base backup (0: a standby seeded
                           // before ids were, which takes a slot no other owns)
  std::uint64_t system_id = 0;
  std::uint32_t generation = 0;
  std::uint64_t written = 0;     // WAL received and written
  std::uint64_t flushed = 0;     // ... and fsynced
  std::uint64_t replayed = 0;    // ... and replayed
  std::uint64_t replay_rate = 0; // records per second, recently
  std::uint64_t pages_read = 0;  // by replay
  std::uint64_t prefetch_hits = 0;
  /// HOST:PORT this standby serves on once promoted (its replication_listen, when that
  /// names a host and a port; else empty). A primary that restarts asks there whether a
  /// newer generation runs (generation_probe) before it counts any standby again.
  std::string listen;
};

/// Asks to stream from `from` (the end of what the standby has flushed).
struct stream_open {
  standby_position standby;
  std::uint64_t from = 0;
};

/// A standby as its primary last heard of it. Every answer carries all of them, so that
/// each standby knows how far its peers had got when a failover comes (promote compares).
struct standby_peer {
  std::string name;
  std::uint64_t flushed = 0;
  bool live = false; // counted for synchronous commits when the primary answered
};

/// The primary's answer, and the state that comes with every chunk.
struct primary_position {
  std::uint64_t system_id = 0;
  std::uint32_t generation = 0;
  std::uint64_t flushed = 0;      // WAL durable on the primary
  std::int64_t unix_micros = 0;   // the primary's clock when it answered
  std::uint64_t acknowledged = 0; // WAL its synchronous standbys' quorum has confirmed
  std::vector<standby_peer> standbys;
};

/// Up to `max_bytes` of WAL from `from`.
struct wal_fetch {
  standby_position standby;
  std::uint64_t from = 0;
  std::uint32_t max_bytes = 0;
};

/// WAL bytes [start, start + bytes.size()), all durable on the primary.
struct wal_chunk {
  primary_position primary;
  std::uint64_t start = 0;
  std::string bytes;
};

struct standby_feedback {
  standby_position standby;
};

/// One standby as the primary sees it.
struct standby_view {
  standby_position standby;
  bool connected = false;
  std::uint64_t sent = 0; // WAL sent to it
  double seconds_since_reply = 0;
};

/// A primary asks another Tidemark's WAL sender which system and generation it serves: a
/// restarted primary asks where its standbys said they would serve once promoted.
struct generation_probe {
  std::uint64_t system_id = 0;
  std::uint32_t generation = 0; // the asker's
};

struct generation_answer {
  std::uint64_t system_id = 0;
  std::uint32_t generation = 0;
};

/// Begins a base backup: an immediate checkpoint; WAL from its redo point is kept until
/// backup_finish (or the backup's connection is lost).
struct backup_begin {
  std::string name;
  std::uint64_t owner = 0; // the id of the standby being made
  bool take_over = false;  // the name may belong to another standby: this one replaces it
};

struct backup_file {
  std::string path; // relative to the data directory
  std::uint64_t size = 0;
};

struct backup_manifest {
  std::string control; // the control file's bytes as of the backup's checkpoint
  std::string config;  // tidemark.conf
  std::uint64_t checkpoint_lsn = 0;
  std::uint64_t redo_lsn = 0;
  std::uint32_t page_size = 0;
  std::vector<backup_file> files;
};

/// A chunk of a file of the backup; data files are read in whole pages and verified, a
/// page that fails verification is read again through the buffer pool (it was being
/// written) before it counts as corrupt.
struct file_fetch {
  std::string name;
  std::string path;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
};

struct file_chunk {
  std::string bytes;
  std::uint32_t pages_reread = 0;
};

/// Ends the backup: answered with the WAL position the copy is consistent at once
/// replayed to.
struct backup_finish {
  std::string name;
};

struct backup_end {
  std::uint64_t end_lsn = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, standby_position& x) {
  return f(caf::meta::type_name("standby_position"), x.name, x.owner, x.system_id, x.generation,
           x.written, x.flushed, x.replayed, x.replay_rate, x.pages_read, x.prefetch_hits,
           x.listen);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stream_open& x) {
  return f(caf::meta::type_name("stream_open"), x.standby, x.from);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, standby_peer& x) {
  return f(caf::meta::type_name("standby_peer"), x.name, x.flushed, x.live);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, primary_position& x) {
  return f(caf::meta::type_name("primary_position"), x.system_id, x.generation, x.flushed,
           x.unix_micros, x.acknowledged, x.standbys);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wal_fetch& x) {
  return f(caf::meta::type_name("wal_fetch"), x.standby, x.from, x.max_bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, wal_chunk& x) {
  return f(caf::meta::type_name("wal_chunk"), x.primary, x.start, x.bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, standby_feedback& x) {
  return f(caf::meta::type_name("standby_feedback"), x.standby);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, standby_view& x) {
  return f(caf::meta::type_name("standby_view"), x.standby, x.connected, x.sent,
           x.seconds_since_reply);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_probe& x) {
  return f(caf::meta::type_name("generation_probe"), x.system_id, x.generation);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, generation_answer& x) {
  return f(caf::meta::type_name("generation_answer"), x.system_id, x.generation);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backup_begin& x) {
  return f(caf::meta::type_name("backup_begin"), x.name, x.owner, x.take_over);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backup_file& x) {
  return f(caf::meta::type_name("backup_file"), x.path, x.size);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backup_manifest& x) {
  return f(caf::meta::type_name("backup_manifest"), x.control, x.config, x.checkpoint_lsn,
           x.redo_lsn, x.page_size, x.files);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_fetch& x) {
  return f(caf::meta::type_name("file_fetch"), x.name, x.path, x.offset, x.length);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_chunk& x) {
  return f(caf::meta::type_name("file_chunk"), x.bytes, x.pages_reread);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backup_finish& x) {
  return f(caf::meta::type_name("backup_finish"), x.name);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, backup_end& x) {
  return f(caf::meta::type_name("backup_end"), x.end_lsn);
}

} // namespace tidemark::messages
