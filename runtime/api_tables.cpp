// The public API of keyed tables (include/tidemark/database.hpp): table handles, the
// catalog's operations, a session's get/put/insert/erase and its cursors. It checks what
// an application passes (a handle of this database naming a live table, keys and values
// within their limits, a cursor used inside its transaction and on its thread) before
// anything reaches the engine (runtime/tables.hpp, runtime/session.hpp).
#include "runtime/api_impl.hpp"

#include "access/catalog.hpp"
#include "access/tree.hpp"
#include "runtime/tables.hpp"

#include <algorithm>
#include <thread>

namespace tidemark {

static_assert(max_key_bytes == access::max_key_size, "the public limit is the tree's");
static_assert(max_value_bytes == access::max_value_size, "the public limit is the tree's");
static_assert(max_table_name_bytes == access::max_table_name, "the public limit is the catalog's");

namespace {

std::string quoted(const std::string& name) { return "'" + name + "'"; }

// The relation of the table `handle` names, when a session of `db` may use it.
relation_id relation_of(const database::impl& db, const std::shared_ptr<const table::state>& handle,
                        const char* operation) {
  if (handle == nullptr)
    throw usage_error(std::string(operation) + ": the table handle names no table");
  if (handle->owner != &db)
    throw usage_error(std::string(operation) + ": table " + quoted(handle->name) +
                      " belongs to another database");
  if (handle->dropped.load(std::memory_order_acquire))
    throw usage_error(std::string(operation) + ": table " + quoted(handle->name) + " was dropped");
  return handle->relation;
}

void check_key(std::string_view key, const char* operation) {
  if (key.size() > max_key_bytes)
    throw usage_error(std::string(operation) + ": a key is at most " +
                      std::to_string(max_key_bytes) + " bytes; this one has " +
                      std::to_string(key.size()));
}

void check_value(std::string_view value, const char* operation) {
  if (value.size() > max_value_bytes)
    throw usage_error(std::string(operation) + ": a value is at most " +
                      std::to_string(max_value_bytes) + " bytes; this one has " +
                      std::to_string(value.size()));
}

// relation_of, and inside a transaction the handle noted as used by it (for commit()).
relation_id use_table(session::impl& s, const std::shared_ptr<const table::state>& handle,
                      const char* operation) {
  relation_id relation = relation_of(*s.db, handle, operation);
  if (s.internal.in_transaction() &&
      std::find(s.used_tables.begin(), s.used_tables.end(), handle) == s.used_tables.end())
    s.used_tables.push_back(handle);
  return relation;
}

// The handle of `info`: the registered one, or a new one registered (under tables_mutex).
table handle_of(database::impl& db, const access::table_info& info) {
  std::shared_ptr<table::state>& slot = db.tables[info.name];
  if (slot == nullptr || slot->relation != info.relation) {
    slot = std::make_shared<table::state>();
    slot->owner = &db;
    slot->name = info.name;
    slot->relation = info.relation;
  }
  return internal_access::make_table(slot);
}

} // namespace

void refuse_dropped_tables(session::impl& s) {
  for (const std::shared_ptr<const table::state>& handle : s.used_tables)
    if (handle->dropped.load(std::memory_order_acquire)) {
      s.internal.rollback();
      s.used_tables.clear();
      throw usage_error("commit: table " + quoted(handle->name) +
                        " was dropped during the transaction; nothing was applied");
    }
  s.used_tables.clear();
}

const std::string& table::name() const {
  static const std::string none;
  return state_ ? state_->name : none;
}

// ---- database: the catalog -----------------------------------------------------------------

table database::create_table(const std::string& name) {
  refuse_in_callback("create_table");
  impl_->check_open("create_table");
  runtime::instance_session internal(*impl_->db);
  std::lock_guard<std::mutex> guard(impl_->tables_mutex);
  return handle_of(*impl_, runtime::create_table(internal, name));
}

table database::open_table(const std::string& name) {
  refuse_in_callback("open_table");
  impl_->check_open("open_table");
  runtime::instance_session internal(*impl_->db);
  std::lock_guard<std::mutex> guard(impl_->tables_mutex);
  std::optional<access::table_info> info = runtime::find_table(internal, name);
  if (!info)
    throw usage_error("open_table: no table named " + quoted(name));
  return handle_of(*impl_, *info);
}

void database::drop_table(const std::string& name) {
  refuse_in_callback("drop_table");
  impl_->check_open("drop_table");
  runtime::instance_session internal(*impl_->db);
  std::lock_guard<std::mutex> guard(impl_->tables_mutex);
  access::table_info dropped = runtime::drop_table(internal, name);
  auto registered = impl_->tables.find(name);
  if (registered != impl_->tables.end())
    impl_->forget_dropped(registered);
  // Calls that passed their handle checks before the mark end before the files go.
  impl_->wait_for_calls_in_flight();
  runtime::remove_table_files(*impl_->db, dropped.relation);
}

std::vector<table_info> database::tables() {
  refuse_in_callback("tables");
  impl_->check_open("tables");
  runtime::instance_session internal(*impl_->db);
  std::vector<table_info> out;
  for (const access::table_info& info : runtime::list_tables(internal))
    out.push_back({info.name, impl_->engine().store.files->nblocks(info.relation)});
  return out;
}

std::size_t database::max_commit_pages() const {
  return impl_->engine().tables->max_latched_pages();
}

// ---- session: reads and changes ------------------------------------------------------------

std::optional<std::string> session::get(const table& t, std::string_view key) {
  session_call s(impl_.get(), "get");
  relation_id relation = use_table(s.impl(), t.state_, "get");
  check_key(key, "get");
  return s->internal.get(relation, key);
}

void session::put(const table& t, std::string_view key, std::string_view value) {
  session_call s(impl_.get(), "put");
  relation_id relation = use_table(s.impl(), t.state_, "put");
  check_key(key, "put");
  check_value(value, "put");
  s->internal.put(relation, key, value);
}

bool session::insert(const table& t, std::string_view key, std::string_view value) {
  session_call s(impl_.get(), "insert");
  relation_id relation = use_table(s.impl(), t.state_, "insert");
  check_key(key, "insert");
  check_value(value, "insert");
  return s->internal.insert(relation, key, value);
}

bool session::erase(const table& t, std::string_view key) {
  session_call s(impl_.get(), "erase");
  relation_id relation = use_table(s.impl(), t.state_, "erase");
  check_key(key, "erase");
  return s->internal.erase(relation, key);
}

void session::add_i64(const table& t, std::string_view key, std::uint32_t offset,
                      std::int64_t delta) {
  session_call s(impl_.get(), "add_i64");
  relation_id relation = use_table(s.impl(), t.state_, "add_i64");
  check_key(key, "add_i64");
  s->internal.add_i64(relation, key, offset, delta);
}

// ---- cursors -------------------------------------------------------------------------------

struct table_cursor::state {
  std::weak_ptr<session::impl> owner;
  std::uint64_t epoch = 0; // the session's transaction_epoch when the cursor was made
  std::thread::id thread;
  std::shared_ptr<const table::state> handle;
  key_range range;
  access::read_ahead ahead; // forward steps: the rest of a leaf, read once
};

table_cursor session::cursor(const table& t, const key_range& range) {
  session_call s(impl_.get(), "cursor");
  use_table(s.impl(), t.state_, "cursor");
  if (range.low)
    check_key(*range.low, "cursor");
  if (range.high)
    check_key(*range.high, "cursor");
  auto c = std::make_shared<table_cursor::state>();
  c->owner = impl_;
  c->epoch = s->transaction_epoch;
  c->thread = std::this_thread::get_id();
  c->handle = t.state_;
  c->range = range;
  return table_cursor(std::move(c));
}

namespace {

// One step of a cursor: a session call on the cursor's session, refused outside the
// cursor's transaction or thread; step() gives the table's relation.
class cursor_call {
public:
  cursor_call(const std::shared_ptr<table_cursor::state>& cursor, const char* operation)
    : owner_(cursor ? cursor->owner.lock() : nullptr), call_(owner_.get(), operation) {
    if (call_->transaction_epoch != cursor->epoch)
      throw usage_error(std::string(operation) +
                        ": the cursor's transaction has ended (a cursor lives as long as the "
                        "transaction it was made in)");
    if (cursor->thread != std::this_thread::get_id())
      throw usage_error(std::string(operation) +
                        ": the cursor is used from another thread than the one that made it");
    relation = use_table(call_.impl(), cursor->handle, operation);
  }
  runtime::instance_session& session() const { return call_->internal; }
  relation_id relation = 0;

private:
  std::shared_ptr<session::impl> owner_;
  session_call call_;
};

using found_entry = std::optional<access::table_entry>;

bool below_low(const key_range& range, const std::string& key) {
  if (!range.low)
    return false;
  int order = access::compare_keys(key, *range.low);
  return order < 0 || (order == 0 && !range.low_inclusive);
}

bool above_high(const key_range& range, const std::string& key) {
  if (!range.high)
    return false;
  int order = access::compare_keys(key, *range.high);
  return order > 0 || (order == 0 && !range.high_inclusive);
}

} // namespace

bool table_cursor::land(std::optional<std::pair<std::string, std::string>> entry) {
  positioned_ = entry && !below_low(state_->range, entry->first) &&
                !above_high(state_->range, entry->first);
  if (positioned_) {
    key_ = std::move(entry->first);
    value_ = std::move(entry->second);
  }
  return positioned_;
}

namespace {

std::optional<std::pair<std::string, std::string>> as_pair(found_entry entry) {
  if (!entry)
    return std::nullopt;
  return std::make_pair(std::move(entry->key), std::move(entry->value));
}

} // namespace

bool table_cursor::seek(std::string_view key, bool inclusive) {
  cursor_call call(state_, "table_cursor::seek");
  check_key(key, "table_cursor::seek");
  const key_range& range = state_->range;
  if (range.low && below_low(range, std::string(key))) // start at the range's beginning
    return land(as_pair(
      call.session().next_entry(call.relation, *range.low, range.low_inclusive, &state_->ahead)));
  return land(as_pair(call.session().next_entry(call.relation, key, inclusive, &state_->ahead)));
}

bool table_cursor::seek_first() {
  cursor_call call(state_, "table_cursor::seek_first");
  const key_range& range = state_->range;
  return land(as_pair(
    range.low
      ? call.session().next_entry(call.relation, *range.low, range.low_inclusive, &state_->ahead)
      : call.session().next_entry(call.relation, std::string_view(), true, &state_->ahead)));
}

bool table_cursor::seek_last() {
  cursor_call call(state_, "table_cursor::seek_last");
  const key_range& range = state_->range;
  return land(as_pair(
    range.high ? call.session().previous_entry(call.relation, &*range.high, range.high_inclusive)
               : call.session().previous_entry(call.relation, nullptr, true)));
}

bool table_cursor::next() {
  if (!positioned_)
    return seek_first();
  cursor_call call(state_, "table_cursor::next");
  return land(as_pair(call.session().next_entry(call.relation, key_, false, &state_->ahead)));
}

bool table_cursor::prev() {
  if (!positioned_)
    return seek_last();
  cursor_call call(state_, "table_cursor::prev");
  return land(as_pair(call.session().previous_entry(call.relation, &key_, false)));
}

const std::string& table_cursor::key() const {
  if (!positioned_)
    throw usage_error("table_cursor::key: the cursor is on no entry");
  return key_;
}

const std::string& table_cursor::value() const {
  if (!positioned_)
    throw usage_error("table_cursor::value: the cursor is on no entry");
  return value_;
}

} // namespace tidemark

