// What of the owner's a statement on the extension's tables would run
// (owner_code.h): whatever is not one of the parts the extension installed
// (installed_parts.h), read from the locked table's relcache entry.
#include <cstring>

#include "storage/table/owner_code.h"

#include "storage/table/installed_parts.h"
#include "support/catalog.h"

extern "C" {
#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/pg_cast.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "nodes/nodeFuncs.h"
#include "utils/rel.h"
#include "utils/syscache.h"
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

// The parts of a table the extension installed, which run none of the
// owner's code: its unique indexes as installed, and (the state table's)
// the shard column, whose CHECK (shard >= 0) and DEFAULT 0 are installed.
// The config tables' installed statement trigger calls the extension's own
// function (IsInstalledTrigger), on any table.
struct InstalledParts {
  Oid indexes[2];    // InvalidOid: none
  AttrNumber shard;  // InvalidAttrNumber: no installed CHECK or default
};

bool TriggerFiresFor(const Trigger& trigger, CmdType command) {
  switch (command) {
    case CMD_INSERT:
      return TRIGGER_FOR_INSERT(trigger.tgtype);
    case CMD_UPDATE:
      return TRIGGER_FOR_UPDATE(trigger.tgtype);
    case CMD_DELETE:
      return TRIGGER_FOR_DELETE(trigger.tgtype);
    default:
      return false;
  }
}

// Whether a trigger is one the extension installs on its config tables:
// for each statement, without WHEN, calling the extension's own function.
bool IsInstalledTrigger(const Trigger& trigger) {
  return !TRIGGER_FOR_ROW(trigger.tgtype) && trigger.tgqual == nullptr &&
         IsExtensionTriggerFunction(trigger.tgfoid);
}

// Whether the table has a trigger (other than an installed one, internal
// ones such as a foreign key's included) or a rule for `command`.
bool HasTriggerOrRuleFor(Relation rel, CmdType command) {
  const TriggerDesc* t = rel->trigdesc;
  if (t != nullptr)
    for (int i = 0; i < t->numtriggers; ++i)
      if (TriggerFiresFor(t->triggers[i], command) && !IsInstalledTrigger(t->triggers[i])) return true;
  if (rel->rd_rules != nullptr)
    for (int i = 0; i < rel->rd_rules->numLocks; ++i)
      if (rel->rd_rules->rules[i]->event == command) return true;
  return false;
}

// Whether a column default can run the owner's code: one on any column but
// the installed shard, or the shard's if it is not the installed constant 0.
bool DefaultsRunOwnerCode(const TupleConstr* constr, AttrNumber shard) {
  for (int i = 0; i < constr->num_defval; ++i) {
    const AttrDefault& def = constr->defval[i];
    if (shard == InvalidAttrNumber || def.adnum != shard ||
        !IsZeroDefault(static_cast<Node*>(stringToNode(def.adbin))))
      return true;
  }
  return false;
}

// Whether the table has an index other than the installed ones (an index
// replaced under an installed name is not one of them): its expressions,
// predicate and operators are functions.
bool HasOwnerIndexes(Relation rel, const InstalledParts& installed) {
  List* indexes = RelationGetIndexList(rel);
  bool owner_index = false;
  ListCell* cell;
  foreach (cell, indexes) {
    Oid index = lfirst_oid(cell);
    if (index != installed.indexes[0] && index != installed.indexes[1]) owner_index = true;
  }
  list_free(indexes);
  return owner_index;
}

// Whether a CHECK can run the owner's code: all but the installed shard check.
bool ChecksRunOwnerCode(const TupleConstr* constr, AttrNumber shard) {
  if (constr->num_check == 0) return false;
  return shard == InvalidAttrNumber || constr->num_check > 1 ||
         !IsInstalledShardCheck(constr->check[0], shard);
}

// Whether a new row version (insert or update) runs code the owner added:
// a CHECK other than the installed shard check, a column default other
// than the shard's (inserts), a stored generated column, an index other
// than the installed ones, or a partition constraint (the parent's key).
bool NewVersionRunsOwnerCode(Relation rel, CmdType command, const InstalledParts& installed) {
  const TupleConstr* constr = RelationGetDescr(rel)->constr;
  if (rel->rd_rel->relispartition) return true;
  if (constr != nullptr) {
    if (constr->has_generated_stored) return true;
    if (command == CMD_INSERT && DefaultsRunOwnerCode(constr, installed.shard)) return true;
    if (ChecksRunOwnerCode(constr, installed.shard)) return true;
  }
  return HasOwnerIndexes(rel, installed);
}

// What a write (`command` not CMD_SELECT) on the table runs of the owner's
// beyond what a read does: the command's triggers and rules, and for
// inserts and updates what a new row version runs.
bool WriteRunsOwnerCode(Relation rel, CmdType command, const InstalledParts& installed) {
  if (HasTriggerOrRuleFor(rel, command)) return true;
  return command != CMD_DELETE && NewVersionRunsOwnerCode(rel, command, installed);
}

// Whether a config table's column the statements compare or convert
// (name, key as text, config as jsonb) is converted by the owner's cast.
bool ConfigCastsRunOwnerCode(Relation rel) {
  TupleDesc desc = RelationGetDescr(rel);
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute att = TupleDescAttr(desc, i);
    if (att->attisdropped) continue;
    const char* column = NameStr(att->attname);
    Oid installed = std::strcmp(column, "config") == 0                                    ? JSONBOID
                    : std::strcmp(column, "name") == 0 || std::strcmp(column, "key") == 0 ? TEXTOID
                                                                                          : InvalidOid;
    if (OidIsValid(installed) && CastRunsOwnerCode(att->atttypid, installed)) return true;
  }
  return false;
}

}  // namespace

