// What the extension knows of the catalogs, in one place with one
// invalidation path (catalog.cpp): the schema a call runs in, the oids of
// the config tables, the facts SQL text is made from, the generations of
// definitions and overrides, and the called functions' owners; and, for
// the relations a lower module knows (a storage's), a generation that
// moves when any of them is invalidated (RegisterRelationWatch). One
// relcache callback and one syscache callback per catalog keep all of it;
// the caches other modules derive from it (plans, parsed configs, a
// storage's shape of its table) carry the generation they were derived in
// and are redone when it moves.
//
// Nothing here is trusted before a lock: a caller locks the relation, which
// processes the invalidations other sessions' DDL queued, and then looks
// (oids are hints until then, checked again after the lock).
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "storage/lockdefs.h"
}

namespace ratelimit_pg {

void RegisterCatalogInvalidation();

// The extension the called function is a member of, its owner and its
// schema; set by each call before it touches anything else
// (api/fn_args.cpp, from FactsOfFunction).
void SetExtension(Oid extension, Oid owner, Oid extension_namespace);
Oid ExtensionOid();
Oid ExtensionNamespace();

// The extension's member relation called `name` (pg_depend deptype 'e' on
// its pg_extension row), in its schema, owned by its owner; a same-named
// relation of anyone else's is never one of them: 42P01 naming it if there
// is none. No lock is taken.
Oid RequireMemberRelation(const char* name);

// The config tables, the extension's members of these names
// (RequireMemberRelation). The definition table raises (42P01) if missing;
// the override table is InvalidOid before ALTER EXTENSION UPDATE to 0.5.0
// created it.
Oid DefinitionTableOid();
Oid OverrideTableOid();
// OverrideTableOid for what needs the table (setting or removing an
// override): 42P01 naming it when there is none.
Oid RequireOverrideTable();

// Locks the relation `oid_of` finds (DefinitionTableOid, OverrideTableOid,
// a storage's) in `mode`, retrying if the name came to mean another
// relation before the lock was granted (a DROP and CREATE EXTENSION), as
// RangeVarGetRelidExtended does. Returns its oid; InvalidOid (nothing
// locked) when oid_of finds none.
Oid LockCatalogRelation(Oid (*oid_of)(), LOCKMODE mode);

// The relations a module watches (InvalidOid: none), which it sets
// itself: generation moves whenever one of them, every relation or a
// schema is invalidated, or the extension changes, so that what the module
// derived from them in an earlier generation is derived again. Registered
// once, by the module that owns it (at most four modules), and kept for
// the backend's life.
struct RelationWatch {
  Oid relids[4];
  uint64 generation;
};
void RegisterRelationWatch(RelationWatch* watch);

// The facts SQL text is made from: the schema's name. version changes
// whenever it does.
struct SchemaFacts {
  uint64 version;
  Oid namespace_oid;
  char schema[NAMEDATALEN];
};
const SchemaFacts& CurrentSchemaFacts();

// Whether state rows tag their kind in prev (from 0.5.0, which created the
// override table; before, a NULL prev may be any kind that reads untagged rows).
bool RowKindsTagged();

// Change whenever any backend changes definitions (overrides), or this one
// does, at once: any DML on the table sends a relcache invalidation of it.
uint64 DefinitionsGeneration();
uint64 OverridesGeneration();
// Tells every backend (at commit; this one at once) that they changed.
void InvalidateDefinitions();
void InvalidateOverrides();
// Whether the generations above and OverrideTableOid answer from what is
// known, without a catalog lookup (none since the last invalidation of a
// table or schema).
bool ConfigTablesKnown();

// What a call needs of the called function, from pg_proc: its schema (the
// extension's), its owner (whom the SQL it runs runs as) and its result
// type; and the extension it is a member of (InvalidOid: none), with that
// extension's owner and schema (pg_extension).
struct FunctionFacts {
  Oid function;
  Oid namespace_oid;
  Oid owner;
  Oid result_type;
  Oid extension;
  Oid extension_owner;
  Oid extension_namespace;
};
const FunctionFacts& FactsOfFunction(Oid function);
// The facts of `function` if they are known, without a catalog lookup;
// nullptr if not.
const FunctionFacts* KnownFactsOfFunction(Oid function);

// Whether `function` is the extension's own trigger function
// (ratelimit_definitions_changed, which the config tables' installed
// statement triggers call): a C function of the library, a member of the
// extension. It runs no code of the owner's.
bool IsExtensionTriggerFunction(Oid function);

}  // namespace ratelimit_pg