namespace tidemark {

// ---- bulk loading --------------------------------------------------------------------------

struct table_loader::state {
  std::weak_ptr<session::impl> owner;
  std::thread::id thread;
  std::shared_ptr<const table::state> handle;
  std::string last_key;
  bool any = false;                    // last_key holds a key
  bool finished = false;               // finish() ran, or a change failed
  std::vector<access::node_item> leaf; // the next leaf's entries, not yet in the table
  std::size_t leaf_bytes = 0, leaf_capacity = 0;
  std::uint64_t loaded = 0; // entries in the table (durable at finish)
};

namespace {

// One call on a loader: its session's, refused once the load is over, from another thread,
// or while the session is inside a transaction of its own.
class loader_call {
public:
  loader_call(table_loader::state* loader, const char* operation)
    : owner_(loader != nullptr ? loader->owner.lock() : nullptr), call_(owner_.get(), operation) {
    if (loader->finished)
      throw usage_error(std::string(operation) + ": the load is over");
    if (loader->thread != std::this_thread::get_id())
      throw usage_error(std::string(operation) +
                        ": the loader is used from another thread than its session's");
    if (call_->internal.in_transaction())
      throw usage_error(std::string(operation) +
                        ": the session is inside a transaction; commit() or rollback() it first");
  }
  session::impl& owner() const { return call_.impl(); }

private:
  std::shared_ptr<session::impl> owner_;
  session_call call_;
};

// Entries put the usual way, as one transaction committed without waiting for its fsync.
void commit_entries(const table_loader::state& loader, session::impl& s,
                    const std::vector<access::node_item>& entries, relation_id relation) {
  runtime::instance_session& internal = s.internal;
  internal.begin();
  ++s.transaction_epoch;
  s.used_tables.assign(1, loader.handle); // its commit is refused once the table is dropped
  for (const access::node_item& entry : entries)
    internal.put(relation, entry.key, entry.payload);
  refuse_dropped_tables(s);
  internal.commit_unsettled();
  ++s.transaction_epoch;
}

// The leaf in progress goes into the table: appended as a new rightmost leaf (one record),
// or committed the usual way when `append` is false (a value on overflow pages) or the
// table holds a key at or past its first (another session put one). A failure ends the
// load, the entries added before it staying.
void add_leaf(table_loader::state& loader, session::impl& s, bool append) {
  if (loader.leaf.empty())
    return;
  try {
    relation_id relation = relation_of(*s.db, loader.handle, "table_loader::add");
    if (!append || !s.internal.append_entries(relation, loader.leaf))
      commit_entries(loader, s, loader.leaf, relation);
    loader.loaded += loader.leaf.size();
    loader.leaf.clear();
    loader.leaf_bytes = 0;
  } catch (...) {
    if (s.internal.in_transaction()) {
      s.internal.rollback();
      ++s.transaction_epoch;
    }
    loader.finished = true;
    throw;
  }
}

} // namespace

table_loader session::load(const table& t) {
  session_call s(impl_.get(), "load");
  relation_id relation = relation_of(*s->db, t.state_, "load");
  if (s->internal.in_transaction())
    throw usage_error("load: the session is inside a transaction; commit() or rollback() it "
                      "first");
  s->internal.check_writable("load");
  if (s->internal.next_entry(relation, std::string_view(), true, nullptr))
    throw usage_error("load: table " + quoted(t.state_->name) +
                      " is not empty (a load fills an empty table; use put)");
  auto loader = std::make_unique<table_loader::state>();
  loader->owner = impl_;
  loader->thread = std::this_thread::get_id();
  loader->handle = t.state_;
  loader->leaf_capacity = access::append_capacity(s->db->engine().config.page_size);
  return table_loader(std::move(loader));
}

table_loader::table_loader(std::unique_ptr<state> s) : state_(std::move(s)) {}
table_loader::table_loader(table_loader&&) noexcept = default;
table_loader& table_loader::operator=(table_loader&&) noexcept = default;
table_loader::~table_loader() = default; // the leaf in progress was never in the table

void table_loader::add(std::string_view key, std::string_view value) {
  loader_call call(state_.get(), "table_loader::add");
  state& loader = *state_;
  check_key(key, "table_loader::add");
  check_value(value, "table_loader::add");
  if (loader.any && access::compare_keys(key, loader.last_key) <= 0)
    throw usage_error("table_loader::add: keys come in increasing order; this one is not after "
                      "the previous one");
  relation_of(*call.owner().db, loader.handle, "table_loader::add");
  access::node_item entry{std::string(key), 0, static_cast<std::uint32_t>(value.size()),
                          std::string(value)};
  std::size_t page_size = call.owner().db->engine().config.page_size;
  if (!access::inline_value_fits(page_size, key.size(), value.size())) {
    // A value on overflow pages: the leaf so far, then this entry the usual way.
    add_leaf(loader, call.owner(), true);
    loader.leaf.push_back(std::move(entry));
    add_leaf(loader, call.owner(), false);
  } else {
    if (loader.leaf_bytes + entry.footprint() > loader.leaf_capacity)
      add_leaf(loader, call.owner(), true);
    loader.leaf_bytes += entry.footprint();
    loader.leaf.push_back(std::move(entry));
  }
  loader.last_key.assign(key);
  loader.any = true;
}

std::uint64_t table_loader::finish() {
  loader_call call(state_.get(), "table_loader::finish");
  add_leaf(*state_, call.owner(), true);
  state_->finished = true;
  call.owner().internal.settle();
  return state_->loaded;
}

} // namespace tidemark
