// ratelimit_proxy_route: the C function behind every function of the
// router (ratelimit_proxy 0.9.0) that reaches partitions, in place of
// PL/Proxy's call handler: the ratelimit_proxy_* functions, and
// ratelimit_limit and ratelimit_check themselves (the hot path: no SQL
// wrapper, which PostgreSQL cannot inline in FROM and would parse and plan
// at every call). Each runs one statement of the partition's ratelimit
// (kRouted below: the statement, and how it is routed: the partition of its
// first argument, a hash, as PL/Proxy's RUN ON hash; of (name, key), as
// ratelimit_hash gives it; every partition, RUN ON ALL; any one, RUN ON
// ANY) over the router's own connections (route/connections.h), prepared
// once per connection. What crosses is bit-exact and independent of every
// session setting, the caller's and the partition's: its arguments go in
// binary (the types' send functions), text and jsonb as their text (which
// no setting changes, and which is not converted to the caller's
// client_encoding as their binary forms would be); its rows come back in
// binary, each column checked to be of the type expected and read by the
// type's receive function (text and jsonb checked to be valid in the
// database's encoding) into the function's declared result; a partition's
// error returned as data is raised here.
#include <cstring>

#include "support/entry.h"

#include "api/routing.h"

#include "api/routed_answers.h"

#include "route/cluster.h"
#include "route/connections.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "catalog/pg_proc.h"
#include "common/hashfn.h"
#include "common/md5.h"
#include "common/pg_prng.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "utils/tuplestore.h"
}

