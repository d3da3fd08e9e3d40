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
#include "catalog/pg_type.h"
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

// The names of the error columns, which follow the result's.
constexpr const char* kErrorColumnNames[kErrorColumns] = {"error_state", "error_message", "error_detail",
                                                          "error_hint"};

// The number of live (not dropped) columns of a row type.
int LiveColumns(TupleDesc desc) {
  int live = 0;
  for (int i = 0; i < desc->natts; ++i) live += TupleDescAttr(desc, i)->attisdropped ? 0 : 1;
  return live;
}

// The result's live column number `live` (0-based), or nullptr past them.
Form_pg_attribute LiveResultColumn(TupleDesc result, int live) {
  for (int i = 0; i < result->natts; ++i) {
    if (TupleDescAttr(result, i)->attisdropped) continue;
    if (live-- == 0) return TupleDescAttr(result, i);
  }
  return nullptr;
}

// Checks every column of the answer before any is read: the result's live
// columns with their types, then the four error columns as text (42804
// naming the first column that is not): a datum is never read as a type
// it was not checked to be.
void RequireAnswerColumns(TupleDesc answer, TupleDesc result) {
  int expected_columns = LiveColumns(result) + kErrorColumns;
  if (LiveColumns(answer) != expected_columns)
    ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                    errmsg("a routed call's answer must have %d columns, not %d", expected_columns,
                           LiveColumns(answer)),
                    errdetail("The answer is the columns of %s and the text columns error_state, "
                              "error_message, error_detail and error_hint.",
                              format_type_be(result->tdtypeid))));
  for (int i = 0, live = 0; i < answer->natts; ++i) {
    Form_pg_attribute att = TupleDescAttr(answer, i);
    if (att->attisdropped) continue;
    Form_pg_attribute wanted = LiveResultColumn(result, live);
    Oid type = wanted != nullptr ? wanted->atttypid : TEXTOID;
    const char* name = wanted != nullptr ? NameStr(wanted->attname)
                                         : kErrorColumnNames[live - (expected_columns - kErrorColumns)];
    if (att->atttypid != type)
      ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                      errmsg("column %d (%s) of a routed call's answer must be %s, not %s", live + 1, name,
                             format_type_be(type), format_type_be(att->atttypid))));
    ++live;
  }
}

// Moves the answer's live columns (checked) into the result's live
// positions (dropped ones NULL) and its last four into error_values.
void SplitAnswer(TupleDesc answer, const Datum* values, const bool* nulls, TupleDesc result, Datum* out,
                 bool* out_nulls, Datum* error_values, bool* error_nulls) {
  int r = 0;
  int e = 0;
  for (int i = 0; i < answer->natts; ++i) {
    if (TupleDescAttr(answer, i)->attisdropped) continue;
    while (r < result->natts && TupleDescAttr(result, r)->attisdropped) {
      out[r] = 0;
      out_nulls[r++] = true;
    }
    if (r < result->natts) {
      out[r] = values[i];
      out_nulls[r++] = nulls[i];
    } else {
      error_values[e] = values[i];
      error_nulls[e++] = nulls[i];
    }
  }
  for (; r < result->natts; ++r) {
    out[r] = 0;
    out_nulls[r] = true;
  }
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
  TupleDesc desc = ResultDesc(fcinfo);
  RequireAnswerColumns(answer_desc, desc);
  int columns = answer_desc->natts;
  HeapTupleData tuple;
  tuple.t_len = HeapTupleHeaderGetDatumLength(answer);
  ItemPointerSetInvalid(&tuple.t_self);
  tuple.t_tableOid = InvalidOid;
  tuple.t_data = answer;
  Datum* values = static_cast<Datum*>(palloc(columns * sizeof(Datum)));
  bool* nulls = static_cast<bool*>(palloc(columns * sizeof(bool)));
  heap_deform_tuple(&tuple, answer_desc, values, nulls);
  Datum* result_values = static_cast<Datum*>(palloc((desc->natts + 1) * sizeof(Datum)));
  bool* result_nulls = static_cast<bool*>(palloc((desc->natts + 1) * sizeof(bool)));
  Datum error_values[kErrorColumns];
  bool error_nulls[kErrorColumns];
  SplitAnswer(answer_desc, values, nulls, desc, result_values, result_nulls, error_values, error_nulls);
  ReleaseTupleDesc(answer_desc);
  RaiseIfError(error_values, error_nulls);
  return HeapTupleGetDatum(heap_form_tuple(desc, result_values, result_nulls));
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
