// The Tidemark embedding API: create or open a data directory (crash recovery runs when it
// needs to), keep keyed tables in it, open sessions whose transactions change them (or
// raw pages) atomically and durably, checkpoint, close.
//
//   tidemark::database::create("/path/to/data", {});
//   auto db = tidemark::database::open("/path/to/data");
//   tidemark::table users = db->create_table("users");
//   tidemark::session s = db->open_session();
//   s.begin();
//   s.put(users, "alice", "{\"age\": 41}");
//   s.commit();                   // durable when it returns (synchronous_commit=on)
//   db->close();                  // shutdown checkpoint
//
// Thread rules: a database may be used from any number of threads; a session from one
// thread at a time (open one per thread). Sessions stay safe to destroy after the
// database is closed or destroyed; anything else they are asked then is a usage_error.
// docs/embedding.md describes the guarantees (atomicity, durability, isolation).
//
// Errors: each call's comment names the errors.hpp exceptions it can throw ("Throws:");
// a call that names none throws none of them. Besides those, only what the C++ library
// throws (std::bad_alloc, std::system_error when a thread cannot start) and what an
// application's own callback throws pass through.
#pragma once

#include <tidemark/errors.hpp>
#include <tidemark/options.hpp>
#include <tidemark/reports.hpp>
#include <tidemark/statistics.hpp>
#include <tidemark/types.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tidemark {

class session;
struct internal_access; // the library's own tests and tools

/// One keyed table of one database (database::create_table, open_table): a handle, copied
/// freely and used from any thread with any session of that database. A default-made
/// handle names no table. Once the table is dropped, or its database closed, the calls
/// given the handle throw usage_error.
class table {
public:
  table() = default;
  /// The table's name (empty for a handle that names no table).
  const std::string& name() const;
  explicit operator bool() const { return state_ != nullptr; }

  struct state;

private:
  friend class session;
  friend struct internal_access;
  explicit table(std::shared_ptr<const state> s) : state_(std::move(s)) {}
  std::shared_ptr<const state> state_;
};

/// A table as database::tables() lists it.
struct table_info {
  std::string name;
  std::uint64_t pages = 0; // the pages its files hold (tree, overflow and free pages)
};

/// The keys a cursor visits: from `low` to `high`, each bound included or not; a bound
/// that is absent leaves that end open.
struct key_range {
  std::optional<std::string> low;
  bool low_inclusive = true;
  std::optional<std::string> high;
  bool high_inclusive = true;
};

class database {
public:
  /// Creates a data directory: tidemark.conf with `options.settings`, the initial data, a
  /// first checkpoint. Everything is durable before the control file is written, so a
  /// crash, or a failure, leaves either a complete directory or one open() refuses (remove
  /// it before creating it again).
  /// Throws: config_error (`dir` exists and is not empty or cannot be made, a setting is
  /// wrong), usage_error (the initial_loader was misused: a relation id, a row size, a
  /// file name), io_error (a write or fsync failed).
  static void create(const std::string& dir, const create_options& options = {});

  /// Opens a data directory, running crash recovery when the last stop was not clean. One
  /// process at a time may open a directory (config_error otherwise). If recovery fails,
  /// nothing marks the directory clean: the next open retries it.
  /// Throws: usage_error (open_options that exclude each other), config_error (`dir` is
  /// missing, not a data directory, in use by another process, or a standby opened as a
  /// primary or the reverse; a setting, tidemark.conf or standby.conf is wrong; open
  /// read-only, it needs recovery; replication_listen cannot listen), data_error or
  /// page_corrupt_error (a corrupt control file, WAL or page), io_error (a system call
  /// failed), engine_stopped_error (the engine stopped during recovery, e.g. a failed
  /// fsync).
  static std::unique_ptr<database> open(const std::string& dir, const open_options& options = {});

