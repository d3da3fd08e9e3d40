// The SQL-callable functions: thin C-linkage wrappers that read arguments,
// connect SPI, hand the work to consume.cpp/storage.cpp and form results.
#include <cstring>
#include <exception>
#include <initializer_list>

#include "pg_adapter.h"
#include "policy.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "commands/trigger.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "tcop/utility.h"
}

#include "compat.h"

extern "C" {
PG_MODULE_MAGIC;

void _PG_init(void);
PG_FUNCTION_INFO_V1(ratelimit_limit);
PG_FUNCTION_INFO_V1(ratelimit_limit_invoker);
PG_FUNCTION_INFO_V1(ratelimit_check);
PG_FUNCTION_INFO_V1(ratelimit_check_invoker);
PG_FUNCTION_INFO_V1(ratelimit_reset);
PG_FUNCTION_INFO_V1(ratelimit_reset_invoker);
PG_FUNCTION_INFO_V1(ratelimit_value);
PG_FUNCTION_INFO_V1(ratelimit_value_invoker);
PG_FUNCTION_INFO_V1(ratelimit_define);
PG_FUNCTION_INFO_V1(ratelimit_define_invoker);
PG_FUNCTION_INFO_V1(ratelimit_undefine);
PG_FUNCTION_INFO_V1(ratelimit_undefine_invoker);
PG_FUNCTION_INFO_V1(ratelimit_limit_all);
PG_FUNCTION_INFO_V1(ratelimit_limit_all_invoker);
PG_FUNCTION_INFO_V1(ratelimit_refund);
PG_FUNCTION_INFO_V1(ratelimit_refund_invoker);
PG_FUNCTION_INFO_V1(ratelimit_cleanup);
PG_FUNCTION_INFO_V1(ratelimit_cleanup_invoker);
PG_FUNCTION_INFO_V1(ratelimit_headers);
PG_FUNCTION_INFO_V1(ratelimit_headers_invoker);
PG_FUNCTION_INFO_V1(ratelimit_status_rows);
PG_FUNCTION_INFO_V1(ratelimit_status_rows_invoker);
PG_FUNCTION_INFO_V1(ratelimit_definitions_changed);
PG_FUNCTION_INFO_V1(ratelimit_override);
PG_FUNCTION_INFO_V1(ratelimit_unoverride);
PG_FUNCTION_INFO_V1(ratelimit_stats_rows);
PG_FUNCTION_INFO_V1(ratelimit_stats_reset);
PG_FUNCTION_INFO_V1(ratelimit_headers_keyed);
}

namespace ratelimit_pg {
namespace {

// Raises 22004 for a NULL argument that must not be NULL.
void RequireNotNull(FunctionCallInfo fcinfo, int arg, const char* what) {
  if (PG_ARGISNULL(arg))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not be null", what)));
}

// The (name, key) identity from two arguments; a NULL key is the global
// limit. key_arg < 0: the function has no key argument.
LimitId IdFromArgs(FunctionCallInfo fcinfo, int name_arg, int key_arg) {
  LimitId id{};
  RequireNotNull(fcinfo, name_arg, "name");
  SetIdText(PG_GETARG_TEXT_PP(name_arg), "name", &id.name_text, &id.name, &id.name_len);
  if (key_arg >= 0 && !PG_ARGISNULL(key_arg))
    SetIdText(PG_GETARG_TEXT_PP(key_arg), "key", &id.key_text, &id.key, &id.key_len);
  return id;
}

// What a call needs of the called function, from pg_proc: its schema (the
// extension's) and its owner (whom the SQL it runs runs as). Remembered per
// backend until pg_proc changes.
struct FunctionFacts {
  Oid function;
  Oid namespace_oid;
  Oid owner;
};

constexpr int kFunctionFactSlots = 16;  // direct-mapped by oid
FunctionFacts function_facts[kFunctionFactSlots];

void OnFunctionInvalidation(Datum arg, int cacheid, uint32 hashvalue) {
  (void)arg;
  (void)cacheid;
  (void)hashvalue;
  for (FunctionFacts& facts : function_facts) facts.function = InvalidOid;
}

const FunctionFacts& FactsOf(Oid function) {
  FunctionFacts& slot = function_facts[function % kFunctionFactSlots];
  if (slot.function == function) return slot;
  slot.function = InvalidOid;
  HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(function));
  if (!HeapTupleIsValid(tuple)) elog(ERROR, "ratelimit: function %u not found", function);
  auto* proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tuple));
  slot.namespace_oid = proc->pronamespace;
  slot.owner = proc->proowner;
  ReleaseSysCache(tuple);
  slot.function = function;
  return slot;
}

