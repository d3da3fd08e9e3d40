// Declarations shared by the PostgreSQL adapter (src/pg).
//
// Boundary rules (see README "Code layout"): C++ headers first, PostgreSQL
// headers inside extern "C" after them; frames that can ereport hold only
// trivially destructible locals; the core is noexcept and never throws.
#pragma once

#include "limiter.h"

extern "C" {
#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "utils/jsonb.h"
}

namespace ratelimit_pg {

using ratelimit::Decision;
using ratelimit::LimitConfig;
using ratelimit::LimitState;
using ratelimit::Micros;
using ratelimit::Request;

constexpr int kMaxNameBytes = 1024;

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
Micros UnixFromTimestamptz(TimestampTz ts);
TimestampTz TimestamptzFromUnix(Micros micros);

// config_json.cpp: jsonb config -> LimitConfig, errors naming the field.
void ParseConfigJsonb(Jsonb* config, LimitConfig* out);

// errors.cpp: core Status and rate-limit refusals as PostgreSQL errors.
void RaiseIfInvalid(const ratelimit::Status& status);
void RaiseRateLimited(const LimitId& id, const Decision& decision);

// storage.cpp: the state and definition tables, through saved SPI plans.
struct StoredState {
  LimitState state;
  bool prev_is_null;
};
void PrepareStorage(Oid extension_namespace);
StoredState ReadState(const LimitId& id, bool lock);
bool InsertState(const LimitId& id, const LimitState& next, bool keep_prev);
bool UpdateStateIfUnchanged(const LimitId& id, const StoredState& expected, const LimitState& next,
                            bool keep_prev);
bool DeleteStates(const LimitId& id);
bool LookupDefinedConfig(text* name, LimitConfig* config);
void UpsertDefinition(text* name, Jsonb* config);
bool DeleteDefinition(text* name);

}  // namespace ratelimit_pg
