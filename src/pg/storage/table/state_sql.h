// State rows through the extension's saved SQL plans (state_sql.cpp), for
// a state table that is not as installed (rules, row security, changed
// column types), and the statements every table storage call may need.
// Internal to the table storage.
#pragma once

#include "storage/table/state_table.h"

namespace ratelimit_pg {

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
// Every row of the state table, read all shards of one limit, cleanup and
// the status scan (the table storage's steps of the same names).
int ReadAllShardsSql(const LimitId& id, bool lock, int shards, StoredState* out);
int64 DeleteIdleStatesSql(Micros now);
void ScanStatusRowsSql(StatusRowSink sink, void* context);
int LockRowsForChangeSql(text* name, text* key, KeyedRow** out);

}  // namespace ratelimit_pg