// Connects SPI for one call and sets up its storage: the schema is the
// called function's (the extension's), its SQL runs as the function's
// owner. Returns the previous SQL role, which DisconnectStorage restores.
//
// The SPI memory rule: SPI_connect switches to SPI's procedure context and
// SPI_finish frees it, so everything allocated in between (the call's
// temporary memory, its executor state, SPI results) goes with it.
// Whatever must outlive SPI_finish (a result to return, an array the rows
// are formed from afterwards) is allocated before ConnectStorage, or with
// SPI_palloc.
Oid ConnectStorage(FunctionCallInfo fcinfo) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ratelimit: SPI_connect failed");
  const FunctionFacts& facts = FactsOf(fcinfo->flinfo->fn_oid);
  return BeginStorageCall(facts.namespace_oid, facts.owner);
}

void DisconnectStorage(Oid previous_sql_role) {
  EndStorageCall(previous_sql_role);
  if (SPI_finish() != SPI_OK_FINISH) elog(ERROR, "ratelimit: SPI_finish failed");
}

// Reads (name, key, config, count, reserve) from the arguments starting at
// `first`; count and reserve may be absent (argument index < 0).
LimitCall LimitCallFromArgs(FunctionCallInfo fcinfo, int name, int key, int config, int count, int reserve) {
  LimitCall call{};
  call.id = IdFromArgs(fcinfo, name, key);
  call.inline_config = PG_ARGISNULL(config) ? nullptr : PG_GETARG_JSONB_P(config);
  call.request = Request{1, false};
  if (count >= 0) {
    RequireNotNull(fcinfo, count, "count");
    call.request.count = PG_GETARG_FLOAT8(count) + 0.0;  // + 0.0 turns -0 into 0
  }
  if (reserve >= 0) {
    RequireNotNull(fcinfo, reserve, "reserve");
    call.request.reserve = PG_GETARG_BOOL(reserve);
  }
  return call;
}

// The five fields of a ratelimit_result (ok, retry_after, retry_at,
// remaining, reset_after), as every function returning a decision shows it.
void EncodeDecision(const Decision& decision, Datum* values, bool* nulls) {
  values[0] = BoolGetDatum(decision.ok);
  values[1] = Float8GetDatum(decision.retry_after);
  values[2] = TimestampTzGetDatum(TimestamptzFromUnix(decision.retry_at));
  values[3] = Float8GetDatum(decision.remaining + 0.0);
  values[4] = Float8GetDatum(decision.reset_after);
  nulls[0] = nulls[3] = nulls[4] = false;
  nulls[1] = nulls[2] = !decision.has_retry;
}

// Forms a ratelimit_result from a decision.
Datum ResultDatum(TupleDesc desc, const Decision& decision) {
  Datum values[5];
  bool nulls[5];
  EncodeDecision(decision, values, nulls);
  return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}

TupleDesc ResultDesc(FunctionCallInfo fcinfo) {
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "ratelimit: return type must be a row type");
  return BlessTupleDesc(desc);
}

// A function that writes refuses to run in a read-only transaction (and on
// a standby) with 25006, as SQL's INSERT/UPDATE would: the direct write
// path bypasses the executor's own check.
void RequireWritable(const char* function) { PreventCommandIfReadOnly(function); }

