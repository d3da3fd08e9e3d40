// The catalog state of catalog.h and its one invalidation path.
#include <cstring>

#include "support/catalog.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace ratelimit_pg {
namespace {

constexpr const char* kDefinitionTableName = "ratelimit_definition";
constexpr const char* kOverrideTableName = "ratelimit_override";
constexpr const char* kTriggerFunctionSymbol = "ratelimit_definitions_changed";
constexpr int kFunctionFactSlots = 16;  // direct-mapped by oid
constexpr int kRelationWatches = 4;     // RegisterRelationWatch

struct CatalogState {
  Oid extension;
  Oid extension_owner;
  Oid namespace_oid;
  // Relation hints, cleared by an invalidation of the relation or a schema.
  Oid definition_table;
  bool override_looked_up;  // override_table is known (InvalidOid: absent)
  Oid override_table;
  // A relation of the override table's name that is not the extension's
  // (planted in its schema before 0.5.0): not looked at again until an
  // invalidation of it, or of every relation.
  Oid foreign_override;
  // The relations lower modules watch (RegisterRelationWatch).
  RelationWatch* watches[kRelationWatches];
  int nwatches;
  bool facts_valid;
  SchemaFacts facts;
  // The tables the generations count invalidations of.
  Oid watched_definitions;
  Oid watched_overrides;
  uint64 definitions_generation;
  uint64 overrides_generation;
  FunctionFacts functions[kFunctionFactSlots];
};

CatalogState catalog{};

// Forgets every relation hint: the schema changed, or was renamed or dropped.
void ForgetRelations() {
  catalog.definition_table = catalog.override_table = InvalidOid;
  catalog.override_looked_up = false;
  catalog.foreign_override = InvalidOid;
  catalog.facts_valid = false;
  for (int i = 0; i < catalog.nwatches; ++i) ++catalog.watches[i]->generation;
}

// Moves the generation of every watch that holds `relid`.
void InvalidateWatches(Oid relid) {
  for (int i = 0; i < catalog.nwatches; ++i) {
    RelationWatch& watch = *catalog.watches[i];
    for (Oid watched : watch.relids)
      if (watched == relid) {
        ++watch.generation;
        break;
      }
  }
}

void OnRelcacheInvalidation(Datum arg, Oid relid) {
  (void)arg;
  if (relid == InvalidOid) {
    ForgetRelations();
    ++catalog.definitions_generation;
    ++catalog.overrides_generation;
    return;
  }
  InvalidateWatches(relid);
  if (relid == catalog.definition_table || relid == catalog.watched_definitions) {
    catalog.definition_table = InvalidOid;
    ++catalog.definitions_generation;
  }
  if (relid == catalog.foreign_override) catalog.foreign_override = InvalidOid;
  if (relid == catalog.override_table || relid == catalog.watched_overrides) {
    catalog.override_looked_up = false;
    ++catalog.overrides_generation;
  }
}

void OnNamespaceInvalidation(Datum arg, int cacheid, uint32 hashvalue) {
  (void)arg;
  (void)cacheid;
  (void)hashvalue;
  ForgetRelations();
}

void OnFunctionInvalidation(Datum arg, int cacheid, uint32 hashvalue) {
  (void)arg;
  (void)cacheid;
  (void)hashvalue;
  for (FunctionFacts& facts : catalog.functions) facts.function = InvalidOid;
}

// Whether the relation is owned by the extension's owner.
bool OwnedByExtensionOwner(Oid relid) {
  HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
  if (!HeapTupleIsValid(tuple)) return false;  // dropped meanwhile
  bool owned = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner == catalog.extension_owner;
  ReleaseSysCache(tuple);
  return owned;
}

// Whether the relation is the extension's: a member of it (pg_depend
// deptype 'e'), owned by its owner. (It is in the extension's schema: it
// was looked up there.)
bool IsExtensionRelation(Oid relid) {
  return OwnedByExtensionOwner(relid) && getExtensionOfObject(RelationRelationId, relid) == catalog.extension;
}

// The extension's relation called `name`, or InvalidOid: a relation of that
// name in its schema that is not the extension's is none.
Oid MemberRelation(const char* name) {
  if (!OidIsValid(catalog.extension)) elog(ERROR, "ratelimit: storage is not prepared");
  Oid relid = get_relname_relid(name, catalog.namespace_oid);
  if (!OidIsValid(relid) || !IsExtensionRelation(relid)) return InvalidOid;
  return relid;
}

// The 42P01 of a table of the extension's that is not there (hint: what
// brings it back).
[[noreturn]] void RaiseMissingRelation(const char* name, const char* hint) {
  ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                  errmsg("ratelimit: table %s of extension ratelimit not found", name),
                  errdetail("The extension's tables are its members, in its schema, owned by its owner; "
                            "a table of that name that is not is never used."),
                  errhint("%s", hint)));
  pg_unreachable();
}

}  // namespace

