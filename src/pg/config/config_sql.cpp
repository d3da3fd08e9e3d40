// The config tables' statements (config_sql.h): their text and their plans,
// prepared on first use for the schema the called function lives in, freed
// whenever the schema facts (support/catalog.h) change.
#include <cstring>

#include "config/config_sql.h"

#include "support/catalog.h"
#include "support/owner_code.h"

extern "C" {
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
}

namespace ratelimit_pg {
namespace {

// Parameters: $1 name, then the key (overrides), then the config (writes).
// {schema} is the quoted schema.
struct ConfigStatementSpec {
  int nargs;
  const Oid* argtypes;
  const char* sql;
  CmdType command;  // for the owner code checks (an upsert: INSERT, may UPDATE)
  bool upsert;
  Oid (*table_oid)();
};

const Oid kDefinitionArgTypes[] = {TEXTOID, JSONBOID};
const Oid kOverrideArgTypes[] = {TEXTOID, TEXTOID, JSONBOID};

const ConfigStatementSpec kSpecs[] = {
    // kDefinitionLookup
    {1, kDefinitionArgTypes,
     "SELECT config::pg_catalog.jsonb FROM {schema}.ratelimit_definition WHERE name = $1", CMD_SELECT, false,
     DefinitionTableOid},
    // kDefinitionUpsert
    {2, kDefinitionArgTypes,
     "INSERT INTO {schema}.ratelimit_definition (name, config) VALUES ($1, $2)"
     " ON CONFLICT (name) DO UPDATE SET config = EXCLUDED.config",
     CMD_INSERT, true, DefinitionTableOid},
    // kDefinitionDelete
    {1, kDefinitionArgTypes, "DELETE FROM {schema}.ratelimit_definition WHERE name = $1", CMD_DELETE, false,
     DefinitionTableOid},
    // kOverrideLookup
    {2, kOverrideArgTypes,
     "SELECT config::pg_catalog.jsonb FROM {schema}.ratelimit_override WHERE name = $1 AND key = $2",
     CMD_SELECT, false, OverrideTableOid},
    // kOverrideUpsert
    {3, kOverrideArgTypes,
     "INSERT INTO {schema}.ratelimit_override (name, key, config) VALUES ($1, $2, $3)"
     " ON CONFLICT (name, key) DO UPDATE SET config = EXCLUDED.config",
     CMD_INSERT, true, OverrideTableOid},
    // kOverrideDelete
    {2, kOverrideArgTypes, "DELETE FROM {schema}.ratelimit_override WHERE name = $1 AND key = $2", CMD_DELETE,
     false, OverrideTableOid},
    // kOverrideNames
    {0, kOverrideArgTypes, "SELECT name, key FROM {schema}.ratelimit_override", CMD_SELECT, false,
     OverrideTableOid},
};
static_assert(sizeof kSpecs / sizeof kSpecs[0] == static_cast<int>(ConfigStatement::kCount),
              "one statement per enum value");

// The plans, prepared for the schema facts of version plans_version.
SPIPlanPtr plans[static_cast<int>(ConfigStatement::kCount)];
uint64 plans_version = 0;

// The statement's text with {schema} replaced by the quoted schema.
char* ExpandSchema(const char* sql, const char* schema) {
  constexpr const char kPlaceholder[] = "{schema}";
  const char* at = std::strstr(sql, kPlaceholder);
  StringInfoData buf;
  initStringInfo(&buf);
  while (at != nullptr) {
    appendBinaryStringInfo(&buf, sql, static_cast<int>(at - sql));
    appendStringInfoString(&buf, schema);
    sql = at + sizeof kPlaceholder - 1;
    at = std::strstr(sql, kPlaceholder);
  }
  appendStringInfoString(&buf, sql);
  return buf.data;
}

// Frees the plans if the schema facts changed since they were prepared.
void CheckPlanFacts() {
  const SchemaFacts& facts = CurrentSchemaFacts();
  if (facts.version == plans_version) return;
  for (SPIPlanPtr& plan : plans) {
    if (plan != nullptr) SPI_freeplan(plan);
    plan = nullptr;
  }
  plans_version = facts.version;
}

// The statement's plan, prepared (in the SQL scope) on first use.
SPIPlanPtr PlanOf(ConfigStatement statement) {
  const ConfigStatementSpec& spec = kSpecs[static_cast<int>(statement)];
  SPIPlanPtr& plan = plans[static_cast<int>(statement)];
  if (plan != nullptr) return plan;
  char* sql = ExpandSchema(spec.sql, quote_identifier(CurrentSchemaFacts().schema));
  plan = KeepPlanInScope(sql, spec.nargs, spec.argtypes);
  pfree(sql);
  return plan;
}

// Before a statement runs: never one on a config table the extension does
// not have (its name could mean someone else's table; only the override
// table can be absent: DefinitionTableOid raises itself), and the owner
// code rule.
void RequireStatementSafe(ConfigStatement statement) {
  const ConfigStatementSpec& spec = kSpecs[static_cast<int>(statement)];
  if (!OidIsValid(spec.table_oid())) RequireOverrideTable();
  RequireConfigStatementSafe(spec.table_oid, spec.command, spec.upsert);
}

}  // namespace

void ExecuteConfigStatement(ConfigStatement statement, Datum* values, const char* nulls, int expected,
                            long limit) {
  CheckPlanFacts();
  RequireStatementSafe(statement);
  ExecutePlanInScope(PlanOf(statement), values, nulls, expected, limit);
}

void ExecuteConfigStatementLatest(ConfigStatement statement, Datum* values, const char* nulls, int expected,
                                  long limit) {
  CheckPlanFacts();
  RequireStatementSafe(statement);
  ExecutePlanLatestInScope(PlanOf(statement), values, nulls, expected, limit);
}

}  // namespace ratelimit_pg
