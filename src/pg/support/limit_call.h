// The vocabulary every module of the adapter shares: one limit row's
// identity, a limit's config with its storage options, and one resolved
// call on one limit. Plain data, trivially
// destructible, so they may live in frames that ereport (a longjmp skips
// destructors: see "Boundary rules" in docs/internals.md).
#pragma once

#include <type_traits>

// Every core header the adapter uses, before any PostgreSQL header (the
// core's guard fires only where a core header is first included).
#include "headers.h"
#include "kinds/registry.h"
#include "limiter.h"
#include "policy.h"
#include "shards.h"

extern "C" {
#include "postgres.h"

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

// What a config says beside the core's fields: how its storage keeps the
// limit. The core never sees these; config_json.cpp parses and checks them.
struct StorageOptions {
  int storage = 0;                // "storage": the storage keeping its rows, as storage.cpp numbers them
  bool keep_on_rollback = false;  // "on_rollback": "keep": a grant outlives its rollback (where it can)
  bool has_name_rows = false;     // "memoryKeys": the most rows the name may hold (where they are bounded)
  double name_rows = 0;
};

// A limit's config as the adapter keeps it: the core's config, which every
// core function takes as it is, and its storage options.
struct LimitSettings : LimitConfig {
  StorageOptions options;
};

// Whether two valid configs are the same limit kept the same way
// (ratelimit::SameLimit, and the same storage options): what a config cache,
// a change of config and a transaction's grant records compare.
bool SameSettings(const LimitSettings& a, const LimitSettings& b);

// One resolved call on one limit: identity, config and request.
struct LimitCall {
  LimitId id;
  Jsonb* inline_config;  // nullptr: use the defined config
  LimitSettings config;
  Request request;
  Micros origin;
  // Shadow mode only: the count can never be granted; answered as a shadow
  // refusal without touching storage.
  bool never_fits;
  bool owner_config;  // the config is a definition or an override (the owner's limit)
  uint64 generation;  // of definitions and overrides when the config was resolved
};

// The adapter's rule: what crosses a frame that may ereport has no destructor.
static_assert(std::is_trivially_destructible_v<LimitId>);
static_assert(std::is_trivially_destructible_v<LimitCall>);
static_assert(std::is_trivially_destructible_v<LimitSettings>);
static_assert(std::is_trivially_destructible_v<Decision>);
static_assert(std::is_trivially_destructible_v<ratelimit::Status>);

// The one order of identities: by name bytes, then by key bytes with the
// NULL key first (a shorter prefix first, as memcmp and text's C collation
// order them). key_len < 0: the NULL key. What the all-or-nothing lock order,
// the memory storage's status rows and ratelimit_stats' names sort by.
int CompareIdentity(const char* a_name, int a_name_len, const char* a_key, int a_key_len, const char* b_name,
                    int b_name_len, const char* b_key, int b_key_len);
// CompareIdentity of two limit identities (the shard aside).
int CompareLimitIds(const LimitId& a, const LimitId& b);

// Points id fields at a text value's bytes (22023 past kMaxNameBytes;
// limit_call.cpp).
void SetIdText(text* value, const char* what, text** field, const char** bytes, int* len);

}  // namespace ratelimit_pg
