// The guard that keeps a C++ exception from crossing into PostgreSQL's C
// frames, around every fmgr entry point's body.
#pragma once

#include <cstring>
#include <exception>

// C++ and core headers before any PostgreSQL header (limit_call.h's order).
#include "limit_call.h"

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

// Runs an entry point's body; a C++ exception (none is expected: the core is
// noexcept and the adapter holds no C++ objects) becomes a PostgreSQL error
// raised after the catch block has been left. Allowed in a parallel
// operation: for the PARALLEL SAFE functions, which touch no storage.
template <Datum (*Body)(FunctionCallInfo)>
Datum GuardedParallelSafe(FunctionCallInfo fcinfo) {
  char message[256] = "unknown C++ exception";
  bool failed = false;
  Datum result = 0;
  try {
    result = Body(fcinfo);
  } catch (const std::exception& e) {
    failed = true;
    strlcpy(message, e.what(), sizeof message);
  } catch (...) {
    failed = true;
  }
  if (failed) ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("ratelimit: %s", message)));
  return result;
}

// GuardedParallelSafe for a function that touches storage: refused in a
// parallel operation.
template <Datum (*Body)(FunctionCallInfo)>
Datum Guarded(FunctionCallInfo fcinfo) {
  RequireNoParallelMode();
  return GuardedParallelSafe<Body>(fcinfo);
}

}  // namespace ratelimit_pg
