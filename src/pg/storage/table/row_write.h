// State rows written without SQL (row_write.cpp): updated, inserted and
// deleted through the executor's per-row pieces, as logical replication's
// apply worker writes them. Code the owner added to the table (triggers,
// constraints, defaults, index expressions) runs as the calling role.
// Internal to the table storage.
#pragma once

#include "storage/table/state_table.h"

namespace ratelimit_pg {

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

}  // namespace ratelimit_pg
