// The state table as one step of a call sees it, and the ways a step reads
// or writes it: directly (row_access.cpp) or through SQL (state_sql.cpp).
// Internal to the storage files; consume.cpp uses pg_adapter.h's API.
#pragma once

#include "pg_adapter.h"

extern "C" {
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
};

// Whether an SQL statement of kind `command` (CMD_SELECT for reads and
// row locks, CMD_INSERT, CMD_UPDATE, CMD_DELETE) on the (locked) table, run
// as `statement_role`, runs code the owner added after installing it: what
// ReadRunsOwnerCode finds; for writes also the command's triggers and
// rules, and for inserts and updates CHECKs, defaults, generated columns,
// further indexes and a partition constraint.
bool StatementRunsOwnerCode(const StateTable& table, CmdType command, Oid statement_role);
// Whether a SELECT on `rel` run as `statement_role` runs code the owner
// added: row security that applies to that role, a column of a type that
// is not built in (its casts and I/O), or inheritance children (whose own
// policies apply).
bool ReadRunsOwnerCode(Relation rel, Oid statement_role);
// Whether converting between types `from` and `to` (either way) calls a
// cast function that is not built in.
bool CastRunsOwnerCode(Oid from, Oid to);

// storage.cpp: raises the error of a locked row's write that did not happen
// (a BEFORE ROW trigger returned NULL, or a rule or policy hid the row):
// the decision cannot be stored, so the call must not answer.
[[noreturn]] void RaiseWriteSkipped();
// storage.cpp: a stored state from the datums of value, ts and prev.
StoredState StoredStateFromValues(Datum value, Datum ts, Datum prev, bool prev_is_null);

// state_table.cpp: finds the extension's relations in its schema.
void RegisterStateTableInvalidation();
// The schema the called function lives in; set by each call before it
// touches storage (ConnectStorage).
void SetStorageNamespace(Oid extension_namespace);
Oid StorageNamespace();
// The state table's oid, looked up by name in the extension's schema
// (raises if it is missing); no lock is taken.
Oid StateTableOid();
// ratelimit_definition's oid, likewise.
Oid DefinitionTableOid();
// Opens and locks the state table in `mode`, then looks at it.
StateTable OpenStateTable(LOCKMODE mode);
// Ends a step: the relation is closed, its lock kept until the transaction ends.
void CloseStateTable(StateTable* table);

// row_access.cpp: rows read, locked and written without SQL, through the
// index and table access methods and the executor's per-row pieces.
StoredState ProbeState(const StateTable& table, const LimitId& id, ReadMode mode);
// Updates the row version at *tid, keeping its other columns. locked: this
// transaction holds the row lock (else the update succeeds only if that
// version is still the newest; false when it is not).
bool UpdateRowDirect(const StateTable& table, const ItemPointerData& tid, const RowWrite& row, bool locked);

// Inserts the row unless one of its (name, key, shard) exists, as INSERT
// ... ON CONFLICT DO NOTHING would; false if it existed. A BEFORE ROW
// trigger that skips it raises (RaiseWriteSkipped).
bool InsertRowDirect(const StateTable& table, const LimitId& id, const RowWrite& row);

// Deletes every row of (name, key) (all shards) as DELETE would; returns
// how many were locked for it (a BEFORE trigger may still skip one).
int DeleteRowsDirect(const StateTable& table, const LimitId& id);

// state_sql.cpp: the same steps through the extension's saved SQL plans.
// Raises 21000 for a second row of one limit's shard (only a table
// inheriting from ratelimit_state can hold one).
[[noreturn]] void RaiseDuplicateRows(const LimitId& id);
StoredState ReadStateSql(const LimitId& id, ReadMode mode);
// Whether the row exists in the latest committed state (or this
// transaction's), whatever the transaction's snapshot sees.
bool RowExistsLatestSql(const LimitId& id);
// INSERT ... ON CONFLICT DO NOTHING, or (on_conflict false, for a table
// with rules) a plain INSERT; whether a row was inserted.
bool InsertStateSql(const LimitId& id, const RowWrite& row, bool on_conflict);
// DELETE of every row of (name, key); whether any was deleted.
bool DeleteStatesSql(const LimitId& id);
void UpdateLockedSql(const LimitId& id, const RowWrite& row);

}  // namespace ratelimit_pg
