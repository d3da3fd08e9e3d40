// Argument reading and result forming for the SQL functions (fn_args.cpp).
#pragma once

#include "headers.h"
#include "limit_call.h"

extern "C" {
#include "fmgr.h"
#include "funcapi.h"
#include "utils/tuplestore.h"
}

namespace ratelimit_pg {

// Raises 22004 for a NULL argument that must not be NULL.
void RequireNotNull(FunctionCallInfo fcinfo, int arg, const char* what);
// The (name, key) identity from two arguments; a NULL key is the global
// limit. key_arg < 0: the function has no key argument.
LimitId IdFromArgs(FunctionCallInfo fcinfo, int name_arg, int key_arg);
// Reads (name, key, config, count, reserve) from the arguments; count and
// reserve may be absent (argument index < 0).
LimitCall LimitCallFromArgs(FunctionCallInfo fcinfo, int name, int key, int config, int count, int reserve);
// A function that writes refuses to run in a read-only transaction (and on
// a standby) with 25006, as SQL's INSERT/UPDATE would: the direct write
// path bypasses the executor's own check.
void RequireWritable(const char* function);

// The function's result row type, blessed.
TupleDesc ResultDesc(FunctionCallInfo fcinfo);
// The function's ratelimit_result row for a decision.
Datum DecisionDatum(FunctionCallInfo fcinfo, const Decision& decision);
// A decision as the kDecisionColumns fields of a ratelimit_result.
constexpr int kDecisionColumns = 5;
void EncodeDecision(const Decision& decision, Datum* values, bool* nulls);
// A ratelimit_limit_all row: name, key and the decision's fields.
constexpr int kEntryColumns = 2 + kDecisionColumns;
void EncodeEntry(const LimitId& id, const Decision& decision, Datum* values, bool* nulls);
// A tuplestore for a materialized set-returning function's rows.
Tuplestorestate* MaterializedResult(FunctionCallInfo fcinfo, TupleDesc* desc);
// Adds one (name, key, ok, retry_after, retry_at, remaining, reset_after) row.
void PutEntryRow(Tuplestorestate* store, TupleDesc desc, const LimitId& id, const Decision& decision);
// The answer a ratelimit_result row carries: ok, remaining and reset_after
// are required (22004); retry_after (and retry_at) are NULL unless there is
// a retry.
ratelimit::HeaderAnswer AnswerFromResult(HeapTupleHeader result);

}  // namespace ratelimit_pg
