// One call's context: SPI, the extension's schema and the SQL role.
#include "call_context.h"

#include "catalog.h"
#include "sql_plans.h"

extern "C" {
#include "executor/spi.h"
#include "utils/regproc.h"
}

namespace ratelimit_pg {

Oid ConnectStorage(FunctionCallInfo fcinfo) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ratelimit: SPI_connect failed");
  const FunctionFacts& facts = FactsOfFunction(fcinfo->flinfo->fn_oid);
  // The extension's objects are found as its members: a function outside
  // it (a C function someone created on the library) has none.
  if (!OidIsValid(facts.extension))
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("ratelimit: function %s is not a member of extension ratelimit",
                           format_procedure(facts.function)),
                    errdetail("The library finds its tables as members of the extension the called function "
                              "belongs to."),
                    errhint("Call the functions CREATE EXTENSION ratelimit created.")));
  SetExtension(facts.extension, facts.extension_owner, facts.extension_namespace);
  return SetSqlRole(facts.owner);
}

void DisconnectStorage(Oid previous_sql_role) {
  SetSqlRole(previous_sql_role);
  if (SPI_finish() != SPI_OK_FINISH) elog(ERROR, "ratelimit: SPI_finish failed");
}

}  // namespace ratelimit_pg
