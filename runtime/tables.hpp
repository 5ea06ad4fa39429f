// The runtime's side of keyed tables: the catalog (access/catalog.hpp) made at the first
// open for writing, and the catalog's operations, each a transaction of its own on a
// session (retried when a concurrent one conflicts with it).
//
// Invariants:
//  - A database open for writing (a primary, or a standby once promoted) has a catalog
//    before its first session: ensure_catalog runs before sessions are admitted. A
//    directory made before keyed tables existed gets its catalog then; a standby gets it
//    from its primary's WAL.
//  - Each operation commits (durably, as any commit) before it returns.
//  - A dropped table's files are removed only after its catalog entry is durably gone, and
//    after every session call that could still reach it has returned (the public API's
//    drop_table waits for that): relation_files::drop marks the relation first, so a dirty
//    buffer or a sync request of it still in flight is skipped, and the sync worker is
//    told to forget the removed segments (PostgreSQL's unlink path). Files a crash left
//    behind (the catalog entry gone, the files not yet) are removed at the next open for
//    writing or promotion (dropped_table_relations), once recovery has run; at a promotion,
//    after the public API has marked their handles and waited for the calls in flight.
#pragma once

#include "access/catalog.hpp"
#include "runtime/engine.hpp"
#include "runtime/session.hpp"

#include <optional>
#include <string_view>
#include <vector>

namespace tidemark::runtime {

class instance;

/// The store starts taking changes (page_store::begin_changes: leaves a standby's redo
/// unlinked are reused only after the reads in progress at promotion), and the catalog's
/// tree is made when the directory has none (one structure record).
void ensure_catalog(engine& e);
/// Removes the files of `relation`, a table whose catalog entry is gone (see above).
void remove_table_files(instance& db, storage::rel_id relation);
/// The table relations that have files but no catalog entry: dropped (a crash came
/// before their files went, or, on a standby, the primary dropped them).
std::vector<storage::rel_id> dropped_table_relations(instance& db);

/// The table named `name`, read outside a transaction (durable when it returns); none
/// when there is no such table, or no catalog yet (a directory only ever opened
/// read-only since before keyed tables).
std::optional<access::table_info> find_table(instance_session& session, std::string_view name);
/// usage_error: the name is bad or taken, or no relation is left.
access::table_info create_table(instance_session& session, std::string_view name);
/// Removes the table's catalog entry; usage_error when there is none.
access::table_info drop_table(instance_session& session, std::string_view name);
std::vector<access::table_info> list_tables(instance_session& session);

} // namespace tidemark::runtime
