// The SQL scope (sql_scope.h): the role, the pinned settings, and running
// a kept plan in them.
#include "support/sql_scope.h"

extern "C" {
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
}

namespace ratelimit_pg {
namespace {

// The role SQL statements run as: the called function's owner (SetSqlRole).
Oid sql_role = InvalidOid;

constexpr const char* kPinnedSearchPath = "pg_catalog, pg_temp";

}  // namespace

Oid SetSqlRole(Oid role) {
  Oid previous = sql_role;
  sql_role = role;
  return previous;
}

Oid SqlRole() {
  if (!OidIsValid(sql_role)) elog(ERROR, "ratelimit: storage is not prepared");
  return sql_role;
}

bool CallerHasOwnerRights() { return has_privs_of_role(GetUserId(), SqlRole()); }

// The functions are SECURITY INVOKER: their direct table access checks no
// privileges and resolves no names, and a function-level SET would save and
// restore the GUC on every call. So each SQL statement is scoped instead.
// After an error, the (sub)transaction abort restores the user and the GUC,
// as for fmgr's SECURITY DEFINER wrapper.
SqlScope EnterSqlScope() {
  SqlScope scope{};
  Oid role = SqlRole();
  GetUserIdAndSecContext(&scope.user, &scope.sec_context);
  SetUserIdAndSecContext(role, scope.sec_context | SECURITY_LOCAL_USERID_CHANGE);
  scope.guc_level = NewGUCNestLevel();
  (void)set_config_option("search_path", kPinnedSearchPath, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true,
                          0, false);
  // An owner's ALTER COLUMN ts TYPE timestamp (or text) makes the statements
  // convert: in UTC, whatever TimeZone the caller set.
  PinConversionSettings();
  return scope;
}

void PinConversionSettings() {
  (void)set_config_option("TimeZone", "UTC", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  (void)set_config_option("DateStyle", "ISO, MDY", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                          false);
  (void)set_config_option("IntervalStyle", "postgres", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                          false);
}

void LeaveSqlScope(const SqlScope& scope) {
  AtEOXact_GUC(true, scope.guc_level);
  SetUserIdAndSecContext(scope.user, scope.sec_context);
}

SPIPlanPtr KeepPlanInScope(const char* sql, int nargs, const Oid* argtypes) {
  SqlScope scope = EnterSqlScope();
  SPIPlanPtr plan = SPI_prepare(sql, nargs, const_cast<Oid*>(argtypes));
  LeaveSqlScope(scope);
  if (plan == nullptr) elog(ERROR, "ratelimit: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
  if (SPI_keepplan(plan) != 0) elog(ERROR, "ratelimit: SPI_keepplan failed");
  return plan;
}

void ExecutePlanInScope(SPIPlanPtr plan, Datum* values, const char* nulls, int expected, long limit) {
  SqlScope scope = EnterSqlScope();
  int rc = SPI_execute_plan(plan, values, nulls, false, limit);
  LeaveSqlScope(scope);
  // A DO INSTEAD rule replaced the write: it wrote none of the rows
  // (SPI_processed tells the caller so).
  if (rc == SPI_OK_REWRITTEN && expected != SPI_OK_SELECT) rc = expected;
  if (rc != expected) elog(ERROR, "ratelimit: SPI_execute_plan failed: %s", SPI_result_code_string(rc));
}

void ExecutePlanLatestInScope(SPIPlanPtr plan, Datum* values, const char* nulls, int expected, long limit) {
  SqlScope scope = EnterSqlScope();
  int rc =
      SPI_execute_snapshot(plan, values, nulls, GetLatestSnapshot(), InvalidSnapshot, false, false, limit);
  LeaveSqlScope(scope);
  if (rc != expected) elog(ERROR, "ratelimit: SPI_execute_snapshot failed: %s", SPI_result_code_string(rc));
}

void RaiseOwnerCode(Oid table) {
  const char* name = get_rel_name(table);
  ereport(
      ERROR,
      (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
       errmsg("ratelimit: this call would run code the owner added to %s as its owner", name),
       errdetail("This call reaches %s through SQL, which runs as the extension's owner, and the table has a "
                 "trigger, rule, row security policy, constraint, default, index, column type or "
                 "inheritance child of the owner's that the statement would run; role \"%s\" does not "
                 "have the owner's privileges.",
                 name, GetUserNameFromId(GetUserId(), false)),
       errhint("See docs/security.md: drop what the statement would run, or call as the "
               "owner.")));
  pg_unreachable();
}

}  // namespace ratelimit_pg