// ratelimit_limit and ratelimit_check share everything but the write.
Datum LimitOrCheck(FunctionCallInfo fcinfo, bool consume) {
  if (consume) RequireWritable("ratelimit_limit()");
  LimitCall call = LimitCallFromArgs(fcinfo, 0, 1, 2, 3, 4);
  RequireNotNull(fcinfo, 5, "throws");
  bool throws = PG_GETARG_BOOL(5);
  Oid previous_sql_role = ConnectStorage(fcinfo);
  CompleteLimitCall(&call);
  Decision decision = consume ? Consume(&call) : Check(call);
  DisconnectStorage(previous_sql_role);
  bool shadow_refused = !decision.ok && call.config.shadow;
  if (shadow_refused) decision = ratelimit::ShadowGrant(decision);
  if (consume) CountDecision(call, decision, shadow_refused);
  if (!decision.ok && throws) RaiseRateLimited(call, decision);
  return ResultDatum(ResultDesc(fcinfo), decision);
}

// Computes ratelimit_value's single row as a heap tuple in `cxt`.
Datum ValueRow(FunctionCallInfo fcinfo, MemoryContext cxt) {
  LimitCall call = LimitCallFromArgs(fcinfo, 0, 1, 2, -1, -1);
  call.request.count = 0;  // reading takes nothing: any valid config can be read
  Oid previous_sql_role = ConnectStorage(fcinfo);
  CompleteLimitCall(&call);
  ratelimit::Reading reading = CurrentValue(call);
  DisconnectStorage(previous_sql_role);
  MemoryContext old = MemoryContextSwitchTo(cxt);
  Datum values[2] = {Float8GetDatum(reading.value + 0.0),
                     TimestampTzGetDatum(TimestamptzFromUnix(reading.ts))};
  bool nulls[2] = {false, false};
  Datum row = HeapTupleGetDatum(heap_form_tuple(ResultDesc(fcinfo), values, nulls));
  MemoryContextSwitchTo(old);
  return row;
}

// A tuplestore for a materialized set-returning function's rows.
Tuplestorestate* MaterializedResult(FunctionCallInfo fcinfo, TupleDesc* desc) {
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  if (rsinfo == nullptr || !IsA(rsinfo, ReturnSetInfo) || (rsinfo->allowedModes & SFRM_Materialize) == 0)
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("set-valued function called in context that cannot accept a set")));
  MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
  if (get_call_result_type(fcinfo, nullptr, desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "ratelimit: return type must be a row type");
  *desc = CreateTupleDescCopy(*desc);
  Tuplestorestate* store = tuplestore_begin_heap(true, false, work_mem);
  rsinfo->returnMode = SFRM_Materialize;
  rsinfo->setResult = store;
  rsinfo->setDesc = *desc;
  MemoryContextSwitchTo(old);
  return store;
}

// Adds one (name, key, ok, retry_after, retry_at, remaining, reset_after) row.
void PutEntryRow(Tuplestorestate* store, TupleDesc desc, const LimitId& id, const Decision& decision) {
  Datum values[7];
  bool nulls[7];
  values[0] = PointerGetDatum(id.name_text);
  values[1] = PointerGetDatum(id.key_text);
  nulls[0] = false;
  nulls[1] = id.key_text == nullptr;
  EncodeDecision(decision, values + 2, nulls + 2);
  tuplestore_putvalues(store, desc, values, nulls);
}

// ---- ratelimit_headers and ratelimit_status ------------------------------

// A ratelimit_result field that must not be NULL (22004 naming it).
Datum RequiredResultField(HeapTupleHeader result, int attnum, const char* name) {
  bool isnull = false;
  Datum value = GetAttributeByNum(result, attnum, &isnull);
  if (isnull)
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("result.%s must not be null", name)));
  return value;
}

// The answer a ratelimit_result row carries: ok, remaining and reset_after
// are required; retry_after (and retry_at) are NULL unless there is a retry.
ratelimit::HeaderAnswer AnswerFromResult(HeapTupleHeader result) {
  ratelimit::HeaderAnswer answer;
  answer.ok = DatumGetBool(RequiredResultField(result, 1, "ok"));
  answer.remaining = DatumGetFloat8(RequiredResultField(result, 4, "remaining"));
  answer.reset_after = DatumGetFloat8(RequiredResultField(result, 5, "reset_after"));
  bool isnull = false;
  Datum retry_after = GetAttributeByNum(result, 2, &isnull);
  answer.has_retry = !isnull;
  if (!isnull) answer.retry_after = DatumGetFloat8(retry_after);
  Datum retry_at = GetAttributeByNum(result, 3, &isnull);
  TimestampTz at = isnull ? 0 : DatumGetTimestampTz(retry_at);
  answer.has_retry_at = answer.has_retry && !isnull && TimestamptzSupported(at);
  if (answer.has_retry_at) answer.retry_at = UnixFromTimestamptz(at);
  if (!ratelimit::HeaderAnswerFinite(answer))
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("result has a non-finite number"),
                    errdetail("remaining, reset_after and retry_after must be finite.")));
  return answer;
}