  /// Checks a directory that no process has open for writing, changing nothing: the
  /// control file, every WAL record's CRC from the redo point to the end, every page of
  /// every relation and table (checksum and identity), every doublewrite ring image, and
  /// (after a clean close) every table's tree: keys in order in each page, separators
  /// bounding their children, sibling links, every page reachable once, free pages and
  /// overflow chains accounted for; the first violation in each table is named. Run it
  /// after a clean close: after a crash, torn pages are expected until recovery repairs them.
  /// What it finds is in the report. Throws: config_error (`dir` is missing, not a data
  /// directory, or open for writing), io_error (a file could not be read).
  static file_check_report check_files(const std::string& dir);
  /// Copies the running primary at `primary` (HOST:PORT, its replication_listen) into
  /// `new_dir` (missing or empty) as a standby named `name` (empty: a generated name): its
  /// files, verified as they are copied, and the WAL that makes them consistent.
  /// Open it with open_options::standby. `progress` (optional) receives a line every
  /// second. Throws: config_error (`new_dir` is not empty or cannot be made, `primary` is
  /// not HOST:PORT, `name` is not a standby name), replication_error (the primary cannot
  /// be reached or refuses), data_error (the primary sent an inconsistent copy), io_error
  /// (writing the copy failed).
  static base_backup_report
  base_backup(const std::string& new_dir, const std::string& primary, const std::string& name = "",
              const std::function<void(const std::string&)>& progress = {});
  /// The same, with options: a name the primary knows as another standby's is refused
  /// (replication_error naming it) unless options.take_over.
  static base_backup_report base_backup(const std::string& new_dir, const std::string& primary,
                                        const base_backup_options& options);

  ~database(); // closes (ignoring a failure already reported) if close() was not called
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  /// Throws: usage_error (the database is closed).
  session open_session();

  /// Keyed tables. Each call below is a transaction of its own, committed (durably, as
  /// any commit) before it returns; tables made by one are seen by every session at once.
  /// A name is 1..max_table_name_bytes bytes without control characters.
  /// create_table throws: usage_error (a bad name, a table of that name exists, read-only
  /// or standby, closed, called inside a callback), engine_stopped_error, io_error.
  table create_table(const std::string& name);
  /// The table named `name`. Throws: usage_error (no such table, a bad name, closed).
  table open_table(const std::string& name);
  /// Removes the table and everything in it: its handles throw usage_error from now on.
  /// Throws as create_table, and usage_error when there is no such table.
  void drop_table(const std::string& name);
  /// Every table, by name. Throws: usage_error (closed).
  std::vector<table_info> tables();
  /// The most pages a commit of a table transaction may hold at once: a quarter of the
  /// buffer pool (at most 65 535 pages), and at least 8. A transaction whose commit would
  /// need more (its leaves, the overflow pages of its large values) is refused (see
  /// session::commit).
  std::size_t max_commit_pages() const;
  /// Runs an immediate checkpoint and waits for it. Throws: usage_error (closed, open
  /// read-only, a standby, or called from an observer or log callback),
  /// engine_stopped_error (the engine had failed, or failed in the checkpoint).
  void checkpoint();
  /// Reads tidemark.conf again, as PostgreSQL's reload does (settings given at open in
  /// open_options::settings still win), and gives every reloadable setting whose value
  /// changed (describe_settings(): `reloadable`) to the running engine: the checkpointer,
  /// bgwriter, sync worker and doublewrite batcher use it from their next decision (a
  /// checkpoint in progress paces its next write step by the new values; a new
  /// checkpoint_timeout counts from the last checkpoint's start). Other changed settings
  /// keep their value until a restart and are named in the report. Logs a line for each.
  /// Returns once every actor has it.
  /// Throws: usage_error (closed, open read-only, or called from an observer or log
  /// callback), config_error (tidemark.conf unreadable or wrong: nothing changes),
  /// engine_stopped_error.
  reload_report reload();
  /// Shutdown checkpoint, then stops the engine. Idempotent. engine_stopped_error if the
  /// engine had failed (or failed in the shutdown checkpoint): it is stopped all the same,
  /// and the next open runs crash recovery. Throws: usage_error (called from an observer or
  /// log callback), engine_stopped_error.
  void close();

