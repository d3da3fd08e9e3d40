// The context of one call of an SQL function: SPI connected, the extension
// (its schema and owner) set and the role its SQL runs as (the called
// function's owner); argument reading and result forming (fn_args.cpp).
#pragma once

#include "headers.h"
#include "support/limit_call.h"
#include "support/spi_connection.h"

extern "C" {
#include "fmgr.h"
#include "funcapi.h"
#include "utils/tuplestore.h"
}

namespace ratelimit_pg {

// Connects SPI for one call and sets up its context: the extension is the
// one the called function is a member of (55000 if none), whose tables are
// found among its members in its schema; its SQL runs as the function's
// owner. Returns the previous SQL role, which LeaveCallContext restores (a
// call from inside another call's SQL, e.g. a trigger, must not change the
// outer call's role).
//
// The SPI memory rule: SPI_connect switches to SPI's procedure context and
// SPI_finish frees it, so everything allocated in between (the call's
// temporary memory, its executor state, SPI results) goes with it.
// Whatever must outlive SPI_finish (a result to return, an array the rows
// are formed from afterwards) is allocated before EnterCallContext, or with
// SPI_palloc.
Oid EnterCallContext(FunctionCallInfo fcinfo);
void LeaveCallContext(Oid previous_sql_role);

// The same context with SPI connected only when the call first needs it
// (spi_connection.h): ratelimit_limit's and ratelimit_check's, whose calls
// on a cached memory limit never connect. Until it is, nothing is
// allocated: a call hands `spi` to every step that may run SQL, read the
// catalog or allocate (config_cache.h), and connects it before a storage
// whose steps run SQL.
struct CallContext {
  Oid previous_sql_role;
  SpiConnection spi;
};
CallContext EnterCallContextDeferred(FunctionCallInfo fcinfo);
void LeaveCallContext(CallContext* context);

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
