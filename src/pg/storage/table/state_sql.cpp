// State rows through SQL: the statements every call may need (a new key's
// insert, all shards of a limit, reset, cleanup, the status scan) and the
// read/lock/update steps when the state table is not as installed (see
// state_table.cpp), so that rules, row security or a changed column type
// are applied by PostgreSQL.
#include <cstring>

#include "storage/table/state_sql.h"

#include "storage/row_codec.h"
#include "storage/table/sql_plans.h"
#include "support/owner_code.h"
#include "support/catalog.h"
#include "support/clock.h"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

namespace ratelimit_pg {
namespace {

bool NullKey(const LimitId& id) { return id.key_text == nullptr; }

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

// Reads (value, ts, prev[, ctid], idle_at) starting at column `first` of
// row `row` of an SPI result.
StoredState StoredStateFromTuple(const SPITupleTable* rows, uint64 row, int first, bool with_tid) {
  HeapTuple tuple = rows->vals[row];
  TupleDesc desc = rows->tupdesc;
  bool isnull = false;
  bool prev_is_null = false;
  Datum value = SPI_getbinval(tuple, desc, first, &isnull);
  Datum ts = SPI_getbinval(tuple, desc, first + 1, &isnull);
  Datum prev = SPI_getbinval(tuple, desc, first + 2, &prev_is_null);
  StoredState out = StoredStateFromValues(value, ts, prev, prev_is_null, RowKindsTagged());
  bool idle_is_null = true;
  Datum idle_at = SPI_getbinval(tuple, desc, first + (with_tid ? 4 : 3), &idle_is_null);
  out.has_idle_at = !idle_is_null;
  if (!idle_is_null) out.idle_at = UnixFromTimestamptz(DatumGetTimestampTz(idle_at));
  if (with_tid)
    out.version = VersionOf(
        *reinterpret_cast<ItemPointer>(DatumGetPointer(SPI_getbinval(tuple, desc, first + 3, &isnull))));
  return out;
}

// The one row a read statement returned, or no row.
StoredState SingleRow(const LimitId& id) {
  if (SPI_processed > 1) RaiseDuplicateRows(id);
  StoredState out = NoStoredRow();
  if (SPI_processed == 1) out = StoredStateFromTuple(SPI_tuptable, 0, 1, true);
  SPI_freetuptable(SPI_tuptable);
  return out;
}

// Runs one of the single-row reads (two rows are fetched, to tell a
// duplicate from an inheritance child).
StoredState RunRead(const LimitId& id, Statement statement) {
  Datum values[3];
  char nulls[3];
  FillIdParams(id, id.shard, values, nulls);
  ExecuteStatement(statement, NullKey(id), values, nulls, SPI_OK_SELECT, 2);
  return SingleRow(id);
}

}  // namespace

// A row SKIP LOCKED passed over reads as busy: SQL cannot tell it from no
// row, so a second, unlocked read tells.
StoredState ReadStateSql(const LimitId& id, ReadMode mode) {
  if (mode == ReadMode::kUnlocked || mode == ReadMode::kUnlockedForWrite)
    return RunRead(id, Statement::kRead);
  if (mode == ReadMode::kLock) return RunRead(id, Statement::kLock);
  StoredState out = RunRead(id, Statement::kLockSkipLocked);
  if (!out.state.exists) out.busy = RunRead(id, Statement::kRead).state.exists;
  return out;
}

bool RowExistsLatestSql(const LimitId& id) {
  Datum values[3];
  char nulls[3];
  FillIdParams(id, id.shard, values, nulls);
  ExecuteStatementLatest(Statement::kRead, NullKey(id), values, nulls, SPI_OK_SELECT, 1);
  bool exists = SPI_processed > 0;
  SPI_freetuptable(SPI_tuptable);
  return exists;
}

void UpdateLockedSql(const LimitId& id, const RowWrite& row) {
  Datum values[7];
  char nulls[7];
  FillWriteParams(id, row, values, nulls);
  ExecuteStatement(Statement::kUpdateLocked, NullKey(id), values, nulls, SPI_OK_UPDATE, 0);
  if (SPI_processed > 1) RaiseDuplicateRows(id);
  if (SPI_processed != 1) RaiseWriteSkipped();
}

bool InsertStateSql(const LimitId& id, const RowWrite& row, bool on_conflict) {
  Datum values[7];
  char nulls[7];
  FillWriteParams(id, row, values, nulls);
  ExecuteStatement(on_conflict ? Statement::kInsert : Statement::kInsertPlain, NullKey(id), values, nulls,
                   SPI_OK_INSERT, 0);
  return SPI_processed == 1;
}

int ReadAllShardsSql(const LimitId& id, bool lock, int shards, StoredState* out) {
  for (int i = 0; i < shards; ++i) out[i] = NoStoredRow();
  Datum values[3];
  char nulls[3];
  FillIdParams(id, 0, values, nulls);
  ExecuteStatement(lock ? Statement::kLockAll : Statement::kReadAll, NullKey(id), values, nulls,
                   SPI_OK_SELECT, 0);
  int found = 0;
  for (uint64 row = 0; row < SPI_processed; ++row) {
    bool isnull = false;
    int shard = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1, &isnull));
    // Left over from a config with more shards, or (negative) written by
    // someone who replaced the shard CHECK: not one of this call's shards.
    if (shard < 0 || shard >= shards) continue;
    if (out[shard].state.exists) {
      LimitId shard_id = id;
      shard_id.shard = shard;
      RaiseDuplicateRows(shard_id);
    }
    out[shard] = StoredStateFromTuple(SPI_tuptable, row, 2, false);
    ++found;
  }
  SPI_freetuptable(SPI_tuptable);
  return found;
}