  const recovery_report& recovery() const;
  /// Standby only: ends streaming, replays what arrived, runs the end-of-recovery
  /// checkpoint in the next generation (a standby of the old primary refuses it), and
  /// accepts writes from then on. Throws: usage_error (closed, called from an observer or
  /// log callback, not a standby, or the copy is not consistent yet: standby().flushed
  /// below backup_end), data_error (refused: redo stopped short of WAL it has; the standby
  /// stays one), engine_stopped_error (the engine had failed, or failed in the
  /// end-of-recovery checkpoint). Also usage_error, unless options.force, when the primary
  /// last said that another of its standbys had flushed more WAL than this one
  /// (standby().peer_ahead): promote that one instead (docs/replication.md, the failover
  /// runbook).
  void promote(const promote_options& options = {});
  bool is_standby() const;
  /// The generation of the history this database holds: 0 for a system `init` made, one
  /// more at each promotion (a standby reports the generation of the primary it follows).
  /// Two databases of one system with the same transaction id but different generations
  /// ran different transactions under it. Throws: usage_error (closed).
  std::uint32_t generation() const;
  /// A standby's stream (all zero on a primary).
  standby_status standby() const;
  /// A primary's standbys and base backups (empty without replication_listen). Throws:
  /// usage_error (closed).
  std::vector<standby_info> standbys() const;
  /// HOST:PORT the WAL sender listens on for standbys and base backups: replication_listen,
  /// with the port the system chose when it said port 0. Empty when nothing listens.
  std::string replication_address() const;
  statistics stats() const;
  /// The value of a setting for this run, as text ("8kB", "doublewrite", "on"). Throws:
  /// config_error (no such setting).
  std::string setting(const std::string& key) const;
  std::size_t page_size() const;
  /// Blocks relation `relation` has (appended rows extend it). Throws: usage_error (a
  /// relation id out of range, or closed).
  block_number relation_blocks(relation_id relation) const;
  /// What the commit-status log records for `id` (unknown: never committed or aborted, too
  /// old to be kept, or an id this database has not assigned yet). Open read-only too: it then
  /// reads the log's files. Throws: usage_error (closed), io_error (a page of the log could not be
  /// read or written).
  transaction_status status_of(transaction_id id) const;

  /// Test hooks. simulate_power_loss() needs open_options::faults: unsynced writes are
  /// lost or torn and the engine refuses all further I/O (abandon the database: destroy
  /// it without close(), then open the directory again). write_trace() needs
  /// open_options::trace: the message trace as Chrome trace-event JSON. Throws:
  /// usage_error (opened without faults or trace), io_error (write_trace: the file cannot
  /// be written).
  power_loss_report simulate_power_loss();
  void write_trace(const std::string& path) const;

  struct impl;

private:
  friend struct internal_access;
  explicit database(std::shared_ptr<impl> state);
  std::shared_ptr<impl> impl_;
};

/// The rows appended to a relation, in order: every page's committed rows, then (inside a
/// transaction) the transaction's own pending rows. Reads go through the session that made
/// it, with the same isolation; use it from that session's thread. A cursor whose session
/// is gone throws usage_error.
class row_cursor {
public:
  /// Moves to the next row; false at the end. Throws: usage_error (as any session call,
  /// or a cursor session::rows did not make), the errors of a read (see session),
  /// data_error (a page's row count and size cannot be).
  bool next();
  /// Where the row is; a pending row has no page yet (pending() is true).
  page_id page() const { return page_; }
  std::uint32_t slot() const { return slot_; }
  bool pending() const { return pending_; }
  const void* data() const { return row_; }
  std::uint32_t size() const { return size_; }

private:
  friend class session;
  struct state;
  explicit row_cursor(std::shared_ptr<state> s) : state_(std::move(s)) {}
  std::shared_ptr<state> state_;
  page_id page_{};
  std::uint32_t slot_ = 0;
  bool pending_ = false;
  const void* row_ = nullptr;
  std::uint32_t size_ = 0;
};

/// An ordered walk over a table's entries inside a key_range (session::cursor), reading as
/// its session's transaction reads: every step is a read that commit() validates (a key
/// that appeared in or vanished from the stretch a step passed over is a conflict), and
/// the transaction's own pending changes are seen. A cursor lives as long as the
/// transaction it was made in (or, made outside one, until the session begins one), and is
/// used from the thread that made it: otherwise every call throws usage_error. Stepping
/// forward, it reads the rest of a leaf at once and answers the next steps from it: outside
/// a transaction, a step may show an entry as it was when that leaf was read (never older
/// than what the cursor's earlier steps showed).
///
/// seek, seek_first, seek_last, next and prev return whether the cursor is on an entry;
/// next() on a cursor on none starts at the first entry, prev() at the last. Each may
/// throw what a read of the session throws (see session).
class table_cursor {
public:
  /// The first entry of the range at or after `key` (after it, with `inclusive` false).
  bool seek(std::string_view key, bool inclusive = true);
  bool seek_first();
  bool seek_last();
  bool next();
  bool prev();
  bool valid() const { return positioned_; }
  /// The entry the cursor is on. Throws: usage_error (on none).
  const std::string& key() const;
  const std::string& value() const;

