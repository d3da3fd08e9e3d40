// The router's plans (routing_plan.h): the list of routed functions and
// their partitions' statements (kRouted), and for each argument and answer
// column the form it crosses in, chosen when a plan is made so that values
// cross bit-exact whatever the caller's or the partition's settings
// (docs/scale-out.md, "How values cross to the partitions"); a type with no
// exact form is refused then.
#include <cstring>

#include "api/routing_plan.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
}

namespace ratelimit_pg {
namespace {

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
    // Reached by an owner's ALTER TYPE of a row type a routed function takes.
    ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                    errmsg("%s: argument %d's type %s cannot be routed exactly", name, arg + 1,
                           format_type_be(type)),
                    errhint("Routed arguments are text, jsonb, boolean, integers, real, double precision, "
                            "timestamptz, and arrays or row types of the scalars among them.")));
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
  if (!BinaryScalar(type))  // an owner's ALTER TYPE of a routed function's row type
    ereport(ERROR,
            (errcode(ERRCODE_DATATYPE_MISMATCH),
             errmsg("%s: a result column's type %s cannot be routed exactly", name, format_type_be(type)),
             errhint("Routed answer columns are text, jsonb, boolean, integers, real, double precision "
                     "and timestamptz.")));
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

}  // namespace

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

}  // namespace ratelimit_pg
