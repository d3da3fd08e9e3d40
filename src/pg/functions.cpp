// The SQL-callable functions: thin C-linkage wrappers that read arguments,
// talk to storage through SPI, ask the core for a decision and form results.
#include <cstring>
#include <exception>

#include "pg_adapter.h"

extern "C" {
#include "access/htup_details.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;

void _PG_init(void);
PG_FUNCTION_INFO_V1(ratelimit_limit);
PG_FUNCTION_INFO_V1(ratelimit_check);
PG_FUNCTION_INFO_V1(ratelimit_reset);
PG_FUNCTION_INFO_V1(ratelimit_value);
PG_FUNCTION_INFO_V1(ratelimit_define);
PG_FUNCTION_INFO_V1(ratelimit_undefine);
}

namespace ratelimit_pg {
namespace {

// Everything one ratelimit_limit/ratelimit_check call needs; trivially
// destructible, so it may live in frames that ereport.
struct LimitCall {
  LimitId id;
  Jsonb* inline_config;  // nullptr: use the defined config
  LimitConfig config;
  Request request;
  Micros origin;
  bool throws;
};

// Raises 22004 for a NULL argument that must not be NULL.
void RequireNotNull(FunctionCallInfo fcinfo, int arg, const char* what) {
  if (PG_ARGISNULL(arg))
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("%s must not be null", what)));
}

// A text argument's bytes, at most kMaxNameBytes long.
text* TextArg(FunctionCallInfo fcinfo, int arg, const char* what, const char** bytes, int* len) {
  text* value = PG_GETARG_TEXT_PP(arg);
  *bytes = VARDATA_ANY(value);
  *len = VARSIZE_ANY_EXHDR(value);
  if (*len > kMaxNameBytes)
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("%s is too long", what), errdetail("%s is %d bytes; the maximum is %d.", what, *len,
                                                               kMaxNameBytes)));
  return value;
}

// The (name, key) identity from two arguments; a NULL key is the global
// limit. key_arg < 0: the function has no key argument.
LimitId IdFromArgs(FunctionCallInfo fcinfo, int name_arg, int key_arg) {
  LimitId id{};
  RequireNotNull(fcinfo, name_arg, "name");
  id.name_text = TextArg(fcinfo, name_arg, "name", &id.name, &id.name_len);
  if (key_arg >= 0 && !PG_ARGISNULL(key_arg)) id.key_text = TextArg(fcinfo, key_arg, "key", &id.key, &id.key_len);
  return id;
}

// The extension's schema: the one the called function lives in.
Oid ExtensionNamespace(FunctionCallInfo fcinfo) { return get_func_namespace(fcinfo->flinfo->fn_oid); }

// Connects SPI and makes sure the saved plans match the extension's schema.
void ConnectStorage(FunctionCallInfo fcinfo) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ratelimit: SPI_connect failed");
  PrepareStorage(ExtensionNamespace(fcinfo));
}

void DisconnectStorage() {
  if (SPI_finish() != SPI_OK_FINISH) elog(ERROR, "ratelimit: SPI_finish failed");
}

// The inline config if given, else the named definition (42704 if neither).
void ResolveConfig(const LimitId& id, Jsonb* inline_config, LimitConfig* config) {
  if (inline_config != nullptr) {
    ParseConfigJsonb(inline_config, config);
    return;
  }
  if (LookupDefinedConfig(id.name_text, config)) return;
  ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                  errmsg("rate limit \"%.*s\" is not defined", id.name_len, id.name),
                  errhint("Pass a config, or define the limit with ratelimit_define().")));
}

// Reads the arguments shared by ratelimit_limit and ratelimit_check:
// (name, key, config, count, reserve, throws).
LimitCall LimitCallFromArgs(FunctionCallInfo fcinfo) {
  LimitCall call{};
  call.id = IdFromArgs(fcinfo, 0, 1);
  call.inline_config = PG_ARGISNULL(2) ? nullptr : PG_GETARG_JSONB_P(2);
  RequireNotNull(fcinfo, 3, "count");
  RequireNotNull(fcinfo, 4, "reserve");
  RequireNotNull(fcinfo, 5, "throws");
  call.request.count = PG_GETARG_FLOAT8(3) + 0.0;  // + 0.0 turns -0 into 0
  call.request.reserve = PG_GETARG_BOOL(4);
  call.throws = PG_GETARG_BOOL(5);
  return call;
}

// Resolves and validates the config and request; needs SPI for named limits.
void CompleteLimitCall(LimitCall* call) {
  ResolveConfig(call->id, call->inline_config, &call->config);
  RaiseIfInvalid(ratelimit::ValidateRequest(call->config, call->request));
  call->origin =
      ratelimit::WindowOrigin(call->config, call->id.name, call->id.name_len, call->id.key, call->id.key_len);
}

Decision DecideNow(const LimitCall& call, const StoredState& stored) {
  return ratelimit::Decide(call.config, stored.state, ClockNow(), call.origin, call.request);
}

// Stores an ok decision: insert for a new row, else update if unchanged.
bool WriteDecision(const LimitCall& call, const StoredState& stored, const Decision& decision) {
  bool keep_prev = call.config.kind == ratelimit::Kind::kSlidingWindow;
  if (!stored.state.exists) return InsertState(call.id, decision.next, keep_prev);
  return UpdateStateIfUnchanged(call.id, stored, decision.next, keep_prev);
}

