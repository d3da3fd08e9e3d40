// What a change of a limit's effective config (ratelimit_define,
// ratelimit_override, ratelimit_unoverride) does to its stored rows, in the
// changing transaction: the rows are locked (as SELECT ... FOR UPDATE, so
// callers holding them are waited for), then, key by key, reset (deleted)
// when the kind changes, or brought up to now under the old config and
// carried into the new one (the core's CarryRow: tokens stay, capped at the
// new capacity; a row past its idle_at is no row, as everywhere). A change
// of the shard count spreads the key's tokens evenly over the new shards.
#include <algorithm>
#include <cstring>

#include "config_changes.h"

#include "catalog.h"
#include "clock.h"
#include "limits_json.h"
#include "policy.h"
#include "row_codec.h"
#include "shards.h"
#include "sql_plans.h"
#include "state_table.h"
#include "table_storage.h"

extern "C" {
#include "catalog/pg_type.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
}

namespace ratelimit_pg {
namespace {

using ratelimit::ShardInput;

// The config one row of `config` holds (a shard's share when sharded).
LimitConfig RowConfig(const LimitConfig& config) {
  return config.shards > 1 ? ratelimit::ShardConfig(config) : config;
}

// The rows of one key, as locked.
struct KeyRows {
  LimitId id;  // shard 0
  int count;
  int shard[ratelimit::kMaxShards];
  StoredState stored[ratelimit::kMaxShards];
};

// Inserts a row holding `state`, settled under `to` (its idle time computed).
void InsertCarried(const LimitId& id, const LimitConfig& to, const LimitState& state, Micros now) {
  LimitConfig row = RowConfig(to);
  Micros origin = ratelimit::WindowOrigin(to, id.name, id.name_len, id.key, id.key_len);
  Decision settled = ratelimit::Refund(row, state, now, origin, 0);
  TableStorage().insert(id, TaggedRow(to, settled.next, settled.full_at));
}

// Whether the key's rows must be reset: one was written by another kind.
bool KindChanges(const KeyRows& rows, const LimitConfig* from, const LimitConfig& to) {
  if (from != nullptr && from->kind != to.kind) return true;
  for (int i = 0; i < rows.count; ++i)
    if (!StoredKindFits(rows.stored[i].kind, to.kind)) return true;
  return false;
}

// Same shard count: each row carried over on its own.
void CarryRows(const KeyRows& rows, const LimitConfig& from, const LimitConfig& to, Micros now) {
  const LimitId& id = rows.id;
  Micros from_origin = ratelimit::WindowOrigin(from, id.name, id.name_len, id.key, id.key_len);
  Micros to_origin = ratelimit::WindowOrigin(to, id.name, id.name_len, id.key, id.key_len);
  for (int i = 0; i < rows.count; ++i) {
    if (rows.shard[i] >= to.shards) continue;  // left over from more shards: never read
    ratelimit::StoredRow carried = ratelimit::CarryRow(RowConfig(from), from_origin, RowConfig(to), to_origin,
                                                       StateForKind(rows.stored[i], from.kind, now), now);
    LimitId shard_id = id;
    shard_id.shard = rows.shard[i];
    TableStorage().update_locked(shard_id, nullptr, TaggedRow(to, carried.state, carried.idle_at));
  }
}

// Another shard count: the key's tokens now (missing shards are full),
// spread evenly over the new shards, each capped at its capacity.
void SpreadRows(const KeyRows& rows, const LimitConfig& from, const LimitConfig& to, Micros now) {
  const LimitId& id = rows.id;
  auto* inputs = static_cast<ShardInput*>(palloc0(sizeof(ShardInput) * from.shards));
  for (int i = 0; i < from.shards; ++i) inputs[i].shard = i;
  Micros eff = now;
  for (int i = 0; i < rows.count; ++i) {
    if (rows.shard[i] >= from.shards) continue;
    inputs[rows.shard[i]].state = StateForKind(rows.stored[i], from.kind, now);  // an idle row is full
    if (inputs[rows.shard[i]].state.exists) eff = std::max(eff, rows.stored[i].state.ts);
  }
  Micros from_origin = ratelimit::WindowOrigin(from, id.name, id.name_len, id.key, id.key_len);
  Micros to_origin = ratelimit::WindowOrigin(to, id.name, id.name_len, id.key, id.key_len);
  double total = ratelimit::TotalValueAt(RowConfig(from), inputs, from.shards, now, from_origin).value;
  LimitConfig row = RowConfig(to);
  double level = std::min(total / to.shards, ratelimit::Capacity(row));
  TableStorage().delete_limit(id);
  if (level >= ratelimit::Capacity(row)) return;  // full: the same as no rows
  for (int shard = 0; shard < to.shards; ++shard) {
    LimitId shard_id = id;
    shard_id.shard = shard;
    InsertCarried(shard_id, to, ratelimit::StateWithTokens(row, to_origin, eff, level), now);
  }
  pfree(inputs);
}

void ApplyToKey(const KeyRows& rows, const LimitConfig* from, const LimitConfig& to, Micros now) {
  if (rows.count == 0) return;
  if (KindChanges(rows, from, to)) {
    TableStorage().delete_limit(rows.id);
  } else if (from == nullptr) {
    return;  // the config they were written under is not known: they stay (read within the new bounds)
  } else if (from->shards == to.shards) {
    CarryRows(rows, *from, to, now);
  } else {
    SpreadRows(rows, *from, to, now);
  }
}

// Locks and returns the rows to change, ordered by key and shard: of one
// key, or of every key of the name without an override.
SPITupleTable* LockRows(text* name, text* key, uint64* count) {
  const char* schema = QuotedSchema();
  const char* filter = key != nullptr ? " AND key = $2" : "";
  char* except = pstrdup("");
  if (key == nullptr && OidIsValid(OverrideTableOid()))
    except = psprintf(
        " AND NOT EXISTS (SELECT FROM %s.ratelimit_override o WHERE o.name = s.name AND o.key = s.key)",
        schema);
  char* sql = psprintf(
      "SELECT key, shard::pg_catalog.int4, value::pg_catalog.float8, ts::pg_catalog.timestamptz,"
      " prev::pg_catalog.float8, %s FROM %s.ratelimit_state s WHERE name = $1%s%s"
      " ORDER BY key NULLS FIRST, shard FOR UPDATE",
      StateHasIdleAt() ? "idle_at::pg_catalog.timestamptz" : "NULL::pg_catalog.timestamptz", schema, filter,
      except);
  Oid types[2] = {TEXTOID, TEXTOID};
  Datum values[2] = {PointerGetDatum(name), PointerGetDatum(key)};
  RequireOwnerCodeSafe(CMD_SELECT);
  RequireLookupSafe(OverrideTableOid());
  SqlScope scope = EnterSqlScope();
  int rc = SPI_execute_with_args(sql, key != nullptr ? 2 : 1, types, values, nullptr, false, 0);
  LeaveSqlScope(scope);
  if (rc != SPI_OK_SELECT)
    elog(ERROR, "ratelimit: locking state rows failed: %s", SPI_result_code_string(rc));
  *count = SPI_processed;
  return SPI_tuptable;
}

// Whether row `row` of `table` belongs to the key of `id` (NULL keys alike).
bool SameKey(const LimitId& id, text* key) {
  if ((key == nullptr) != (id.key_text == nullptr)) return false;
  if (key == nullptr) return true;
  return static_cast<int>(VARSIZE_ANY_EXHDR(key)) == id.key_len &&
         std::memcmp(VARDATA_ANY(key), id.key, id.key_len) == 0;
}

// Reads one locked row into the key's group.
void AddRow(SPITupleTable* table, uint64 row, KeyRows* rows) {
  HeapTuple tuple = table->vals[row];
  bool isnull = false;
  bool prev_is_null = false;
  int shard = DatumGetInt32(SPI_getbinval(tuple, table->tupdesc, 2, &isnull));
  Datum value = SPI_getbinval(tuple, table->tupdesc, 3, &isnull);
  Datum ts = SPI_getbinval(tuple, table->tupdesc, 4, &isnull);
  Datum prev = SPI_getbinval(tuple, table->tupdesc, 5, &prev_is_null);
  if (shard < 0 || shard >= ratelimit::kMaxShards) return;
  // Rows come ordered by shard: one shard twice is a duplicate (only an
  // inheritance child can hold one), which would also overrun the group.
  if (rows->count > 0 && rows->shard[rows->count - 1] == shard) {
    LimitId shard_id = rows->id;
    shard_id.shard = shard;
    RaiseDuplicateRows(shard_id);
  }
  StoredState stored = StoredStateFromValues(value, ts, prev, prev_is_null, RowKindsTagged());
  bool idle_is_null = true;
  Datum idle_at = SPI_getbinval(tuple, table->tupdesc, 6, &idle_is_null);
  stored.has_idle_at = !idle_is_null;
  if (!idle_is_null) stored.idle_at = UnixFromTimestamptz(DatumGetTimestampTz(idle_at));
  rows->shard[rows->count] = shard;
  rows->stored[rows->count] = stored;
  ++rows->count;
}

}  // namespace

void LockDefinitionChanges() { LockRelationOid(DefinitionTableOid(), ShareRowExclusiveLock); }

void LockOverrideChanges() {
  Oid table = OverrideTableOid();
  if (!OidIsValid(table)) elog(ERROR, "ratelimit: run ALTER EXTENSION ratelimit UPDATE first");
  LockRelationOid(table, ShareRowExclusiveLock);
}

void ApplyConfigChangeToTable(text* name, text* key, const LimitConfig* from, const LimitConfig* to) {
  if (to == nullptr || (from != nullptr && ratelimit::SameLimit(*from, *to))) return;
  uint64 count = 0;
  SPITupleTable* table = LockRows(name, key, &count);
  Micros now = ClockNow();
  auto* rows = static_cast<KeyRows*>(palloc0(sizeof(KeyRows)));
  for (uint64 row = 0; row < count; ++row) {
    bool isnull = false;
    Datum key_datum = SPI_getbinval(table->vals[row], table->tupdesc, 1, &isnull);
    text* row_key = isnull ? nullptr : DatumGetTextPP(key_datum);
    if (rows->count > 0 && !SameKey(rows->id, row_key)) {
      ApplyToKey(*rows, from, *to, now);
      rows->count = 0;
    }
    if (rows->count == 0) {
      rows->id = LimitId{};
      SetIdText(name, "name", &rows->id.name_text, &rows->id.name, &rows->id.name_len);
      if (row_key != nullptr) SetIdText(row_key, "key", &rows->id.key_text, &rows->id.key, &rows->id.key_len);
    }
    AddRow(table, row, rows);
  }
  ApplyToKey(*rows, from, *to, now);
  SPI_freetuptable(table);
  pfree(rows);
}

}  // namespace ratelimit_pg
