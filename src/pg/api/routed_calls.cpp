// The calls the router (ratelimit_proxy 0.7.0) sends to a partition:
// ratelimit_proxy_limit, _check and _limit_all (and 0.8.0's _simulate) run
// ratelimit_limit, _check and _limit_all's (_simulate's) code in an internal subtransaction and return an
// error it raises (a refusal with throws => true, a bad argument, any error a caller can provoke) as data:
// its SQLSTATE, message, detail and hint, which the router raises again. PL/Proxy closes its connection to a
// partition whenever the remote statement fails; returned as data, the
// error costs no reconnect. The rollback of the subtransaction undoes what
// the failed call did (row writes; memory grants through pending_grants'
// subtransaction callbacks), so a call that errors leaves nothing when the
// partition's transaction commits, as on one node, where the error aborts
// the caller's transaction.
//
// The entry points are here rather than in entry_points.cpp: this module is
// the whole of the partition's side of the router.
#include "support/entry.h"

#include "api/routed_calls.h"

#include "api/fn_args.h"
#include "api/functions.h"
#include "api/simulation.h"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/tuplestore.h"
}

namespace ratelimit_pg {
namespace {

// error_state, error_message, error_detail, error_hint.
constexpr int kErrorColumns = 4;

// One routed call: its arguments and, once made, its decisions.
struct RoutedCall {
  FunctionCallInfo fcinfo;
  int error_format_arg;
  bool all;      // ratelimit_limit_all
  bool consume;  // ratelimit_limit (else ratelimit_check)
  Decision decision;
  LimitCall* calls;
  Decision* decisions;
  int count;
  ratelimit::Arrival* arrivals;  // ratelimit_simulate's
};

// PL/Proxy sends no settings: the router sends its session's
// ratelimit.error_format, set here for the rest of the partition's
// transaction as set_config(..., true) would (an invalid value raises
// SET's 22023). NULL: the partition's own setting stays.
void ApplyErrorFormat(FunctionCallInfo fcinfo, int arg) {
  if (PG_ARGISNULL(arg)) return;
  char* wanted = text_to_cstring(PG_GETARG_TEXT_PP(arg));
  const char* current = GetConfigOption("ratelimit.error_format", true, false);
  if (current != nullptr && strcmp(current, wanted) == 0) return;
  (void)set_config_option("ratelimit.error_format", wanted, superuser() ? PGC_SUSET : PGC_USERSET,
                          PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
}

// The call itself, as the single-node function makes it.
void MakeRoutedCall(void* context) {
  auto* call = static_cast<RoutedCall*>(context);
  ApplyErrorFormat(call->fcinfo, call->error_format_arg);
  if (call->all)
    call->count = DecideLimitAll(call->fcinfo, &call->calls, &call->decisions);
  else
    call->decision = DecideLimitOrCheck(call->fcinfo, call->consume);
}

// The simulation, as ratelimit_simulate makes it.
void MakeSimulation(void* context) {
  auto* call = static_cast<RoutedCall*>(context);
  call->count = SimulateFromArgs(call->fcinfo, &call->arrivals, &call->decisions);
}

// Runs step in an internal subtransaction (subtransaction.cpp's pattern,
// PL/pgSQL's exception block): kept when it returns (nullptr), rolled back
// when it raises, and the error, copied into the caller's memory, returned.
// A cancel is raised again, as PL/pgSQL's WHEN OTHERS does not catch it.
ErrorData* CatchError(void (*step)(void* context), void* context) {
  MemoryContext caller_context = CurrentMemoryContext;
  ResourceOwner caller_owner = CurrentResourceOwner;
  BeginInternalSubTransaction(nullptr);
  // The step allocates in the caller's memory: its results outlive the
  // subtransaction.
  MemoryContextSwitchTo(caller_context);
  ErrorData* volatile error = nullptr;
  PG_TRY();
  {
    step(context);
    ReleaseCurrentSubTransaction();
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(caller_context);
    error = CopyErrorData();
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(caller_context);
    CurrentResourceOwner = caller_owner;
    if (error->sqlerrcode == ERRCODE_QUERY_CANCELED) ReThrowError(error);
  }
  PG_END_TRY();
  MemoryContextSwitchTo(caller_context);
  CurrentResourceOwner = caller_owner;
  return error;
}

// The error columns of a routed call's row: NULL without an error, and for
// a field the error does not have.
void EncodeError(const ErrorData* error, Datum* values, bool* nulls) {
  const char* fields[kErrorColumns] = {nullptr, nullptr, nullptr, nullptr};
  if (error != nullptr) {
    fields[0] = unpack_sql_state(error->sqlerrcode);
    fields[1] = error->message;
    fields[2] = error->detail;
    fields[3] = error->hint;
  }
  for (int i = 0; i < kErrorColumns; ++i) {
    nulls[i] = fields[i] == nullptr;
    values[i] = nulls[i] ? static_cast<Datum>(0) : CStringGetTextDatum(fields[i]);
  }
}

// The types of the columns each routed call fills, in order: the
// decision's (ratelimit_proxy_answer), an entry's (ratelimit_proxy_entry)
// and a simulated arrival's, each followed by the four error columns.
constexpr Oid kAnswerTypes[kDecisionColumns + kErrorColumns] = {
    BOOLOID, FLOAT8OID, TIMESTAMPTZOID, FLOAT8OID, FLOAT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
constexpr Oid kEntryTypes[kEntryColumns + kErrorColumns] = {TEXTOID,        TEXTOID,   BOOLOID,   FLOAT8OID,
                                                            TIMESTAMPTZOID, FLOAT8OID, FLOAT8OID, TEXTOID,
                                                            TEXTOID,        TEXTOID,   TEXTOID};
constexpr Oid kSimulatedTypes[kSimulatedColumns + kErrorColumns] = {
    TIMESTAMPTZOID, FLOAT8OID, BOOLOID, FLOAT8OID, FLOAT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};

// 42804: the declared row type is not the columns a routed call fills (an
// owner's ALTER TYPE of ratelimit_proxy_answer or ratelimit_proxy_entry).
[[noreturn]] void RaiseNotRoutedShape(TupleDesc desc, const Oid* types, int columns) {
  StringInfoData wanted;
  initStringInfo(&wanted);
  for (int i = 0; i < columns; ++i)
    appendStringInfo(&wanted, "%s%s", i > 0 ? ", " : "", format_type_be(types[i]));
  ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                  errmsg("ratelimit: result type %s is not the row a routed call answers",
                         format_type_be(desc->tdtypeid)),
                  errdetail("Its columns must be (%s).", wanted.data)));
  pg_unreachable();
}

// A row of the declared type desc from the columns this module fills
// (values/nulls, of `types`): each live column must be the next of them,
// of its type, checked before any is stored (a datum is never stored in a
// column of another type: an owner's ALTER TYPE of a column to text made
// a boolean a pointer, a SIGSEGV); dropped columns are NULL.
HeapTuple FormRow(TupleDesc desc, const Oid* types, int columns, const Datum* values, const bool* nulls) {
  auto* row_values = static_cast<Datum*>(palloc0(sizeof(Datum) * Max(1, desc->natts)));
  auto* row_nulls = static_cast<bool*>(palloc(sizeof(bool) * Max(1, desc->natts)));
  int live = 0;
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute att = TupleDescAttr(desc, i);
    row_nulls[i] = true;
    if (att->attisdropped) continue;
    if (live >= columns || att->atttypid != types[live]) RaiseNotRoutedShape(desc, types, columns);
    row_values[i] = values[live];
    row_nulls[i] = nulls[live];
    ++live;
  }
  if (live != columns) RaiseNotRoutedShape(desc, types, columns);
  return heap_form_tuple(desc, row_values, row_nulls);
}

Datum RoutedDecision(FunctionCallInfo fcinfo, bool consume) {
  RoutedCall call{};
  call.fcinfo = fcinfo;
  call.error_format_arg = 6;
  call.consume = consume;
  ErrorData* error = CatchError(MakeRoutedCall, &call);
  TupleDesc desc = ResultDesc(fcinfo);
  Datum values[kDecisionColumns + kErrorColumns] = {};
  bool nulls[kDecisionColumns + kErrorColumns] = {true, true, true, true, true};
  if (error == nullptr) EncodeDecision(call.decision, values, nulls);
  EncodeError(error, values + kDecisionColumns, nulls + kDecisionColumns);
  return HeapTupleGetDatum(FormRow(desc, kAnswerTypes, kDecisionColumns + kErrorColumns, values, nulls));
}

}  // namespace

