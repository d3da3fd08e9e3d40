// Internal subtransactions (subtransaction.cpp), on PL/pgSQL's
// exec_stmt_block pattern.
#pragma once

namespace ratelimit_pg {

// Runs `step` in an internal subtransaction, kept if it returns true,
// rolled back (its row locks released) if false or on an error, which is
// then raised again. Returns what step returned.
bool RunInSubtransaction(bool (*step)(void* context), void* context);

}  // namespace ratelimit_pg
