// The state and definition tables, through SPI plans prepared once per
// backend (SPI_prepare + SPI_keepplan). Every query is schema-qualified and
// parameterised; the schema is the one the called function lives in.
#include <cstring>

#include "pg_adapter.h"

extern "C" {
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

namespace ratelimit_pg {
namespace {

// Statements on the state table, prepared once per key variant (given / NULL).
enum StateStatement {
  kRead,
  kLock,
  kLockSkipLocked,
  kInsert,
  kMaterialize,
  kUpdateIfUnchanged,
  kUpdateLocked,
  kReadAll,
  kLockAll,
  kRemove,
  kStateStatementCount
};

enum OtherStatement {
  kDefinitionLookup,
  kDefinitionUpsert,
  kDefinitionDelete,
  kCleanup,
  kOtherStatementCount
};

// Parameters: $1 name, $2 key, $3 shard (or shard count), $4..$7 new state
// (value, ts, prev, idle_at), $8..$10 expected state (value, ts, prev).
// In the SQL templates {schema} is the quoted schema, {key_match} the key
// test, {key_value} the key value and {conflict} the conflict target of the
// key variant; {idle_*} write idle_at where the installed schema has it
// (0.1.0 does not: a newer library must work until ALTER EXTENSION UPDATE).
struct StatementSpec {
  int nargs;
  const char* sql;
};

const StatementSpec kStateSpecs[kStateStatementCount] = {
    {3,
     "SELECT value, ts, prev FROM {schema}.ratelimit_state WHERE name = $1 AND {key_match} AND shard = $3"},
    {3,
     "SELECT value, ts, prev FROM {schema}.ratelimit_state WHERE name = $1 AND {key_match} AND shard = $3 "
     "FOR UPDATE"},
    {3,
     "SELECT value, ts, prev FROM {schema}.ratelimit_state WHERE name = $1 AND {key_match} AND shard = $3"
     " FOR UPDATE SKIP LOCKED"},
    {7,
     "INSERT INTO {schema}.ratelimit_state (name, key, shard, value, ts, prev{idle_cols})"
     " VALUES ($1, {key_value}, $3, $4, $5, $6{idle_vals}) ON CONFLICT {conflict} DO NOTHING"},
    {7,
     "INSERT INTO {schema}.ratelimit_state (name, key, shard, value, ts, prev{idle_cols})"
     " SELECT $1, {key_value}, s::smallint, $4, $5, $6{idle_vals} FROM pg_catalog.generate_series(0, $3 - 1) "
     "AS s"
     " ORDER BY s ON CONFLICT {conflict} DO NOTHING"},
    {10,
     "UPDATE {schema}.ratelimit_state SET value = $4, ts = $5, prev = $6{idle_set}"
     " WHERE name = $1 AND {key_match} AND shard = $3"
     " AND value = $8 AND ts = $9 AND prev IS NOT DISTINCT FROM $10"},
    {7,
     "UPDATE {schema}.ratelimit_state SET value = $4, ts = $5, prev = $6{idle_set}"
     " WHERE name = $1 AND {key_match} AND shard = $3"},
    {2,
     "SELECT shard, value, ts, prev FROM {schema}.ratelimit_state WHERE name = $1 AND {key_match} ORDER BY "
     "shard"},
    {2,
     "SELECT shard, value, ts, prev FROM {schema}.ratelimit_state WHERE name = $1 AND {key_match} ORDER BY "
     "shard"
     " FOR UPDATE"},
    {2, "DELETE FROM {schema}.ratelimit_state WHERE name = $1 AND {key_match}"},
};

const StatementSpec kOtherSpecs[kOtherStatementCount] = {
    {1, "SELECT config FROM {schema}.ratelimit_definition WHERE name = $1"},
    {2,
     "INSERT INTO {schema}.ratelimit_definition (name, config) VALUES ($1, $2)"
     " ON CONFLICT (name) DO UPDATE SET config = EXCLUDED.config"},
    {1, "DELETE FROM {schema}.ratelimit_definition WHERE name = $1"},
    // Rows a caller holds are skipped; the ones taken are locked, so their
    // ctid is stable until the DELETE (which rechecks idle_at anyway).
    {1,
     "DELETE FROM {schema}.ratelimit_state WHERE ctid = ANY (ARRAY(SELECT ctid FROM {schema}.ratelimit_state"
     " WHERE idle_at <= $1 FOR UPDATE SKIP LOCKED)) AND idle_at <= $1"},
};

Oid kStateArgTypes[] = {TEXTOID,   TEXTOID,        INT2OID,   FLOAT8OID,      TIMESTAMPTZOID,
                        FLOAT8OID, TIMESTAMPTZOID, FLOAT8OID, TIMESTAMPTZOID, FLOAT8OID};
Oid kDefinitionArgTypes[] = {TEXTOID, JSONBOID};
Oid kCleanupArgTypes[] = {TIMESTAMPTZOID};

SPIPlanPtr state_plans[2][kStateStatementCount];  // [0]: key = $2, [1]: key IS NULL
SPIPlanPtr other_plans[kOtherStatementCount];
Oid prepared_namespace = InvalidOid;
char prepared_schema[NAMEDATALEN] = {0};
bool prepared_has_idle_at = false;
// Cleared by relcache invalidations (e.g. ALTER EXTENSION UPDATE adding a
// column), so the next call rechecks which columns the state table has.
bool schema_checked = false;

void OnRelcacheInvalidation(Datum arg, Oid relid) {
  (void)arg;
  (void)relid;
  schema_checked = false;
}

// Whether the installed state table has idle_at (0.2.0 and later).
bool StateTableHasIdleAt(Oid extension_namespace) {
  Oid relid = get_relname_relid("ratelimit_state", extension_namespace);
  if (!OidIsValid(relid)) elog(ERROR, "ratelimit: table ratelimit_state not found");
  return get_attnum(relid, "idle_at") != InvalidAttrNumber;
}

// The values of a template's placeholders for one schema and key variant.
struct TemplateValues {
  const char* schema;
  bool null_key;
  bool has_idle_at;
};

// Expands a statement template's {placeholders}.
char* ExpandTemplate(const char* sql, const TemplateValues& v) {
  const char* names[] = {"{schema}",    "{key_match}", "{key_value}", "{conflict}",
                         "{idle_cols}", "{idle_vals}", "{idle_set}"};
  const char* values[] = {v.schema,
                          v.null_key ? "key IS NULL" : "key = $2",
                          v.null_key ? "NULL" : "$2",
                          v.null_key ? "(name, shard) WHERE key IS NULL" : "(name, key, shard)",
                          v.has_idle_at ? ", idle_at" : "",
                          v.has_idle_at ? ", $7" : "",
                          v.has_idle_at ? ", idle_at = $7" : ""};
  StringInfoData buf;
  initStringInfo(&buf);
  while (*sql != '\0') {
    int found = -1;
    for (int i = 0; i < 7 && found < 0; ++i)
      if (std::strncmp(sql, names[i], std::strlen(names[i])) == 0) found = i;
    if (found < 0) {
      appendStringInfoChar(&buf, *sql++);
      continue;
    }
    appendStringInfoString(&buf, values[found]);
    sql += std::strlen(names[found]);
  }
  return buf.data;
}

// Prepares one statement from its template and keeps it for the backend's life.
SPIPlanPtr KeepPlan(const StatementSpec& spec, Oid* argtypes, const TemplateValues& values) {
  char* sql = ExpandTemplate(spec.sql, values);
  SPIPlanPtr plan = SPI_prepare(sql, spec.nargs, argtypes);
  if (plan == nullptr) elog(ERROR, "ratelimit: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
  if (SPI_keepplan(plan) != 0) elog(ERROR, "ratelimit: SPI_keepplan failed");
  pfree(sql);
  return plan;
}

// Frees every kept plan (before re-preparing for another schema).
void FreePlans() {
  for (auto& variant : state_plans)
    for (SPIPlanPtr& plan : variant) {
      if (plan != nullptr) SPI_freeplan(plan);
      plan = nullptr;
    }
  for (SPIPlanPtr& plan : other_plans) {
    if (plan != nullptr) SPI_freeplan(plan);
    plan = nullptr;
  }
}

SPIPlanPtr StatePlan(const LimitId& id, StateStatement statement) {
  return state_plans[id.key == nullptr ? 1 : 0][statement];
}

// Fills $1..$3 (name, key, shard).
void FillIdParams(const LimitId& id, int shard, Datum* values, char* nulls) {
  values[0] = PointerGetDatum(id.name_text);
  nulls[0] = ' ';
  values[1] = id.key_text ? PointerGetDatum(id.key_text) : 0;
  nulls[1] = id.key_text ? ' ' : 'n';
  values[2] = Int16GetDatum(static_cast<int16>(shard));
  nulls[2] = ' ';
}

// Fills value, ts and prev parameters from a state.
void FillStateParams(const LimitState& state, bool prev_is_null, Datum* values, char* nulls) {
  values[0] = Float8GetDatum(state.value);
  values[1] = TimestampTzGetDatum(TimestamptzFromUnix(state.ts));
  values[2] = prev_is_null ? 0 : Float8GetDatum(state.prev);
  nulls[0] = nulls[1] = ' ';
  nulls[2] = prev_is_null ? 'n' : ' ';
}

// Fills $1..$7: the row's identity and the state to write.
void FillWriteParams(const LimitId& id, const RowWrite& row, Datum* values, char* nulls) {
  FillIdParams(id, id.shard, values, nulls);
  FillStateParams(row.next, !row.keep_prev, values + 3, nulls + 3);
  values[6] = TimestampTzGetDatum(TimestamptzFromUnix(row.idle_at));
  nulls[6] = ' ';
}

// Runs a kept plan and checks SPI's return code.
void Execute(SPIPlanPtr plan, Datum* values, char* nulls, int expected, long limit) {
  int rc = SPI_execute_plan(plan, values, nulls, false, limit);
  if (rc != expected) elog(ERROR, "ratelimit: SPI_execute_plan failed: %s", SPI_result_code_string(rc));
}

// Reads (value, ts, prev) starting at column `first` of result row `row`.
StoredState StoredStateFromRow(uint64 row, int first) {
  HeapTuple tuple = SPI_tuptable->vals[row];
  TupleDesc desc = SPI_tuptable->tupdesc;
  bool isnull = false;
  StoredState out{};
  out.state.exists = true;
  out.state.value = DatumGetFloat8(SPI_getbinval(tuple, desc, first, &isnull));
  out.state.ts = UnixFromTimestamptz(DatumGetTimestampTz(SPI_getbinval(tuple, desc, first + 1, &isnull)));
  Datum prev = SPI_getbinval(tuple, desc, first + 2, &out.prev_is_null);
  out.state.prev = out.prev_is_null ? 0 : DatumGetFloat8(prev);
  return out;
}

}  // namespace

void RegisterStorageInvalidation() { CacheRegisterRelcacheCallback(OnRelcacheInvalidation, 0); }

void PrepareStorage(Oid extension_namespace) {
  const char* schema = get_namespace_name(extension_namespace);
  if (schema == nullptr) elog(ERROR, "ratelimit: schema %u not found", extension_namespace);
  bool same_schema = extension_namespace == prepared_namespace && std::strcmp(schema, prepared_schema) == 0;
  if (same_schema && schema_checked) return;
  bool has_idle_at = StateTableHasIdleAt(extension_namespace);
  schema_checked = true;
  if (same_schema && has_idle_at == prepared_has_idle_at) return;
  prepared_namespace = InvalidOid;
  FreePlans();
  TemplateValues values{quote_identifier(schema), false, has_idle_at};
  for (int variant = 0; variant < 2; ++variant) {
    values.null_key = variant == 1;
    for (int s = 0; s < kStateStatementCount; ++s)
      state_plans[variant][s] = KeepPlan(kStateSpecs[s], kStateArgTypes, values);
  }
  values.null_key = false;
  for (int s = 0; s < kCleanup; ++s) other_plans[s] = KeepPlan(kOtherSpecs[s], kDefinitionArgTypes, values);
  if (has_idle_at) other_plans[kCleanup] = KeepPlan(kOtherSpecs[kCleanup], kCleanupArgTypes, values);
  strlcpy(prepared_schema, schema, sizeof prepared_schema);
  prepared_has_idle_at = has_idle_at;
  prepared_namespace = extension_namespace;
}

StoredState ReadState(const LimitId& id, ReadMode mode) {
  Datum values[3];
  char nulls[3];
  FillIdParams(id, id.shard, values, nulls);
  StateStatement statement = mode == ReadMode::kLock             ? kLock
                             : mode == ReadMode::kLockSkipLocked ? kLockSkipLocked
                                                                 : kRead;
  Execute(StatePlan(id, statement), values, nulls, SPI_OK_SELECT, 1);
  StoredState out{};
  out.prev_is_null = true;
  if (SPI_processed == 1) out = StoredStateFromRow(0, 1);
  SPI_freetuptable(SPI_tuptable);
  return out;
}

int ReadAllShards(const LimitId& id, bool lock, int shards, ratelimit::ShardInput* out) {
  for (int i = 0; i < shards; ++i) out[i] = ratelimit::ShardInput{i, LimitState{}};
  Datum values[3];
  char nulls[3];
  FillIdParams(id, 0, values, nulls);
  Execute(StatePlan(id, lock ? kLockAll : kReadAll), values, nulls, SPI_OK_SELECT, 0);
  int found = 0;
  for (uint64 row = 0; row < SPI_processed; ++row) {
    bool isnull = false;
    int shard = DatumGetInt16(SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1, &isnull));
    if (shard >= shards) continue;  // left over from a config with more shards
    out[shard].state = StoredStateFromRow(row, 2).state;
    ++found;
  }
  SPI_freetuptable(SPI_tuptable);
  return found;
}

bool InsertState(const LimitId& id, const RowWrite& row) {
  Datum values[7];
  char nulls[7];
  FillWriteParams(id, row, values, nulls);
  Execute(StatePlan(id, kInsert), values, nulls, SPI_OK_INSERT, 0);
  return SPI_processed == 1;
}

void MaterializeShards(const LimitId& id, int shards, const RowWrite& initial) {
  Datum values[7];
  char nulls[7];
  FillWriteParams(id, initial, values, nulls);
  values[2] = Int16GetDatum(static_cast<int16>(shards));
  Execute(StatePlan(id, kMaterialize), values, nulls, SPI_OK_INSERT, 0);
}

bool UpdateStateIfUnchanged(const LimitId& id, const StoredState& expected, const RowWrite& row) {
  Datum values[10];
  char nulls[10];
  FillWriteParams(id, row, values, nulls);
  FillStateParams(expected.state, expected.prev_is_null, values + 7, nulls + 7);
  Execute(StatePlan(id, kUpdateIfUnchanged), values, nulls, SPI_OK_UPDATE, 0);
  return SPI_processed == 1;
}

void UpdateLockedState(const LimitId& id, const RowWrite& row) {
  Datum values[7];
  char nulls[7];
  FillWriteParams(id, row, values, nulls);
  Execute(StatePlan(id, kUpdateLocked), values, nulls, SPI_OK_UPDATE, 0);
  if (SPI_processed != 1) elog(ERROR, "ratelimit: a locked state row vanished");
}

bool DeleteStates(const LimitId& id) {
  Datum values[3];
  char nulls[3];
  FillIdParams(id, 0, values, nulls);
  Execute(StatePlan(id, kRemove), values, nulls, SPI_OK_DELETE, 0);
  return SPI_processed > 0;
}

int64 DeleteIdleStates(Micros now) {
  if (other_plans[kCleanup] == nullptr) elog(ERROR, "ratelimit: run ALTER EXTENSION ratelimit UPDATE first");
  Datum values[1] = {TimestampTzGetDatum(TimestamptzFromUnix(now))};
  char nulls[1] = {' '};
  Execute(other_plans[kCleanup], values, nulls, SPI_OK_DELETE, 0);
  return static_cast<int64>(SPI_processed);
}

bool LookupDefinedConfig(text* name, LimitConfig* config) {
  Datum values[1] = {PointerGetDatum(name)};
  char nulls[1] = {' '};
  Execute(other_plans[kDefinitionLookup], values, nulls, SPI_OK_SELECT, 1);
  if (SPI_processed == 0) return false;
  bool isnull = false;
  Datum stored = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  ParseConfigJsonb(DatumGetJsonbP(stored), config);
  return true;
}

void UpsertDefinition(text* name, Jsonb* config) {
  Datum values[2] = {PointerGetDatum(name), JsonbPGetDatum(config)};
  char nulls[2] = {' ', ' '};
  Execute(other_plans[kDefinitionUpsert], values, nulls, SPI_OK_INSERT, 0);
}

bool DeleteDefinition(text* name) {
  Datum values[1] = {PointerGetDatum(name)};
  char nulls[1] = {' '};
  Execute(other_plans[kDefinitionDelete], values, nulls, SPI_OK_DELETE, 0);
  return SPI_processed > 0;
}

}  // namespace ratelimit_pg