namespace ratelimit_pg {
namespace {

enum class Route { kByHash, kByNameKey, kAll, kAny };

struct RoutedFunction {
  const char* name;  // the router's function (in the extension's schema)
  Route route;
  // The partition's statement; nullptr: SELECT * FROM the partition's
  // function of the same name, with the router's arguments (without the
  // hash). @extschema@ is the router's schema, the partition's too.
  const char* sql;
  // kByNameKey: the statement takes the arguments and the session's
  // ratelimit.error_format, and answers the result's columns and the
  // error's (error_state, error_message, error_detail, error_hint).
  bool answers_error = false;
};

constexpr int kErrorColumns = 4;

constexpr const char* kServer =
    "EXTRACT(epoch FROM pg_catalog.pg_postmaster_start_time())::text || ' ' || "
    "pg_catalog.current_setting('port') "
    "AS server";

// Every routed function, and what reaches the partitions.
const RoutedFunction kRouted[] = {
    {"ratelimit_limit", Route::kByNameKey,
     "SELECT * FROM @extschema@.ratelimit_proxy_limit($1::pg_catalog.text, $2::pg_catalog.text, "
     "$3::pg_catalog.jsonb, "
     "$4::double precision, $5::boolean, $6::boolean, $7::pg_catalog.text)",
     true},
    {"ratelimit_check", Route::kByNameKey,
     "SELECT * FROM @extschema@.ratelimit_proxy_check($1::pg_catalog.text, $2::pg_catalog.text, "
     "$3::pg_catalog.jsonb, "
     "$4::double precision, $5::boolean, $6::boolean, $7::pg_catalog.text)",
     true},
    {"ratelimit_proxy_limit", Route::kByHash, nullptr},
    {"ratelimit_proxy_check", Route::kByHash, nullptr},
    {"ratelimit_proxy_limit_all", Route::kByHash, nullptr},
    {"ratelimit_proxy_value", Route::kByHash, nullptr},
    {"ratelimit_proxy_reset", Route::kByHash, nullptr},
    {"ratelimit_proxy_refund", Route::kByHash, nullptr},
    {"ratelimit_proxy_headers", Route::kByHash, nullptr},
    {"ratelimit_proxy_override", Route::kByHash, nullptr},
    {"ratelimit_proxy_unoverride", Route::kByHash, nullptr},
    {"ratelimit_proxy_define", Route::kAll, nullptr},
    {"ratelimit_proxy_undefine", Route::kAll, nullptr},
    {"ratelimit_proxy_cleanup", Route::kAll, nullptr},
    {"ratelimit_proxy_stats_reset", Route::kAll, nullptr},
    {"ratelimit_proxy_stats", Route::kAll, "SELECT %s, s.* FROM @extschema@.ratelimit_stats AS s"},
    {"ratelimit_proxy_status", Route::kAll,
     "SELECT %s, pg_catalog.current_database()::text AS db, s.* FROM @extschema@.ratelimit_status AS s"},
    {"ratelimit_proxy_simulate", Route::kAny, nullptr},
};

// How an argument crosses: its send function's bytes (binary), or its
// output function's text.
struct SentParam {
  bool binary;
  FmgrInfo function;
};

// How a column of the partition's binary answer is read: text and jsonb
// checked for the database's encoding (their receive functions would
// convert from the caller's client_encoding, which the partition did not
// write them in), the others by their receive functions.
enum class ColumnKind { kText, kJsonb, kReceived };

struct ReadColumn {
  ColumnKind form;
  int attnum;  // its index in desc; -1: an error column (text)
  FmgrInfo receive;
  Oid ioparam;
};

// A named row type a plan was made for (its result's, or an argument's)
// and the type cache's identifier of its columns then: an ALTER TYPE
// changes the columns, or a rollback changes them back, without a pg_type
// invalidation, so the plan compares the identifier at every call.
struct RowShape {
  Oid type;
  uint64 identifier;
};

// What a call of one routed function needs, made at its first call in
// the backend and kept until a function or type changes (a query's
// FmgrInfo lives only as long as one execution of it).
struct RoutedPlan {
  Oid function;
  Route route;
  bool answers_error;
  uint32 sql_hash;
  char* function_name;  // schema.name
  int args;
  int first_param;  // 1 when the first argument is the hash
  char* sql;
  SentParam* params;  // of each argument (those before first_param unused)
  bool returns_set;
  TupleDesc desc;
  int columns;        // of each answer row: desc's live columns, then the error columns
  ReadColumn* read;   // of each answer column
  Oid* column_types;  // of each answer column
  int shapes;
  RowShape* shape;  // the named row types it was made for
};

// The type cache's identifier of a row type's columns.
uint64 ShapeIdentifier(Oid type) { return lookup_type_cache(type, TYPECACHE_TUPDESC)->tupDesc_identifier; }

// Remembers type, if it is a named row type, with its columns' identifier.
void NoteShape(RoutedPlan* plan, Oid type) {
  if (type == RECORDOID || !type_is_rowtype(type)) return;
  plan->shape[plan->shapes++] = RowShape{type, ShapeIdentifier(type)};
}

// Whether every row type the plan was made for still has the columns it had.
bool ShapesCurrent(const RoutedPlan& plan) {
  for (int i = 0; i < plan.shapes; ++i)
    if (ShapeIdentifier(plan.shape[i].type) != plan.shape[i].identifier) return false;
  return true;
}

// The scalar types whose binary form holds no text and no type OID that
// could differ between servers: sent and read in binary, bit-exact.
bool BinaryScalar(Oid type) {
  switch (type) {
    case BOOLOID:
    case INT2OID:
    case INT4OID:
    case INT8OID:
    case FLOAT4OID:
    case FLOAT8OID:
    case TIMESTAMPTZOID:
      return true;
    default:
      return false;
  }
}

// Whether an argument of this type goes in binary: a binary scalar, an
// array of one (array_send names its element type, built in), or a row
// type of them (record_send names each column's type, built in, not the
// row type's own OID, which differs between servers; record_recv on the
// partition checks each against its own row type's columns).
bool SentInBinary(Oid type) {
  if (BinaryScalar(type)) return true;
  Oid element = get_element_type(type);
  if (OidIsValid(element)) return BinaryScalar(element);
  if (!type_is_rowtype(type) || type == RECORDOID) return false;
  TupleDesc desc = lookup_rowtype_tupdesc(type, -1);
  bool scalars = true;
  for (int i = 0; i < desc->natts && scalars; ++i)
    scalars = TupleDescAttr(desc, i)->attisdropped || BinaryScalar(TupleDescAttr(desc, i)->atttypid);
  ReleaseTupleDesc(desc);
  return scalars;
}

// How argument `arg` (of type `type`) of function `name` crosses; a type
// with no exact form here is refused when the plan is made.
void PlanParam(const char* name, int arg, Oid type, SentParam* param) {
  Oid function;
  bool varlena;
  if (type == TEXTOID || type == JSONBOID) {
    param->binary = false;
    getTypeOutputInfo(type, &function, &varlena);
  } else if (SentInBinary(type)) {
    param->binary = true;
    getTypeBinaryOutputInfo(type, &function, &varlena);
  } else {
    elog(ERROR, "%s: argument %d's type %s cannot be routed exactly", name, arg + 1, format_type_be(type));
  }
  fmgr_info_cxt(function, &param->function, CurrentMemoryContext);  // the plan's
}

// How an answer column of type `type` is read; a type with no exact form
// here is refused when the plan is made.
void PlanColumn(const char* name, Oid type, int attnum, ReadColumn* column) {
  column->attnum = attnum;
  if (type == TEXTOID || type == JSONBOID) {
    column->form = type == TEXTOID ? ColumnKind::kText : ColumnKind::kJsonb;
    return;
  }
  if (!BinaryScalar(type))
    elog(ERROR, "%s: a result column's type %s cannot be routed exactly", name, format_type_be(type));
  column->form = ColumnKind::kReceived;
  Oid receive;
  getTypeBinaryInputInfo(type, &receive, &column->ioparam);
  fmgr_info_cxt(receive, &column->receive, CurrentMemoryContext);  // the plan's
}

// The answer's columns: desc's live ones, then (answers_error) the error
// columns, all text.
void PlanColumns(RoutedPlan* plan) {
  int live = 0;
  for (int i = 0; i < plan->desc->natts; ++i) live += TupleDescAttr(plan->desc, i)->attisdropped ? 0 : 1;
  plan->columns = live + (plan->answers_error ? kErrorColumns : 0);
  plan->read = static_cast<ReadColumn*>(palloc0(sizeof(ReadColumn) * Max(1, plan->columns)));
  plan->column_types = static_cast<Oid*>(palloc0(sizeof(Oid) * Max(1, plan->columns)));
  int column = 0;
  for (int i = 0; i < plan->desc->natts; ++i) {
    Form_pg_attribute att = TupleDescAttr(plan->desc, i);
    if (att->attisdropped) continue;
    plan->column_types[column] = att->atttypid;
    PlanColumn(plan->function_name, att->atttypid, i, &plan->read[column++]);
  }
  for (; column < plan->columns; ++column) {
    plan->column_types[column] = TEXTOID;
    PlanColumn(plan->function_name, TEXTOID, -1, &plan->read[column]);
  }
}

const RoutedFunction& RoutedFunctionNamed(const char* name) {
  for (const RoutedFunction& f : kRouted)
    if (strcmp(f.name, name) == 0) return f;
  ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                  errmsg("function %s is not one of ratelimit_proxy's routed functions", name)));
  pg_unreachable();
}

