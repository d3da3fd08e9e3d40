// Limits as data: ratelimit_define, undefine, override and unoverride
// (each carries the stored rows of every storage into the new config, in
// the changing transaction), ratelimit_stats_reset, and the statement
// trigger that tells every backend the definitions changed.
#include "api/config_functions.h"

#include "api/fn_args.h"
#include "config/config_changes.h"
#include "config/config_json.h"
#include "config/config_rows.h"
#include "decide/pending_grants.h"
#include "shmem/stats.h"
#include "support/catalog.h"

extern "C" {
#include "commands/trigger.h"
#include "utils/inval.h"
#include "utils/rel.h"
}

namespace ratelimit_pg {
namespace {

// The config (name, key) uses now without an override of its own: the
// definition, or nullptr when calls pass inline configs only.
const LimitSettings* ConfigWithoutOverride(text* name, LimitSettings* buffer) {
  return LookupDefinedConfig(name, buffer) ? buffer : nullptr;
}

// The key's override as stored now, parsed; nullptr if it has none.
const LimitSettings* StoredOverride(const LimitId& id, LimitSettings* buffer) {
  Jsonb* stored = ReadOverrideConfig(id.name_text, id.key_text);
  if (stored == nullptr) return nullptr;
  ParseConfigJsonb(stored, buffer);
  return buffer;
}

}  // namespace

Datum Define(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_define()");
  LimitId id = IdFromArgs(fcinfo, 0, -1);
  RequireNotNull(fcinfo, 1, "config");
  Jsonb* config = PG_GETARG_JSONB_P(1);
  LimitSettings parsed;
  ParseConfigJsonb(config, &parsed);
  Oid previous_sql_role = EnterCallContext(fcinfo);
  // Changes of one name's definition wait for each other: each carries the
  // rows over from the config it replaces.
  LockDefinitionChanges();
  LimitSettings previous;
  bool was_defined = LookupDefinedConfig(id.name_text, &previous);
  ApplyConfigChange(id.name_text, nullptr, was_defined ? &previous : nullptr, &parsed);
  NoteConfigChange(&id);
  UpsertDefinition(id.name_text, config);
  EndOwnConfigWrite();
  InvalidateDefinitions();
  LeaveCallContext(previous_sql_role);
  PG_RETURN_VOID();
}

Datum Override(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_override()");
  RequireNotNull(fcinfo, 1, "key");
  RequireNotNull(fcinfo, 2, "config");
  LimitId id = IdFromArgs(fcinfo, 0, 1);
  Jsonb* config = PG_GETARG_JSONB_P(2);
  LimitSettings parsed;
  ParseConfigJsonb(config, &parsed);
  Oid previous_sql_role = EnterCallContext(fcinfo);
  LockOverrideChanges();
  LimitSettings override_buffer;
  LimitSettings definition_buffer;
  const LimitSettings* from = StoredOverride(id, &override_buffer);
  if (from == nullptr) from = ConfigWithoutOverride(id.name_text, &definition_buffer);
  ApplyConfigChange(id.name_text, id.key_text, from, &parsed);
  NoteConfigChange(&id);
  UpsertOverride(id.name_text, id.key_text, config);
  EndOwnConfigWrite();
  InvalidateOverrides();
  LeaveCallContext(previous_sql_role);
  PG_RETURN_VOID();
}

Datum Unoverride(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_unoverride()");
  RequireNotNull(fcinfo, 1, "key");
  LimitId id = IdFromArgs(fcinfo, 0, 1);
  Oid previous_sql_role = EnterCallContext(fcinfo);
  LockOverrideChanges();
  LimitSettings override_buffer;
  LimitSettings definition_buffer;
  const LimitSettings* from = StoredOverride(id, &override_buffer);
  if (from != nullptr)
    ApplyConfigChange(id.name_text, id.key_text, from,
                      ConfigWithoutOverride(id.name_text, &definition_buffer));
  NoteConfigChange(&id);
  bool existed = DeleteOverride(id.name_text, id.key_text);
  EndOwnConfigWrite();
  InvalidateOverrides();
  LeaveCallContext(previous_sql_role);
  PG_RETURN_BOOL(existed);
}

Datum Undefine(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_undefine()");
  LimitId id = IdFromArgs(fcinfo, 0, -1);
  Oid previous_sql_role = EnterCallContext(fcinfo);
  NoteConfigChange(&id);
  bool existed = DeleteDefinition(id.name_text);
  EndOwnConfigWrite();
  InvalidateDefinitions();
  LeaveCallContext(previous_sql_role);
  PG_RETURN_BOOL(existed);
}

Datum StatsReset(FunctionCallInfo fcinfo) {
  (void)fcinfo;
  ResetStats();
  PG_RETURN_VOID();
}

// The statement trigger on the definition table: any direct change to it
// invalidates the cached named configs in every backend.
Datum DefinitionsChanged(FunctionCallInfo fcinfo) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("ratelimit: not called as a trigger")));
  auto* trigger = reinterpret_cast<TriggerData*>(fcinfo->context);
  CacheInvalidateRelcacheByRelid(RelationGetRelid(trigger->tg_relation));
  NoteDirectConfigChange();  // an owner's own DML: every name, as it may change any
  return PointerGetDatum(nullptr);
}

}  // namespace ratelimit_pg
