// A step whose row locks must not outlive a refusal: PostgreSQL releases a
// row lock only when the (sub)transaction that took it ends, so the step
// runs in an internal subtransaction, kept when it grants and rolled back
// (its locks, and any row it created, gone) when it does not. The pattern
// is PL/pgSQL's exception block (exec_stmt_block): an error inside rolls
// the subtransaction back before it is raised again, so an enclosing
// handler finds the subtransaction stack as it left it.
#include "support/subtransaction.h"

extern "C" {
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
}

namespace ratelimit_pg {

bool RunInSubtransaction(bool (*step)(void* context), void* context) {
  MemoryContext caller_context = CurrentMemoryContext;
  ResourceOwner caller_owner = CurrentResourceOwner;
  BeginInternalSubTransaction(nullptr);
  // The step allocates in the caller's memory: what it returns outlives the
  // subtransaction (the SPI memory rule holds as for the caller).
  MemoryContextSwitchTo(caller_context);
  volatile bool keep = false;
  PG_TRY();
  {
    keep = step(context);
    if (keep) {
      ReleaseCurrentSubTransaction();
    } else {
      RollbackAndReleaseCurrentSubTransaction();
    }
    MemoryContextSwitchTo(caller_context);
    CurrentResourceOwner = caller_owner;
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(caller_context);
    ErrorData* error = CopyErrorData();
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(caller_context);
    CurrentResourceOwner = caller_owner;
    ReThrowError(error);
  }
  PG_END_TRY();
  return keep;
}

}  // namespace ratelimit_pg
