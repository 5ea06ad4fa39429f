// The catalog's operations as transactions of their own: see tables.hpp.
#include "runtime/tables.hpp"

#include "runtime/instance.hpp"

#include <tidemark/errors.hpp>

#include <caf/send.hpp>

#include <set>

namespace tidemark::runtime {

namespace {

// Runs `body` in a transaction of its own and commits it, again after a conflict (two
// creates race for the next relation; a conflict applied nothing).
template <class Body>
auto in_own_transaction(instance_session& session, const char* operation, Body body) {
  if (session.in_transaction())
    throw tidemark::usage_error(std::string(operation) +
                                ": the session is inside a transaction; commit() or "
                                "rollback() it first");
  for (;;) {
    session.begin();
    try {
      auto result = body(session.tables(operation));
      session.commit();
      return result;
    } catch (const tidemark::conflict_error&) {
      continue; // the commit ended the transaction and applied nothing
    } catch (...) {
      session.rollback();
      throw;
    }
  }
}

} // namespace

void ensure_catalog(engine& e) {
  e.tables->begin_changes(); // blocks of leaves unlinked before wait for today's readers
  if (!access::catalog::exists(*e.tables))
    access::catalog::create(*e.tables);
}

void remove_table_files(instance& db, storage::rel_id relation) {
  engine& e = db.internals();
  for (const storage::segment_id& segment : e.store.files->drop(relation))
    caf::anon_send(db.sync_worker(),
                   messages::sync_forget{
                     messages::file_ref{static_cast<std::uint8_t>(storage::file_kind::relation),
                                        segment.rel, segment.segno}});
}

std::vector<storage::rel_id> dropped_table_relations(instance& db) {
  engine& e = db.internals();
  std::set<storage::rel_id> named;
  access::table_transaction reader(*e.tables); // outside a transaction: committed reads
  for (const access::table_info& table : access::catalog::list(reader))
    named.insert(table.relation);
  std::vector<storage::rel_id> dropped;
  const storage::rel_id handed_out = access::catalog::next_relation(reader); // none beyond
  for (storage::rel_id relation = access::first_table_relation; relation < handed_out; ++relation)
    if (named.count(relation) == 0 && e.store.files->segment_count(relation) > 0)
      dropped.push_back(relation);
  return dropped;
}

std::optional<access::table_info> find_table(instance_session& session, std::string_view name) {
  access::catalog::check_name(name);
  if (!access::catalog::exists(*session.database().internals().tables))
    return std::nullopt;
  std::optional<std::string> entry = session.get(access::catalog_relation, name);
  if (!entry)
    return std::nullopt;
  return access::catalog::decode(std::string(name), *entry);
}

access::table_info create_table(instance_session& session, std::string_view name) {
  session.check_writable("create_table");
  access::catalog::check_name(name);
  return in_own_transaction(session, "create_table", [&](access::table_transaction& txn) {
    return access::catalog::create_table(txn, name);
  });
}

access::table_info drop_table(instance_session& session, std::string_view name) {
  session.check_writable("drop_table");
  access::catalog::check_name(name);
  return in_own_transaction(session, "drop_table", [&](access::table_transaction& txn) {
    return access::catalog::drop_table(txn, name);
  });
}

std::vector<access::table_info> list_tables(instance_session& session) {
  if (!access::catalog::exists(*session.database().internals().tables))
    return {};
  return in_own_transaction(session, "tables", [&](access::table_transaction& txn) {
    return access::catalog::list(txn);
  });
}

} // namespace tidemark::runtime
