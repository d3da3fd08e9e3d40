// The table storage's view of ratelimit_state (state_table.cpp): what one
// step of a call may do with the table, derived after the step has taken
// its lock on it (lock, then look), and whether an SQL statement on it
// would run code the owner added. Internal to the table storage
// (table_storage.cpp, row_access.cpp, state_sql.cpp, config_changes.cpp)
// and sql_plans.cpp.
#pragma once

#include "storage/seam.h"

extern "C" {
#include "nodes/execnodes.h"
#include "nodes/nodes.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"
}

namespace ratelimit_pg {

// The columns of ratelimit_state, by attribute number (InvalidAttrNumber:
// absent; idle_at is absent before 0.2.0).
struct StateColumns {
  AttrNumber name;
  AttrNumber key;
  AttrNumber shard;
  AttrNumber value;
  AttrNumber ts;
  AttrNumber prev;
  AttrNumber idle_at;
};

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

// Whether an SQL statement of kind `command` (CMD_SELECT for reads and
// row locks, CMD_INSERT, CMD_UPDATE, CMD_DELETE) on the (locked) table, run
// as `statement_role`, runs code the owner added after installing it: what
// ReadRunsOwnerCode finds; for writes also the command's triggers and
// rules, and for inserts and updates CHECKs, defaults, generated columns,
// further indexes and a partition constraint.
bool StatementRunsOwnerCode(const StateTable& table, CmdType command, Oid statement_role);
// The same for a statement on a (locked) config table: ratelimit_definition,
// or ratelimit_override (keyed). What the extension installed there runs
// none of the owner's code: the primary key, the statement trigger calling
// the extension's own function, the columns' types.
bool ConfigStatementRunsOwnerCode(Relation rel, bool keyed, CmdType command, Oid statement_role);
// Whether a SELECT on `rel` run as `statement_role` runs code the owner
// added: row security that applies to that role, a column of a type that
// is not built in (its casts and I/O), or inheritance children (whose own
// policies apply).
bool ReadRunsOwnerCode(Relation rel, Oid statement_role);
// Whether converting between types `from` and `to` (either way) calls a
// cast function that is not built in.
bool CastRunsOwnerCode(Oid from, Oid to);

// Opens and locks the state table in `mode`, then looks at it. What does
// not change between calls (columns, probe indexes, what the table allows)
// is derived once per state table generation (catalog.h), which any
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
