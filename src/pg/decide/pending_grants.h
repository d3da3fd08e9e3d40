// The grants of storages undone by refunds (Undo::kByRefund) that the caller's
// rollback gives back (pending_grants.cpp), through PostgreSQL's transaction
// and subtransaction callbacks: a grant taken under a savepoint that rolls
// back, or in a transaction that aborts (an error, ROLLBACK, a terminated
// backend: its exit aborts the transaction too), is refunded once, with
// ratelimit_refund's rules (capped at capacity; a window kind only into the
// window it was taken from). Commit keeps it. PREPARE TRANSACTION with a
// pending grant fails (0A000), and the abort gives it back.
#pragma once

#include "storage/storage.h"

namespace ratelimit_pg {

void RegisterPendingGrantCallbacks();
// Before a grant is stored: room for its record (may ereport; nothing is
// taken yet). Returns the record's index.
int ReservePendingGrant(const Storage& storage, const LimitCall& call);
// After: the grant the record is for (no allocation, no error). keep: given
// back only if the current subtransaction (not an outer one) rolls back
// (ratelimit_limit_all's all-or-nothing step under "on_rollback": "keep").
// incarnation: the life of the row it was taken from (StoredState's).
void RememberGrant(int record, const Decision& decision, bool keep, uint64 incarnation);
// After: no grant was stored; the record is dropped.
void ForgetPendingGrant(int record);

// ratelimit_define, _undefine, _override and _unoverride of a name in the
// current subtransaction (forgotten if it rolls back); the statement they
// run on the config table follows, until EndOwnConfigWrite.
void NoteConfigChange(const LimitId* id);
void EndOwnConfigWrite();
// The config tables' statement trigger: a change not made by those
// functions (the owner's own DML) may change any name's config.
void NoteDirectConfigChange();
// Whether this transaction changed the config of the name and has not
// committed it: a memory limit is not decided under a config a rollback
// could take back, as its entry would not be rolled back with it.
bool ConfigChangedHere(const LimitId& id);

}  // namespace ratelimit_pg