// Replaces every @extschema@ of sql by schema (quoted).
char* WithSchema(const char* sql, const char* schema) {
  StringInfoData out;
  initStringInfo(&out);
  const char* quoted = quote_identifier(schema);
  constexpr const char* kToken = "@extschema@";
  for (const char* at; (at = strstr(sql, kToken)) != nullptr; sql = at + strlen(kToken)) {
    appendBinaryStringInfo(&out, sql, static_cast<int>(at - sql));
    appendStringInfoString(&out, quoted);
  }
  appendStringInfoString(&out, sql);
  return out.data;
}

MemoryContext plan_context = nullptr;
RoutedPlan** plans = nullptr;
int plan_count = 0;
constexpr int kMostPlans = 64;
// A function or type changed: the plans are made again at the next call.
// Only flagged here: an invalidation arrives whenever a catalog is read
// (the cluster's, a plan's own lookups), in the middle of a call that
// still uses its plan, so the plans are freed only when a call begins.
bool plans_stale = false;

void ForgetPlans(Datum, int, uint32) { plans_stale = true; }

// Frees the plans if a change made them stale; at the start of a call only.
void DropStalePlans() {
  if (!plans_stale || plan_context == nullptr) return;
  MemoryContextReset(plan_context);
  plans = nullptr;
  plan_count = 0;
  plans_stale = false;
}

