// What the public API's implementation files (api.cpp, api_tables.cpp) share: the state
// behind a database, a session and a table handle, and the guard every session call
// takes. Not installed.
//
// Invariants:
//  - A session call runs under a session_call: one thread inside a session at a time, and
//    never on a closed database.
//  - session::impl::transaction_epoch changes whenever a transaction begins or ends, so a
//    cursor can tell that the transaction it was made in is over.
//  - A table handle's state is registered in its database (database::impl::tables) while
//    the table exists; drop_table marks it dropped under tables_mutex, the same lock
//    open_table registers under, so no handle of a dropped table escapes unmarked.
//  - Every session call checks the handles it is given, and a commit the handles its
//    transaction used, for dropped ones first. drop_table marks the handle, then waits
//    until every session call in flight then has returned (call_seq is odd inside a call)
//    before the table's files go: a call that reaches the table's pages started before
//    the drop and ends before its files are removed.
#pragma once

#include "runtime/api_bridge.hpp"

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tidemark {

/// While an observer or log callback runs on this thread (it runs on a Tidemark thread
/// that a checkpoint, close or commit would wait for).
class callback_scope {
public:
  callback_scope();
  ~callback_scope();
  callback_scope(const callback_scope&) = delete;
  callback_scope& operator=(const callback_scope&) = delete;
};
/// usage_error when called from inside an observer or log callback.
void refuse_in_callback(const char* operation);
/// usage_error when `relation` is not a page relation an application may use.
void check_relation(relation_id relation);
/// In commit(): when a table the transaction used was dropped since, rolls the
/// transaction back and throws usage_error naming it (api_tables.cpp).
void refuse_dropped_tables(session::impl& s);

struct table::state {
  const database::impl* owner = nullptr;
  std::string name;
  relation_id relation = 0;
  mutable std::atomic<bool> dropped{false};
};

struct database::impl {
  std::unique_ptr<runtime::instance> db;
  recovery_report recovery;
  std::atomic<bool> closed{false};
  std::atomic<std::uint64_t> commits{0};
  std::atomic<std::uint64_t> conflicts{0};
  std::mutex close_mutex;
  bool traced = false;
  // Keyed tables' handles, by name (see the header comment).
  std::mutex tables_mutex;
  std::map<std::string, std::shared_ptr<table::state>> tables;
  // Every session, and the wait for the calls in flight (see the header comment).
  std::mutex sessions_mutex;
  std::vector<std::weak_ptr<session::impl>> sessions;
  std::mutex calls_mutex;
  std::condition_variable call_returned;
  std::atomic<int> waiting_for_calls{0};

  runtime::engine& engine() { return db->internals(); }
  void register_session(const std::shared_ptr<session::impl>& s);
  /// Returns once every session call that was in flight when it was called has returned.
  void wait_for_calls_in_flight();
  /// Marks the registered handle `registered` dropped and forgets it (tables_mutex held):
  /// every call given one of its handles refuses from now on.
  void forget_dropped(std::map<std::string, std::shared_ptr<table::state>>::iterator registered) {
    registered->second->dropped.store(true, std::memory_order_release);
    tables.erase(registered);
  }
  void check_open(const char* operation) const {
    if (closed.load(std::memory_order_acquire))
      throw usage_error(std::string(operation) + ": the database is closed");
  }
  void check_page(page_id page, std::uint32_t offset, std::uint32_t length) {
    check_relation(page.relation);
    std::size_t size = engine().config.page_size;
    if (offset < page_header_bytes || std::uint64_t(offset) + length > size)
      throw usage_error("bytes " + std::to_string(offset) + ".." +
                        std::to_string(std::uint64_t(offset) + length) +
                        " are outside the data area of a page (bytes " +
                        std::to_string(page_header_bytes) + ".." + std::to_string(size) + ")");
  }
};

struct session::impl {
  explicit impl(std::shared_ptr<database::impl> owner) : db(std::move(owner)), internal(*db->db) {}
  std::shared_ptr<database::impl> db;
  runtime::instance_session internal;
  std::atomic<bool> in_call{false};       // a session serves one thread at a time
  std::atomic<std::uint64_t> call_seq{0}; // odd while a call runs
  std::uint64_t transaction_epoch = 0;
  std::vector<std::shared_ptr<const table::state>> used_tables; // by this transaction
};

// One call on a session: refuses a moved-from session, a closed database, and a second
// thread calling while another call runs (instead of two threads corrupting the
// transaction or spinning on each other's latches).
class session_call {
public:
  session_call(session::impl* state, const char* operation);
  ~session_call();
  session_call(const session_call&) = delete;
  session_call& operator=(const session_call&) = delete;
  session::impl* operator->() const { return state_; }
  session::impl& impl() const { return *state_; }

private:
  session::impl* state_ = nullptr;
};

} // namespace tidemark