Datum RoutedLimit(FunctionCallInfo fcinfo) { return RoutedDecision(fcinfo, true); }

Datum RoutedCheck(FunctionCallInfo fcinfo) { return RoutedDecision(fcinfo, false); }

Datum RoutedLimitAll(FunctionCallInfo fcinfo) {
  RoutedCall call{};
  call.fcinfo = fcinfo;
  call.error_format_arg = 2;
  call.all = true;
  ErrorData* error = CatchError(MakeRoutedCall, &call);
  TupleDesc desc;
  Tuplestorestate* store = MaterializedResult(fcinfo, &desc);
  constexpr int kColumns = kEntryColumns + kErrorColumns;
  Datum values[kColumns] = {};
  bool nulls[kColumns];
  if (error != nullptr) {
    for (bool& null : nulls) null = true;
    EncodeError(error, values + kEntryColumns, nulls + kEntryColumns);
    tuplestore_puttuple(store, FormRow(desc, kEntryTypes, kColumns, values, nulls));
    return static_cast<Datum>(0);
  }
  for (int i = 0; i < call.count; ++i) {
    EncodeEntry(call.calls[i].id, call.decisions[i], values, nulls);
    EncodeError(nullptr, values + kEntryColumns, nulls + kEntryColumns);
    tuplestore_puttuple(store, FormRow(desc, kEntryTypes, kColumns, values, nulls));
  }
  return static_cast<Datum>(0);
}

