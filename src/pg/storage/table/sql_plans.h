// The SQL statements the extension runs, as saved SPI plans, and the scope
// they run in (the called function's owner, search_path pinned).
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "executor/spi.h"
}

namespace ratelimit_pg {

// Every statement. Those up to kStateStatementCount exist in two variants:
// for a given key (key = $2) and for the NULL key (key IS NULL).
enum class Statement {
  kRead,
  kLock,
  kLockSkipLocked,
  kInsert,
  kInsertPlain,
  kUpdateLocked,
  kReadAll,
  kLockAll,
  kRemove,
  kDefinitionLookup,
  kDefinitionUpsert,
  kDefinitionDelete,
  kCleanup,
  kOverrideLookup,
  kOverrideUpsert,
  kOverrideDelete,
  kOverrideNames,
  kCount
};
constexpr int kStateStatementCount = static_cast<int>(Statement::kDefinitionLookup);

// Sets the role SQL statements run as (the called function's owner);
// returns the previous one.
Oid SetSqlRole(Oid role);

// What a SECURITY DEFINER function with SET search_path would do, for one
// SQL statement: run it as the function's owner, with search_path pinned.
struct SqlScope {
  Oid user;
  int sec_context;
  int guc_level;
};
SqlScope EnterSqlScope();
void LeaveSqlScope(const SqlScope& scope);

// Runs a statement (its plan prepared in the SQL scope on first use) in the
// SQL scope and checks SPI's return code; the results are in SPI_tuptable.
// null_key chooses the state statements' variant.
void ExecuteStatement(Statement statement, bool null_key, Datum* values, const char* nulls, int expected,
                      long limit);
// ExecuteStatement with the latest snapshot instead of the transaction's:
// what a config lookup reads, so that a config cached until the next
// invalidation is never older than that invalidation (also under
// REPEATABLE READ, whose transaction snapshot may predate it).
void ExecuteStatementLatest(Statement statement, bool null_key, Datum* values, const char* nulls,
                            int expected, long limit);
// One rule for every statement the extension runs: statements run as the
// owner, so code the owner added to a table would run as the owner in a
// session the caller shaped (its temporary schema, its settings). A caller
// without the owner's privileges is refused with 42501 when a statement
// would run such code (owner_code.h's StatementRunsOwnerCode and
// ConfigStatementRunsOwnerCode), after taking the statement's lock;
// ExecuteStatement and ExecuteStatementLatest apply it to each of theirs.
// The direct path, which runs the state table's code as the caller, is
// never refused. For a statement of kind `command` on the state table
// (CMD_SELECT for reads and row locks):
void RequireOwnerCodeSafe(CmdType command);
// For a SELECT on the config table `table_oid` finds (DefinitionTableOid,
// OverrideTableOid; nothing to check where it finds none).
void RequireLookupSafe(Oid (*table_oid)());
// Sets TimeZone UTC, DateStyle ISO, MDY and IntervalStyle postgres at the
// current GUC nest level (GUC_ACTION_SAVE), so conversions never depend on
// the caller's settings.
void PinConversionSettings();

// Whether the state table has idle_at (0.2.0 on).
bool StateHasIdleAt();
// The extension's schema, quoted for SQL text.
const char* QuotedSchema();

}  // namespace ratelimit_pg