bool DeleteStatesSql(const LimitId& id) {
  Datum values[3];
  char nulls[3];
  FillIdParams(id, 0, values, nulls);
  ExecuteStatement(Statement::kRemove, NullKey(id), values, nulls, SPI_OK_DELETE, 0);
  return SPI_processed > 0;
}

int64 DeleteIdleStatesSql(Micros now) {
  Datum values[1] = {TimestampTzGetDatum(TimestamptzFromUnix(now))};
  char nulls[1] = {' '};
  ExecuteStatement(Statement::kCleanup, false, values, nulls, SPI_OK_DELETE, 0);
  return static_cast<int64>(SPI_processed);
}

// Every state row, in (name, key, shard) order. A cursor fetches a batch at
// a time, so a big table is never all in memory. Each batch is fetched in
// the SQL scope and handed to `sink` outside it, from a copy of SPI's
// result: the sink may run statements of its own (a config lookup), which
// then check their own safety as the caller's.
void ScanStatusRowsSql(StatusRowSink sink, void* context) {
  RequireOwnerCodeSafe(CMD_SELECT);
  const char* schema = QuotedSchema();
  char* sql = psprintf(
      "SELECT s.name, s.key, s.shard, s.value::pg_catalog.float8, s.ts::pg_catalog.timestamptz,"
      " s.prev::pg_catalog.float8, s.idle_at FROM %s.ratelimit_state s"
      " ORDER BY s.name, s.key NULLS FIRST, s.shard",
      schema);
  SqlScope scope = EnterSqlScope();
  Portal portal = SPI_cursor_open_with_args(nullptr, sql, 0, nullptr, nullptr, nullptr, true, 0);
  LeaveSqlScope(scope);
  // What one batch detoasts or copies is freed with it.
  MemoryContext batch =
      AllocSetContextCreate(CurrentMemoryContext, "ratelimit status batch", ALLOCSET_DEFAULT_SIZES);
  for (;;) {
    scope = EnterSqlScope();  // the rows are fetched in it: no caller code runs there
    SPI_cursor_fetch(portal, true, 1000);
    LeaveSqlScope(scope);
    SPITupleTable* rows = SPI_tuptable;
    uint64 count = SPI_processed;
    if (count == 0) break;
    MemoryContext outer = MemoryContextSwitchTo(batch);
    for (uint64 row = 0; row < count; ++row) {
      HeapTuple tuple = rows->vals[row];
      KeyedRow out{};
      bool isnull = false;
      out.id.name_text = DatumGetTextPP(SPI_getbinval(tuple, rows->tupdesc, 1, &isnull));
      out.id.name = VARDATA_ANY(out.id.name_text);
      out.id.name_len = VARSIZE_ANY_EXHDR(out.id.name_text);
      Datum key = SPI_getbinval(tuple, rows->tupdesc, 2, &isnull);
      if (!isnull) {
        out.id.key_text = DatumGetTextPP(key);
        out.id.key = VARDATA_ANY(out.id.key_text);
        out.id.key_len = VARSIZE_ANY_EXHDR(out.id.key_text);
      }
      out.id.shard = DatumGetInt16(SPI_getbinval(tuple, rows->tupdesc, 3, &isnull));
      out.stored = StoredStateFromTuple(rows, row, 4, false);
      sink(out, context);
    }
    MemoryContextSwitchTo(outer);
    MemoryContextReset(batch);
    SPI_freetuptable(rows);
  }
  MemoryContextDelete(batch);
  scope = EnterSqlScope();
  SPI_cursor_close(portal);
  LeaveSqlScope(scope);
  pfree(sql);
}

// The rows a config change locks, ordered by key and shard: of one key, or
// of every key of the name without an override. The rows' keys point into
// the SPI result, which is freed with the call's SPI memory (SPI_finish).
int LockRowsForChangeSql(text* name, text* key, KeyedRow** out) {
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
  RequireLookupSafe(OverrideTableOid);
  SqlScope scope = EnterSqlScope();
  int rc = SPI_execute_with_args(sql, key != nullptr ? 2 : 1, types, values, nullptr, false, 0);
  LeaveSqlScope(scope);
  if (rc != SPI_OK_SELECT)
    elog(ERROR, "ratelimit: locking state rows failed: %s", SPI_result_code_string(rc));
  int count = static_cast<int>(SPI_processed);
  auto* rows = static_cast<KeyedRow*>(palloc0(sizeof(KeyedRow) * (count + 1)));
  for (int i = 0; i < count; ++i) {
    HeapTuple tuple = SPI_tuptable->vals[i];
    KeyedRow& row = rows[i];
    bool isnull = false;
    SetIdText(name, "name", &row.id.name_text, &row.id.name, &row.id.name_len);
    Datum key_datum = SPI_getbinval(tuple, SPI_tuptable->tupdesc, 1, &isnull);
    if (!isnull) SetIdText(DatumGetTextPP(key_datum), "key", &row.id.key_text, &row.id.key, &row.id.key_len);
    row.id.shard = DatumGetInt32(SPI_getbinval(tuple, SPI_tuptable->tupdesc, 2, &isnull));
    row.stored = StoredStateFromTuple(SPI_tuptable, i, 3, false);
    // Rows come ordered by key and shard: one shard of a key twice is a
    // duplicate (only an inheritance child can hold one).
    if (i > 0 && row.id.shard == rows[i - 1].id.shard &&
        (row.id.key == nullptr) == (rows[i - 1].id.key == nullptr) &&
        (row.id.key == nullptr || (row.id.key_len == rows[i - 1].id.key_len &&
                                   std::memcmp(row.id.key, rows[i - 1].id.key, row.id.key_len) == 0)))
      RaiseDuplicateRows(row.id);
  }
  *out = rows;
  return count;
}

}  // namespace ratelimit_pg
