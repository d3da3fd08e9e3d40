// The context of one call of an SQL function (call_context.cpp): SPI
// connected, the extension (its schema and owner) set and the role its SQL
// runs as (the called function's owner).
#pragma once

#include "limit_call.h"

extern "C" {
#include "fmgr.h"
}

namespace ratelimit_pg {

// Connects SPI for one call and sets up its context: the extension is the
// one the called function is a member of (55000 if none), whose tables are
// found among its members in its schema; its SQL runs as the function's
// owner. Returns the previous SQL role, which DisconnectStorage restores (a
// call from inside another call's SQL, e.g. a trigger, must not change the
// outer call's role).
//
// The SPI memory rule: SPI_connect switches to SPI's procedure context and
// SPI_finish frees it, so everything allocated in between (the call's
// temporary memory, its executor state, SPI results) goes with it.
// Whatever must outlive SPI_finish (a result to return, an array the rows
// are formed from afterwards) is allocated before ConnectStorage, or with
// SPI_palloc.
Oid ConnectStorage(FunctionCallInfo fcinfo);
void DisconnectStorage(Oid previous_sql_role);

}  // namespace ratelimit_pg
