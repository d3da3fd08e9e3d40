// The table storage: the storage seam (storage.h) over ratelimit_state.
// Each step chooses how it reaches the table after it has opened and
// locked it (state_table.cpp): directly (row_probe.cpp, row_write.cpp) when
// the table allows it, else through SQL (state_sql.cpp). Reads take the
// lock a SELECT would (ACCESS SHARE, or ROW SHARE for FOR UPDATE), writes
// the lock an UPDATE would (ROW EXCLUSIVE).
#include "storage/table/table_storage.h"

#include "limiter.h"
#include "storage/table/row_probe.h"
#include "storage/table/row_write.h"
#include "storage/table/state_sql.h"

extern "C" {
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
}

namespace ratelimit_pg {
namespace {

LOCKMODE ReadLockMode(ReadMode mode) {
  switch (mode) {
    case ReadMode::kUnlocked:
      return AccessShareLock;
    case ReadMode::kUnlockedForWrite:
      return RowExclusiveLock;
    case ReadMode::kLock:
    case ReadMode::kLockSkipLocked:
      break;
  }
  return RowShareLock;
}

// The first field-4 value of the creation locks' tags: pg_advisory_lock
// uses 1 (one int8 key) and 2 (two int4 keys).
constexpr uint16 kCreationLockBase = 3;

// The lock a transaction holds while it creates a shard row through
// LockOrCreate, until it ends: whoever would create the same row meanwhile
// learns that the row is in flight instead of waiting for that transaction
// in INSERT ... ON CONFLICT (a caller that may skip the row then takes
// another shard). In pg_locks: locktype advisory, classid and objid the high
// and low halves of the 64-bit hash of (name, key), objsubid 3 + the shard.
// (A collision of two identities would only make one wait for, or skip, the
// other's creation; with the full 64-bit hash it is negligible.)
bool LockRowCreation(const LimitId& id, bool wait) {
  uint64_t hash = ratelimit::LimitHash(id.name, id.name_len, id.key, id.key_len);
  LOCKTAG tag;
  SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(hash >> 32), static_cast<uint32>(hash),
                       static_cast<uint16>(kCreationLockBase + id.shard));
  return LockAcquire(&tag, ExclusiveLock, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

StoredState ReadState(const LimitId& id, ReadMode mode) {
  StateTable table = OpenStateTable(ReadLockMode(mode));
  StoredState out = table.direct_read ? ProbeState(table, id, mode) : ReadStateSql(id, mode);
  CloseStateTable(&table);
  return out;
}

// Through SQL there is no optimistic update: an UPDATE whose recheck fails
// after waiting for a concurrent writer still keeps the lock it took on the
// newest version (EvalPlanQual), and the call may then refuse. So the SQL
// path always decides under the row lock, in the subtransaction that
// releases it on a refusal.
bool UpdateIfUnchanged(const LimitId& id, const StoredState& expected, const RowWrite& row) {
  (void)id;
  StateTable table = OpenStateTable(RowExclusiveLock);
  ItemPointerData tid = TidOf(expected.version);
  bool updated = table.direct_write && ItemPointerIsValid(&tid) && UpdateRowDirect(table, tid, row, false);
  CloseStateTable(&table);
  return updated;
}

void UpdateLocked(const LimitId& id, const RowVersion* version, const RowWrite& row) {
  StateTable table = OpenStateTable(RowExclusiveLock);
  ItemPointerData tid = version != nullptr ? TidOf(*version) : ItemPointerData{};
  if (table.direct_write && version != nullptr && ItemPointerIsValid(&tid)) {
    if (!UpdateRowDirect(table, tid, row, true)) RaiseWriteSkipped();
  } else {
    UpdateLockedSql(id, row);
  }
  CloseStateTable(&table);
}

// A new row: directly when the table allows it (code the owner added runs
// as the caller); else through SQL, with ON CONFLICT when the key
// variant's unique index is as installed (its arbiter) and the table has
// no rules (which ON CONFLICT refuses); else a plain INSERT, made the only
// one by the row's creation lock (held to the transaction's end), after a
// look for a committed row.
bool InsertState(const LimitId& id, const RowWrite& row) {
  StateTable table = OpenStateTable(RowExclusiveLock);
  bool inserted = false;
  bool arbiter = OidIsValid(id.key_text != nullptr ? table.keyed_index : table.null_key_index);
  if (table.direct_insert) {
    inserted = InsertRowDirect(table, id, row);
  } else if (table.rel->rd_rules == nullptr && arbiter) {
    inserted = InsertStateSql(id, row, true);
    // No row and no conflict: a BEFORE trigger skipped the insert.
    if (!inserted && !ReadStateSql(id, ReadMode::kUnlocked).state.exists) RaiseWriteSkipped();
  } else {
    LockRowCreation(id, true);
    if (!ReadStateSql(id, ReadMode::kUnlocked).state.exists) {
      // Committed after this REPEATABLE READ or SERIALIZABLE snapshot: a
      // serialization failure, as INSERT ... ON CONFLICT would raise.
      if (IsolationUsesXactSnapshot() && RowExistsLatestSql(id))
        ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                        errmsg("could not serialize access due to concurrent update")));
      if (!InsertStateSql(id, row, false)) RaiseWriteSkipped();  // a rule did instead
      inserted = true;
    }
  }
  CloseStateTable(&table);
  return inserted;
}

// Every row of (name, key): directly when the table allows it (the owner's
// delete triggers run as the caller), else through SQL.
bool DeleteLimit(const LimitId& id) {
  StateTable table = OpenStateTable(RowExclusiveLock);
  bool deleted = table.direct_delete ? DeleteRowsDirect(table, id) > 0 : DeleteStatesSql(id);
  CloseStateTable(&table);
  return deleted;
}

bool LockOrCreate(const LimitId& id, const RowWrite& initial, bool wait, bool announce, StoredState* out) {
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    *out = ReadState(id, wait ? ReadMode::kLock : ReadMode::kLockSkipLocked);
    if (out->state.exists) return true;
    if (out->busy || (announce && !LockRowCreation(id, wait))) return false;
    InsertState(id, initial);  // or someone else's committed row: the next read locks it
  }
}

constexpr Storage kTableStorage = {
    .name = "table",
    .undo = Undo::kByTransaction,
    .keeps_shards = true,
    .usable_read_only = false,
    .carries_rows_on_change = true,
    .bounds_name_rows = false,
    .locks_config_tables = true,
    .read = ReadState,
    .read_all_shards = ReadAllShardsSql,
    .insert = InsertState,
    .lock_or_create = LockOrCreate,
    .update_if_unchanged = UpdateIfUnchanged,
    .update_locked = UpdateLocked,
    .delete_limit = DeleteLimit,
    .delete_idle = DeleteIdleStatesSql,
    .scan_status = ScanStatusRowsSql,
    .lock_rows_for_change = LockRowsForChangeSql,
};

}  // namespace

const Storage& TableStorage() { return kTableStorage; }

}  // namespace ratelimit_pg
