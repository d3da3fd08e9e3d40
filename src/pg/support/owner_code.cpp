// What of the owner's a statement on the extension's tables would run
// (owner_code.h): whatever is not one of the parts the extension installed,
// read from the locked table's relcache entry.
#include <cstring>

#include "support/owner_code.h"

#include "support/catalog.h"
#include "support/sql_scope.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/pg_am.h"
#include "catalog/pg_cast.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "nodes/nodeFuncs.h"
#include "nodes/primnodes.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

namespace ratelimit_pg {
namespace {

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
// the installed one's, or that one's if it is not the installed default.
bool DefaultsRunOwnerCode(const TupleConstr* constr, const InstalledParts& installed) {
  for (int i = 0; i < constr->num_defval; ++i) {
    const AttrDefault& def = constr->defval[i];
    if (installed.column == InvalidAttrNumber || def.adnum != installed.column ||
        !installed.is_installed_default(static_cast<Node*>(stringToNode(def.adbin))))
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

// Whether a CHECK can run the owner's code: all but the installed check.
bool ChecksRunOwnerCode(const TupleConstr* constr, const InstalledParts& installed) {
  if (constr->num_check == 0) return false;
  return installed.column == InvalidAttrNumber || constr->num_check > 1 ||
         !installed.is_installed_check(constr->check[0], installed.column);
}

// Whether a new row version (insert or update) runs code the owner added:
// a CHECK other than the installed one, a column default other than the
// installed one (inserts), a stored generated column, an index other than
// the installed ones, or a partition constraint (the parent's key).
bool NewVersionRunsOwnerCode(Relation rel, CmdType command, const InstalledParts& installed) {
  const TupleConstr* constr = RelationGetDescr(rel)->constr;
  if (rel->rd_rel->relispartition) return true;
  if (constr != nullptr) {
    if (constr->has_generated_stored) return true;
    if (command == CMD_INSERT && DefaultsRunOwnerCode(constr, installed)) return true;
    if (ChecksRunOwnerCode(constr, installed)) return true;
  }
  return HasOwnerIndexes(rel, installed);
}

// Whether an index's predicate is exactly "column IS NULL".
bool PredicateIsNull(Relation index, AttrNumber column) {
  List* predicate = RelationGetIndexPredicate(index);
  if (list_length(predicate) != 1 || !IsA(linitial(predicate), NullTest)) return false;
  auto* test = static_cast<NullTest*>(linitial(predicate));
  return test->nulltesttype == IS_NULL && IsA(test->arg, Var) &&
         reinterpret_cast<Var*>(test->arg)->varattno == column;
}

// Whether `index` is what InstalledIndex looks for: what the row probe's
// scan keys and ON CONFLICT's arbiter assume.
bool IndexAsInstalled(Relation rel, Relation index, const AttrNumber* columns, const Oid* families,
                      int ncolumns, AttrNumber null_column) {
  Form_pg_index form = index->rd_index;
  if (form->indrelid != RelationGetRelid(rel) || !form->indisunique || !form->indimmediate ||
      !form->indisvalid || !form->indisready || !form->indislive || index->rd_rel->relam != BTREE_AM_OID ||
      form->indnatts != ncolumns || form->indnkeyatts != ncolumns ||
      !heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, nullptr))
    return false;
  for (int i = 0; i < ncolumns; ++i)
    if (form->indkey.values[i] != columns[i] || index->rd_opfamily[i] != families[i]) return false;
  if (null_column != InvalidAttrNumber) return PredicateIsNull(index, null_column);
  return heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, nullptr);
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

// Locks the config table `table_oid` finds as `command` on it would (lock,
// then look), and whether the statement runs the owner's code (both
// commands of an upsert). false if the extension has no such table.
bool LockedConfigStatementRunsOwnerCode(Oid (*table_oid)(), CmdType command, bool upsert) {
  Oid table = LockCatalogRelation(table_oid, command == CMD_SELECT ? AccessShareLock : RowExclusiveLock);
  if (!OidIsValid(table)) return false;
  Relation rel = table_open(table, NoLock);
  bool keyed = table_oid == OverrideTableOid;
  Oid role = SqlRole();
  bool owner_code = ConfigStatementRunsOwnerCode(rel, keyed, command, role) ||
                    (upsert && ConfigStatementRunsOwnerCode(rel, keyed, CMD_UPDATE, role));
  table_close(rel, NoLock);
  return owner_code;
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

bool WriteRunsOwnerCode(Relation rel, CmdType command, const InstalledParts& installed) {
  if (HasTriggerOrRuleFor(rel, command)) return true;
  return command != CMD_DELETE && NewVersionRunsOwnerCode(rel, command, installed);
}

Oid InstalledIndex(Relation rel, const char* name, const AttrNumber* columns, const Oid* families,
                   int ncolumns, AttrNumber null_column) {
  Oid relid = get_relname_relid(name, ExtensionNamespace());
  if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_INDEX) return InvalidOid;
  Relation index = index_open(relid, AccessShareLock);
  bool ok = IndexAsInstalled(rel, index, columns, families, ncolumns, null_column);
  index_close(index, NoLock);
  return ok ? relid : InvalidOid;
}

bool ConfigStatementRunsOwnerCode(Relation rel, bool keyed, CmdType command, Oid statement_role) {
  if (ReadRunsOwnerCode(rel, statement_role) || ConfigCastsRunOwnerCode(rel)) return true;
  if (command == CMD_SELECT) return false;
  // The installed primary key: (name) of the definitions, (name, key) of
  // the overrides, named as PostgreSQL names a table's primary key.
  AttrNumber columns[] = {get_attnum(RelationGetRelid(rel), "name"),
                          get_attnum(RelationGetRelid(rel), "key")};
  const Oid families[] = {TEXT_BTREE_FAM_OID, TEXT_BTREE_FAM_OID};
  char* pkey = psprintf("%s_pkey", RelationGetRelationName(rel));
  InstalledParts installed{
      {InstalledIndex(rel, pkey, columns, families, keyed ? 2 : 1, InvalidAttrNumber), InvalidOid},
      InvalidAttrNumber,
      nullptr,
      nullptr};
  pfree(pkey);
  return WriteRunsOwnerCode(rel, command, installed);
}

void RequireConfigStatementSafe(Oid (*table_oid)(), CmdType command, bool upsert) {
  if (CallerHasOwnerRights()) return;
  if (LockedConfigStatementRunsOwnerCode(table_oid, command, upsert)) RaiseOwnerCode(table_oid());
}

void RequireLookupSafe(Oid (*table_oid)()) { RequireConfigStatementSafe(table_oid, CMD_SELECT, false); }

}  // namespace ratelimit_pg
