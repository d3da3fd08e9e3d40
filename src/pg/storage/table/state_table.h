// The table storage's view of ratelimit_state (state_table.cpp): what one
// step of a call may do with the table, derived after the step has taken
// its lock on it (lock, then look). Internal to the table storage
// (table_storage.cpp, row_access.cpp, state_sql.cpp, owner_code.cpp and
// sql_plans.cpp).
#pragma once

#include <cstring>

#include "storage/seam.h"
#include "storage/table/installed_parts.h"

extern "C" {
#include "nodes/execnodes.h"
#include "nodes/nodes.h"
#include "storage/itemptr.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"
}

namespace ratelimit_pg {

// What one step of a call may do with the table, derived from the relcache
// entry after the step has taken its lock on the table (lock, then look):
// DDL's invalidations are processed when that lock is taken, so nothing
// here rests on a fact read before it.
struct StateTable {
  Relation rel;  // open, locked in the step's mode until the transaction ends
  StateColumns columns;
  // The unique indexes the row probe uses: (name, key, shard) and
  // (name, shard) WHERE key IS NULL; InvalidOid if not as installed (the
  // probe also needs the columns' installed types: direct_read).
  Oid keyed_index;
  Oid null_key_index;
  // Rows can be found and read without SQL: the columns have the installed
  // types and both unique indexes are as installed.
  bool direct_read;
  // Rows can be written without SQL: also an ordinary table without rules
  // or row security. Triggers, constraints, other indexes and replica
  // identity are honoured by PostgreSQL's executor pieces either way.
  bool direct_write;
  // New rows can be inserted (rows deleted) without SQL: also no
  // statement-level INSERT (DELETE) triggers or transition tables.
  bool direct_insert;
  bool direct_delete;
  // The table's CHECK constraints are exactly the installed shard check,
  // prepared once per state table generation (it calls built-in functions
  // only): a write hands it to the executor instead of having
  // ExecConstraints parse and prepare it on every call. nullptr: the
  // executor prepares the table's checks itself.
  ExprState* installed_check;
};

// A row version of the table storage (seam.h's opaque RowVersion): the
// tuple id where the row was read; all zero bytes read as an invalid one
// (offset 0).
static_assert(sizeof(ItemPointerData) <= sizeof(RowVersion::bytes));
inline ItemPointerData TidOf(const RowVersion& version) {
  ItemPointerData tid;
  std::memcpy(&tid, version.bytes, sizeof tid);
  return tid;
}
inline RowVersion VersionOf(const ItemPointerData& tid) {
  RowVersion version{};
  std::memcpy(version.bytes, &tid, sizeof tid);
  return version;
}

// ratelimit_state, the extension's member of that name
// (RequireMemberRelation: 42P01 if there is none); no lock is taken.
Oid StateTableOid();
// Changes whenever the state table, the probe indexes a shape was derived
// from, every relation or a schema is invalidated: what was derived from
// them in an earlier generation (the shape, the statements' plans) must be
// derived again.
uint64 StateTableGeneration();

// Opens and locks the state table in `mode`, then looks at it. What does
// not change between calls (columns, probe indexes, what the table allows)
// is derived once per StateTableGeneration, which any
// invalidation of the table or its indexes moves.
StateTable OpenStateTable(LOCKMODE mode);
// Ends a step: the relation is closed, its lock kept until the transaction ends.
void CloseStateTable(StateTable* table);

// Raises the error of a locked row's write that did not happen (a BEFORE
// ROW trigger returned NULL, or a rule or policy hid the row): the decision
// cannot be stored, so the call must not answer.
[[noreturn]] void RaiseWriteSkipped();
// Raises 21000 for a second row of one limit's shard (only a table
// inheriting from ratelimit_state can hold one).
[[noreturn]] void RaiseDuplicateRows(const LimitId& id);

}  // namespace ratelimit_pg
