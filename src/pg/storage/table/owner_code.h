// Whether an SQL statement on one of the extension's tables would run code
// the owner added after installing it (owner_code.cpp): triggers, rules,
// row security, CHECKs, defaults, generated columns, further indexes,
// casts, inheritance or partitions. The statements the extension runs as
// its owner (sql_plans.cpp) refuse to run such code on a caller's behalf
// (docs/security.md). Internal to the table storage.
#pragma once

#include "storage/table/state_table.h"

namespace ratelimit_pg {

// Whether an SQL statement of kind `command` (CMD_SELECT for reads and
// row locks, CMD_INSERT, CMD_UPDATE, CMD_DELETE) on the (locked) table, run
// as `statement_role`, runs code the owner added after installing it: what
// ReadRunsOwnerCode finds; for writes also the command's triggers and
// rules, and for inserts and updates CHECKs, defaults, generated columns,
// further indexes and a partition constraint.
bool StatementRunsOwnerCode(const StateTable& table, CmdType command, Oid statement_role);
// The same for a statement on a (locked) config table: ratelimit_definition,
// or ratelimit_override (keyed). What the extension installed there runs
// none of the owner's code: the primary key, the statement trigger calling
// the extension's own function, the columns' types.
bool ConfigStatementRunsOwnerCode(Relation rel, bool keyed, CmdType command, Oid statement_role);
// Whether a SELECT on `rel` run as `statement_role` runs code the owner
// added: row security that applies to that role, a column of a type that
// is not built in (its casts and I/O), or inheritance children (whose own
// policies apply).
bool ReadRunsOwnerCode(Relation rel, Oid statement_role);
// Whether converting between types `from` and `to` (either way) calls a
// cast function that is not built in.
bool CastRunsOwnerCode(Oid from, Oid to);

}  // namespace ratelimit_pg
