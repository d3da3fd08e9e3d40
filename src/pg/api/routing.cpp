// ratelimit_proxy_route: the C function behind every function of the
// router (ratelimit_proxy 0.9.0) that reaches partitions, in place of
// PL/Proxy's call handler: the ratelimit_proxy_* functions, and
// ratelimit_limit and ratelimit_check themselves (the hot path: no SQL
// wrapper, which PostgreSQL cannot inline in FROM and would parse and plan
// at every call). Each runs its plan's statement (routing_plan.h: the
// statement, how it is routed, the forms in which values cross) on its
// partitions over the router's own connections (route/connections.h),
// prepared once per connection: its arguments encoded, its rows read back
// into the function's declared result, each column checked, and a
// partition's error returned as data raised here. docs/scale-out.md, "How
// values cross to the partitions", says why the forms are exact.
#include <cstdlib>

#include "support/entry.h"

#include "api/routing.h"

#include "api/routed_answers.h"
#include "api/routing_plan.h"

#include "route/cluster.h"
#include "route/connections.h"

extern "C" {
#include "access/htup_details.h"
#include "common/md5.h"
#include "common/pg_prng.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/tuplestore.h"
}

namespace ratelimit_pg {
namespace {

// ratelimit_hash(name, key) (ratelimit_proxy--0.4.0.sql): the first 8 hex
// digits of md5(octet_length(name) || ':' || name || coalesce('=' || key,
// '')) as a signed 32-bit integer, a NULL name as ''.
int32 NameKeyHash(FunctionCallInfo fcinfo) {
  StringInfoData bytes;
  initStringInfo(&bytes);
  const text* name = PG_ARGISNULL(0) ? nullptr : PG_GETARG_TEXT_PP(0);
  int name_len = name != nullptr ? static_cast<int>(VARSIZE_ANY_EXHDR(name)) : 0;
  appendStringInfo(&bytes, "%d:", name_len);
  if (name != nullptr) appendBinaryStringInfo(&bytes, VARDATA_ANY(name), name_len);
  if (!PG_ARGISNULL(1)) {
    const text* key = PG_GETARG_TEXT_PP(1);
    appendStringInfoChar(&bytes, '=');
    appendBinaryStringInfo(&bytes, VARDATA_ANY(key), static_cast<int>(VARSIZE_ANY_EXHDR(key)));
  }
  char hex[33];
  const char* why = nullptr;
  if (!pg_md5_hash(bytes.data, bytes.len, hex, &why))
    ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not compute an MD5 hash: %s", why)));
  hex[8] = '\0';
  return static_cast<int32>(static_cast<uint32>(strtoul(hex, nullptr, 16)));
}

// The partitions this call runs on: how many; *targets their numbers.
int TargetsOf(const RoutedPlan& plan, FunctionCallInfo fcinfo, const RouterCluster& cluster, int** targets) {
  switch (plan.route) {
    case Route::kByNameKey:
      *targets = static_cast<int*>(palloc(sizeof(int)));
      (*targets)[0] = PartitionOfHash(cluster, NameKeyHash(fcinfo));
      return 1;
    case Route::kByHash: {
      if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                        errmsg("%s: the hash that routes the call must not be NULL", plan.function_name)));
      *targets = static_cast<int*>(palloc(sizeof(int)));
      (*targets)[0] = PartitionOfHash(cluster, PG_GETARG_INT32(0));
      return 1;
    }
    case Route::kAny:
      *targets = static_cast<int*>(palloc(sizeof(int)));
      (*targets)[0] =
          static_cast<int>(pg_prng_uint64_range(&pg_global_prng_state, 0, cluster.partitions - 1));
      return 1;
    case Route::kAll:
      *targets = static_cast<int*>(palloc(sizeof(int) * cluster.partitions));
      for (int i = 0; i < cluster.partitions; ++i) (*targets)[i] = i;
      return cluster.partitions;
  }
  pg_unreachable();
}

