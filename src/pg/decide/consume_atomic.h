// Decisions on a limit whose storage is undone by refunds (Undo::kByRefund):
// decided and written in one atomic step (the storage's modify) under its
// short lock on the row, never waiting for another transaction
// (consume_atomic.cpp).
#pragma once

#include "support/limit_call.h"

namespace ratelimit_pg {

// Takes the call's request from its limit (a grant is given back by the
// caller's rollback unless the config keeps it). keep_scoped: the grant is
// given back if the current subtransaction rolls back even when the config
// keeps it (ratelimit_limit_all's all-or-nothing step). A new row finding
// the storage full of live rows raises 53200, counted in ratelimit_stats.
Decision TakeAtomically(const LimitCall& call, bool keep_scoped);
// Gives tokens back at once (ratelimit_refund; not undone by a rollback).
Decision RefundAtomically(const LimitCall& call, double amount);

}  // namespace ratelimit_pg
