// One call's context: SPI, the extension's schema and the SQL role.
#include "call_context.h"

#include "catalog.h"
#include "sql_plans.h"

extern "C" {
#include "executor/spi.h"
}

namespace ratelimit_pg {

Oid ConnectStorage(FunctionCallInfo fcinfo) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ratelimit: SPI_connect failed");
  const FunctionFacts& facts = FactsOfFunction(fcinfo->flinfo->fn_oid);
  SetExtensionNamespace(facts.namespace_oid);
  return SetSqlRole(facts.owner);
}

void DisconnectStorage(Oid previous_sql_role) {
  SetSqlRole(previous_sql_role);
  if (SPI_finish() != SPI_OK_FINISH) elog(ERROR, "ratelimit: SPI_finish failed");
}

}  // namespace ratelimit_pg
