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

// errors.cpp: how many of the `len` bytes at `bytes` (in the database
// encoding) an error message quotes: at most kMaxEchoBytes, cut at a
// character boundary so the message stays valid in any client encoding.
int EchoLength(const char* bytes, int len);

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

// limits_json.cpp: identity fields and ratelimit_limit_all's argument.
// Points id fields at a text value's bytes (22023 past kMaxNameBytes).
void SetIdText(text* value, const char* what, text** field, const char** bytes, int* len);
struct LimitCall;
// Parses the limits array into palloc'd calls (config unresolved); returns
// how many.
int EntriesFromJson(Jsonb* limits, LimitCall** out);

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

// The state rows, read and written by the steps of storage.cpp (each takes
// its lock on the table first, then looks at it) and the statements of
// state_sql.cpp.
struct StoredState {
  LimitState state;
  bool has_idle_at;  // idle_at is not NULL (and the column exists)
  Micros idle_at;    // from then on the row answers as no row (see StateForKind)
  bool prev_is_null;
  bool busy;            // the row exists but another transaction holds it (SKIP LOCKED)
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

// Sets up storage for one call of a function of the extension: its schema
// is `extension_namespace`, its SQL runs as `owner`. Returns the previous
// owner, for EndStorageCall (a call from inside another call's SQL, e.g. a
// trigger, must not change the outer call's role).
Oid BeginStorageCall(Oid extension_namespace, Oid owner);
void EndStorageCall(Oid previous_owner);
void RegisterStorageInvalidation();

StoredState ReadState(const LimitId& id, ReadMode mode);
// Fills out[0..shards) with shard i at index i (state.exists=false: no row).
int ReadAllShards(const LimitId& id, bool lock, int shards, StoredState* out);
// INSERT ... ON CONFLICT DO NOTHING; false if the row existed.
bool InsertState(const LimitId& id, const RowWrite& row);
// Locks the row, creating it first in the state `initial` (which must
// answer like no row at all) if there is none. wait=false: a row another
// transaction holds, or is creating, is not waited for and false returned.
// With wait, false means the row vanished under the lock (decide again).
// announce: the creation takes a lock held to the transaction's end, which
// tells skip-locked callers the row is in flight (shard rows).
bool LockOrCreateRow(const LimitId& id, const RowWrite& initial, bool wait, bool announce, StoredState* out);
// Updates the row version that was read (expected.tid) if it is still the
// newest; false if another transaction changed or deleted it meanwhile.
bool UpdateStateIfUnchanged(const StoredState& expected, const RowWrite& row);
// Updates a row this transaction has locked; tid (may be nullptr) is where
// the locked version is.
void UpdateLockedState(const LimitId& id, const ItemPointerData* tid, const RowWrite& row);
bool DeleteStates(const LimitId& id);
int64 DeleteIdleStates(Micros now);

// definitions.cpp: named limits, and the generation that changes whenever
// any backend changes them (or this one, at once).
void RegisterDefinitionsInvalidation();
uint64 DefinitionsGeneration();
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
  Jsonb* config;  // the key's override, else the definition's config; nullptr: neither
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
  // Shadow mode only: the count can never be granted; answered as a shadow
  // refusal without touching storage.
  bool never_fits;
  bool owner_config;  // the config is a definition or an override (the owner's limit)
  uint64 generation;  // of definitions and overrides when the config was resolved
};

// config_cache.cpp: parsed configs cached per backend (inline by their
// bytes, named by name until the definition table changes).
void InlineConfig(Jsonb* config, LimitConfig* out);
bool NamedConfig(const LimitId& id, LimitConfig* out);

// subtransaction.cpp: runs `step` in an internal subtransaction, kept if
// it returns true, rolled back (its row locks released) if false or on an
// error, which is then raised again. Returns what step returned.
bool RunInSubtransaction(bool (*step)(void* context), void* context);