Oid RequireMemberRelation(const char* name) {
  Oid relid = MemberRelation(name);
  if (!OidIsValid(relid))
    RaiseMissingRelation(name, "Reinstall the extension, or ALTER EXTENSION ratelimit ADD TABLE it back.");
  return relid;
}

namespace {

// The extension's owner and schema, from its pg_extension row (there is
// no syscache of pg_extension before PostgreSQL 16).
void ReadExtensionRow(Oid extension, Oid* owner, Oid* namespace_oid) {
  Relation rel = table_open(ExtensionRelationId, AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(extension));
  SysScanDesc scan = systable_beginscan(rel, ExtensionOidIndexId, true, nullptr, 1, &key);
  HeapTuple tuple = systable_getnext(scan);
  if (!HeapTupleIsValid(tuple)) elog(ERROR, "ratelimit: extension %u not found", extension);
  auto* form = reinterpret_cast<Form_pg_extension>(GETSTRUCT(tuple));
  *owner = form->extowner;
  *namespace_oid = form->extnamespace;
  systable_endscan(scan);
  table_close(rel, AccessShareLock);
}

}  // namespace

void RegisterCatalogInvalidation() {
  catalog.definitions_generation = catalog.overrides_generation = 1;
  CacheRegisterRelcacheCallback(OnRelcacheInvalidation, 0);
  CacheRegisterSyscacheCallback(NAMESPACEOID, OnNamespaceInvalidation, 0);
  CacheRegisterSyscacheCallback(PROCOID, OnFunctionInvalidation, 0);
}

void SetExtension(Oid extension, Oid owner, Oid extension_namespace) {
  if (extension == catalog.extension && owner == catalog.extension_owner &&
      extension_namespace == catalog.namespace_oid)
    return;
  catalog.extension = extension;
  catalog.extension_owner = owner;
  catalog.namespace_oid = extension_namespace;
  ForgetRelations();
}

Oid ExtensionOid() { return catalog.extension; }

Oid ExtensionNamespace() { return catalog.namespace_oid; }

Oid DefinitionTableOid() {
  if (!OidIsValid(catalog.definition_table))
    catalog.definition_table = RequireMemberRelation(kDefinitionTableName);
  return catalog.definition_table;
}

Oid OverrideTableOid() {
  if (catalog.override_looked_up) return catalog.override_table;
  // Absent before ALTER EXTENSION UPDATE to 0.5.0: looked up again each
  // time (a negative syscache entry), so the update is seen at once. A
  // same-named table someone else created there is absent too.
  Oid relid = get_relname_relid(kOverrideTableName, catalog.namespace_oid);
  if (OidIsValid(relid) && relid != catalog.foreign_override && !IsExtensionRelation(relid))
    catalog.foreign_override = relid;
  catalog.override_table = relid == catalog.foreign_override ? InvalidOid : relid;
  catalog.override_looked_up = OidIsValid(catalog.override_table);
  return catalog.override_table;
}

Oid RequireOverrideTable() {
  Oid relid = OverrideTableOid();
  if (!OidIsValid(relid))
    RaiseMissingRelation(kOverrideTableName,
                         "ALTER EXTENSION ratelimit UPDATE creates it (0.5.0 and later); if the extension is "
                         "up to date, reinstall it, or ALTER EXTENSION ratelimit ADD TABLE it back.");
  return relid;
}

