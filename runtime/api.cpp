// The public API (include/tidemark/database.hpp) over the runtime's database and session.
// It checks what an application passes (relation ids, offsets, lengths, a closed
// database) before anything reaches the engine, converts between the public and the
// internal vocabulary, and keeps the engine alive for as long as a session refers to it:
// a session outliving its database gets usage_error, never freed memory.
#include "runtime/api_impl.hpp"

#include "runtime/api_check.hpp"
#include "runtime/api_statistics.hpp"
#include "runtime/config.hpp"
#include "runtime/initial_loader.hpp"
#include "runtime/startup.hpp"
#include "storage/page.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <mutex>

namespace tidemark {

namespace {

storage::fault_config internal(const fault_injection& f) {
  storage::fault_config c;
  c.crash_after_writes = f.crash_after_writes;
  c.mode = f.mode == crash_mode::torn      ? storage::crash_mode::torn
           : f.mode == crash_mode::process ? storage::crash_mode::process
                                           : storage::crash_mode::lose_unsynced;
  c.tear_every_write = f.tear_every_write;
  c.seed = f.seed;
  c.fail_sync_after = f.fail_fsync_after;
  c.fail_sync_match = f.fail_fsync_match;
  c.journal_path = f.journal_path;
  c.bad_reads.kind = f.bad_read == read_fault::zeros        ? storage::read_fault::zeros
                     : f.bad_read == read_fault::short_read ? storage::read_fault::short_read
                     : f.bad_read == read_fault::error      ? storage::read_fault::error
                                                            : storage::read_fault::none;
  c.bad_reads.after = f.bad_read_after;
  c.bad_reads.match = f.bad_read_match;
  c.bad_reads.repeats = f.bad_read_repeats;
  return c;
}

std::optional<storage::fault_config> internal(const std::optional<fault_injection>& f) {
  if (!f)
    return std::nullopt;
  return internal(*f);
}

// The fsyncs the sync worker traces, as the observer's events.
messages::trace_sink::listener file_sync_listener(std::shared_ptr<observer> events) {
  return [events](const messages::trace_event& e) {
    if (e.type != messages::trace_type::fsync)
      return;
    callback_scope scope;
    file_sync_event sync;
    if (e.c == static_cast<std::uint64_t>(storage::file_kind::commit_log))
      sync.kind = file_sync_event::file_kind::commit_log_segment;
    sync.relation = static_cast<relation_id>(e.a);
    sync.segment = static_cast<std::uint32_t>(e.b);
    events->on_file_synced(sync);
  };
}

} // namespace

// ---- database ------------------------------------------------------------------------------

namespace {
// Set while an observer or log callback runs on this thread: such a callback runs on a
// Tidemark thread that a checkpoint or close would wait for.
thread_local bool in_callback = false;
} // namespace

callback_scope::callback_scope() { in_callback = true; }
callback_scope::~callback_scope() { in_callback = false; }

void refuse_in_callback(const char* operation) {
  if (in_callback)
    throw usage_error(std::string(operation) + ": called from an observer or log callback, on "
                                               "the Tidemark thread it would wait for");
}

void check_relation(relation_id relation) {
  if (relation == 0 || relation > max_relation)
    throw usage_error("relation id " + std::to_string(relation) + " is out of range 1.." +
                      std::to_string(max_relation));
}

session_call::session_call(session::impl* state, const char* operation) {
  if (state == nullptr)
    throw usage_error(std::string(operation) + ": the session was moved from, or is gone");
  if (state->in_call.exchange(true, std::memory_order_acquire))
    throw usage_error(std::string(operation) + ": the session is in use by another thread "
                                               "(open one session per thread)");
  state_ = state;
  try {
    state_->db->check_open(operation);
  } catch (...) {
    state_->in_call.store(false, std::memory_order_release);
    throw;
  }
  state_->call_seq.fetch_add(1); // seq_cst: ordered against a drop's waiting_for_calls
}

session_call::~session_call() {
  state_->call_seq.fetch_add(1);
  state_->in_call.store(false, std::memory_order_release);
  database::impl& db = *state_->db;
  if (db.waiting_for_calls.load() > 0) {
    std::lock_guard<std::mutex> lock(db.calls_mutex);
    db.call_returned.notify_all();
  }
}

void database::impl::register_session(const std::shared_ptr<session::impl>& s) {
  std::lock_guard<std::mutex> lock(sessions_mutex);
  sessions.erase(std::remove_if(sessions.begin(), sessions.end(),
                                [](const std::weak_ptr<session::impl>& w) { return w.expired(); }),
                 sessions.end());
  sessions.push_back(s);
}

void database::impl::wait_for_calls_in_flight() {
  waiting_for_calls.fetch_add(1); // seq_cst, before the sequences are read
  std::vector<std::pair<std::shared_ptr<session::impl>, std::uint64_t>> in_flight;
  {
    std::lock_guard<std::mutex> lock(sessions_mutex);
    for (const std::weak_ptr<session::impl>& w : sessions)
      if (std::shared_ptr<session::impl> s = w.lock()) {
        std::uint64_t seq = s->call_seq.load();
        if (seq % 2 == 1)
          in_flight.emplace_back(std::move(s), seq);
      }
  }
  std::unique_lock<std::mutex> lock(calls_mutex);
  call_returned.wait(lock, [&] {
    for (const auto& [s, seq] : in_flight)
      if (s->call_seq.load() == seq)
        return false;
    return true;
  });
  waiting_for_calls.fetch_sub(1);
}

database::database(std::shared_ptr<impl> state) : impl_(std::move(state)) {}

database::~database() {
  try {
    close();
  } catch (const std::exception&) {
    // A failure was reported where it happened; the next start runs crash recovery.
  }
}

void database::create(const std::string& dir, const create_options& options) {
  runtime::instance::create(
    dir, options.settings,
    [&](storage::relation_files& files, const runtime::settings& s) {
      runtime::relation_loader loader(files, dir, s.data_checksums);
      if (options.initial_data)
        options.initial_data(loader);
      loader.finish();
    },
    internal(options.faults));
}

std::unique_ptr<database> database::open(const std::string& dir, const open_options& options) {
  if (options.read_only && options.standby)
    throw usage_error("open_options: read_only and standby exclude each other (a standby's "
                      "sessions only read anyway)");
  if (options.read_only) {
    if (options.faults || options.trace || options.events)
      throw usage_error("open_options::read_only: fault injection, tracing and the observer "
                        "need a database open for writing");
    runtime::instance_options internal_options;
    internal_options.overrides = options.settings;
    internal_options.log = options.log;
    auto state = std::make_shared<impl>();
    state->db = runtime::instance::open_read_only(dir, internal_options);
    state->recovery = state->db->recovery();
    return std::unique_ptr<database>(new database(std::move(state)));
  }
  runtime::instance_options internal_options;
  internal_options.overrides = options.settings;
  internal_options.faults = internal(options.faults);
  internal_options.trace = options.trace;
  if (options.events)
    internal_options.trace_listener = file_sync_listener(options.events);
  if (options.log)
    internal_options.log = [log = options.log](const std::string& line) {
      callback_scope scope;
      log(line);
    };
  internal_options.standby = options.standby;
  internal_options.primary = options.primary;
  internal_options.stream = options.stream;
  auto state = std::make_shared<impl>();
  state->db = runtime::instance::open(dir, internal_options);
  state->recovery = state->db->recovery();
  state->traced = options.trace;
  if (options.events) {
    std::shared_ptr<observer> events = options.events;
    state->db->observe_checkpoints([events](const messages::checkpoint_event& e) {
      checkpoint_event event;
      event.phase = static_cast<checkpoint_phase>(e.phase);
      event.reason = messages::to_string(static_cast<messages::checkpoint_reason>(e.reason));
      event.buffers_total = e.buffers_total;
      event.buffers_written = e.buffers_written;
      event.progress = e.progress;
      event.schedule = e.schedule;
      event.napping = e.napping;
      callback_scope scope;
      events->on_checkpoint(event);
    });
  }
  return std::unique_ptr<database>(new database(std::move(state)));
}

file_check_report database::check_files(const std::string& dir) { return check_data_files(dir); }

session database::open_session() {
  impl_->check_open("open_session");
  auto state = std::make_shared<session::impl>(impl_);
  impl_->register_session(state);
  return session(std::move(state));
}

void database::checkpoint() {
  refuse_in_callback("checkpoint");
  impl_->check_open("checkpoint");
  impl_->db->checkpoint();
}

reload_report database::reload() {
  refuse_in_callback("reload");
  impl_->check_open("reload");
  return impl_->db->reload();
}

void database::close() {
  refuse_in_callback("close");
  std::lock_guard<std::mutex> guard(impl_->close_mutex);
  if (impl_->closed.exchange(true))
    return;
  impl_->db->close();
}

const recovery_report& database::recovery() const { return impl_->recovery; }

base_backup_report database::base_backup(const std::string& new_dir, const std::string& primary,
                                         const std::string& name,
                                         const std::function<void(const std::string&)>& progress) {
  base_backup_options options;
  options.name = name;
  options.progress = progress;
  return runtime::base_backup(new_dir, primary, options);
}

base_backup_report database::base_backup(const std::string& new_dir, const std::string& primary,
                                         const base_backup_options& options) {
  return runtime::base_backup(new_dir, primary, options);
}

void database::promote(const promote_options& options) {
  refuse_in_callback("promote");
  impl_->check_open("promote");
  // Tables the primary dropped lose their files now: their handles stop working first,
  // and the calls that passed their checks before end before the files go.
  impl_->db->promote(options.force, [this](const std::vector<storage::rel_id>& dropped) {
    {
      std::lock_guard<std::mutex> guard(impl_->tables_mutex);
      for (auto it = impl_->tables.begin(); it != impl_->tables.end();) {
        auto next = std::next(it);
        if (std::find(dropped.begin(), dropped.end(), it->second->relation) != dropped.end())
          impl_->forget_dropped(it);
        it = next;
      }
    }
    impl_->wait_for_calls_in_flight();
  });
  impl_->recovery = impl_->db->recovery();
}

bool database::is_standby() const { return impl_->db->is_standby(); }

std::uint32_t database::generation() const {
  impl_->check_open("generation");
  return impl_->engine().control().generation;
}

standby_status database::standby() const { return impl_->db->standby(); }

std::string database::replication_address() const { return impl_->db->replication_address(); }

std::vector<standby_info> database::standbys() const {
  impl_->check_open("standbys");
  std::vector<standby_info> out;
  for (const messages::standby_view& v : impl_->db->standbys()) {
    standby_info info;
    info.name = v.standby.name;
    info.connected = v.connected;
    info.sent = v.sent;
    info.written = v.standby.written;
    info.flushed = v.standby.flushed;
    info.replayed = v.standby.replayed;
    info.pages_read = v.standby.pages_read;
    info.prefetch_hits = v.standby.prefetch_hits;
    info.seconds_since_heard = v.seconds_since_reply;
    out.push_back(std::move(info));
  }
  return out;
}

std::string database::setting(const std::string& key) const { return impl_->db->setting(key); }

statistics database::stats() const {
  statistics s = collect_statistics(impl_->engine());
  s.commits = impl_->commits.load(std::memory_order_relaxed);
  s.conflicts = impl_->conflicts.load(std::memory_order_relaxed);
  return s;
}

std::size_t database::page_size() const { return impl_->engine().config.page_size; }

block_number database::relation_blocks(relation_id relation) const {
  check_relation(relation);
  impl_->check_open("relation_blocks");
  return impl_->engine().store.files->nblocks(relation);
}

transaction_status database::status_of(transaction_id id) const {
  impl_->check_open("status_of");
  runtime::engine& e = impl_->engine();
  if (id >= e.next_xid.load()) // never assigned: nothing to read (and no file to create)
    return transaction_status::unknown;
  // Open read-only, there is no commit-status log in memory: its files hold every status.
  storage::xact_status status =
    e.store.commit_log != nullptr
      ? e.store.commit_log->get(id)
      : storage::read_recorded_status(*e.store.io, e.data_dir + "/xact", e.config.page_size, id);
  switch (status) {
    case storage::xact_status::committed:
      return transaction_status::committed;
    case storage::xact_status::aborted:
      return transaction_status::aborted;
    case storage::xact_status::unknown:
      break;
  }
  return transaction_status::unknown;
}

power_loss_report database::simulate_power_loss() {
  storage::fault_engine* faults = impl_->engine().faults;
  if (faults == nullptr)
    throw usage_error("simulate_power_loss needs open_options::faults");
  storage::power_loss_report loss = faults->simulate_power_loss();
  return {loss.unsynced_writes, loss.survived, loss.lost, loss.torn};
}

void database::write_trace(const std::string& path) const {
  if (!impl_->traced)
    throw usage_error("write_trace needs open_options::trace");
  impl_->engine().store.trace->write_chrome_json(path);
}

// ---- session -------------------------------------------------------------------------------

session::session(std::shared_ptr<impl> state) : impl_(std::move(state)) {}
session::session(session&&) noexcept = default;
session& session::operator=(session&&) noexcept = default;
session::~session() = default;

namespace {

storage::page_id internal(page_id page) { return {page.relation, page.block}; }

// A page a call reads or changes: a valid relation, bytes inside the data area, a block
// the relation has (or, for a change, the next one).
void check_access(session::impl& s, page_id page, std::uint32_t offset, std::uint32_t length,
                  bool changing) {
  s.db->check_page(page, offset, length);
  s.internal.check_block(internal(page), changing);
}

} // namespace

void session::begin() {
  session_call s(impl_.get(), "begin");
  s->internal.begin();
  ++s->transaction_epoch;
  s->used_tables.clear();
}

bool session::in_transaction() const {
  return session_call(impl_.get(), "in_transaction")->internal.in_transaction();
}

std::int64_t session::read_i64(page_id page, std::uint32_t offset) {
  session_call s(impl_.get(), "read_i64");
  check_access(*impl_, page, offset, 8, false);
  return s->internal.read_i64(internal(page), static_cast<std::uint16_t>(offset));
}

void session::read_bytes(page_id page, std::uint32_t offset, void* out, std::uint32_t length) {
  session_call s(impl_.get(), "read_bytes");
  check_access(*impl_, page, offset, length, false);
  if (length > 0 && out == nullptr)
    throw usage_error("read_bytes: out is null");
  s->internal.read_bytes(internal(page), static_cast<std::uint16_t>(offset), out,
                         static_cast<std::uint16_t>(length));
}

std::uint32_t session::row_count(page_id page) {
  session_call s(impl_.get(), "row_count");
  check_relation(page.relation);
  s->internal.check_block(internal(page), false);
  return s->internal.rows_on(internal(page)).count;
}

void session::add_i64(page_id page, std::uint32_t offset, std::int64_t delta) {
  session_call s(impl_.get(), "add_i64");
  check_access(*impl_, page, offset, 8, true);
  s->internal.add_i64(internal(page), static_cast<std::uint16_t>(offset), delta);
}

void session::write_bytes(page_id page, std::uint32_t offset, const void* data,
                          std::uint32_t length) {
  session_call s(impl_.get(), "write_bytes");
  check_access(*impl_, page, offset, length, true);
  if (length > 0 && data == nullptr)
    throw usage_error("write_bytes: data is null");
  s->internal.write_bytes(internal(page), static_cast<std::uint16_t>(offset), data,
                          static_cast<std::uint16_t>(length));
}

void session::append_row(relation_id relation, const void* row, std::uint32_t row_size) {
  session_call s(impl_.get(), "append_row");
  check_relation(relation);
  if (row_size == 0 || tidemark::rows_per_page(s->db->engine().config.page_size, row_size) == 0)
    throw usage_error("row size " + std::to_string(row_size) + " does not fit a page");
  if (row == nullptr)
    throw usage_error("append_row: row is null");
  s->internal.append_row(relation, row, static_cast<std::uint16_t>(row_size));
}

transaction_id session::commit() {
  session_call s(impl_.get(), "commit");
  ++s->transaction_epoch; // the transaction ends, whatever commit() throws
  refuse_dropped_tables(s.impl());
  try {
    transaction_id id = s->internal.commit();
    s->db->commits.fetch_add(1, std::memory_order_relaxed);
    return id;
  } catch (const conflict_error&) {
    s->db->conflicts.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
}

void session::rollback() {
  session_call s(impl_.get(), "rollback");
  s->internal.rollback();
  ++s->transaction_epoch;
  s->used_tables.clear();
}

transaction_id session::id() const {
  return session_call(impl_.get(), "id")->internal.transaction_id();
}

// ---- row_cursor ----------------------------------------------------------------------------

struct row_cursor::state {
  std::weak_ptr<session::impl> owner;
  relation_id relation = 0;
  block_number blocks = 0;     // the relation's size when the scan began
  block_number block = 0;      // next block to read
  std::uint32_t next_slot = 0; // next row on the current page
  std::uint32_t count = 0, row_size = 0;
  std::vector<unsigned char> rows; // the current page's rows
  std::size_t next_pending = 0;    // this transaction's own rows, after the pages
  bool pages_done = false;
};

row_cursor session::rows(relation_id relation) {
  session_call s(impl_.get(), "rows");
  check_relation(relation);
  auto cursor = std::make_shared<row_cursor::state>();
  cursor->owner = impl_;
  cursor->relation = relation;
  cursor->blocks = s->internal.relation_size(relation);
  return row_cursor(std::move(cursor));
}

bool row_cursor::next() {
  if (!state_)
    throw usage_error("row_cursor::next: the cursor was never made by session::rows");
  std::shared_ptr<session::impl> owner = state_->owner.lock();
  session_call s(owner.get(), "row_cursor::next");
  state& c = *state_;
  while (!c.pages_done && c.next_slot >= c.count) {
    if (c.block >= c.blocks) {
      c.pages_done = true;
      break;
    }
    page_id page{c.relation, c.block++};
    storage::page_rows rows = s->internal.rows_on(internal(page));
    c.next_slot = 0;
    c.count = rows.count;
    c.row_size = rows.row_size;
    if (c.count == 0)
      continue;
    std::size_t size = s->db->engine().config.page_size;
    if (c.row_size == 0 || page_header_bytes + std::size_t(c.count) * c.row_size > size)
      throw data_error("relation " + std::to_string(c.relation) + " block " +
                       std::to_string(page.block) + " says it holds " + std::to_string(c.count) +
                       " rows of " + std::to_string(c.row_size) + " bytes, which a " +
                       std::to_string(size) +
                       "-byte page cannot (or a page written before "
                       "pages recorded their row size)");
    c.rows.resize(std::size_t(c.count) * c.row_size);
    s->internal.read_bytes(internal(page), static_cast<std::uint16_t>(page_header_bytes),
                           c.rows.data(), static_cast<std::uint16_t>(c.rows.size()));
  }
  if (!c.pages_done) {
    page_ = {c.relation, c.block - 1};
    slot_ = c.next_slot++;
    pending_ = false;
    size_ = c.row_size;
    row_ = c.rows.data() + std::size_t(slot_) * c.row_size;
    return true;
  }
  const storage::page_transaction& txn = s->internal.transaction();
  std::uint16_t size = 0;
  const unsigned char* row = txn.active() ? txn.pending_row(c.relation, c.next_pending, &size)
                                          : nullptr;
  if (row == nullptr)
    return false;
  page_ = {c.relation, 0};
  slot_ = static_cast<std::uint32_t>(c.next_pending++);
  pending_ = true;
  size_ = size;
  row_ = row;
  return true;
}

runtime::instance& internal_access::of(database& db) { return *db.impl_->db; }

} // namespace tidemark
