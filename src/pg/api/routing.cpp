// ratelimit_proxy_route: the C function behind every ratelimit_proxy_*
// function of the router (ratelimit_proxy 0.9.0) that reaches partitions,
// in place of PL/Proxy's call handler. Each runs one statement of the
// partition's ratelimit (kRouted below: its name there, and how it is
// routed: the partition of its first argument, a hash, as PL/Proxy's RUN
// ON hash; every partition, RUN ON ALL; any one, RUN ON ANY) over the
// router's own connections (route/connections.h), prepared once per
// connection. Its arguments go as text, its rows come back as text, read
// by the types' input functions into the function's declared result.
#include <cstring>

#include "support/entry.h"

#include "api/routing.h"

#include "route/cluster.h"
#include "route/connections.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "common/pg_prng.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"
}

namespace ratelimit_pg {
namespace {

enum class Route { kByHash, kAll, kAny };

struct RoutedFunction {
  const char* name;  // the router's function (in the extension's schema)
  Route route;
  // The partition's statement; nullptr: SELECT * FROM the partition's
  // function of the same name, with the router's arguments (without the
  // hash). @extschema@ is the router's schema, the partition's too.
  const char* sql;
};

constexpr const char* kServer =
    "EXTRACT(epoch FROM pg_catalog.pg_postmaster_start_time())::text || ' ' || "
    "pg_catalog.current_setting('port') "
    "AS server";

// Every routed function, and what reaches the partitions.
const RoutedFunction kRouted[] = {
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

// What a call of one routed function needs, made at its first call in a
// query (kept in its FmgrInfo).
struct RoutedPlan {
  Oid function;
  Route route;
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

RoutedPlan* MakePlan(FunctionCallInfo fcinfo) {
  MemoryContext caller = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
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

  plan->outputs = static_cast<FmgrInfo*>(palloc0(sizeof(FmgrInfo) * Max(1, plan->args)));
  for (int i = plan->first_param; i < plan->args; ++i) {
    Oid output;
    bool varlena;
    getTypeOutputInfo(types[i], &output, &varlena);
    fmgr_info_cxt(output, &plan->outputs[i], fcinfo->flinfo->fn_mcxt);
  }
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "%s: a routed function returns rows", plan->function_name);
  plan->desc = BlessTupleDesc(CreateTupleDescCopy(desc));
  plan->meta = TupleDescGetAttInMetadata(plan->desc);
  MemoryContextSwitchTo(caller);
  return plan;
}

RoutedPlan* PlanOf(FunctionCallInfo fcinfo) {
  auto* plan = static_cast<RoutedPlan*>(fcinfo->flinfo->fn_extra);
  if (plan == nullptr || plan->function != fcinfo->flinfo->fn_oid) {
    plan = MakePlan(fcinfo);
    fcinfo->flinfo->fn_extra = plan;
  }
  return plan;
}

// The partitions this call runs on: how many; *targets their numbers.
int TargetsOf(const RoutedPlan& plan, FunctionCallInfo fcinfo, const RouterCluster& cluster, int** targets) {
  switch (plan.route) {
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
  auto** values = static_cast<const char**>(palloc(sizeof(char*) * Max(1, params)));
  for (int i = 0; i < params; ++i) {
    int arg = plan->first_param + i;
    values[i] = PG_ARGISNULL(arg) ? nullptr : OutputFunctionCall(&plan->outputs[arg], PG_GETARG_DATUM(arg));
  }
  RemoteStatement statement{plan->function, plan->function_name, plan->args, plan->sql, params,
                            values,         plan->desc->natts};
  auto* answers = static_cast<RemoteRows*>(palloc(sizeof(RemoteRows) * count));
  RunOnPartitions(cluster, targets, count, statement, answers);

  if (!plan->returns_set) {
    const RemoteRows& rows = answers[0];
    if (rows.rows == 0) PG_RETURN_NULL();
    if (rows.rows > 1)
      ereport(ERROR, (errcode(ERRCODE_CARDINALITY_VIOLATION),
                      errmsg("%s: the partition answered %d rows, not one", plan->function_name, rows.rows)));
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
