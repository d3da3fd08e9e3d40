// Named limits: the rows of ratelimit_definition, and the invalidation that
// tells every backend's config cache (config_cache.cpp) that they changed.
// Any change to the table, through ratelimit_define/undefine or direct DML
// (its statement trigger), sends a relcache invalidation of the table; each
// backend counts them as a generation its cached named configs must match.
#include "sql_plans.h"
#include "state_table.h"

extern "C" {
#include "utils/inval.h"
}

namespace ratelimit_pg {
namespace {

uint64 generation = 1;
Oid watched_table = InvalidOid;

void OnRelcacheInvalidation(Datum arg, Oid relid) {
  (void)arg;
  if (relid == InvalidOid || relid == watched_table) ++generation;
}

}  // namespace

void RegisterDefinitionsInvalidation() { CacheRegisterRelcacheCallback(OnRelcacheInvalidation, 0); }

uint64 DefinitionsGeneration() {
  Oid table = DefinitionTableOid();
  if (table != watched_table) {  // first use, or the extension was re-created
    watched_table = table;
    ++generation;
  }
  return generation;
}

void InvalidateDefinitions() { CacheInvalidateRelcacheByRelid(DefinitionTableOid()); }

bool LookupDefinedConfig(text* name, LimitConfig* config) {
  Datum values[1] = {PointerGetDatum(name)};
  char nulls[1] = {' '};
  ExecuteStatementLatest(Statement::kDefinitionLookup, false, values, nulls, SPI_OK_SELECT, 1);
  if (SPI_processed == 0) return false;
  bool isnull = false;
  Datum stored = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  ParseConfigJsonb(DatumGetJsonbP(stored), config);
  return true;
}

void UpsertDefinition(text* name, Jsonb* config) {
  Datum values[2] = {PointerGetDatum(name), JsonbPGetDatum(config)};
  char nulls[2] = {' ', ' '};
  ExecuteStatement(Statement::kDefinitionUpsert, false, values, nulls, SPI_OK_INSERT, 0);
}

bool DeleteDefinition(text* name) {
  Datum values[1] = {PointerGetDatum(name)};
  char nulls[1] = {' '};
  ExecuteStatement(Statement::kDefinitionDelete, false, values, nulls, SPI_OK_DELETE, 0);
  return SPI_processed > 0;
}

}  // namespace ratelimit_pg