RoutedPlan* MakePlan(FunctionCallInfo fcinfo) {
  if (plan_context == nullptr) {
    plan_context = AllocSetContextCreate(TopMemoryContext, "ratelimit routed plans", ALLOCSET_SMALL_SIZES);
    CacheRegisterSyscacheCallback(PROCOID, ForgetPlans, 0);
    CacheRegisterSyscacheCallback(TYPEOID, ForgetPlans, 0);
  }
  MemoryContext caller = MemoryContextSwitchTo(plan_context);
  auto* plan = static_cast<RoutedPlan*>(palloc0(sizeof(RoutedPlan)));
  plan->function = fcinfo->flinfo->fn_oid;
  HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(plan->function));
  if (!HeapTupleIsValid(tuple)) elog(ERROR, "cache lookup failed for function %u", plan->function);
  auto* proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tuple));
  char* name = pstrdup(NameStr(proc->proname));
  char* schema = get_namespace_name(proc->pronamespace);
  plan->args = proc->pronargs;
  plan->returns_set = proc->proretset;
  Oid* types = static_cast<Oid*>(palloc(sizeof(Oid) * Max(1, plan->args)));
  for (int i = 0; i < plan->args; ++i) types[i] = proc->proargtypes.values[i];
  ReleaseSysCache(tuple);

  const RoutedFunction& routed = RoutedFunctionNamed(name);
  plan->route = routed.route;
  plan->answers_error = routed.answers_error;
  plan->function_name = psprintf("%s.%s", schema, name);
  plan->first_param = routed.route == Route::kByHash ? 1 : 0;
  if (plan->route == Route::kByHash && (plan->args < 1 || types[0] != INT4OID))
    elog(ERROR, "%s: a routed function by hash takes the hash (integer) first", plan->function_name);
  if (plan->route == Route::kByNameKey && (plan->args < 2 || types[0] != TEXTOID || types[1] != TEXTOID))
    elog(ERROR, "%s: a routed function by name and key takes them (text) first", plan->function_name);

  StringInfoData sql;
  initStringInfo(&sql);
  if (routed.sql != nullptr) {
    appendStringInfo(&sql, routed.sql, kServer);
  } else {
    appendStringInfo(&sql, "SELECT * FROM @extschema@.%s(", quote_identifier(name));
    for (int i = plan->first_param; i < plan->args; ++i)
      appendStringInfo(&sql, "%s$%d::%s", i > plan->first_param ? ", " : "", i - plan->first_param + 1,
                       format_type_be_qualified(types[i]));
    appendStringInfoChar(&sql, ')');
  }
  plan->sql = WithSchema(sql.data, schema);
  plan->sql_hash =
      hash_bytes(reinterpret_cast<const unsigned char*>(plan->sql), static_cast<int>(strlen(plan->sql)));

  plan->params = static_cast<SentParam*>(palloc0(sizeof(SentParam) * Max(1, plan->args)));
  for (int i = plan->first_param; i < plan->args; ++i)
    PlanParam(plan->function_name, i, types[i], &plan->params[i]);
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "%s: a routed function returns rows", plan->function_name);
  plan->desc = BlessTupleDesc(CreateTupleDescCopy(desc));
  PlanColumns(plan);
  plan->shape = static_cast<RowShape*>(palloc(sizeof(RowShape) * (plan->args + 1)));
  NoteShape(plan, plan->desc->tdtypeid);
  for (int i = plan->first_param; i < plan->args; ++i) NoteShape(plan, types[i]);
  MemoryContextSwitchTo(caller);
  return plan;
}

// The call's plan, valid until the call ends (a change seen during the
// call frees it only at the next one).
RoutedPlan* PlanOf(FunctionCallInfo fcinfo) {
  DropStalePlans();
  Oid function = fcinfo->flinfo->fn_oid;
  for (int i = 0; i < plan_count; ++i) {
    if (plans[i]->function != function) continue;
    if (ShapesCurrent(*plans[i])) return plans[i];
    plans_stale = true;  // a row type's columns changed: every plan made again
    DropStalePlans();
    break;
  }
  RoutedPlan* plan = MakePlan(fcinfo);
  if (plans == nullptr)
    plans = static_cast<RoutedPlan**>(MemoryContextAlloc(plan_context, sizeof(RoutedPlan*) * kMostPlans));
  if (plan_count < kMostPlans) plans[plan_count++] = plan;
  return plan;
}

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