// The contended path: lock the row (SELECT ... FOR UPDATE), read the clock
// after the lock is held, decide and write. Loops only if the row appears or
// vanishes under us (a concurrent first insert or reset).
Decision ConsumeLocked(const LimitCall& call) {
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    StoredState stored = ReadState(call.id, true);
    Decision decision = DecideNow(call, stored);
    if (!decision.ok || WriteDecision(call, stored, decision)) return decision;
  }
}

// Consumes: decide from the latest committed state; a refusal returns
// without a lock or a write. An admission writes only if the row is still
// what was read (else the row lock path decides again).
Decision Consume(const LimitCall& call) {
  StoredState stored = ReadState(call.id, false);
  Decision decision = DecideNow(call, stored);
  if (!decision.ok || WriteDecision(call, stored, decision)) return decision;
  return ConsumeLocked(call);
}

// Forms a ratelimit_result from a decision.
Datum ResultDatum(FunctionCallInfo fcinfo, const Decision& decision) {
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "ratelimit: return type must be a row type");
  Datum values[5];
  bool nulls[5] = {false, !decision.has_retry, !decision.has_retry, false, false};
  values[0] = BoolGetDatum(decision.ok);
  values[1] = Float8GetDatum(decision.retry_after);
  values[2] = TimestampTzGetDatum(TimestamptzFromUnix(decision.retry_at));
  values[3] = Float8GetDatum(decision.remaining + 0.0);
  values[4] = Float8GetDatum(decision.reset_after);
  return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls));
}

// ratelimit_limit and ratelimit_check share everything but the write.
Datum LimitOrCheck(FunctionCallInfo fcinfo, bool consume) {
  LimitCall call = LimitCallFromArgs(fcinfo);
  ConnectStorage(fcinfo);
  CompleteLimitCall(&call);
  Decision decision = consume ? Consume(call) : DecideNow(call, ReadState(call.id, false));
  DisconnectStorage();
  if (!decision.ok && call.throws) RaiseRateLimited(call.id, decision);
  return ResultDatum(fcinfo, decision);
}

// Computes ratelimit_value's single row as a heap tuple in `cxt`.
Datum ValueRow(FunctionCallInfo fcinfo, MemoryContext cxt) {
  LimitId id = IdFromArgs(fcinfo, 0, 1);
  Jsonb* inline_config = PG_ARGISNULL(2) ? nullptr : PG_GETARG_JSONB_P(2);
  ConnectStorage(fcinfo);
  LimitConfig config;
  ResolveConfig(id, inline_config, &config);
  Micros origin = ratelimit::WindowOrigin(config, id.name, id.name_len, id.key, id.key_len);
  ratelimit::Reading reading = ratelimit::ValueAt(config, ReadState(id, false).state, ClockNow(), origin);
  DisconnectStorage();
  MemoryContext old = MemoryContextSwitchTo(cxt);
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "ratelimit: return type must be a row type");
  Datum values[2] = {Float8GetDatum(reading.value + 0.0), TimestampTzGetDatum(TimestamptzFromUnix(reading.ts))};
  bool nulls[2] = {false, false};
  Datum row = HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls));
  MemoryContextSwitchTo(old);
  return row;
}

Datum Limit(FunctionCallInfo fcinfo) { return LimitOrCheck(fcinfo, true); }

Datum Check(FunctionCallInfo fcinfo) { return LimitOrCheck(fcinfo, false); }

Datum Reset(FunctionCallInfo fcinfo) {
  LimitId id = IdFromArgs(fcinfo, 0, 1);
  ConnectStorage(fcinfo);
  bool existed = DeleteStates(id);
  DisconnectStorage();
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
  LimitId id = IdFromArgs(fcinfo, 0, -1);
  RequireNotNull(fcinfo, 1, "config");
  Jsonb* config = PG_GETARG_JSONB_P(1);
  LimitConfig parsed;
  ParseConfigJsonb(config, &parsed);
  ConnectStorage(fcinfo);
  UpsertDefinition(id.name_text, config);
  DisconnectStorage();
  PG_RETURN_VOID();
}

Datum Undefine(FunctionCallInfo fcinfo) {
  LimitId id = IdFromArgs(fcinfo, 0, -1);
  ConnectStorage(fcinfo);
  bool existed = DeleteDefinition(id.name_text);
  DisconnectStorage();
  PG_RETURN_BOOL(existed);
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
#if PG_VERSION_NUM >= 150000
  MarkGUCPrefixReserved("ratelimit");
#else
  EmitWarningsOnPlaceholders("ratelimit");
#endif
}

Datum ratelimit_limit(PG_FUNCTION_ARGS) { return ratelimit_pg::Guarded<ratelimit_pg::Limit>(fcinfo); }
Datum ratelimit_check(PG_FUNCTION_ARGS) { return ratelimit_pg::Guarded<ratelimit_pg::Check>(fcinfo); }
Datum ratelimit_reset(PG_FUNCTION_ARGS) { return ratelimit_pg::Guarded<ratelimit_pg::Reset>(fcinfo); }
Datum ratelimit_value(PG_FUNCTION_ARGS) { return ratelimit_pg::Guarded<ratelimit_pg::Value>(fcinfo); }
Datum ratelimit_define(PG_FUNCTION_ARGS) { return ratelimit_pg::Guarded<ratelimit_pg::Define>(fcinfo); }
Datum ratelimit_undefine(PG_FUNCTION_ARGS) { return ratelimit_pg::Guarded<ratelimit_pg::Undefine>(fcinfo); }

}  // extern "C"
