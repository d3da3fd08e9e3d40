// Whether an SQL statement on the state table would run code the owner
// added after installing it (owner_code.cpp), by support/owner_code.h's
// rules with the parts the table storage installed (installed_parts.h).
// The state table's statements run as the owner (sql_plans.cpp) refuse to
// run such code on a caller's behalf (docs/security.md). Internal to the
// table storage.
#pragma once

#include "storage/table/state_table.h"

namespace ratelimit_pg {

// Whether an SQL statement of kind `command` (CMD_SELECT for reads and
// row locks, CMD_INSERT, CMD_UPDATE, CMD_DELETE) on the (locked) table, run
// as `statement_role`, runs code the owner added after installing it: what
// ReadRunsOwnerCode finds and the owner's casts of the state columns; for
// writes also what WriteRunsOwnerCode finds beyond the installed unique
// indexes and the shard's CHECK and DEFAULT.
bool StatementRunsOwnerCode(const StateTable& table, CmdType command, Oid statement_role);

}  // namespace ratelimit_pg