bool CastRunsOwnerCode(Oid from, Oid to) {
  if (from == to) return false;
  for (int direction = 0; direction < 2; ++direction) {
    HeapTuple tuple = SearchSysCache2(CASTSOURCETARGET, ObjectIdGetDatum(direction == 0 ? from : to),
                                      ObjectIdGetDatum(direction == 0 ? to : from));
    if (!HeapTupleIsValid(tuple)) continue;
    Oid function = reinterpret_cast<Form_pg_cast>(GETSTRUCT(tuple))->castfunc;
    ReleaseSysCache(tuple);
    if (function >= FirstNormalObjectId) return true;
  }
  return false;
}

bool ReadRunsOwnerCode(Relation rel, Oid statement_role) {
  Form_pg_class form = rel->rd_rel;
  // Policies apply unless the statement's role owns the table and they are
  // not forced.
  bool policies = form->relrowsecurity && (form->relforcerowsecurity || form->relowner != statement_role);
  if (policies || form->relhassubclass) return true;
  TupleDesc desc = RelationGetDescr(rel);
  for (int i = 0; i < desc->natts; ++i)
    if (!TupleDescAttr(desc, i)->attisdropped && TupleDescAttr(desc, i)->atttypid >= FirstNormalObjectId)
      return true;
  return false;
}

bool StatementRunsOwnerCode(const StateTable& table, CmdType command, Oid statement_role) {
  Relation rel = table.rel;
  if (ReadRunsOwnerCode(rel, statement_role) || StateCastsRunOwnerCode(rel, table.columns)) return true;
  if (command == CMD_SELECT) return false;
  InstalledParts installed{{table.keyed_index, table.null_key_index}, table.columns.shard};
  return WriteRunsOwnerCode(rel, command, installed);
}

bool ConfigStatementRunsOwnerCode(Relation rel, bool keyed, CmdType command, Oid statement_role) {
  if (ReadRunsOwnerCode(rel, statement_role) || ConfigCastsRunOwnerCode(rel)) return true;
  if (command == CMD_SELECT) return false;
  // The installed primary key: (name) of the definitions, (name, key) of
  // the overrides, named as PostgreSQL names a table's primary key.
  StateColumns c = FindColumns(rel);
  c.shard = InvalidAttrNumber;  // text columns only
  AttrNumber columns[] = {c.name, c.key};
  char* pkey = psprintf("%s_pkey", RelationGetRelationName(rel));
  InstalledParts installed{{InstalledIndex(rel, pkey, columns, keyed ? 2 : 1, c, false), InvalidOid},
                           InvalidAttrNumber};
  pfree(pkey);
  return WriteRunsOwnerCode(rel, command, installed);
}

}  // namespace ratelimit_pg
