// The config tables' SQL statements (config_sql.cpp): lookups, upserts and
// deletes of ratelimit_definition and ratelimit_override rows, as saved SPI
// plans run in the SQL scope (support/sql_scope.h), each refused first if
// it would run code the owner added to its table (support/owner_code.h).
#pragma once

#include "support/sql_scope.h"

namespace ratelimit_pg {

enum class ConfigStatement {
  kDefinitionLookup,
  kDefinitionUpsert,
  kDefinitionDelete,
  kOverrideLookup,
  kOverrideUpsert,
  kOverrideDelete,
  kOverrideNames,
  kCount
};

// Runs a config statement (its plan prepared on first use) and checks SPI's
// return code; the results are in SPI_tuptable.
void ExecuteConfigStatement(ConfigStatement statement, Datum* values, const char* nulls, int expected,
                            long limit);
// ExecuteConfigStatement with the latest snapshot instead of the
// transaction's: what a config lookup reads, so that a config cached until
// the next invalidation is never older than that invalidation (also under
// REPEATABLE READ, whose transaction snapshot may predate it).
void ExecuteConfigStatementLatest(ConfigStatement statement, Datum* values, const char* nulls, int expected,
                                  long limit);

}  // namespace ratelimit_pg
