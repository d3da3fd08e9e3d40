// The context of one call of an SQL function (SPI, the extension, the SQL
// role), argument reading and result forming.
#include "api/fn_args.h"

#include "api/limits_json.h"
#include "support/sql_scope.h"
#include "support/catalog.h"
#include "support/clock.h"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/regproc.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"
}

namespace ratelimit_pg {

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

namespace {

// The types of a ratelimit_result's five live columns, in order.
constexpr Oid kDecisionTypes[kDecisionColumns] = {BOOLOID, FLOAT8OID, TIMESTAMPTZOID, FLOAT8OID, FLOAT8OID};

// 42804: a row type that is not (or no longer) ratelimit_result's shape.
[[noreturn]] void RaiseNotDecisionShape(Oid type) {
  ereport(ERROR,
          (errcode(ERRCODE_DATATYPE_MISMATCH),
           errmsg("ratelimit: result type %s is not ratelimit_result's shape", format_type_be(type)),
           errdetail("A decision is (ok boolean, retry_after double precision, retry_at timestamp with "
                     "time zone, remaining double precision, reset_after double precision).")));
  pg_unreachable();
}

// The five live fields of a ratelimit_result datum, each checked to be of
// its type before it is read (42804 otherwise: an owner's ALTER TYPE, or a
// row of another type, is never read as a decision).
void DecisionFields(HeapTupleHeader result, Datum* fields, bool* nulls) {
  Oid type = HeapTupleHeaderGetTypeId(result);
  TupleDesc desc = lookup_rowtype_tupdesc(type, HeapTupleHeaderGetTypMod(result));
  int live = 0;
  for (int i = 0; i < desc->natts; ++i) {
    if (TupleDescAttr(desc, i)->attisdropped) continue;
    if (live >= kDecisionColumns || TupleDescAttr(desc, i)->atttypid != kDecisionTypes[live]) {
      ReleaseTupleDesc(desc);
      RaiseNotDecisionShape(type);
    }
    ++live;
  }
  if (live != kDecisionColumns) {
    ReleaseTupleDesc(desc);
    RaiseNotDecisionShape(type);
  }
  HeapTupleData tuple;
  tuple.t_len = HeapTupleHeaderGetDatumLength(result);
  ItemPointerSetInvalid(&tuple.t_self);
  tuple.t_tableOid = InvalidOid;
  tuple.t_data = result;
  auto* values = static_cast<Datum*>(palloc(sizeof(Datum) * desc->natts));
  auto* all_nulls = static_cast<bool*>(palloc(sizeof(bool) * desc->natts));
  heap_deform_tuple(&tuple, desc, values, all_nulls);
  for (int i = 0, field = 0; i < desc->natts; ++i) {
    if (TupleDescAttr(desc, i)->attisdropped) continue;
    fields[field] = values[i];
    nulls[field++] = all_nulls[i];
  }
  ReleaseTupleDesc(desc);
}

// A ratelimit_result field that must not be NULL (22004 naming it).
Datum RequiredResultField(const Datum* fields, const bool* nulls, int field, const char* name) {
  if (nulls[field])
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("result.%s must not be null", name)));
  return fields[field];
}

// Which attribute of a tuple descriptor holds each field of a decision.
struct ResultShape {
  int natts;
  int field_att[kDecisionColumns];
  bool installed;  // the installed shape: the five fields are the columns, in order
};

// Maps a descriptor of ratelimit_result's shape: five live columns of the
// installed types, in order (an ALTER TYPE may have added, dropped or
// retyped one; dropped columns are NULL). False for any other shape.
bool MapResultShape(TupleDesc desc, ResultShape* shape) {
  int live = 0;
  for (int i = 0; i < desc->natts; ++i) {
    Form_pg_attribute att = TupleDescAttr(desc, i);
    if (att->attisdropped) continue;
    if (live >= kDecisionColumns || att->atttypid != kDecisionTypes[live]) return false;
    shape->field_att[live++] = i;
  }
  shape->natts = desc->natts;
  shape->installed = desc->natts == kDecisionColumns;
  return live == kDecisionColumns;
}

