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
// once per connection. Its arguments go as text, its rows come back as
// text, read by the types' input functions into the function's declared
// result; a partition's error returned as data is raised here.
#include <cstring>

#include "support/entry.h"

#include "api/routing.h"

#include "api/routed_answers.h"

#include "route/cluster.h"
#include "route/connections.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "common/hashfn.h"
#include "common/md5.h"
#include "common/pg_prng.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
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
  FmgrInfo* outputs;  // of each argument sent
  bool returns_set;
  TupleDesc desc;
  AttInMetadata* meta;
};

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

  plan->outputs = static_cast<FmgrInfo*>(palloc0(sizeof(FmgrInfo) * Max(1, plan->args)));
  for (int i = plan->first_param; i < plan->args; ++i) {
    Oid output;
    bool varlena;
    getTypeOutputInfo(types[i], &output, &varlena);
    fmgr_info_cxt(output, &plan->outputs[i], plan_context);
  }
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "%s: a routed function returns rows", plan->function_name);
  plan->desc = BlessTupleDesc(CreateTupleDescCopy(desc));
  plan->meta = TupleDescGetAttInMetadata(plan->desc);
  MemoryContextSwitchTo(caller);
  return plan;
}

// The call's plan, valid until the call ends (a change seen during the
// call frees it only at the next one).
RoutedPlan* PlanOf(FunctionCallInfo fcinfo) {
  DropStalePlans();
  Oid function = fcinfo->flinfo->fn_oid;
  for (int i = 0; i < plan_count; ++i)
    if (plans[i]->function == function) return plans[i];
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

}  // namespace

Datum RouteCall(FunctionCallInfo fcinfo) {
  RoutedPlan* plan = PlanOf(fcinfo);
  const RouterCluster& cluster = CurrentCluster();
  int* targets = nullptr;
  int count = TargetsOf(*plan, fcinfo, cluster, &targets);

  int params = plan->args - plan->first_param;
  int sent = params + (plan->route == Route::kByNameKey ? 1 : 0);
  auto** values = static_cast<const char**>(palloc(sizeof(char*) * Max(1, sent)));
  for (int i = 0; i < params; ++i) {
    int arg = plan->first_param + i;
    values[i] = PG_ARGISNULL(arg) ? nullptr : OutputFunctionCall(&plan->outputs[arg], PG_GETARG_DATUM(arg));
  }
  if (plan->route == Route::kByNameKey) {
    // The session's error format ('' when unset: NULL, the partition's own).
    const char* format = GetConfigOption("ratelimit.error_format", true, false);
    values[params] = format != nullptr && format[0] != '\0' ? format : nullptr;
  }
  int columns = plan->desc->natts + (plan->answers_error ? kErrorColumns : 0);
  RemoteStatement statement{plan->function, plan->sql_hash, plan->function_name, plan->args, plan->sql, sent,
                            values,         columns};
  auto* answers = static_cast<RemoteRows*>(palloc(sizeof(RemoteRows) * count));
  RunOnPartitions(cluster, targets, count, statement, answers);

  if (!plan->returns_set) {
    const RemoteRows& rows = answers[0];
    if (rows.rows == 0) PG_RETURN_NULL();
    if (rows.rows > 1)
      ereport(ERROR, (errcode(ERRCODE_CARDINALITY_VIOLATION),
                      errmsg("%s: the partition answered %d rows, not one", plan->function_name, rows.rows)));
    if (plan->answers_error) {
      char** error = rows.values + plan->desc->natts;
      if (error[0] != nullptr)
        RaiseRoutedAnswer(error[0], error[1] != nullptr ? error[1] : "", error[2], error[3]);
    }
    return HeapTupleGetDatum(BuildTupleFromCStrings(plan->meta, rows.values));
  }
  InitMaterializedSRF(fcinfo, 0);
  auto* set = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  for (int t = 0; t < count; ++t)
    for (int r = 0; r < answers[t].rows; ++r)
      tuplestore_puttuple(set->setResult,
                          BuildTupleFromCStrings(plan->meta, answers[t].values + r * answers[t].columns));
  return static_cast<Datum>(0);
}

}  // namespace ratelimit_pg

extern "C" {

PG_FUNCTION_INFO_V1(ratelimit_proxy_route);

Datum ratelimit_proxy_route(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::RouteCall>(fcinfo);
}

}  // extern "C"