// consume.cpp: the decisions that read, lock and write state rows. A call
// whose config changes while it waits is completed again (RefreshConfig).
Decision Consume(LimitCall* call);
Decision Check(const LimitCall& call);
ratelimit::Reading CurrentValue(const LimitCall& call);
Decision RefundTokens(LimitCall* call, double amount);
void ConsumeAll(LimitCall* calls, int count, Decision* out);

// ---- limits as data (0.5.0) ------------------------------------------------

// config_cache.cpp: a call's config: the key's override, else the inline
// config (for a defined name only the same limit as the definition: 22023),
// else the definition (42704 if there is none).
void ResolveConfig(LimitCall* call);
// ResolveConfig, then the request validated against the config (22023) and
// the window origin derived. Needs SPI.
void CompleteLimitCall(LimitCall* call);
// After a wait for a lock: whether another session's committed change of a
// definition or override changed the call's config; if so, completes the
// call again under the config now in force (true).
bool RefreshConfig(LimitCall* call);

// overrides.cpp: per-key overrides and their per-backend caches.
void RegisterOverridesInvalidation();
// ratelimit_override's oid in the extension's schema; InvalidOid before
// the update to 0.5.0 created it.
Oid OverrideTableOid();
// Changes whenever any backend changes overrides (or this one, at once).
uint64 OverridesGeneration();
// The key's override, if it has one (cached; a name without any override
// costs one hash lookup).
bool LookupOverride(const LimitId& id, LimitConfig* out);
// The stored override config of (name, key), read now; nullptr if none.
Jsonb* ReadOverrideConfig(text* name, text* key);
void UpsertOverride(text* name, text* key, Jsonb* config);
bool DeleteOverride(text* name, text* key);
// Tells every backend (at commit; this one at once) that overrides changed.
void InvalidateOverrides();

// stored_kind.cpp: which algorithm wrote a state row (carried by prev).
enum class StoredKind { kTokenBucket, kFixedWindow, kSlidingWindow, kTokenBucketOrFixedWindow };
StoredKind StoredKindOf(const StoredState& stored);
bool StoredKindFits(StoredKind stored, ratelimit::Kind kind);
// The state a call of `kind` decides on at clock `now`: the stored one, or
// no row (the initial state) when another algorithm wrote it or when its
// idle_at has passed. An idle row is the same as no row under the config
// that wrote it; reading it as no row under any config is what makes
// ratelimit_cleanup(), which deletes exactly those rows, never change an
// answer, whatever config changed since.
LimitState StateForKind(const StoredState& stored, ratelimit::Kind kind, Micros now);
// The row to write for `next` under `config`, its kind tagged.
RowWrite TaggedRow(const LimitConfig& config, const LimitState& next, Micros idle_at);

// config_changes.cpp: what a change of effective config does to stored
// rows. The rows of (name, key) (key nullptr: every key of the name that
// has no override) are locked; `from` nullptr: the old config is not known
// (inline configs only); `to` nullptr: the new one is not. A row of
// another kind than `to` is reset (deleted); with both known and of one
// kind, each row is brought up to now under `from` and carried into `to`.
void ApplyConfigChange(text* name, text* key, const LimitConfig* from, const LimitConfig* to);
// Serialize changes of definitions, or of overrides (a lock on the table
// held to the end of the transaction; callers only read it), so each change
// reads the config it replaces.
void LockDefinitionChanges();
void LockOverrideChanges();

// stats.cpp: decision counters in shared memory (ratelimit_stats).
void DefineStatsGucs();
void RequestStatsSharedMemory();
// Each counts under the call's name; a name whose limit is the owner's (a
// definition or an override: call.owner_config) may take a slot of the
// half reserved for those.
void CountDecision(const LimitCall& call, const Decision& decision, bool shadow_refused);
void CountRefund(const LimitCall& call, double amount);
void CountLockWait(const LimitCall& call);
// ratelimit_stats_rows' rows (materialized) and ratelimit_stats_reset.
Datum StatsRows(FunctionCallInfo fcinfo);
void ResetStats();

}  // namespace ratelimit_pg
