// What of the owner's a statement on the state table would run
// (owner_code.h): support/owner_code.h's rules, with the state table's
// installed parts (installed_parts.h).
#include "storage/table/owner_code.h"

#include "support/owner_code.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/rel.h"
}

namespace ratelimit_pg {
namespace {

// Whether a state column whose type was changed is converted by the
// owner's cast (the statements read value, ts and prev with casts to their
// installed types, and write them back by assignment).
bool StateCastsRunOwnerCode(Relation rel, const StateColumns& c) {
  const struct {
    AttrNumber attnum;
    Oid installed;
  } columns[] = {{c.name, TEXTOID},          {c.key, TEXTOID},       {c.shard, INT2OID},
                 {c.value, FLOAT8OID},       {c.ts, TIMESTAMPTZOID}, {c.prev, FLOAT8OID},
                 {c.idle_at, TIMESTAMPTZOID}};
  for (const auto& column : columns)
    if (column.attnum != InvalidAttrNumber &&
        CastRunsOwnerCode(TupleDescAttr(RelationGetDescr(rel), column.attnum - 1)->atttypid,
                          column.installed))
      return true;
  return false;
}

}  // namespace

bool StatementRunsOwnerCode(const StateTable& table, CmdType command, Oid statement_role) {
  Relation rel = table.rel;
  if (ReadRunsOwnerCode(rel, statement_role) || StateCastsRunOwnerCode(rel, table.columns)) return true;
  if (command == CMD_SELECT) return false;
  // The unique indexes as installed, and the shard column's installed
  // CHECK (shard >= 0) and DEFAULT 0.
  InstalledParts installed{
      {table.keyed_index, table.null_key_index}, table.columns.shard, IsInstalledShardCheck, IsZeroDefault};
  return WriteRunsOwnerCode(rel, command, installed);
}

}  // namespace ratelimit_pg
