// The router's side of a routed call (ratelimit_proxy 0.8.0 loads these from
// this library): the partition returns an error as data (routed_calls.cpp
// and the partition's ratelimit_proxy_* functions) and the router raises it
// here, with the partition's SQLSTATE, message, detail and hint. In C
// rather than PL/pgSQL so that the router's ratelimit_limit and
// ratelimit_check can be one SQL expression, inlined into the caller's
// statement: ratelimit_proxy_result(<the PL/Proxy call>).
#include "support/entry.h"

#include "api/routed_answers.h"

#include "api/fn_args.h"

extern "C" {
#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/typcache.h"
}

namespace ratelimit_pg {

// A SQLSTATE as the partition sent it: five digits or upper-case letters.
static bool ValidSqlState(const char* state) {
  if (strlen(state) != 5) return false;
  for (int i = 0; i < 5; ++i) {
    char c = state[i];
    if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'))) return false;
  }
  return true;
}

// Raises the partition's error: state, message, and detail and hint when
// not NULL (an absent field stays absent, as on the partition).
void RaiseRoutedAnswer(const char* state, const char* message, const char* detail, const char* hint) {
  if (!ValidSqlState(state))
    ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                    errmsg("ratelimit: a partition returned an error with an invalid SQLSTATE \"%s\"", state),
                    errdetail_internal("%s", message)));
  ereport(ERROR, (errcode(MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4])),
                  errmsg_internal("%s", message), detail != nullptr ? errdetail_internal("%s", detail) : 0,
                  hint != nullptr ? errhint("%s", hint) : 0));
  pg_unreachable();
}

namespace {

// error_state, error_message, error_detail, error_hint: the last columns of
// every routed call's row.
constexpr int kErrorColumns = 4;

// A text Datum as a C string, or nullptr for NULL.
const char* TextOrNull(Datum value, bool null) { return null ? nullptr : TextDatumGetCString(value); }

// Raises the error of error columns values/nulls (error_state first) if
// error_state is not NULL.
void RaiseIfError(const Datum* values, const bool* nulls) {
  if (nulls[0]) return;
  const char* message = TextOrNull(values[1], nulls[1]);
  RaiseRoutedAnswer(TextDatumGetCString(values[0]), message != nullptr ? message : "",
                    TextOrNull(values[2], nulls[2]), TextOrNull(values[3], nulls[3]));
}

// The answer's columns must be the result's, then the error columns.
void RequireResultColumns(TupleDesc answer, TupleDesc result) {
  bool same = answer->natts == result->natts + kErrorColumns;
  for (int i = 0; same && i < result->natts; ++i)
    same = TupleDescAttr(answer, i)->atttypid == TupleDescAttr(result, i)->atttypid;
  if (!same)
    ereport(ERROR,
            (errcode(ERRCODE_DATATYPE_MISMATCH),
             errmsg("ratelimit: a routed call's answer must be the %d columns of its result and %d error "
                    "columns",
                    result->natts, kErrorColumns)));
}

}  // namespace

Datum RaiseRoutedError(FunctionCallInfo fcinfo) {
  Datum values[kErrorColumns];
  bool nulls[kErrorColumns];
  for (int i = 0; i < kErrorColumns; ++i) {
    nulls[i] = PG_ARGISNULL(i);
    values[i] = nulls[i] ? static_cast<Datum>(0) : PG_GETARG_DATUM(i);
  }
  RaiseIfError(values, nulls);
  PG_RETURN_VOID();
}

Datum RoutedResult(FunctionCallInfo fcinfo) {
  HeapTupleHeader answer = PG_GETARG_HEAPTUPLEHEADER(0);
  TupleDesc answer_desc =
      lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(answer), HeapTupleHeaderGetTypMod(answer));
  int columns = answer_desc->natts;
  HeapTupleData tuple;
  tuple.t_len = HeapTupleHeaderGetDatumLength(answer);
  ItemPointerSetInvalid(&tuple.t_self);
  tuple.t_tableOid = InvalidOid;
  tuple.t_data = answer;
  Datum* values = static_cast<Datum*>(palloc(columns * sizeof(Datum)));
  bool* nulls = static_cast<bool*>(palloc(columns * sizeof(bool)));
  heap_deform_tuple(&tuple, answer_desc, values, nulls);
  int result_columns = columns - kErrorColumns;
  TupleDesc desc = ResultDesc(fcinfo);
  RequireResultColumns(answer_desc, desc);
  ReleaseTupleDesc(answer_desc);
  RaiseIfError(values + result_columns, nulls + result_columns);
  return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}

}  // namespace ratelimit_pg

extern "C" {

PG_FUNCTION_INFO_V1(ratelimit_proxy_raise);
PG_FUNCTION_INFO_V1(ratelimit_proxy_result);

Datum ratelimit_proxy_raise(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::RaiseRoutedError>(fcinfo);
}
Datum ratelimit_proxy_result(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::RoutedResult>(fcinfo);
}

}  // extern "C"