// The statement's parameters: the arguments after the hash, each in its
// form (binary or text), and for kByNameKey the session's error format.
void EncodeParams(const RoutedPlan& plan, FunctionCallInfo fcinfo, int sent, const char** values,
                  int* lengths, int* formats) {
  int params = plan.args - plan.first_param;
  for (int i = 0; i < params; ++i) {
    int arg = plan.first_param + i;
    const SentParam& param = plan.params[arg];
    values[i] = nullptr;
    lengths[i] = 0;
    formats[i] = param.binary ? 1 : 0;
    if (PG_ARGISNULL(arg)) continue;
    // A const FmgrInfo is still the function's to cache in (fn_extra).
    auto* function = const_cast<FmgrInfo*>(&param.function);
    if (!param.binary) {
      values[i] = OutputFunctionCall(function, PG_GETARG_DATUM(arg));
      continue;
    }
    bytea* bytes = SendFunctionCall(function, PG_GETARG_DATUM(arg));
    values[i] = VARDATA(bytes);
    lengths[i] = static_cast<int>(VARSIZE(bytes) - VARHDRSZ);
  }
  if (sent > params) {
    // The session's error format ('' when unset: NULL, the partition's own).
    const char* format = GetConfigOption("ratelimit.error_format", true, false);
    values[params] = format != nullptr && format[0] != '\0' ? format : nullptr;
    lengths[params] = 0;
    formats[params] = 0;
  }
}

// A value of the partition's answer that is not of its column's type:
// only a broken or foreign server answers so (22P03, or 22021 for text).
[[noreturn]] void RaiseBadColumn(const RoutedPlan& plan, int column, int sqlstate, const char* what) {
  ereport(ERROR, (errcode(sqlstate), errmsg("%s: column %d of the partition's answer is not valid %s",
                                            plan.function_name, column + 1, what)));
  pg_unreachable();
}

// Text the partition sent (in the connection's client_encoding, the
// database's): checked to be valid in it, without a zero byte.
void RequireText(const RoutedPlan& plan, int column, const char* bytes, int length) {
  if (!pg_verify_mbstr(GetDatabaseEncoding(), bytes, length, true))
    RaiseBadColumn(plan, column, ERRCODE_CHARACTER_NOT_IN_REPERTOIRE,
                   psprintf("text in encoding %s", GetDatabaseEncodingName()));
}

// Column `column` of an answer row (bytes, length) as the router's datum.
Datum ReadValue(const RoutedPlan& plan, int column, char* bytes, int length) {
  const ReadColumn& read = plan.read[column];
  switch (read.form) {
    case ColumnKind::kText:
      RequireText(plan, column, bytes, length);
      return PointerGetDatum(cstring_to_text_with_len(bytes, length));
    case ColumnKind::kJsonb:
      // jsonb_send's form: a version byte (1), then the text.
      if (length < 1 || bytes[0] != 1)
        RaiseBadColumn(plan, column, ERRCODE_INVALID_BINARY_REPRESENTATION, "jsonb");
      RequireText(plan, column, bytes + 1, length - 1);
      return DirectFunctionCall1(jsonb_in, CStringGetDatum(bytes + 1));  // zero-terminated by CopyRows
    case ColumnKind::kReceived: {
      StringInfoData buf;
      buf.data = bytes;
      buf.len = length;
      buf.maxlen = length + 1;
      buf.cursor = 0;
      Datum value = ReceiveFunctionCall(const_cast<FmgrInfo*>(&read.receive), &buf, read.ioparam, -1);
      if (buf.cursor != buf.len)
        RaiseBadColumn(plan, column, ERRCODE_INVALID_BINARY_REPRESENTATION,
                       format_type_be(plan.column_types[column]));
      return value;
    }
  }
  pg_unreachable();
}