// A simulation needs no subtransaction to be undone (it writes nothing),
// only to catch its error: the same pattern as the other calls.
Datum RoutedSimulate(FunctionCallInfo fcinfo) {
  RoutedCall call{};
  call.fcinfo = fcinfo;
  ErrorData* error = CatchError(MakeSimulation, &call);
  TupleDesc desc;
  Tuplestorestate* store = MaterializedResult(fcinfo, &desc);
  constexpr int kColumns = kSimulatedColumns + kErrorColumns;
  Datum values[kColumns] = {};
  bool nulls[kColumns];
  if (error != nullptr) {
    for (bool& null : nulls) null = true;
    EncodeError(error, values + kSimulatedColumns, nulls + kSimulatedColumns);
    tuplestore_puttuple(store, FormRow(desc, kSimulatedTypes, kColumns, values, nulls));
    return static_cast<Datum>(0);
  }
  for (int i = 0; i < call.count; ++i) {
    EncodeSimulated(call.arrivals[i], call.decisions[i], values, nulls);
    EncodeError(nullptr, values + kSimulatedColumns, nulls + kSimulatedColumns);
    tuplestore_puttuple(store, FormRow(desc, kSimulatedTypes, kColumns, values, nulls));
  }
  return static_cast<Datum>(0);
}

}  // namespace ratelimit_pg

extern "C" {

PG_FUNCTION_INFO_V1(ratelimit_proxy_limit);
PG_FUNCTION_INFO_V1(ratelimit_proxy_check);
PG_FUNCTION_INFO_V1(ratelimit_proxy_limit_all);
PG_FUNCTION_INFO_V1(ratelimit_proxy_simulate);

Datum ratelimit_proxy_limit(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::RoutedLimit>(fcinfo);
}
Datum ratelimit_proxy_check(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::RoutedCheck>(fcinfo);
}
Datum ratelimit_proxy_limit_all(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::RoutedLimitAll>(fcinfo);
}
Datum ratelimit_proxy_simulate(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::RoutedSimulate>(fcinfo);
}

}  // extern "C"
