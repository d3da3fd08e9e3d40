// The SQL the extension runs: statement templates, their plans (prepared on
// first use with SPI_prepare + SPI_keepplan, kept for the backend's life and
// revalidated by the plan cache), and the scope every statement runs in.
// Every query is schema-qualified and parameterised; the schema is the one
// the called function lives in.
//
// Which text a plan is prepared from depends on the schema facts of
// catalog.h (the schema's name, whether the state table has idle_at); the
// plans are freed whenever those facts change. The plans' own validity
// (DDL on the tables) is the plan cache's business.
#include <cstring>

#include "storage/table/sql_plans.h"

#include "storage/table/owner_code.h"
#include "support/catalog.h"

extern "C" {
#include "access/table.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

namespace ratelimit_pg {
namespace {

// Parameters: $1 name, $2 key, $3 shard, $4..$7 new state (value, ts,
// prev, idle_at). In the templates {schema} is the quoted schema, {key_match} the key test,
// {key_value} the key value and {conflict} the conflict target of the key
// variant; {idle_*} write idle_at where the installed schema has it. Values
// are read with casts, so an owner's change of a column's type is converted
// (or refused by the cast) instead of being misread.
struct StatementSpec {
  int nargs;
  const Oid* argtypes;
  const char* sql;
};

const Oid kStateArgTypes[] = {TEXTOID,        TEXTOID,   INT2OID,       FLOAT8OID,
                              TIMESTAMPTZOID, FLOAT8OID, TIMESTAMPTZOID};
const Oid kDefinitionArgTypes[] = {TEXTOID, JSONBOID};
const Oid kCleanupArgTypes[] = {TIMESTAMPTZOID};
const Oid kOverrideArgTypes[] = {TEXTOID, TEXTOID, JSONBOID};

#define RATELIMIT_STATE_COLUMNS \
  "value::pg_catalog.float8, ts::pg_catalog.timestamptz, prev::pg_catalog.float8"

const StatementSpec kSpecs[] = {
    // kRead
    {3, kStateArgTypes,
     "SELECT " RATELIMIT_STATE_COLUMNS ", ctid{idle_read} FROM {schema}.ratelimit_state"
     " WHERE name = $1 AND {key_match} AND shard = $3"},
    // kLock
    {3, kStateArgTypes,
     "SELECT " RATELIMIT_STATE_COLUMNS ", ctid{idle_read} FROM {schema}.ratelimit_state"
     " WHERE name = $1 AND {key_match} AND shard = $3 FOR UPDATE"},
    // kLockSkipLocked
    {3, kStateArgTypes,
     "SELECT " RATELIMIT_STATE_COLUMNS ", ctid{idle_read} FROM {schema}.ratelimit_state"
     " WHERE name = $1 AND {key_match} AND shard = $3 FOR UPDATE SKIP LOCKED"},
    // kInsert
    {7, kStateArgTypes,
     "INSERT INTO {schema}.ratelimit_state (name, key, shard, value, ts, prev{idle_cols})"
     " VALUES ($1, {key_value}, $3, $4, $5, $6{idle_vals}) ON CONFLICT {conflict} DO NOTHING"},
    // kInsertPlain: for a table with rules, which INSERT ... ON CONFLICT
    // refuses (the caller holds the row's creation lock and saw no row).
    {7, kStateArgTypes,
     "INSERT INTO {schema}.ratelimit_state (name, key, shard, value, ts, prev{idle_cols})"
     " VALUES ($1, {key_value}, $3, $4, $5, $6{idle_vals})"},
    // kUpdateLocked
    {7, kStateArgTypes,
     "UPDATE {schema}.ratelimit_state SET value = $4, ts = $5, prev = $6{idle_set}"
     " WHERE name = $1 AND {key_match} AND shard = $3"},
    // kReadAll
    {2, kStateArgTypes,
     "SELECT shard::pg_catalog.int4, " RATELIMIT_STATE_COLUMNS "{idle_read} FROM {schema}.ratelimit_state"
     " WHERE name = $1 AND {key_match} ORDER BY shard"},
    // kLockAll
    {2, kStateArgTypes,
     "SELECT shard::pg_catalog.int4, " RATELIMIT_STATE_COLUMNS "{idle_read} FROM {schema}.ratelimit_state"
     " WHERE name = $1 AND {key_match} ORDER BY shard FOR UPDATE"},
    // kRemove
    {2, kStateArgTypes, "DELETE FROM {schema}.ratelimit_state WHERE name = $1 AND {key_match}"},
    // kDefinitionLookup
    {1, kDefinitionArgTypes,
     "SELECT config::pg_catalog.jsonb FROM {schema}.ratelimit_definition WHERE name = $1"},
    // kDefinitionUpsert
    {2, kDefinitionArgTypes,
     "INSERT INTO {schema}.ratelimit_definition (name, config) VALUES ($1, $2)"
     " ON CONFLICT (name) DO UPDATE SET config = EXCLUDED.config"},
    // kDefinitionDelete
    {1, kDefinitionArgTypes, "DELETE FROM {schema}.ratelimit_definition WHERE name = $1"},
    // kCleanup: rows a caller holds are skipped; the ones taken are locked,
    // so their ctid is stable until the DELETE (which rechecks idle_at anyway).
    {1, kCleanupArgTypes,
     "DELETE FROM {schema}.ratelimit_state WHERE ctid = ANY (ARRAY(SELECT ctid FROM {schema}.ratelimit_state"
     " WHERE idle_at <= $1 FOR UPDATE SKIP LOCKED)) AND idle_at <= $1"},
    // kOverrideLookup
    {2, kOverrideArgTypes,
     "SELECT config::pg_catalog.jsonb FROM {schema}.ratelimit_override WHERE name = $1 AND key = $2"},
    // kOverrideUpsert
    {3, kOverrideArgTypes,
     "INSERT INTO {schema}.ratelimit_override (name, key, config) VALUES ($1, $2, $3)"
     " ON CONFLICT (name, key) DO UPDATE SET config = EXCLUDED.config"},
    // kOverrideDelete
    {2, kOverrideArgTypes, "DELETE FROM {schema}.ratelimit_override WHERE name = $1 AND key = $2"},
    // kOverrideNames
    {0, kOverrideArgTypes, "SELECT name, key FROM {schema}.ratelimit_override"},
};
static_assert(sizeof kSpecs / sizeof kSpecs[0] == static_cast<int>(Statement::kCount),
              "one statement per enum value");

#undef RATELIMIT_STATE_COLUMNS

// The plans: [statement][0] for a given key, [statement][1] for the NULL
// key, prepared for the schema facts of version plans_version.
SPIPlanPtr plans[static_cast<int>(Statement::kCount)][2];
uint64 plans_version = 0;
// The role SQL statements run as: the called function's owner (SetSqlRole).
Oid sql_role = InvalidOid;

constexpr const char* kPinnedSearchPath = "pg_catalog, pg_temp";

// Expands a statement template's {placeholders}.
char* ExpandTemplate(const char* sql, const char* schema, bool null_key, bool has_idle_at) {
  const char* names[] = {"{schema}",    "{key_match}", "{key_value}", "{conflict}",
                         "{idle_cols}", "{idle_vals}", "{idle_set}",  "{idle_read}"};
  const char* values[] = {
      schema,
      null_key ? "key IS NULL" : "key = $2",
      null_key ? "NULL" : "$2",
      null_key ? "(name, shard) WHERE key IS NULL" : "(name, key, shard)",
      has_idle_at ? ", idle_at" : "",
      has_idle_at ? ", $7" : "",
      has_idle_at ? ", idle_at = $7" : "",
      has_idle_at ? ", idle_at::pg_catalog.timestamptz" : ", NULL::pg_catalog.timestamptz"};
  StringInfoData buf;
  initStringInfo(&buf);
  while (*sql != '\0') {
    int found = -1;
    for (int i = 0; i < 8 && found < 0; ++i)
      if (std::strncmp(sql, names[i], std::strlen(names[i])) == 0) found = i;
    if (found < 0) {
      appendStringInfoChar(&buf, *sql++);
      continue;
    }
    appendStringInfoString(&buf, values[found]);
    sql += std::strlen(names[found]);
  }
  return buf.data;
}

// Frees every kept plan (before preparing for other facts).
void FreePlans() {
  for (auto& variants : plans)
    for (SPIPlanPtr& plan : variants) {
      if (plan != nullptr) SPI_freeplan(plan);
      plan = nullptr;
    }
}

// The schema facts the plans are made from; a change frees them all.
const SchemaFacts& CheckPlanFacts() {
  const SchemaFacts& facts = CurrentSchemaFacts();
  if (facts.version != plans_version) {
    FreePlans();
    plans_version = facts.version;
  }
  return facts;
}

// Prepares one statement (in the SQL scope, so it is parsed as the owner
// with the pinned search_path) and keeps it for the backend's life.
SPIPlanPtr KeepPlan(Statement statement, bool null_key) {
  const StatementSpec& spec = kSpecs[static_cast<int>(statement)];
  const SchemaFacts& facts = CurrentSchemaFacts();
  char* sql = ExpandTemplate(spec.sql, quote_identifier(facts.schema), null_key, facts.has_idle_at);
  SqlScope scope = EnterSqlScope();
  SPIPlanPtr plan = SPI_prepare(sql, spec.nargs, const_cast<Oid*>(spec.argtypes));
  LeaveSqlScope(scope);
  if (plan == nullptr) elog(ERROR, "ratelimit: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
  if (SPI_keepplan(plan) != 0) elog(ERROR, "ratelimit: SPI_keepplan failed");
  pfree(sql);
  return plan;
}

}  // namespace

Oid SetSqlRole(Oid role) {
  Oid previous = sql_role;
  sql_role = role;
  return previous;
}

// The functions are SECURITY INVOKER: their direct table access checks no
// privileges and resolves no names, and a function-level SET would save and
// restore the GUC on every call. So each SQL statement is scoped instead.
// After an error, the (sub)transaction abort restores the user and the GUC,
// as for fmgr's SECURITY DEFINER wrapper.
SqlScope EnterSqlScope() {
  SqlScope scope{};
  if (!OidIsValid(sql_role)) elog(ERROR, "ratelimit: storage is not prepared");
  GetUserIdAndSecContext(&scope.user, &scope.sec_context);
  SetUserIdAndSecContext(sql_role, scope.sec_context | SECURITY_LOCAL_USERID_CHANGE);
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

namespace {

// The one refusal of owner code (42501), for a statement on `table`.
[[noreturn]] void RaiseOwnerCode(Oid table) {
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

// Whether the caller may run the owner's code as the owner: it has the
// owner's privileges anyway.
bool CallerHasOwnerRights() {
  if (!OidIsValid(sql_role)) elog(ERROR, "ratelimit: storage is not prepared");
  return has_privs_of_role(GetUserId(), sql_role);
}

// Locks the config table `table_oid` finds as `command` on it would (lock,
// then look), and whether the statement runs the owner's code (both
// commands of an upsert). false if the extension has no such table.
bool LockedConfigStatementRunsOwnerCode(Oid (*table_oid)(), CmdType command, bool upsert) {
  Oid table = LockCatalogRelation(table_oid, command == CMD_SELECT ? AccessShareLock : RowExclusiveLock);
  if (!OidIsValid(table)) return false;
  Relation rel = table_open(table, NoLock);
  bool keyed = table_oid == OverrideTableOid;
  bool owner_code = ConfigStatementRunsOwnerCode(rel, keyed, command, sql_role) ||
                    (upsert && ConfigStatementRunsOwnerCode(rel, keyed, CMD_UPDATE, sql_role));
  table_close(rel, NoLock);
  return owner_code;
}

// The rule for the config tables: their lookups and writes.
void RequireConfigStatementSafe(Oid (*table_oid)(), CmdType command, bool upsert) {
  if (CallerHasOwnerRights()) return;
  if (LockedConfigStatementRunsOwnerCode(table_oid, command, upsert)) RaiseOwnerCode(table_oid());
}

}  // namespace

void RequireOwnerCodeSafe(CmdType command) {
  if (CallerHasOwnerRights()) return;
  // The statement's own lock (lock, then look): no trigger or rule can be
  // added between this look and the statement.
  StateTable table = OpenStateTable(command == CMD_SELECT ? AccessShareLock : RowExclusiveLock);
  bool owner_code = StatementRunsOwnerCode(table, command, sql_role);
  Oid relid = RelationGetRelid(table.rel);
  CloseStateTable(&table);
  if (owner_code) RaiseOwnerCode(relid);
}

void RequireLookupSafe(Oid (*table_oid)()) { RequireConfigStatementSafe(table_oid, CMD_SELECT, false); }

namespace {

// What an SQL statement does, for the owner code checks (an upsert is an
// INSERT that may UPDATE).
CmdType CommandOf(Statement statement) {
  switch (statement) {
    case Statement::kInsert:
    case Statement::kInsertPlain:
    case Statement::kDefinitionUpsert:
    case Statement::kOverrideUpsert:
      return CMD_INSERT;
    case Statement::kUpdateLocked:
      return CMD_UPDATE;
    case Statement::kRemove:
    case Statement::kCleanup:
    case Statement::kDefinitionDelete:
    case Statement::kOverrideDelete:
      return CMD_DELETE;
    default:
      return CMD_SELECT;
  }
}

bool OnStateTable(Statement statement) {
  return static_cast<int>(statement) < kStateStatementCount || statement == Statement::kCleanup;
}

// What finds the config table a statement runs on.
using TableOidFunction = Oid (*)();
TableOidFunction ConfigTableOf(Statement statement) {
  switch (statement) {
    case Statement::kDefinitionLookup:
    case Statement::kDefinitionUpsert:
    case Statement::kDefinitionDelete:
      return DefinitionTableOid;
    default:
      return OverrideTableOid;
  }
}

// Every statement, before it runs: one rule for the owner's code.
void RequireStatementSafe(Statement statement) {
  if (OnStateTable(statement)) {
    RequireOwnerCodeSafe(CommandOf(statement));
    return;
  }
  bool upsert = statement == Statement::kDefinitionUpsert || statement == Statement::kOverrideUpsert;
  TableOidFunction table_oid = ConfigTableOf(statement);
  // Never a statement on a config table the extension does not have: its
  // name could mean someone else's table. (Only the override table can be
  // absent: DefinitionTableOid raises itself.)
  if (!OidIsValid(table_oid())) RequireOverrideTable();
  RequireConfigStatementSafe(table_oid, CommandOf(statement), upsert);
}

}  // namespace

void LeaveSqlScope(const SqlScope& scope) {
  AtEOXact_GUC(true, scope.guc_level);
  SetUserIdAndSecContext(scope.user, scope.sec_context);
}

namespace {

// Whether the installed schema has the statement (cleanup needs idle_at, 0.2.0 on).
bool HasStatement(Statement statement) {
  return statement != Statement::kCleanup || CheckPlanFacts().has_idle_at;
}

}  // namespace

void ExecuteStatement(Statement statement, bool null_key, Datum* values, const char* nulls, int expected,
                      long limit) {
  CheckPlanFacts();
  if (!HasStatement(statement)) elog(ERROR, "ratelimit: run ALTER EXTENSION ratelimit UPDATE first");
  RequireStatementSafe(statement);
  int variant = static_cast<int>(statement) < kStateStatementCount && null_key ? 1 : 0;
  SPIPlanPtr& plan = plans[static_cast<int>(statement)][variant];
  if (plan == nullptr) plan = KeepPlan(statement, variant == 1);
  SqlScope scope = EnterSqlScope();
  int rc = SPI_execute_plan(plan, values, nulls, false, limit);
  LeaveSqlScope(scope);
  // A DO INSTEAD rule replaced the write: it wrote none of the state rows
  // (SPI_processed tells the caller so).
  if (rc == SPI_OK_REWRITTEN && expected != SPI_OK_SELECT) rc = expected;
  if (rc != expected) elog(ERROR, "ratelimit: SPI_execute_plan failed: %s", SPI_result_code_string(rc));
}

void ExecuteStatementLatest(Statement statement, bool null_key, Datum* values, const char* nulls,
                            int expected, long limit) {
  CheckPlanFacts();
  RequireStatementSafe(statement);
  int variant = OnStateTable(statement) && null_key ? 1 : 0;
  SPIPlanPtr& plan = plans[static_cast<int>(statement)][variant];
  if (plan == nullptr) plan = KeepPlan(statement, variant == 1);
  SqlScope scope = EnterSqlScope();
  int rc =
      SPI_execute_snapshot(plan, values, nulls, GetLatestSnapshot(), InvalidSnapshot, false, false, limit);
  LeaveSqlScope(scope);
  if (rc != expected) elog(ERROR, "ratelimit: SPI_execute_snapshot failed: %s", SPI_result_code_string(rc));
}

bool StateHasIdleAt() { return CheckPlanFacts().has_idle_at; }

const char* QuotedSchema() { return quote_identifier(CheckPlanFacts().schema); }

}  // namespace ratelimit_pg