// Forms the row of a decision in a descriptor of `shape`.
HeapTuple DecisionTuple(TupleDesc desc, const ResultShape& shape, const Decision& decision) {
  Datum encoded[kDecisionColumns];
  bool encoded_nulls[kDecisionColumns];
  EncodeDecision(decision, encoded, encoded_nulls);
  if (shape.installed) return heap_form_tuple(desc, encoded, encoded_nulls);
  // On the stack for the installed shape and a few columns more.
  Datum values_here[kDecisionColumns * 2];
  bool nulls_here[kDecisionColumns * 2];
  bool here = shape.natts <= kDecisionColumns * 2;
  auto* values = here ? values_here : static_cast<Datum*>(palloc(sizeof(Datum) * shape.natts));
  auto* nulls = here ? nulls_here : static_cast<bool*>(palloc(sizeof(bool) * shape.natts));
  for (int i = 0; i < shape.natts; ++i) {
    values[i] = static_cast<Datum>(0);
    nulls[i] = true;
  }
  for (int f = 0; f < kDecisionColumns; ++f) {
    values[shape.field_att[f]] = encoded[f];
    nulls[shape.field_att[f]] = encoded_nulls[f];
  }
  HeapTuple tuple = heap_form_tuple(desc, values, nulls);
  if (!here) {
    pfree(values);
    pfree(nulls);
  }
  return tuple;
}

// The declared result type's descriptor, mapped: its type cache entry and
// the descriptor the map was made for are kept (a type cache entry lives as
// long as the backend, typcache.c says, and a descriptor's
// tupDesc_identifier changes whenever it does), so a call maps it once per
// change of the type, not once per call.
struct DeclaredResult {
  Oid type;
  TypeCacheEntry* entry;
  uint64 tupdesc_id;  // the descriptor `shape` maps (0: none)
  ResultShape shape;
};
DeclaredResult declared_result{};

// The descriptor of the named composite `type`, and its map. Used without a
// reference count (as lookup_rowtype_tupdesc would take, with a resource
// owner's entry): the type cache frees a descriptor only when it processes
// an invalidation, and nothing between here and the tuple's forming can
// (no lock, no catalog lookup; the error path's format_type_be comes after
// the descriptor's last use).
TupleDesc DeclaredResultDesc(Oid type, const ResultShape** shape) {
  DeclaredResult& known = declared_result;
  if (known.type != type || known.entry == nullptr || known.entry->tupDesc == nullptr) {
    known.tupdesc_id = 0;
    known.entry = lookup_type_cache(type, TYPECACHE_TUPDESC);
    known.type = type;
  }
  TupleDesc desc = known.entry->tupDesc;
  if (desc == nullptr)
    ereport(ERROR,
            (errcode(ERRCODE_WRONG_OBJECT_TYPE), errmsg("type %s is not composite", format_type_be(type))));
  if (known.tupdesc_id != known.entry->tupDesc_identifier) {
    known.tupdesc_id = 0;
    if (!MapResultShape(desc, &known.shape)) RaiseNotDecisionShape(type);
    known.tupdesc_id = known.entry->tupDesc_identifier;
  }
  *shape = &known.shape;
  return desc;
}

}  // namespace

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

TupleDesc ResultDesc(FunctionCallInfo fcinfo) {
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
    elog(ERROR, "ratelimit: return type must be a row type");
  return BlessTupleDesc(desc);
}

Datum DecisionDatum(FunctionCallInfo fcinfo, const Decision& decision) {
  // The declared result type's descriptor from the type cache (a named
  // composite type, ratelimit_result): no copy per call, as
  // get_call_result_type makes. A function declared otherwise asks it.
  Oid type = FactsOfFunction(fcinfo->flinfo->fn_oid).result_type;
  if (type == RECORDOID) {
    TupleDesc desc = ResultDesc(fcinfo);
    ResultShape shape;
    if (!MapResultShape(desc, &shape)) RaiseNotDecisionShape(type);
    return HeapTupleGetDatum(DecisionTuple(desc, shape, decision));
  }
  const ResultShape* shape = nullptr;
  TupleDesc desc = DeclaredResultDesc(type, &shape);
  return HeapTupleGetDatum(DecisionTuple(desc, *shape, decision));
}