// What ratelimit_status shows of one row: its kind and value now under the
// key's override, else the limit's defined config (NULL for a limit called
// with inline configs only).
struct StatusContext {
  Tuplestorestate* store;
  TupleDesc desc;
  Micros now;
  Datum kind_names[3];  // by Kind, made once per scan
};

void PutStatusRow(const StatusRow& row, void* context) {
  auto* status = static_cast<StatusContext*>(context);
  Datum values[8];
  bool nulls[8] = {false, row.id.key_text == nullptr, false, true, true, false, false, !row.has_idle_at};
  values[0] = PointerGetDatum(row.id.name_text);
  values[1] = PointerGetDatum(row.id.key_text);
  values[2] = Int16GetDatum(static_cast<int16>(row.id.shard));
  if (row.config != nullptr) {
    LimitConfig parsed;
    InlineConfig(row.config, &parsed);
    // The owner's config, as calls apply it (ResolveConfig).
    LimitConfig config = ratelimit::OwnerBounded(parsed);
    LimitConfig per_row = config.shards > 1 ? ratelimit::ShardConfig(config) : config;
    Micros origin = ratelimit::WindowOrigin(config, row.id.name, row.id.name_len, row.id.key, row.id.key_len);
    values[3] = status->kind_names[static_cast<int>(config.kind)];
    LimitState state =
        ratelimit::WithinMaxDeficit(per_row, StateForKind(row.stored, config.kind, status->now));
    values[4] = Float8GetDatum(ratelimit::ValueAt(per_row, state, status->now, origin).value + 0.0);
    nulls[3] = nulls[4] = false;
  }
  values[5] = TimestampTzGetDatum(TimestamptzFromUnix(row.stored.state.ts));
  values[6] = Float8GetDatum(row.stored.state.value);
  values[7] = TimestampTzGetDatum(TimestamptzFromUnix(row.idle_at));
  tuplestore_putvalues(status->store, status->desc, values, nulls);
}

// ---- entry point bodies ---------------------------------------------------

Datum Limit(FunctionCallInfo fcinfo) { return LimitOrCheck(fcinfo, true); }

Datum CheckLimit(FunctionCallInfo fcinfo) { return LimitOrCheck(fcinfo, false); }

Datum Reset(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_reset()");
  LimitId id = IdFromArgs(fcinfo, 0, 1);
  Oid previous_sql_role = ConnectStorage(fcinfo);
  bool existed = DeleteStates(id);
  DisconnectStorage(previous_sql_role);
  PG_RETURN_BOOL(existed);
}

// A set-returning function of exactly one row (value-per-call protocol).
Datum Value(FunctionCallInfo fcinfo) {
  if (SRF_IS_FIRSTCALL()) {
    FuncCallContext* first = SRF_FIRSTCALL_INIT();
    first->user_fctx = DatumGetPointer(ValueRow(fcinfo, first->multi_call_memory_ctx));
    first->max_calls = 1;
  }
  FuncCallContext* funcctx = SRF_PERCALL_SETUP();
  if (funcctx->call_cntr < funcctx->max_calls) SRF_RETURN_NEXT(funcctx, PointerGetDatum(funcctx->user_fctx));
  SRF_RETURN_DONE(funcctx);
}

Datum Define(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_define()");
  LimitId id = IdFromArgs(fcinfo, 0, -1);
  RequireNotNull(fcinfo, 1, "config");
  Jsonb* config = PG_GETARG_JSONB_P(1);
  LimitConfig parsed;
  ParseConfigJsonb(config, &parsed);
  Oid previous_sql_role = ConnectStorage(fcinfo);
  // Changes of one name's definition wait for each other: each carries the
  // rows over from the config it replaces.
  LockDefinitionChanges();
  LimitConfig previous;
  bool was_defined = LookupDefinedConfig(id.name_text, &previous);
  ApplyConfigChange(id.name_text, nullptr, was_defined ? &previous : nullptr, &parsed);
  UpsertDefinition(id.name_text, config);
  InvalidateDefinitions();
  DisconnectStorage(previous_sql_role);
  PG_RETURN_VOID();
}

