// State rows read and locked without SQL (row_probe.cpp): one probe of a
// unique index through the index and table access methods, and a row lock
// as the executor's LockRows takes it. What an SPI SELECT [FOR UPDATE
// [SKIP LOCKED]] would see, without starting an executor. Internal to the
// table storage (table_storage.cpp, row_write.cpp).
#pragma once

#include "storage/table/state_table.h"

extern "C" {
#include "access/skey.h"
#include "executor/tuptable.h"
#include "utils/snapshot.h"
}

namespace ratelimit_pg {

// Reads a row through its unique index with a fresh MVCC snapshot, after a
// command counter increment: what an SPI SELECT would see (the latest
// committed state plus this transaction's own writes; SSI predicate locks
// are taken by the index and heap access), without starting an executor.
// With a lock mode it is SELECT ... FOR UPDATE [SKIP LOCKED]: the version
// found is locked (and followed to the newest one); a row held by another
// transaction (skip-locked) reads as busy, one that vanished as no row.
StoredState ProbeState(const StateTable& table, const LimitId& id, ReadMode mode);

// Equality keys on the unique index of the id's key variant for every
// shard of (name, key): its name and key prefix; returns how many (1 or 2).
int FillNameKeyIndexKeys(Relation index, const LimitId& id, ScanKeyData* keys);

enum class LockResult { kLocked, kBusy, kGone };

// Locks the row version at *tid FOR UPDATE, as the executor's LockRows node
// does: with follow_updates (READ COMMITTED) it follows the update chain to
// the newest version, waiting for its writer unless skip_locked; under
// REPEATABLE READ or SERIALIZABLE a concurrent update or delete is a
// serialization failure. Without follow_updates only that very version is
// locked (kGone if it is no longer the newest). kBusy: held by another
// transaction (skip_locked), or changed by the command calling us, which
// LockRows skips too. On kLocked the slot holds the locked version.
LockResult LockVersion(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot* slot,
                       bool skip_locked, bool follow_updates);

}  // namespace ratelimit_pg