  struct state;

private:
  friend class session;
  explicit table_cursor(std::shared_ptr<state> s) : state_(std::move(s)) {}
  bool land(std::optional<std::pair<std::string, std::string>> entry);
  std::shared_ptr<state> state_;
  bool positioned_ = false;
  std::string key_, value_;
};

/// Fills an empty table from entries in increasing key order (session::load): the way to
/// put initial data into a table. Entries are committed a leaf's worth at a time (each a
/// transaction of its own, so leaves fill left to right and each is logged about once),
/// without waiting for each one's fsync; finish() returns once all of them are durable,
/// as a commit would. A load is not atomic: after a crash before finish() returned, the
/// table holds the entries of the batches that became durable, a prefix of the load.
/// Until finish() (or its destruction, which rolls back the batch in progress and waits
/// for nothing), the session is busy with the load: begin() throws usage_error.
class table_loader {
public:
  table_loader(table_loader&&) noexcept;
  table_loader& operator=(table_loader&&) noexcept;
  ~table_loader();
  /// Throws usage_error (a key not after the previous one, a key or value over its limit,
  /// finished already, used from another thread than its session's), and what a commit
  /// throws (then the load is over: the entries committed before stay).
  void add(std::string_view key, std::string_view value);
  /// Commits what is left and returns, the number of entries loaded, once all of them are
  /// durable. Throws what a commit throws.
  std::uint64_t finish();