// The config (name, key) uses now without an override of its own: the
// definition, or nullptr when calls pass inline configs only.
const LimitConfig* ConfigWithoutOverride(text* name, LimitConfig* buffer) {
  return LookupDefinedConfig(name, buffer) ? buffer : nullptr;
}

// The key's override as stored now, parsed; nullptr if it has none.
const LimitConfig* StoredOverride(const LimitId& id, LimitConfig* buffer) {
  Jsonb* stored = ReadOverrideConfig(id.name_text, id.key_text);
  if (stored == nullptr) return nullptr;
  ParseConfigJsonb(stored, buffer);
  return buffer;
}

Datum Override(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_override()");
  RequireNotNull(fcinfo, 1, "key");
  RequireNotNull(fcinfo, 2, "config");
  LimitId id = IdFromArgs(fcinfo, 0, 1);
  Jsonb* config = PG_GETARG_JSONB_P(2);
  LimitConfig parsed;
  ParseConfigJsonb(config, &parsed);
  Oid previous_sql_role = ConnectStorage(fcinfo);
  LockOverrideChanges();
  LimitConfig override_buffer;
  LimitConfig definition_buffer;
  const LimitConfig* from = StoredOverride(id, &override_buffer);
  if (from == nullptr) from = ConfigWithoutOverride(id.name_text, &definition_buffer);
  ApplyConfigChange(id.name_text, id.key_text, from, &parsed);
  UpsertOverride(id.name_text, id.key_text, config);
  InvalidateOverrides();
  DisconnectStorage(previous_sql_role);
  PG_RETURN_VOID();
}

Datum Unoverride(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_unoverride()");
  RequireNotNull(fcinfo, 1, "key");
  LimitId id = IdFromArgs(fcinfo, 0, 1);
  Oid previous_sql_role = ConnectStorage(fcinfo);
  LockOverrideChanges();
  LimitConfig override_buffer;
  LimitConfig definition_buffer;
  const LimitConfig* from = StoredOverride(id, &override_buffer);
  if (from != nullptr)
    ApplyConfigChange(id.name_text, id.key_text, from,
                      ConfigWithoutOverride(id.name_text, &definition_buffer));
  bool existed = DeleteOverride(id.name_text, id.key_text);
  InvalidateOverrides();
  DisconnectStorage(previous_sql_role);
  PG_RETURN_BOOL(existed);
}

Datum StatsReset(FunctionCallInfo fcinfo) {
  (void)fcinfo;
  ResetStats();
  PG_RETURN_VOID();
}

Datum Undefine(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_undefine()");
  LimitId id = IdFromArgs(fcinfo, 0, -1);
  Oid previous_sql_role = ConnectStorage(fcinfo);
  bool existed = DeleteDefinition(id.name_text);
  InvalidateDefinitions();
  DisconnectStorage(previous_sql_role);
  PG_RETURN_BOOL(existed);
}

Datum LimitAll(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_limit_all()");
  RequireNotNull(fcinfo, 0, "limits");
  RequireNotNull(fcinfo, 1, "throws");
  bool throws = PG_GETARG_BOOL(1);
  LimitCall* calls = nullptr;
  int count = EntriesFromJson(PG_GETARG_JSONB_P(0), &calls);
  // The rows are formed after SPI_finish: allocated before ConnectStorage.
  auto* decisions = static_cast<Decision*>(palloc0(sizeof(Decision) * (count + 1)));
  Oid previous_sql_role = ConnectStorage(fcinfo);
  for (int i = 0; i < count; ++i) CompleteLimitCall(&calls[i]);
  ConsumeAll(calls, count, decisions);
  DisconnectStorage(previous_sql_role);
  // Shadow refusals are answered as grants; an element of a call that an
  // enforced refusal stopped only shows what it would have granted, and is
  // counted nowhere.
  bool consumed = true;
  auto* shadowed = static_cast<bool*>(palloc0(sizeof(bool) * (count + 1)));
  for (int i = 0; i < count; ++i) {
    shadowed[i] = !decisions[i].ok && calls[i].config.shadow;
    consumed = consumed && (decisions[i].ok || shadowed[i]);
    if (shadowed[i]) decisions[i] = ratelimit::ShadowGrant(decisions[i]);
  }
  for (int i = 0; i < count; ++i)
    if (consumed || shadowed[i] || !decisions[i].ok) CountDecision(calls[i], decisions[i], shadowed[i]);
  for (int i = 0; throws && i < count; ++i)
    if (!decisions[i].ok) RaiseRateLimited(calls[i], decisions[i]);
  TupleDesc desc;
  Tuplestorestate* store = MaterializedResult(fcinfo, &desc);
  for (int i = 0; i < count; ++i) PutEntryRow(store, desc, calls[i].id, decisions[i]);
  return static_cast<Datum>(0);
}

