// The state and definition tables, through SPI plans prepared once per
// backend (SPI_prepare + SPI_keepplan). Every query is schema-qualified and
// parameterised; the schema is the one the called function lives in.
#include <cstring>

#include "pg_adapter.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

namespace ratelimit_pg {
namespace {

// The statements on the state table, for one key variant (given or NULL).
struct StatePlans {
  SPIPlanPtr read;
  SPIPlanPtr lock;
  SPIPlanPtr insert;
  SPIPlanPtr update;
  SPIPlanPtr remove;
};

struct Plans {
  StatePlans keyed;      // key = $2
  StatePlans null_key;   // key IS NULL ($2 unused)
  SPIPlanPtr definition_lookup;
  SPIPlanPtr definition_upsert;
  SPIPlanPtr definition_delete;
};

Plans plans;
Oid prepared_namespace = InvalidOid;
char prepared_schema[NAMEDATALEN] = {0};

// Parameter types: $1 name, $2 key, $3 shard, $4..$6 new state, $7..$9 expected state.
Oid kStateArgTypes[] = {TEXTOID,   TEXTOID,   INT2OID,        FLOAT8OID, TIMESTAMPTZOID,
                        FLOAT8OID, FLOAT8OID, TIMESTAMPTZOID, FLOAT8OID};
Oid kDefinitionArgTypes[] = {TEXTOID, JSONBOID};

// Prepares one statement and keeps it for the life of the backend.
SPIPlanPtr KeepPlan(const char* sql, int nargs, Oid* argtypes) {
  SPIPlanPtr plan = SPI_prepare(sql, nargs, argtypes);
  if (plan == nullptr) elog(ERROR, "ratelimit: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
  if (SPI_keepplan(plan) != 0) elog(ERROR, "ratelimit: SPI_keepplan failed");
  return plan;
}

// Formats a statement with the quoted schema and prepares it.
SPIPlanPtr PrepareFormatted(const char* schema, int nargs, Oid* argtypes, const char* format,
                            const char* arg1 = "", const char* arg2 = "") {
  char sql[1024];
  int len = snprintf(sql, sizeof sql, format, schema, arg1, arg2);
  if (len < 0 || static_cast<size_t>(len) >= sizeof sql) elog(ERROR, "ratelimit: statement too long");
  return KeepPlan(sql, nargs, argtypes);
}

// Prepares the state statements for one key variant.
StatePlans PrepareStatePlans(const char* schema, bool null_key) {
  const char* key_match = null_key ? "key IS NULL" : "key = $2";
  const char* key_value = null_key ? "NULL" : "$2";
  const char* conflict = null_key ? "(name, shard) WHERE key IS NULL" : "(name, key, shard)";
  StatePlans p;
  p.read = PrepareFormatted(schema, 3, kStateArgTypes,
                            "SELECT value, ts, prev FROM %s.ratelimit_state"
                            " WHERE name = $1 AND %s AND shard = $3",
                            key_match);
  p.lock = PrepareFormatted(schema, 3, kStateArgTypes,
                            "SELECT value, ts, prev FROM %s.ratelimit_state"
                            " WHERE name = $1 AND %s AND shard = $3 FOR UPDATE",
                            key_match);
  p.insert = PrepareFormatted(schema, 6, kStateArgTypes,
                              "INSERT INTO %s.ratelimit_state (name, key, shard, value, ts, prev)"
                              " VALUES ($1, %s, $3, $4, $5, $6) ON CONFLICT %s DO NOTHING",
                              key_value, conflict);
  p.update = PrepareFormatted(schema, 9, kStateArgTypes,
                              "UPDATE %s.ratelimit_state SET value = $4, ts = $5, prev = $6"
                              " WHERE name = $1 AND %s AND shard = $3"
                              " AND value = $7 AND ts = $8 AND prev IS NOT DISTINCT FROM $9",
                              key_match);
  p.remove = PrepareFormatted(schema, 2, kStateArgTypes, "DELETE FROM %s.ratelimit_state WHERE name = $1 AND %s",
                              key_match);
  return p;
}

// Frees every kept plan (before re-preparing for another schema).
void FreePlans() {
  SPIPlanPtr* all[] = {&plans.keyed.read,        &plans.keyed.lock,          &plans.keyed.insert,
                       &plans.keyed.update,      &plans.keyed.remove,        &plans.null_key.read,
                       &plans.null_key.lock,     &plans.null_key.insert,     &plans.null_key.update,
                       &plans.null_key.remove,   &plans.definition_lookup,   &plans.definition_upsert,
                       &plans.definition_delete};
  for (SPIPlanPtr* plan : all) {
    if (*plan != nullptr) SPI_freeplan(*plan);
    *plan = nullptr;
  }
}

const StatePlans& PlansFor(const LimitId& id) { return id.key == nullptr ? plans.null_key : plans.keyed; }

// Fills $1..$3 (name, key, shard).
void FillIdParams(const LimitId& id, Datum* values, char* nulls) {
  values[0] = PointerGetDatum(id.name_text);
  nulls[0] = ' ';
  values[1] = id.key_text ? PointerGetDatum(id.key_text) : 0;
  nulls[1] = id.key_text ? ' ' : 'n';
  values[2] = Int16GetDatum(static_cast<int16>(id.shard));
  nulls[2] = ' ';
}

// Fills three parameters from a state (value, ts, prev).
void FillStateParams(const LimitState& state, bool prev_is_null, Datum* values, char* nulls) {
  values[0] = Float8GetDatum(state.value);
  values[1] = TimestampTzGetDatum(TimestamptzFromUnix(state.ts));
  values[2] = prev_is_null ? 0 : Float8GetDatum(state.prev);
  nulls[0] = nulls[1] = ' ';
  nulls[2] = prev_is_null ? 'n' : ' ';
}

// Runs a kept plan and checks SPI's return code.
void Execute(SPIPlanPtr plan, Datum* values, char* nulls, int expected, long limit) {
  int rc = SPI_execute_plan(plan, values, nulls, false, limit);
  if (rc != expected) elog(ERROR, "ratelimit: SPI_execute_plan failed: %s", SPI_result_code_string(rc));
}

}  // namespace

void PrepareStorage(Oid extension_namespace) {
  const char* schema = get_namespace_name(extension_namespace);
  if (schema == nullptr) elog(ERROR, "ratelimit: schema %u not found", extension_namespace);
  if (extension_namespace == prepared_namespace && std::strcmp(schema, prepared_schema) == 0) return;
  prepared_namespace = InvalidOid;
  FreePlans();
  const char* quoted = quote_identifier(schema);
  plans.keyed = PrepareStatePlans(quoted, false);
  plans.null_key = PrepareStatePlans(quoted, true);
  plans.definition_lookup = PrepareFormatted(quoted, 1, kDefinitionArgTypes,
                                             "SELECT config FROM %s.ratelimit_definition WHERE name = $1");
  plans.definition_upsert = PrepareFormatted(quoted, 2, kDefinitionArgTypes,
                                             "INSERT INTO %s.ratelimit_definition (name, config) VALUES ($1, $2)"
                                             " ON CONFLICT (name) DO UPDATE SET config = EXCLUDED.config");
  plans.definition_delete =
      PrepareFormatted(quoted, 1, kDefinitionArgTypes, "DELETE FROM %s.ratelimit_definition WHERE name = $1");
  strlcpy(prepared_schema, schema, sizeof prepared_schema);
  prepared_namespace = extension_namespace;
}

StoredState ReadState(const LimitId& id, bool lock) {
  Datum values[3];
  char nulls[3];
  FillIdParams(id, values, nulls);
  const StatePlans& p = PlansFor(id);
  Execute(lock ? p.lock : p.read, values, nulls, SPI_OK_SELECT, 1);
  StoredState out{};
  out.prev_is_null = true;
  if (SPI_processed == 0) return out;
  HeapTuple row = SPI_tuptable->vals[0];
  TupleDesc desc = SPI_tuptable->tupdesc;
  bool isnull = false;
  out.state.exists = true;
  out.state.value = DatumGetFloat8(SPI_getbinval(row, desc, 1, &isnull));
  out.state.ts = UnixFromTimestamptz(DatumGetTimestampTz(SPI_getbinval(row, desc, 2, &isnull)));
  Datum prev = SPI_getbinval(row, desc, 3, &out.prev_is_null);
  out.state.prev = out.prev_is_null ? 0 : DatumGetFloat8(prev);
  SPI_freetuptable(SPI_tuptable);
  return out;
}

bool InsertState(const LimitId& id, const LimitState& next, bool keep_prev) {
  Datum values[6];
  char nulls[6];
  FillIdParams(id, values, nulls);
  FillStateParams(next, !keep_prev, values + 3, nulls + 3);
  Execute(PlansFor(id).insert, values, nulls, SPI_OK_INSERT, 0);
  return SPI_processed == 1;
}

bool UpdateStateIfUnchanged(const LimitId& id, const StoredState& expected, const LimitState& next,
                            bool keep_prev) {
  Datum values[9];
  char nulls[9];
  FillIdParams(id, values, nulls);
  FillStateParams(next, !keep_prev, values + 3, nulls + 3);
  FillStateParams(expected.state, expected.prev_is_null, values + 6, nulls + 6);
  Execute(PlansFor(id).update, values, nulls, SPI_OK_UPDATE, 0);
  return SPI_processed == 1;
}

bool DeleteStates(const LimitId& id) {
  Datum values[3];
  char nulls[3];
  FillIdParams(id, values, nulls);
  Execute(PlansFor(id).remove, values, nulls, SPI_OK_DELETE, 0);
  return SPI_processed > 0;
}

bool LookupDefinedConfig(text* name, LimitConfig* config) {
  Datum values[1] = {PointerGetDatum(name)};
  char nulls[1] = {' '};
  Execute(plans.definition_lookup, values, nulls, SPI_OK_SELECT, 1);
  if (SPI_processed == 0) return false;
  bool isnull = false;
  Datum stored = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  ParseConfigJsonb(DatumGetJsonbP(stored), config);
  return true;
}

void UpsertDefinition(text* name, Jsonb* config) {
  Datum values[2] = {PointerGetDatum(name), JsonbPGetDatum(config)};
  char nulls[2] = {' ', ' '};
  Execute(plans.definition_upsert, values, nulls, SPI_OK_INSERT, 0);
}

bool DeleteDefinition(text* name) {
  Datum values[1] = {PointerGetDatum(name)};
  char nulls[1] = {' '};
  Execute(plans.definition_delete, values, nulls, SPI_OK_DELETE, 0);
  return SPI_processed > 0;
}

}  // namespace ratelimit_pg
