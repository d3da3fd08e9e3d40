// Named limits: the rows of ratelimit_definition. Any change to the table,
// through ratelimit_define/undefine or direct DML (its statement trigger),
// sends a relcache invalidation of the table, which moves the definitions
// generation (catalog.h) that config_cache.cpp's named entries carry.
#include "definitions.h"

#include "config_json.h"
#include "sql_plans.h"

namespace ratelimit_pg {
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