Datum Refund(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_refund()");
  LimitCall call = LimitCallFromArgs(fcinfo, 0, 1, 3, 2, -1);
  RaiseIfInvalid(ratelimit::ValidateAmount(call.request.count));
  double amount = call.request.count;
  call.request.count = 0;  // the request validated against the config is "take nothing"
  Oid previous_sql_role = ConnectStorage(fcinfo);
  CompleteLimitCall(&call);
  Decision decision = RefundTokens(&call, amount);
  DisconnectStorage(previous_sql_role);
  CountRefund(call, amount);
  return ResultDatum(ResultDesc(fcinfo), decision);
}

// The statement trigger on the definition table: any direct change to it
// invalidates the cached named configs in every backend.
Datum DefinitionsChanged(FunctionCallInfo fcinfo) {
  if (!CALLED_AS_TRIGGER(fcinfo))
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("ratelimit: not called as a trigger")));
  auto* trigger = reinterpret_cast<TriggerData*>(fcinfo->context);
  CacheInvalidateRelcacheByRelid(RelationGetRelid(trigger->tg_relation));
  return PointerGetDatum(nullptr);
}

// ratelimit_headers(name, result, config[, key]): key_arg < 0 without key
// (0.3.0's and 0.4.0's SQL).
Datum HeadersOf(FunctionCallInfo fcinfo, int key_arg) {
  LimitCall call = LimitCallFromArgs(fcinfo, 0, key_arg, 2, -1, -1);
  call.request.count = 0;  // headers describe any valid config
  RequireNotNull(fcinfo, 1, "result");
  ratelimit::HeaderAnswer answer = AnswerFromResult(PG_GETARG_HEAPTUPLEHEADER(1));
  Oid previous_sql_role = ConnectStorage(fcinfo);
  CompleteLimitCall(&call);
  DisconnectStorage(previous_sql_role);
  PG_RETURN_DATUM(HeadersJsonb(call.id, call.config, answer, ClockNow()));
}

Datum Headers(FunctionCallInfo fcinfo) { return HeadersOf(fcinfo, -1); }

Datum HeadersForKey(FunctionCallInfo fcinfo) { return HeadersOf(fcinfo, 3); }

Datum StatusRows(FunctionCallInfo fcinfo) {
  StatusContext status{};
  status.store = MaterializedResult(fcinfo, &status.desc);
  status.now = ClockNow();
  for (ratelimit::Kind kind :
       {ratelimit::Kind::kTokenBucket, ratelimit::Kind::kFixedWindow, ratelimit::Kind::kSlidingWindow})
    status.kind_names[static_cast<int>(kind)] = CStringGetTextDatum(ratelimit::KindName(kind));
  Oid previous_sql_role = ConnectStorage(fcinfo);
  ScanStatusRows(PutStatusRow, &status);
  DisconnectStorage(previous_sql_role);
  return static_cast<Datum>(0);
}

Datum Cleanup(FunctionCallInfo fcinfo) {
  RequireWritable("ratelimit_cleanup()");
  Oid previous_sql_role = ConnectStorage(fcinfo);
  int64 deleted = DeleteIdleStates(ClockNow());
  DisconnectStorage(previous_sql_role);
  PG_RETURN_INT64(deleted);
}

