// The fmgr entry points of the SQL functions and _PG_init. (The router's
// partition-side functions have theirs in routed_calls.cpp.)
#include "support/entry.h"

#include "api/config_functions.h"
#include "api/functions.h"
#include "api/object_drops.h"
#include "api/simulation.h"
#include "api/status_view.h"
#include "decide/pending_grants.h"
#include "shmem/shared_tables.h"
#include "shmem/stats.h"
#include "storage/storage.h"
#include "support/catalog.h"
#include "support/clock.h"
#include "support/errors.h"

extern "C" {
#include "utils/guc.h"
}

extern "C" {
PG_MODULE_MAGIC;

void _PG_init(void);
PG_FUNCTION_INFO_V1(ratelimit_limit);
PG_FUNCTION_INFO_V1(ratelimit_limit_invoker);
PG_FUNCTION_INFO_V1(ratelimit_check);
PG_FUNCTION_INFO_V1(ratelimit_check_invoker);
PG_FUNCTION_INFO_V1(ratelimit_reset);
PG_FUNCTION_INFO_V1(ratelimit_reset_invoker);
PG_FUNCTION_INFO_V1(ratelimit_value);
PG_FUNCTION_INFO_V1(ratelimit_value_invoker);
PG_FUNCTION_INFO_V1(ratelimit_define);
PG_FUNCTION_INFO_V1(ratelimit_define_invoker);
PG_FUNCTION_INFO_V1(ratelimit_undefine);
PG_FUNCTION_INFO_V1(ratelimit_undefine_invoker);
PG_FUNCTION_INFO_V1(ratelimit_limit_all);
PG_FUNCTION_INFO_V1(ratelimit_limit_all_invoker);
PG_FUNCTION_INFO_V1(ratelimit_refund);
PG_FUNCTION_INFO_V1(ratelimit_refund_invoker);
PG_FUNCTION_INFO_V1(ratelimit_cleanup);
PG_FUNCTION_INFO_V1(ratelimit_cleanup_invoker);
PG_FUNCTION_INFO_V1(ratelimit_headers);
PG_FUNCTION_INFO_V1(ratelimit_headers_invoker);
PG_FUNCTION_INFO_V1(ratelimit_status_rows);
PG_FUNCTION_INFO_V1(ratelimit_status_rows_invoker);
PG_FUNCTION_INFO_V1(ratelimit_definitions_changed);
PG_FUNCTION_INFO_V1(ratelimit_override);
PG_FUNCTION_INFO_V1(ratelimit_unoverride);
PG_FUNCTION_INFO_V1(ratelimit_stats_rows);
PG_FUNCTION_INFO_V1(ratelimit_stats_reset);
PG_FUNCTION_INFO_V1(ratelimit_headers_keyed);
PG_FUNCTION_INFO_V1(ratelimit_simulate);
}

extern "C" {

void _PG_init(void) {
  ratelimit_pg::DefineClockGuc();
  ratelimit_pg::DefineErrorFormatGuc();
  ratelimit_pg::RegisterCatalogInvalidation();
  ratelimit_pg::DefineStatsGucs();
  ratelimit_pg::DefineStorages();
  ratelimit_pg::RequestSharedTables();
  ratelimit_pg::RegisterPendingGrantCallbacks();
  ratelimit_pg::RegisterStorageHooks();
  ratelimit_pg::RegisterObjectDropHooks();
  MarkGUCPrefixReserved("ratelimit");
}

// Each function has two entry points running the same code: the SQL of
// 0.1.0 to 0.3.0 (SECURITY DEFINER) calls ratelimit_x, that of 0.4.0 on
// (SECURITY INVOKER) calls ratelimit_x_invoker. The new name makes a session
// that still has an older library loaded fail ("could not find function")
// instead of running 0.4.0's definitions with SQL that is not scoped.
#define RATELIMIT_ENTRY_POINTS(name, body)                                                    \
  Datum name(PG_FUNCTION_ARGS) { return ratelimit_pg::RunEntry<ratelimit_pg::body>(fcinfo); } \
  Datum name##_invoker(PG_FUNCTION_ARGS) { return ratelimit_pg::RunEntry<ratelimit_pg::body>(fcinfo); }

RATELIMIT_ENTRY_POINTS(ratelimit_limit, Limit)
RATELIMIT_ENTRY_POINTS(ratelimit_check, CheckLimit)
RATELIMIT_ENTRY_POINTS(ratelimit_reset, Reset)
RATELIMIT_ENTRY_POINTS(ratelimit_value, Value)
RATELIMIT_ENTRY_POINTS(ratelimit_define, Define)
RATELIMIT_ENTRY_POINTS(ratelimit_undefine, Undefine)
RATELIMIT_ENTRY_POINTS(ratelimit_limit_all, LimitAll)
RATELIMIT_ENTRY_POINTS(ratelimit_refund, Refund)
RATELIMIT_ENTRY_POINTS(ratelimit_cleanup, Cleanup)
RATELIMIT_ENTRY_POINTS(ratelimit_headers, Headers)
RATELIMIT_ENTRY_POINTS(ratelimit_status_rows, StatusRows)
Datum ratelimit_definitions_changed(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::DefinitionsChanged>(fcinfo);
}
// 0.5.0's functions: one entry point each (they never ran SECURITY DEFINER).
Datum ratelimit_override(PG_FUNCTION_ARGS) { return ratelimit_pg::RunEntry<ratelimit_pg::Override>(fcinfo); }
Datum ratelimit_unoverride(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::Unoverride>(fcinfo);
}
Datum ratelimit_stats_rows(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::StatsRows>(fcinfo);
}
Datum ratelimit_stats_reset(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::StatsReset>(fcinfo);
}
Datum ratelimit_headers_keyed(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunEntry<ratelimit_pg::HeadersForKey>(fcinfo);
}
// 0.8.0's simulator touches no storage: PARALLEL SAFE.
Datum ratelimit_simulate(PG_FUNCTION_ARGS) {
  return ratelimit_pg::RunParallelSafeEntry<ratelimit_pg::SimulateLimit>(fcinfo);
}

}  // extern "C"