  struct state;

private:
  friend class session;
  explicit table_loader(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

/// A sequence of transactions, used from one thread at a time. begin(), then reads and
/// changes, then commit() or rollback(). Reads may also be made outside a transaction;
/// changes may not (usage_error: before begin(), and after commit(), rollback() or a
/// conflict_error ended the transaction).
///
/// A transaction uses keyed tables (get, put, insert, erase, cursor) or pages (the calls
/// after them), not both: the first call of the other kind throws usage_error.
///
/// Tables: keys are at most max_key_bytes, values max_value_bytes (types.hpp). A
/// transaction's reads see the committed tables with its own pending changes; commit()
/// checks that every key it read still has the value (or absence) it read, and that every
/// stretch a cursor stepped over holds the same entries, phantoms included, then applies
/// everything at once; otherwise conflict_error, nothing applied.
///
/// Isolation: committed transactions are serializable. Changes are buffered until
/// commit(); the transaction's reads see the committed data with its own pending
/// add_i64 and write_bytes applied. commit() checks that everything the transaction read
/// still holds (bytes on pages it changes, the page unchanged on pages it only reads, the
/// relation's size for a scan that reached its end) and throws conflict_error, applying
/// nothing, when it does not: retry the transaction. add_i64 deltas that the transaction
/// does not read back conflict with nothing.
///
/// Durability: with synchronous_commit=on, commit() returns once the transaction and
/// everything it read are durable; a read outside a transaction returns once what it saw
/// is durable. A crash keeps either all of a committed transaction or none of it.
///
/// Limits, checked when the call is made: offsets and lengths inside the page's data area
/// (page_header_bytes .. page_size); at most 8 pages changed per transaction (each
/// relation appended to counts as one); at most 65 535 bytes of changes per page, each
/// change costing 5 bytes more than its length; rows appended to one relation in one
/// transaction share one size and fit one page. Reads reach blocks the relation has; a
/// change may also extend a relation by its next block.
///
/// Errors: every call below (but the destructor and moves) throws usage_error when the
/// session was moved from, its database is closed or gone, or another thread is inside a
/// call on it; nothing changed then. A read (read_i64, read_bytes, row_count) may also
/// throw usage_error (a page or bytes out of range, a null buffer), page_corrupt_error (the
/// page failed verification when read in), io_error (reading it in, or writing out a dirty
/// buffer to make room, failed; the engine goes on) and engine_stopped_error (the engine
/// had failed, or stopped before what the read saw was durable).
class session {
public:
  session(session&&) noexcept;
  session& operator=(session&&) noexcept;
  ~session();

  /// Throws: usage_error (inside a transaction), engine_stopped_error.
  void begin();
  /// True between begin() and commit() or rollback().
  bool in_transaction() const;
  std::int64_t read_i64(page_id page, std::uint32_t offset);
  void read_bytes(page_id page, std::uint32_t offset, void* out, std::uint32_t length);
  /// Rows appended to the page (committed).
  std::uint32_t row_count(page_id page);
  /// The rows appended to `relation`, in order (see row_cursor). Throws: usage_error (a
  /// relation id out of range).
  row_cursor rows(relation_id relation);
  /// Keyed tables. get() is a read (it may also be made outside a transaction): the value,
  /// none when the key is absent. put() inserts or replaces; insert() only inserts (false
  /// when the key is there: nothing changed); erase() returns whether the key was there.
  /// Besides a read's errors, they throw usage_error (a table handle of another database,
  /// of a dropped table or naming none; a key or value over its limit; put, insert and
  /// erase outside a transaction, or on a read-only database or standby; a transaction
  /// that uses pages); nothing changed then and the transaction stays open.
  std::optional<std::string> get(const table& t, std::string_view key);
  void put(const table& t, std::string_view key, std::string_view value);
  bool insert(const table& t, std::string_view key, std::string_view value);
  bool erase(const table& t, std::string_view key);
  /// Adds `delta` (wrapping) to the little-endian 64-bit integer at byte `offset` of the
  /// key's value when the transaction commits, without reading it: like add_i64 on a
  /// page, it conflicts with nothing unless the transaction also reads the key (counters
  /// and balances updated by many sessions at once). Reads in the transaction see the sum.
  /// Throws as put; and usage_error when the transaction erased the key, or put a value
  /// those 8 bytes are not inside. commit() throws usage_error, applying nothing, when
  /// the key is then absent, its value too short, or longer than a leaf keeps (values over
  /// about 40 % of a page live on overflow pages).
  void add_i64(const table& t, std::string_view key, std::uint32_t offset, std::int64_t delta);
  /// A cursor over the entries of `t` in `range` (see table_cursor), not yet on one.
  table_cursor cursor(const table& t, const key_range& range = {});
  /// A bulk load into `t` (see table_loader). Throws usage_error: inside a transaction,
  /// `t` holds an entry already, a read-only database or standby, a handle as get's.
  table_loader load(const table& t);

  /// Changes, buffered until commit(). Throws: usage_error only (outside a transaction, a
  /// limit, a page or bytes out of range, a null buffer, a read-only database or standby);
  /// nothing was added and the transaction stays open.
  void add_i64(page_id page, std::uint32_t offset, std::int64_t delta);
  void write_bytes(page_id page, std::uint32_t offset, const void* data, std::uint32_t length);
  /// Adds a row to the relation's last page (or a new one); where is decided at commit().
  /// A page holds rows of one size. An append never overwrites bytes that are not zero, nor
  /// bytes the same transaction changes by add_i64 or write_bytes (before or after the
  /// append), and never starts rows on a page written by offset: it moves on to the next
  /// block, so every change of the transaction is there after its commit. Throws:
  /// usage_error only, as add_i64.
  void append_row(relation_id relation, const void* row, std::uint32_t row_size);
  /// Validates, applies and logs the transaction and, with synchronous_commit=on, returns
  /// once it is durable (group commit: the thread sleeps until a WAL sync covers it).
  /// Returns the transaction's id. The transaction has ended whatever it throws.
  /// Throws, having applied nothing: usage_error (no begin(), or a limit known only now:
  /// rows landing on a page it also changes), conflict_error (retry), page_corrupt_error
  /// (a page it reads or changes failed verification when read in), io_error (reading such
  /// a page in, or writing out a dirty buffer to make room for it, failed, e.g. on a full
  /// disk; the engine goes on), engine_stopped_error (the engine had failed, or stopped
  /// while applying). Throws commit_outcome_unknown when the engine stopped after the
  /// record was written: after the next open, status_of() says whether it is there.
  transaction_id commit();
  /// Forgets the transaction's changes (no-op outside one).
  void rollback();
  /// The id of the transaction begun last.
  transaction_id id() const;

  struct impl;

private:
  friend class database;
  friend class table_cursor;
  friend class table_loader;
  explicit session(std::shared_ptr<impl> state);
  std::shared_ptr<impl> impl_;
};

} // namespace tidemark