// Reads row r of an answer into the function's row (values/nulls, desc's
// columns; dropped ones NULL) and the error columns (errors, when
// answers_error).
void ReadRow(const RoutedPlan& plan, const RemoteRows& rows, int r, Datum* values, bool* nulls,
             const char** errors) {
  for (int i = 0; i < plan.desc->natts; ++i) {
    values[i] = 0;
    nulls[i] = true;
  }
  for (int column = 0, error = 0; column < plan.columns; ++column) {
    size_t cell = static_cast<size_t>(r) * rows.columns + column;
    char* bytes = rows.values[cell];
    int attnum = plan.read[column].attnum;
    if (attnum < 0) {
      errors[error++] = bytes == nullptr
                            ? nullptr
                            : TextDatumGetCString(ReadValue(plan, column, bytes, rows.lengths[cell]));
      continue;
    }
    nulls[attnum] = bytes == nullptr;
    if (bytes != nullptr) values[attnum] = ReadValue(plan, column, bytes, rows.lengths[cell]);
  }
}

// Row r of an answer as the function's row; a partition's error returned
// as data (answers_error) is raised instead.
HeapTuple RowOf(const RoutedPlan& plan, const RemoteRows& rows, int r) {
  auto* values = static_cast<Datum*>(palloc(sizeof(Datum) * Max(1, plan.desc->natts)));
  auto* nulls = static_cast<bool*>(palloc(sizeof(bool) * Max(1, plan.desc->natts)));
  const char* error[kErrorColumns] = {nullptr, nullptr, nullptr, nullptr};
  ReadRow(plan, rows, r, values, nulls, error);
  if (plan.answers_error && error[0] != nullptr)
    RaiseRoutedAnswer(error[0], error[1] != nullptr ? error[1] : "", error[2], error[3]);
  return heap_form_tuple(plan.desc, values, nulls);
}

}  // namespace

Datum RouteCall(FunctionCallInfo fcinfo) {
  RoutedPlan* plan = PlanOf(fcinfo);
  const RouterCluster& cluster = CurrentCluster();
  int* targets = nullptr;
  int count = TargetsOf(*plan, fcinfo, cluster, &targets);

  int params = plan->args - plan->first_param;
  int sent = params + (plan->route == Route::kByNameKey ? 1 : 0);
  auto** values = static_cast<const char**>(palloc(sizeof(char*) * Max(1, sent)));
  auto* lengths = static_cast<int*>(palloc(sizeof(int) * Max(1, sent)));
  auto* formats = static_cast<int*>(palloc(sizeof(int) * Max(1, sent)));
  EncodeParams(*plan, fcinfo, sent, values, lengths, formats);
  RemoteStatement statement{
      plan->function, plan->sql_hash, plan->function_name, plan->args,        plan->sql, sent, values,
      lengths,        formats,        plan->columns,       plan->column_types};
  auto* answers = static_cast<RemoteRows*>(palloc(sizeof(RemoteRows) * count));
  RunOnPartitions(cluster, targets, count, statement, answers);

  if (!plan->returns_set) {
    const RemoteRows& rows = answers[0];
    if (rows.rows == 0) PG_RETURN_NULL();
    if (rows.rows > 1)
      ereport(ERROR, (errcode(ERRCODE_CARDINALITY_VIOLATION),
                      errmsg("%s: the partition answered %d rows, not one", plan->function_name, rows.rows)));
    return HeapTupleGetDatum(RowOf(*plan, rows, 0));
  }
  InitMaterializedSRF(fcinfo, 0);
  auto* set = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  for (int t = 0; t < count; ++t)
    for (int r = 0; r < answers[t].rows; ++r)
      tuplestore_puttuple(set->setResult, RowOf(*plan, answers[t], r));
  return static_cast<Datum>(0);
}

}  // namespace ratelimit_pg

extern "C" {

PG_FUNCTION_INFO_V1(ratelimit_proxy_route);

Datum ratelimit_proxy_route(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::RouteCall>(fcinfo);
}

}  // extern "C"
