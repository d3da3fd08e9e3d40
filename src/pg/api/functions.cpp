// The calls on limits: ratelimit_limit, check, value, limit_all, refund,
// reset, headers and cleanup. Each reads its arguments, connects its call
// context, hands the decision to consume.h and forms the result.
#include "api/functions.h"

#include "api/fn_args.h"
#include "api/limits_json.h"
#include "config/config_cache.h"
#include "decide/consume.h"
#include "decide/consume_all.h"
#include "policy.h"
#include "shmem/stats.h"
#include "storage/storage.h"
#include "support/clock.h"
#include "support/errors.h"
#include "support/http_headers.h"

extern "C" {
#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "utils/timestamp.h"
}

namespace ratelimit_pg {
namespace {

// A limit whose storage is not usable read-only is not written in a
// read-only transaction (25006).
void RequireWritableFor(const LimitCall& call, const char* function) {
  if (!StorageFor(call).usable_read_only) RequireWritable(function);
}

// Whether the steps of the call's storage run SQL (and so need the call's
// SPI connection). A storage undone by the transaction reads, locks and
// writes its rows through SQL; one undone by refunds keeps them outside the
// database's tables (a write SQL makes is undone by the transaction), in
// steps that run under its own short locks (seam.h).
bool StorageRunsSql(const LimitCall& call) { return StorageFor(call).undo == Undo::kByTransaction; }

}  // namespace

// ratelimit_limit and ratelimit_check share everything but the write. SPI
// is connected only if the call needs it (spi_connection.h): a memory limit
// whose config is cached never does.
Decision DecideLimitOrCheck(FunctionCallInfo fcinfo, bool consume) {
  LimitCall call = LimitCallFromArgs(fcinfo, 0, 1, 2, 3, 4);
  RequireNotNull(fcinfo, 5, "throws");
  bool throws = PG_GETARG_BOOL(5);
  CallContext context = EnterCallContextDeferred(fcinfo);
  CompleteLimitCall(&call, &context.spi);
  if (StorageRunsSql(call)) NeedSpi(&context.spi);
  if (consume) RequireWritableFor(call, "ratelimit_limit()");
  Decision decision = consume ? Consume(&call) : Check(call);
  LeaveCallContext(&context);
  bool shadow_refused = !decision.ok && call.config.shadow;
  if (shadow_refused) decision = ratelimit::ShadowGrant(decision);
  if (consume) CountDecision(call, decision, shadow_refused);
  if (!decision.ok && throws) RaiseRateLimited(call, decision);
  return decision;
}

namespace {

// Computes ratelimit_value's single row as a heap tuple in `cxt`.
Datum ValueRow(FunctionCallInfo fcinfo, MemoryContext cxt) {
  LimitCall call = LimitCallFromArgs(fcinfo, 0, 1, 2, -1, -1);
  call.request.count = 0;  // reading takes nothing: any valid config can be read
  Oid previous_sql_role = EnterCallContext(fcinfo);
  CompleteLimitCall(&call);
  ratelimit::Reading reading = CurrentValue(call);
  LeaveCallContext(previous_sql_role);
  MemoryContext old = MemoryContextSwitchTo(cxt);
  Datum values[2] = {Float8GetDatum(reading.value + 0.0),
                     TimestampTzGetDatum(TimestamptzFromUnix(reading.ts))};
  bool nulls[2] = {false, false};
  Datum row = HeapTupleGetDatum(heap_form_tuple(ResultDesc(fcinfo), values, nulls));
  MemoryContextSwitchTo(old);
  return row;
}

// ratelimit_headers(name, result, config[, key]): key_arg < 0 without key
// (0.3.0's and 0.4.0's SQL).
Datum HeadersOf(FunctionCallInfo fcinfo, int key_arg) {
  LimitCall call = LimitCallFromArgs(fcinfo, 0, key_arg, 2, -1, -1);
  call.request.count = 0;  // headers describe any valid config
  RequireNotNull(fcinfo, 1, "result");
  ratelimit::HeaderAnswer answer = AnswerFromResult(PG_GETARG_HEAPTUPLEHEADER(1));
  Oid previous_sql_role = EnterCallContext(fcinfo);
  CompleteLimitCall(&call);
  LeaveCallContext(previous_sql_role);
  PG_RETURN_DATUM(HeadersJsonb(call.id, call.config, answer, ClockNow()));
}

}  // namespace

Datum Limit(FunctionCallInfo fcinfo) { return DecisionDatum(fcinfo, DecideLimitOrCheck(fcinfo, true)); }

Datum CheckLimit(FunctionCallInfo fcinfo) { return DecisionDatum(fcinfo, DecideLimitOrCheck(fcinfo, false)); }

// Whether the owner's config of the limit (the key's override, else the
// definition) keeps it in a storage usable read-only.
bool OwnerStorageUsableReadOnly(const LimitId& id) {
  LimitSettings config;
  return OwnerConfigOf(id, &config) && StorageFor(config.options).usable_read_only;
}

// Deletes the limit from every storage. In a read-only transaction only
// storages usable read-only can be written: a limit found in one is reset
// there, as is (nothing to delete) one whose owner's config keeps it in
// one; any other reset raises 25006.
Datum Reset(FunctionCallInfo fcinfo) {
  LimitId id = IdFromArgs(fcinfo, 0, 1);
  Oid previous_sql_role = EnterCallContext(fcinfo);
  const Storage* const* storages = nullptr;
  bool existed = false;
  int n = AllStorages(&storages);
  if (XactReadOnly) {
    for (int i = 0; i < n; ++i)
      if (storages[i]->usable_read_only) existed = storages[i]->delete_limit(id) || existed;
    if (!existed && !OwnerStorageUsableReadOnly(id)) RequireWritable("ratelimit_reset()");
    LeaveCallContext(previous_sql_role);
    PG_RETURN_BOOL(existed);
  }
  for (int i = 0; i < n; ++i) existed = storages[i]->delete_limit(id) || existed;
  LeaveCallContext(previous_sql_role);
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

int DecideLimitAll(FunctionCallInfo fcinfo, LimitCall** calls_out, Decision** decisions_out) {
  RequireNotNull(fcinfo, 0, "limits");
  RequireNotNull(fcinfo, 1, "throws");
  bool throws = PG_GETARG_BOOL(1);
  LimitCall* calls = nullptr;
  int count = EntriesFromJson(PG_GETARG_JSONB_P(0), &calls);
  // The rows are formed after SPI_finish: allocated before EnterCallContext.
  auto* decisions = static_cast<Decision*>(palloc0(sizeof(Decision) * (count + 1)));
  Oid previous_sql_role = EnterCallContext(fcinfo);
  for (int i = 0; i < count; ++i) CompleteLimitCall(&calls[i]);
  for (int i = 0; i < count; ++i) RequireWritableFor(calls[i], "ratelimit_limit_all()");
  ConsumeAll(calls, count, decisions);
  LeaveCallContext(previous_sql_role);
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
  *calls_out = calls;
  *decisions_out = decisions;
  return count;
}

Datum LimitAll(FunctionCallInfo fcinfo) {
  LimitCall* calls = nullptr;
  Decision* decisions = nullptr;
  int count = DecideLimitAll(fcinfo, &calls, &decisions);
  TupleDesc desc;
  Tuplestorestate* store = MaterializedResult(fcinfo, &desc);
  for (int i = 0; i < count; ++i) PutEntryRow(store, desc, calls[i].id, decisions[i]);
  return static_cast<Datum>(0);
}

Datum Refund(FunctionCallInfo fcinfo) {
  LimitCall call = LimitCallFromArgs(fcinfo, 0, 1, 3, 2, -1);
  RaiseIfInvalid(ratelimit::ValidateAmount(call.request.count));
  double amount = call.request.count;
  call.request.count = 0;  // the request validated against the config is "take nothing"
  Oid previous_sql_role = EnterCallContext(fcinfo);
  CompleteLimitCall(&call);
  RequireWritableFor(call, "ratelimit_refund()");
  Decision decision = RefundTokens(&call, amount);
  LeaveCallContext(previous_sql_role);
  CountRefund(call, amount);
  return DecisionDatum(fcinfo, decision);
}

Datum Headers(FunctionCallInfo fcinfo) { return HeadersOf(fcinfo, -1); }

Datum HeadersForKey(FunctionCallInfo fcinfo) { return HeadersOf(fcinfo, 3); }

// Deletes idle rows of every storage; in a read-only transaction, of the
// storages usable read-only only (the others' wait for a writable one).
Datum Cleanup(FunctionCallInfo fcinfo) {
  Oid previous_sql_role = EnterCallContext(fcinfo);
  const Storage* const* storages = nullptr;
  int64 deleted = 0;
  Micros now = ClockNow();
  for (int i = 0, n = AllStorages(&storages); i < n; ++i)
    if (!XactReadOnly || storages[i]->usable_read_only) deleted += storages[i]->delete_idle(now);
  LeaveCallContext(previous_sql_role);
  PG_RETURN_INT64(deleted);
}

}  // namespace ratelimit_pg
