// Whether an SQL statement on one of the extension's tables would run code
// the owner added after installing it (owner_code.cpp): triggers, rules,
// row security, CHECKs, defaults, generated columns, further indexes,
// casts, inheritance or partitions. The statements the extension runs as
// its owner refuse to run such code on a caller's behalf
// (docs/security.md). What a table's module installed is that module's to
// say (InstalledParts); the rules that hold for every table are here, and
// the config tables' own (their columns are the config layer's and the
// table storage's alike: a change's row lock reads the overrides).
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "access/tupdesc.h"
#include "nodes/nodes.h"
#include "utils/relcache.h"
}

namespace ratelimit_pg {

// The parts of a table its module installed, which run none of the owner's
// code: up to two unique indexes (InvalidOid: none) and, on one column
// (InvalidAttrNumber: none), a CHECK and a DEFAULT the module recognises.
struct InstalledParts {
  Oid indexes[2];
  AttrNumber column;
  bool (*is_installed_check)(const ConstrCheck& check, AttrNumber column);
  bool (*is_installed_default)(const Node* node);
};

// Whether converting between types `from` and `to` (either way) calls a
// cast function that is not built in.
bool CastRunsOwnerCode(Oid from, Oid to);
// Whether a SELECT on `rel` run as `statement_role` runs code the owner
// added: row security that applies to that role, a column of a type that
// is not built in (its casts and I/O), or inheritance children (whose own
// policies apply).
bool ReadRunsOwnerCode(Relation rel, Oid statement_role);
// What a write (`command` CMD_INSERT, CMD_UPDATE or CMD_DELETE) on the
// table runs of the owner's beyond what a read does: the command's
// triggers (the extension's own statement triggers excepted) and rules,
// and for inserts and updates CHECKs, defaults, stored generated columns,
// further indexes and a partition constraint.
bool WriteRunsOwnerCode(Relation rel, CmdType command, const InstalledParts& installed);

// The oid of the index called `name` (found by name in the extension's
// schema, then checked to be one of `rel`'s: only the table's owner can
// index it) if it is a valid, immediately checked unique btree index (an
// arbiter ON CONFLICT accepts) on exactly `columns`, the i-th with the
// operator family families[i], without expressions, with the predicate
// "null_column IS NULL" when null_column is valid, else none; InvalidOid
// otherwise.
Oid InstalledIndex(Relation rel, const char* name, const AttrNumber* columns, const Oid* families,
                   int ncolumns, AttrNumber null_column);

// Whether an SQL statement of kind `command` on a (locked) config table,
// ratelimit_definition or ratelimit_override (keyed), run as
// `statement_role`, runs the owner's code. What the extension installed
// there runs none: the primary key, the statement trigger calling the
// extension's own function, the columns' types.
bool ConfigStatementRunsOwnerCode(Relation rel, bool keyed, CmdType command, Oid statement_role);
// Refuses (42501) a statement of kind `command` (both commands of an
// upsert) on the config table `table_oid` finds, if it would run the
// owner's code and the caller lacks the owner's privileges; it first takes
// the statement's lock (lock, then look). Nothing to check where it finds
// no table (DefinitionTableOid, OverrideTableOid).
void RequireConfigStatementSafe(Oid (*table_oid)(), CmdType command, bool upsert);
// The same for a SELECT.
void RequireLookupSafe(Oid (*table_oid)());

}  // namespace ratelimit_pg
