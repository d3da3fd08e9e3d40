// What runs around every fmgr entry point's body (entry_points.cpp,
// routed_calls.cpp). No C++ exception guard: the adapter is compiled with
// -fno-exceptions (the Makefile), so none of its code can throw or catch,
// and the core, the one part built with exceptions, is called through
// noexcept functions that return every failure as a Status.
#pragma once

// C++ and core headers before any PostgreSQL header (limit_call.h's order).
#include "support/limit_call.h"

extern "C" {
#include "access/xact.h"
#include "fmgr.h"
}

namespace ratelimit_pg {

// Every function that touches storage is PARALLEL UNSAFE: one reached in a parallel operation
// anyway (through a function its author marked PARALLEL SAFE) is refused
// before it touches anything, as a worker's rollback could not give a
// memory limit's grant back and its table writes would fail midway.
inline void RequireNoParallelMode() {
  if (!IsInParallelMode()) return;
  ereport(ERROR,
          (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
           errmsg("ratelimit functions cannot run during a parallel operation"),
           errhint("They are PARALLEL UNSAFE: do not call them from a function marked PARALLEL SAFE or "
                   "PARALLEL RESTRICTED.")));
}

// Runs an entry point's body. Allowed in a parallel operation: for the
// PARALLEL SAFE functions, which touch no storage.
template <Datum (*Body)(FunctionCallInfo)>
Datum RunParallelSafeEntry(FunctionCallInfo fcinfo) {
  return Body(fcinfo);
}

// RunParallelSafeEntry for a function that touches storage: refused in a
// parallel operation.
template <Datum (*Body)(FunctionCallInfo)>
Datum RunEntry(FunctionCallInfo fcinfo) {
  RequireNoParallelMode();
  return RunParallelSafeEntry<Body>(fcinfo);
}

}  // namespace ratelimit_pg