void RequireWritable(const char* function) { PreventCommandIfReadOnly(function); }

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

void EncodeEntry(const LimitId& id, const Decision& decision, Datum* values, bool* nulls) {
  values[0] = PointerGetDatum(id.name_text);
  values[1] = PointerGetDatum(id.key_text);
  nulls[0] = false;
  nulls[1] = id.key_text == nullptr;
  EncodeDecision(decision, values + 2, nulls + 2);
}

// Adds one (name, key, ok, retry_after, retry_at, remaining, reset_after) row.
void PutEntryRow(Tuplestorestate* store, TupleDesc desc, const LimitId& id, const Decision& decision) {
  Datum values[kEntryColumns];
  bool nulls[kEntryColumns];
  EncodeEntry(id, decision, values, nulls);
  tuplestore_putvalues(store, desc, values, nulls);
}

// The answer a ratelimit_result row carries: ok, remaining and reset_after
// are required; retry_after (and retry_at) are NULL unless there is a retry.
ratelimit::HeaderAnswer AnswerFromResult(HeapTupleHeader result) {
  Datum fields[kDecisionColumns];
  bool nulls[kDecisionColumns];
  DecisionFields(result, fields, nulls);
  ratelimit::HeaderAnswer answer;
  answer.ok = DatumGetBool(RequiredResultField(fields, nulls, 0, "ok"));
  answer.remaining = DatumGetFloat8(RequiredResultField(fields, nulls, 3, "remaining"));
  answer.reset_after = DatumGetFloat8(RequiredResultField(fields, nulls, 4, "reset_after"));
  answer.has_retry = !nulls[1];
  if (answer.has_retry) answer.retry_after = DatumGetFloat8(fields[1]);
  TimestampTz at = nulls[2] ? 0 : DatumGetTimestampTz(fields[2]);
  answer.has_retry_at = answer.has_retry && !nulls[2] && TimestamptzSupported(at);
  if (answer.has_retry_at) answer.retry_at = UnixFromTimestamptz(at);
  if (!ratelimit::HeaderAnswerFinite(answer))
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("result has a non-finite number"),
                    errdetail("remaining, reset_after and retry_after must be finite.")));
  return answer;
}

namespace {

// Sets the call's extension (the one the called function is a member of:
// 55000 if none) and its SQL role (the function's owner); the previous role.
Oid SetCallFacts(const FunctionFacts& facts) {
  // The extension's objects are found as its members: a function outside
  // it (a C function someone created on the library) has none.
  if (!OidIsValid(facts.extension))
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("ratelimit: function %s is not a member of extension ratelimit",
                           format_procedure(facts.function)),
                    errdetail("The library finds its tables as members of the extension the called function "
                              "belongs to."),
                    errhint("Call the functions CREATE EXTENSION ratelimit created.")));
  SetExtension(facts.extension, facts.extension_owner, facts.extension_namespace);
  return SetSqlRole(facts.owner);
}

}  // namespace

// One call's context: SPI, the extension's schema and the SQL role.
Oid EnterCallContext(FunctionCallInfo fcinfo) {
  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "ratelimit: SPI_connect failed");
  return SetCallFacts(FactsOfFunction(fcinfo->flinfo->fn_oid));
}

void LeaveCallContext(Oid previous_sql_role) {
  SetSqlRole(previous_sql_role);
  if (SPI_finish() != SPI_OK_FINISH) elog(ERROR, "ratelimit: SPI_finish failed");
}

CallContext EnterCallContextDeferred(FunctionCallInfo fcinfo) {
  CallContext context{};
  // Facts not known yet are read from the catalog: connected first.
  const FunctionFacts* facts = KnownFactsOfFunction(fcinfo->flinfo->fn_oid);
  if (facts == nullptr) {
    NeedSpi(&context.spi);
    facts = &FactsOfFunction(fcinfo->flinfo->fn_oid);
  }
  context.previous_sql_role = SetCallFacts(*facts);
  return context;
}

void LeaveCallContext(CallContext* context) {
  SetSqlRole(context->previous_sql_role);
  FinishSpi(&context->spi);
}

}  // namespace ratelimit_pg
