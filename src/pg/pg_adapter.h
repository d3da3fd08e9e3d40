// Declarations shared by the PostgreSQL adapter (src/pg).
//
// Boundary rules (see README "Code layout"): C++ headers first, PostgreSQL
// headers inside extern "C" after them; frames that can ereport hold only
// trivially destructible locals; the core is noexcept and never throws.
#pragma once

#include "headers.h"
#include "limiter.h"
#include "shards.h"

extern "C" {
#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "storage/itemptr.h"
#include "utils/jsonb.h"
}

namespace ratelimit_pg {

using ratelimit::Decision;
using ratelimit::LimitConfig;
using ratelimit::LimitState;
using ratelimit::Micros;
using ratelimit::Request;

constexpr int kMaxNameBytes = 1024;
// How much of an unknown name or value an error message repeats.
constexpr int kMaxEchoBytes = 64;

// The length of `len` bytes to quote in an error message (at most kMaxEchoBytes).
inline int EchoLength(int len) { return len < kMaxEchoBytes ? len : kMaxEchoBytes; }

// One limit row's identity: name and key bytes (key == nullptr: NULL key).
struct LimitId {
  text* name_text;
  text* key_text;  // nullptr for the NULL (global) key
  const char* name;
  int name_len;
  const char* key;
  int key_len;
  int shard;
};

// clock.cpp: the clock, honouring the superuser-only ratelimit.now GUC.
void DefineClockGuc();
Micros ClockNow();
// Whether a timestamp lies in 0001-01-01 .. 100000-01-01 (the range the
// limiter accepts for its clock and for config start), so converting it to
// Unix microseconds and adding any answer's offset cannot overflow.
bool TimestamptzSupported(TimestampTz ts);
// Unix microseconds of a (finite, in-range) timestamp, and back.
Micros UnixFromTimestamptz(TimestampTz ts);
TimestampTz TimestamptzFromUnix(Micros micros);

// config_json.cpp: jsonb config -> LimitConfig, errors naming the field.
void ParseConfigJsonb(Jsonb* config, LimitConfig* out);
// A jsonb number as a double (overflow gives +-inf, rejected by validation).
double JsonbNumberToDouble(const JsonbValue& value);

// errors.cpp: core Status and rate-limit refusals as PostgreSQL errors, in
// the form ratelimit.error_format chooses (plain PT429, or PostgREST's PGRST).
void DefineErrorFormatGuc();
void RaiseIfInvalid(const ratelimit::Status& status);
struct LimitCall;
void RaiseRateLimited(const LimitCall& call, const Decision& decision);

// headers.cpp: HTTP rate-limit headers of an answer, as a JSON object text
// or a jsonb datum; `now` is the clock the answer is read at.
ratelimit::HeaderAnswer HeaderAnswerFromDecision(const Decision& decision);
char* HeadersJsonText(const LimitId& id, const LimitConfig& config, const ratelimit::HeaderAnswer& answer,
                      Micros now);
Datum HeadersJsonb(const LimitId& id, const LimitConfig& config, const ratelimit::HeaderAnswer& answer,
                   Micros now);

// storage.cpp: the state and definition tables, through saved SPI plans.
struct StoredState {
  LimitState state;
  bool prev_is_null;
  ItemPointerData tid;  // where the row version was read (valid when state.exists)
};

// A state row to write: the state, whether prev is kept (sliding window
// only, NULL otherwise) and when the row becomes the same as no row.
struct RowWrite {
  LimitState next;
  bool keep_prev;
  Micros idle_at;
};

enum class ReadMode { kUnlocked, kLock, kLockSkipLocked };

void RegisterStorageInvalidation();
void PrepareStorage(Oid extension_namespace);
// Sets the role SQL statements run as (the called function's owner); returns the previous one.
Oid SetSqlRole(Oid role);
StoredState ReadState(const LimitId& id, ReadMode mode);
// Fills out[0..shards) with shard i at index i (exists=false: no row).
int ReadAllShards(const LimitId& id, bool lock, int shards, ratelimit::ShardInput* out);
bool InsertState(const LimitId& id, const RowWrite& row);
void MaterializeShards(const LimitId& id, int shards, const RowWrite& initial);
bool UpdateStateIfUnchanged(const LimitId& id, const StoredState& expected, const RowWrite& row);
// Updates a row this transaction has locked; tid (may be nullptr) is where
// the locked version is, which lets the update skip the SQL executor.
void UpdateLockedState(const LimitId& id, const ItemPointerData* tid, const RowWrite& row);
bool DeleteStates(const LimitId& id);
int64 DeleteIdleStates(Micros now);
bool LookupDefinedConfig(text* name, LimitConfig* config);
void UpsertDefinition(text* name, Jsonb* config);
bool DeleteDefinition(text* name);
// Tells every backend (at commit; this one at once) that definitions changed.
void InvalidateDefinitions();

// One state row as the ratelimit_status view reports it.
struct StatusRow {
  LimitId id;
  StoredState stored;
  bool has_idle_at;
  Micros idle_at;
  Jsonb* config;  // the definition's config; nullptr: not a defined limit
};
using StatusRowSink = void (*)(const StatusRow& row, void* context);
// Hands every state row (with its definition) to `sink`, in canonical order.
void ScanStatusRows(StatusRowSink sink, void* context);

// One resolved call on one limit: identity, config and request. Trivially
// destructible, so it may live in frames that ereport.
struct LimitCall {
  LimitId id;
  Jsonb* inline_config;  // nullptr: use the defined config
  LimitConfig config;
  Request request;
  Micros origin;
};

// config_cache.cpp: parsed configs cached per backend (inline by their
// bytes, named by name until the definition table changes).
void RegisterConfigCacheInvalidation();
void WatchDefinitionTable(Oid definition_table);
void InlineConfig(Jsonb* config, LimitConfig* out);
bool NamedConfig(const LimitId& id, LimitConfig* out);

// consume.cpp: the decisions that read, lock and write state rows.
Decision Consume(const LimitCall& call);
Decision Check(const LimitCall& call);
ratelimit::Reading CurrentValue(const LimitCall& call);
Decision RefundTokens(const LimitCall& call, double amount);
void ConsumeAll(LimitCall* calls, int count, Decision* out);

// A uniform random number in [0, 1) from PostgreSQL's PRNG.
double RandomUnit();

}  // namespace ratelimit_pg