// Runs an entry point's body; a C++ exception (none is expected: the core is
// noexcept and the adapter holds no C++ objects) becomes a PostgreSQL error
// raised after the catch block has been left.
template <Datum (*Body)(FunctionCallInfo)>
Datum Guarded(FunctionCallInfo fcinfo) {
  char message[256] = "unknown C++ exception";
  bool failed = false;
  Datum result = 0;
  try {
    result = Body(fcinfo);
  } catch (const std::exception& e) {
    failed = true;
    strlcpy(message, e.what(), sizeof message);
  } catch (...) {
    failed = true;
  }
  if (failed) ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("ratelimit: %s", message)));
  return result;
}

}  // namespace
}  // namespace ratelimit_pg

extern "C" {

void _PG_init(void) {
  ratelimit_pg::DefineClockGuc();
  ratelimit_pg::DefineErrorFormatGuc();
  ratelimit_pg::RegisterStorageInvalidation();
  ratelimit_pg::RegisterOverridesInvalidation();
  ratelimit_pg::DefineStatsGucs();
  ratelimit_pg::RequestStatsSharedMemory();
  CacheRegisterSyscacheCallback(PROCOID, ratelimit_pg::OnFunctionInvalidation, 0);
  ratelimit_pg::compat::ReserveGucPrefix("ratelimit");
}

// Each function has two entry points running the same code: the SQL of
// 0.1.0 to 0.3.0 (SECURITY DEFINER) calls ratelimit_x, that of 0.4.0 on
// (SECURITY INVOKER) calls ratelimit_x_invoker. The new name makes a session
// that still has an older library loaded fail ("could not find function")
// instead of running 0.4.0's definitions with SQL that is not scoped.
#define RATELIMIT_ENTRY_POINTS(name, body)                                                   \
  Datum name(PG_FUNCTION_ARGS) { return ratelimit_pg::Guarded<ratelimit_pg::body>(fcinfo); } \
  Datum name##_invoker(PG_FUNCTION_ARGS) { return ratelimit_pg::Guarded<ratelimit_pg::body>(fcinfo); }

RATELIMIT_ENTRY_POINTS(ratelimit_limit, Limit)
RATELIMIT_ENTRY_POINTS(ratelimit_check, CheckLimit)
RATELIMIT_ENTRY_POINTS(ratelimit_reset, Reset)
RATELIMIT_ENTRY_POINTS(ratelimit_value, Value)
RATELIMIT_ENTRY_POINTS(ratelimit_define, Define)
RATELIMIT_ENTRY_POINTS(ratelimit_undefine, Undefine)
RATELIMIT_ENTRY_POINTS(ratelimit_limit_all, LimitAll)
RATELIMIT_ENTRY_POINTS(ratelimit_refund, Refund)
RATELIMIT_ENTRY_POINTS(ratelimit_cleanup, Cleanup)
RATELIMIT_ENTRY_POINTS(ratelimit_headers, Headers)
RATELIMIT_ENTRY_POINTS(ratelimit_status_rows, StatusRows)
Datum ratelimit_definitions_changed(PG_FUNCTION_ARGS) {
  return ratelimit_pg::Guarded<ratelimit_pg::DefinitionsChanged>(fcinfo);
}
// 0.5.0's functions: one entry point each (they never ran SECURITY DEFINER).
Datum ratelimit_override(PG_FUNCTION_ARGS) { return ratelimit_pg::Guarded<ratelimit_pg::Override>(fcinfo); }
Datum ratelimit_unoverride(PG_FUNCTION_ARGS) {
  return ratelimit_pg::Guarded<ratelimit_pg::Unoverride>(fcinfo);
}
Datum ratelimit_stats_rows(PG_FUNCTION_ARGS) {
  return ratelimit_pg::Guarded<ratelimit_pg::StatsRows>(fcinfo);
}
Datum ratelimit_stats_reset(PG_FUNCTION_ARGS) {
  return ratelimit_pg::Guarded<ratelimit_pg::StatsReset>(fcinfo);
}
Datum ratelimit_headers_keyed(PG_FUNCTION_ARGS) {
  return ratelimit_pg::Guarded<ratelimit_pg::HeadersForKey>(fcinfo);
}

}  // extern "C"
