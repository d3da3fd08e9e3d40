// The state table's SQL: statement templates and their plans (prepared on
// first use with SPI_prepare + SPI_keepplan, kept for the backend's life and
// revalidated by the plan cache), run in the SQL scope (support/sql_scope.h).
// Every query is schema-qualified and parameterised; the schema is the one
// the called function lives in.
//
// Which text a plan is prepared from depends on the schema facts of
// catalog.h (the schema's name) and on the state table (whether it has
// idle_at); the plans are freed whenever those facts change. The plans' own validity
// (DDL on the tables) is the plan cache's business.
#include <cstring>

#include "storage/table/sql_plans.h"

#include "storage/table/owner_code.h"
#include "support/catalog.h"
#include "support/sql_scope.h"

extern "C" {
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
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
const Oid kCleanupArgTypes[] = {TIMESTAMPTZOID};

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
    // kCleanup: rows a caller holds are skipped; the ones taken are locked,
    // so their ctid is stable until the DELETE (which rechecks idle_at anyway).
    {1, kCleanupArgTypes,
     "DELETE FROM {schema}.ratelimit_state WHERE ctid = ANY (ARRAY(SELECT ctid FROM {schema}.ratelimit_state"
     " WHERE idle_at <= $1 FOR UPDATE SKIP LOCKED)) AND idle_at <= $1"},
};
static_assert(sizeof kSpecs / sizeof kSpecs[0] == static_cast<int>(Statement::kCount),
              "one statement per enum value");

#undef RATELIMIT_STATE_COLUMNS

// The plans: [statement][0] for a given key, [statement][1] for the NULL
// key, prepared for the facts below: the schema facts of version
// schema_version, the state table and whether it has idle_at (0.1.0 does
// not: a newer library must work until ALTER EXTENSION UPDATE), as looked
// up in state table generation `generation`.
SPIPlanPtr plans[static_cast<int>(Statement::kCount)][2];
struct PlanFacts {
  uint64 schema_version;
  uint64 generation;
  Oid table;
  bool has_idle_at;
};
PlanFacts plan_facts{};

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

// The facts the plans are made from, looked up again after an
// invalidation; a change frees the plans.
const PlanFacts& CheckPlanFacts() {
  const SchemaFacts& schema = CurrentSchemaFacts();
  uint64 generation = StateTableGeneration();
  if (schema.version == plan_facts.schema_version && generation == plan_facts.generation) return plan_facts;
  PlanFacts now{schema.version, generation, StateTableOid(), false};
  now.has_idle_at = get_attnum(now.table, "idle_at") != InvalidAttrNumber;
  if (now.schema_version != plan_facts.schema_version || now.table != plan_facts.table ||
      now.has_idle_at != plan_facts.has_idle_at)
    FreePlans();
  plan_facts = now;
  return plan_facts;
}

// Prepares one statement (in the SQL scope, so it is parsed as the owner
// with the pinned search_path) and keeps it for the backend's life.
SPIPlanPtr KeepPlan(Statement statement, bool null_key) {
  const StatementSpec& spec = kSpecs[static_cast<int>(statement)];
  char* sql = ExpandTemplate(spec.sql, quote_identifier(CurrentSchemaFacts().schema), null_key,
                             CheckPlanFacts().has_idle_at);
  SPIPlanPtr plan = KeepPlanInScope(sql, spec.nargs, spec.argtypes);
  pfree(sql);
  return plan;
}

}  // namespace

void RequireOwnerCodeSafe(CmdType command) {
  if (CallerHasOwnerRights()) return;
  // The statement's own lock (lock, then look): no trigger or rule can be
  // added between this look and the statement.
  StateTable table = OpenStateTable(command == CMD_SELECT ? AccessShareLock : RowExclusiveLock);
  bool owner_code = StatementRunsOwnerCode(table, command, SqlRole());
  Oid relid = RelationGetRelid(table.rel);
  CloseStateTable(&table);
  if (owner_code) RaiseOwnerCode(relid);
}

namespace {

// What an SQL statement does, for the owner code checks (an upsert is an
// INSERT that may UPDATE).
CmdType CommandOf(Statement statement) {
  switch (statement) {
    case Statement::kInsert:
    case Statement::kInsertPlain:
      return CMD_INSERT;
    case Statement::kUpdateLocked:
      return CMD_UPDATE;
    case Statement::kRemove:
    case Statement::kCleanup:
      return CMD_DELETE;
    default:
      return CMD_SELECT;
  }
}

// Whether the installed schema has the statement (cleanup needs idle_at, 0.2.0 on).
bool HasStatement(Statement statement) {
  return statement != Statement::kCleanup || CheckPlanFacts().has_idle_at;
}

// The statement's plan for the key variant, prepared on first use.
SPIPlanPtr PlanOf(Statement statement, bool null_key) {
  int variant = static_cast<int>(statement) < kStateStatementCount && null_key ? 1 : 0;
  SPIPlanPtr& plan = plans[static_cast<int>(statement)][variant];
  if (plan == nullptr) plan = KeepPlan(statement, variant == 1);
  return plan;
}

}  // namespace

void ExecuteStatement(Statement statement, bool null_key, Datum* values, const char* nulls, int expected,
                      long limit) {
  CheckPlanFacts();
  if (!HasStatement(statement)) elog(ERROR, "ratelimit: run ALTER EXTENSION ratelimit UPDATE first");
  RequireOwnerCodeSafe(CommandOf(statement));
  ExecutePlanInScope(PlanOf(statement, null_key), values, nulls, expected, limit);
}

void ExecuteStatementLatest(Statement statement, bool null_key, Datum* values, const char* nulls,
                            int expected, long limit) {
  CheckPlanFacts();
  RequireOwnerCodeSafe(CommandOf(statement));
  ExecutePlanLatestInScope(PlanOf(statement, null_key), values, nulls, expected, limit);
}

bool StateHasIdleAt() { return CheckPlanFacts().has_idle_at; }

const char* QuotedSchema() {
  CheckPlanFacts();
  return quote_identifier(CurrentSchemaFacts().schema);
}

}  // namespace ratelimit_pg
