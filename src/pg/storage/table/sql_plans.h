// The state table's SQL statements, as saved SPI plans, run in the SQL
// scope (support/sql_scope.h: the called function's owner, search_path
// pinned). Internal to the table storage.
#pragma once

#include "support/sql_scope.h"

namespace ratelimit_pg {

// The state table's statements. Those up to kStateStatementCount exist in
// two variants: for a given key (key = $2) and for the NULL key (key IS NULL).
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
  kCleanup,
  kCount
};
constexpr int kStateStatementCount = static_cast<int>(Statement::kCleanup);

// Runs a statement (its plan prepared in the SQL scope on first use) in the
// SQL scope and checks SPI's return code; the results are in SPI_tuptable.
// null_key chooses the state statements' variant.
void ExecuteStatement(Statement statement, bool null_key, Datum* values, const char* nulls, int expected,
                      long limit);
// ExecuteStatement with the latest snapshot instead of the transaction's
// (support/sql_scope.h's ExecutePlanLatestInScope).
void ExecuteStatementLatest(Statement statement, bool null_key, Datum* values, const char* nulls,
                            int expected, long limit);
// The rule for the state table's statements: they run as the owner, so
// code the owner added to the table would run as the owner in a session the
// caller shaped (its temporary schema, its settings). A caller without the
// owner's privileges is refused with 42501 when a statement would run such
// code (owner_code.h's StatementRunsOwnerCode), after taking the
// statement's lock; ExecuteStatement and ExecuteStatementLatest apply it to
// each of theirs. The direct path, which runs the state table's code as the
// caller, is never refused. For a statement of kind `command` (CMD_SELECT
// for reads and row locks):
void RequireOwnerCodeSafe(CmdType command);

// Whether the state table has idle_at (0.2.0 on).
bool StateHasIdleAt();
// The extension's schema, quoted for SQL text.
const char* QuotedSchema();

}  // namespace ratelimit_pg
