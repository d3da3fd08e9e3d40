// The scope every SQL statement of the extension runs in (sql_scope.cpp):
// as the called function's owner, with search_path and the conversion
// settings pinned, as a SECURITY DEFINER function with SET clauses would;
// and the saved plans of such statements, prepared and run in it. A
// storage's statements and the config tables' (config/config_sql.h) run
// here.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "executor/spi.h"
}

namespace ratelimit_pg {

// Sets the role SQL statements run as (the called function's owner);
// returns the previous one.
Oid SetSqlRole(Oid role);
// The role SQL statements run as; raises if no call has set one.
Oid SqlRole();
// Whether the calling user has the SQL role's privileges anyway (then
// nothing the owner added runs with more rights than the caller has).
bool CallerHasOwnerRights();

// What a SECURITY DEFINER function with SET search_path would do, for one
// SQL statement: run it as the function's owner, with search_path pinned.
struct SqlScope {
  Oid user;
  int sec_context;
  int guc_level;
};
SqlScope EnterSqlScope();
void LeaveSqlScope(const SqlScope& scope);
// Sets TimeZone UTC, DateStyle ISO, MDY and IntervalStyle postgres at the
// current GUC nest level (GUC_ACTION_SAVE), so conversions never depend on
// the caller's settings.
void PinConversionSettings();

// Prepares `sql` in the SQL scope (parsed as the owner, search_path
// pinned) and keeps the plan for the backend's life.
SPIPlanPtr KeepPlanInScope(const char* sql, int nargs, const Oid* argtypes);
// Runs a kept plan in the SQL scope and checks SPI's return code against
// `expected` (a DO INSTEAD rule's SPI_OK_REWRITTEN counts as a write of no
// row); the results are in SPI_tuptable.
void ExecutePlanInScope(SPIPlanPtr plan, Datum* values, const char* nulls, int expected, long limit);
// The same with the latest snapshot instead of the transaction's: what a
// config lookup reads, so that a config cached until the next invalidation
// is never older than that invalidation (also under REPEATABLE READ).
void ExecutePlanLatestInScope(SPIPlanPtr plan, Datum* values, const char* nulls, int expected, long limit);

// The one refusal of owner code (42501), for a statement on `table`
// (support/owner_code.h says what counts).
[[noreturn]] void RaiseOwnerCode(Oid table);

}  // namespace ratelimit_pg