Oid LockCatalogRelation(Oid (*oid_of)(), LOCKMODE mode) {
  for (;;) {
    Oid relid = oid_of();
    if (!OidIsValid(relid)) return InvalidOid;
    LockRelationOid(relid, mode);
    if (oid_of() == relid) return relid;
    UnlockRelationOid(relid, mode);
  }
}

void RegisterRelationWatch(RelationWatch* watch) {
  if (catalog.nwatches == kRelationWatches) elog(ERROR, "ratelimit: too many relation watches");
  watch->generation = 1;
  catalog.watches[catalog.nwatches++] = watch;
}

const SchemaFacts& CurrentSchemaFacts() {
  if (catalog.facts_valid && catalog.facts.namespace_oid == catalog.namespace_oid) return catalog.facts;
  SchemaFacts now{};
  now.namespace_oid = catalog.namespace_oid;
  const char* schema = get_namespace_name(now.namespace_oid);
  if (schema == nullptr) elog(ERROR, "ratelimit: schema %u not found", now.namespace_oid);
  strlcpy(now.schema, schema, sizeof now.schema);
  const SchemaFacts& was = catalog.facts;
  bool same = now.namespace_oid == was.namespace_oid && std::strcmp(now.schema, was.schema) == 0;
  now.version = same ? was.version : was.version + 1;
  catalog.facts = now;
  catalog.facts_valid = true;
  return catalog.facts;
}

bool RowKindsTagged() { return OidIsValid(OverrideTableOid()); }

uint64 DefinitionsGeneration() {
  Oid table = DefinitionTableOid();
  if (table != catalog.watched_definitions) {  // first use, or the extension was re-created
    catalog.watched_definitions = table;
    ++catalog.definitions_generation;
  }
  return catalog.definitions_generation;
}

uint64 OverridesGeneration() {
  Oid table = OverrideTableOid();
  if (table != catalog.watched_overrides) {  // found anew: nothing cached may predate it
    catalog.watched_overrides = table;
    ++catalog.overrides_generation;
  }
  return catalog.overrides_generation;
}

void InvalidateDefinitions() { CacheInvalidateRelcacheByRelid(DefinitionTableOid()); }

bool ConfigTablesKnown() { return OidIsValid(catalog.definition_table) && catalog.override_looked_up; }

void InvalidateOverrides() { CacheInvalidateRelcacheByRelid(OverrideTableOid()); }

const FunctionFacts* KnownFactsOfFunction(Oid function) {
  const FunctionFacts& slot = catalog.functions[function % kFunctionFactSlots];
  return slot.function == function ? &slot : nullptr;
}

const FunctionFacts& FactsOfFunction(Oid function) {
  FunctionFacts& slot = catalog.functions[function % kFunctionFactSlots];
  if (slot.function == function) return slot;
  slot.function = InvalidOid;
  HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(function));
  if (!HeapTupleIsValid(tuple)) elog(ERROR, "ratelimit: function %u not found", function);
  auto* proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tuple));
  slot.namespace_oid = proc->pronamespace;
  slot.owner = proc->proowner;
  slot.result_type = proc->prorettype;
  ReleaseSysCache(tuple);
  slot.extension = getExtensionOfObject(ProcedureRelationId, function);
  slot.extension_owner = slot.extension_namespace = InvalidOid;
  if (OidIsValid(slot.extension))
    ReadExtensionRow(slot.extension, &slot.extension_owner, &slot.extension_namespace);
  slot.function = function;
  return slot;
}

bool IsExtensionTriggerFunction(Oid function) {
  HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(function));
  if (!HeapTupleIsValid(tuple)) return false;
  bool is_c = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tuple))->prolang == ClanguageId;
  bool isnull = false;
  Datum prosrc = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_prosrc, &isnull);
  bool symbol = is_c && !isnull && std::strcmp(TextDatumGetCString(prosrc), kTriggerFunctionSymbol) == 0;
  ReleaseSysCache(tuple);
  return symbol && OidIsValid(catalog.extension) &&
         getExtensionOfObject(ProcedureRelationId, function) == catalog.extension;
}

}  // namespace ratelimit_pg
