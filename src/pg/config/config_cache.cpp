// A per-backend cache of parsed configs, so a call neither re-parses its
// inline jsonb nor looks up its named definition every time.
//
// Inline configs are keyed by their jsonb bytes (jsonb is normalised: equal
// documents have equal bytes). Named configs (and names without one) are
// keyed by name and carry the definitions generation they were read in
// (catalog.h): any change to the definition table makes every backend's
// named entries stale. ResolveConfig puts a call's config together:
// override, inline, definition.
#include <cstring>

#include "config/config_cache.h"

#include "config/config_json.h"
#include "config/config_rows.h"
#include "policy.h"
#include "storage/storage.h"
#include "support/catalog.h"
#include "support/errors.h"

extern "C" {
#include "common/hashfn.h"
#include "storage/lmgr.h"
#include "utils/inval.h"
#include "utils/memutils.h"
}

namespace ratelimit_pg {
namespace {

constexpr int kCacheSlots = 256;          // direct-mapped; a collision replaces
constexpr int kMaxCachedKeyBytes = 2048;  // larger configs are parsed every time

enum class EntryKind : char { kEmpty, kInline, kNamed };

struct CacheEntry {
  EntryKind kind;
  uint64 generation;  // named entries: the definitions generation read in
  int key_len;
  char* key;     // in cache_context
  bool defined;  // named entries: false for a name without a definition
  LimitConfig config;
};

// One table per kind of entry: a call looks up both its inline config and
// its name (the owner rule), which must never evict each other.
CacheEntry entries[2][kCacheSlots];
MemoryContext cache_context = nullptr;

CacheEntry& SlotFor(EntryKind kind, const char* key, int len) {
  uint32 hash = hash_bytes(reinterpret_cast<const unsigned char*>(key), len);
  return entries[kind == EntryKind::kNamed ? 1 : 0][hash % kCacheSlots];
}

// The cached entry of `key`; named entries only if read in `generation`.
const CacheEntry* FindEntry(EntryKind kind, const char* key, int len, uint64 generation) {
  const CacheEntry& entry = SlotFor(kind, key, len);
  if (entry.kind != kind || entry.key_len != len || std::memcmp(entry.key, key, len) != 0) return nullptr;
  if (entry.generation != generation) return nullptr;
  return &entry;
}

const LimitConfig* Find(EntryKind kind, const char* key, int len, uint64 generation) {
  const CacheEntry* entry = FindEntry(kind, key, len, generation);
  return entry != nullptr ? &entry->config : nullptr;
}

void Remember(EntryKind kind, const char* key, int len, uint64 generation, const LimitConfig& config,
              bool defined = true) {
  if (len > kMaxCachedKeyBytes) return;
  if (cache_context == nullptr)
    cache_context = AllocSetContextCreate(TopMemoryContext, "ratelimit config cache", ALLOCSET_SMALL_SIZES);
  CacheEntry& entry = SlotFor(kind, key, len);
  if (entry.key != nullptr) pfree(entry.key);
  entry.kind = EntryKind::kEmpty;
  entry.key = static_cast<char*>(MemoryContextAlloc(cache_context, len > 0 ? len : 1));
  std::memcpy(entry.key, key, len);
  entry.key_len = len;
  entry.generation = generation;
  entry.config = config;
  entry.defined = defined;
  entry.kind = kind;
}

// Raises the 22023 of an inline config that is not the defined limit.
[[noreturn]] void RaiseNotTheDefinition(const LimitId& id) {
  ereport(
      ERROR,
      (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
       errmsg("config differs from the definition of rate limit \"%.*s\"; change it with ratelimit_define() "
              "or one key's with ratelimit_override()",
              EchoLength(id.name, id.name_len), id.name),
       errdetail("A defined limit belongs to its owner: an inline config for it is accepted only when it "
                 "is the same limit as the definition."),
       errhint("Omit config to use the definition.")));
  pg_unreachable();
}

}  // namespace

void ApplyStorageRules(LimitConfig* config) {
  if (!StorageFor(*config).keeps_shards) config->shards = 1;
}

void InlineConfig(Jsonb* config, LimitConfig* out) {
  const char* bytes = VARDATA_ANY(config);
  int len = VARSIZE_ANY_EXHDR(config);
  if (const LimitConfig* cached = Find(EntryKind::kInline, bytes, len, 0)) {
    *out = *cached;
    return;
  }
  ParseConfigJsonb(config, out);  // raises on a bad config: nothing is cached
  Remember(EntryKind::kInline, bytes, len, 0, *out);
}

namespace {

// A name's definition, cached until the definitions generation moves.
bool NamedConfig(const LimitId& id, LimitConfig* out) {
  // Read before the lookup: a change during it makes the entry miss next time.
  uint64 generation = DefinitionsGeneration();
  if (const CacheEntry* cached = FindEntry(EntryKind::kNamed, id.name, id.name_len, generation)) {
    if (cached->defined) *out = cached->config;
    return cached->defined;
  }
  LimitConfig config{};
  bool defined = LookupDefinedConfig(id.name_text, &config);
  // An undefined name is remembered too: inline calls ask on every call.
  Remember(EntryKind::kNamed, id.name, id.name_len, generation, config, defined);
  if (defined) *out = config;
  return defined;
}

}  // namespace

namespace {

// Changes whenever a definition or an override changes (both only grow).
uint64 ConfigGeneration() { return DefinitionsGeneration() + OverridesGeneration(); }

// Lock, then look: the lock a SELECT takes on the definition and override
// tables (held to the transaction's end) is taken before the generations
// are read, so a change committed before it is seen; one committed by
// another session since this transaction took them is seen through the
// invalidations accepted after.
void LockConfigTables() {
  LockCatalogRelation(DefinitionTableOid, AccessShareLock);
  LockCatalogRelation(OverrideTableOid, AccessShareLock);
  AcceptInvalidationMessages();
}

}  // namespace

bool OwnerConfigOf(const LimitId& id, LimitConfig* out) {
  LockConfigTables();
  return LookupOverride(id, out) || NamedConfig(id, out);
}

bool AppliedOwnerConfig(const LimitId& id, LimitConfig* out) {
  LimitConfig parsed;
  if (!OwnerConfigOf(id, &parsed)) return false;
  *out = ratelimit::OwnerBounded(parsed);
  ApplyStorageRules(out);
  return true;
}

void ResolveConfig(LimitCall* call) {
  LockConfigTables();
  call->generation = ConfigGeneration();
  LimitConfig defined;
  bool has_definition = NamedConfig(call->id, &defined);
  LimitConfig overridden;
  bool has_override = LookupOverride(call->id, &overridden);
  if (call->inline_config != nullptr) {
    LimitConfig given;
    InlineConfig(call->inline_config, &given);
    // A defined name's inline config must be a limit the owner set for it:
    // the definition, or this key's override (which is the one applied).
    if (has_definition && !ratelimit::SameLimit(given, defined) &&
        !(has_override && ratelimit::SameLimit(given, overridden)))
      RaiseNotTheDefinition(call->id);
    call->config = has_definition ? ratelimit::OwnerBounded(defined) : given;
  } else if (has_definition) {
    call->config = ratelimit::OwnerBounded(defined);
  } else if (!has_override) {
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    errmsg("rate limit \"%.*s\" is not defined", EchoLength(call->id.name, call->id.name_len),
                           call->id.name),
                    errhint("Pass a config, or define the limit with ratelimit_define().")));
  }
  if (has_override) call->config = ratelimit::OwnerBounded(overridden);
  call->owner_config = has_definition || has_override;
  ApplyStorageRules(&call->config);
}

void CompleteLimitCall(LimitCall* call) {
  ResolveConfig(call);
  const LimitConfig& config = call->config;
  const Request& request = call->request;
  RaiseIfInvalid(ratelimit::ValidateRequestForm(config, request));
  // In shadow mode a count that can never fit is a refusal like any other:
  // answered ok and counted, never an error that breaks the request.
  call->never_fits = config.shadow && ratelimit::NeverGrantable(config, request);
  if (!call->never_fits) RaiseIfInvalid(ratelimit::ValidateRequest(config, request));
  call->origin =
      ratelimit::WindowOrigin(config, call->id.name, call->id.name_len, call->id.key, call->id.key_len);
}

bool RefreshConfig(LimitCall* call) {
  AcceptInvalidationMessages();
  if (ConfigGeneration() == call->generation) return false;
  LimitConfig before = call->config;
  CompleteLimitCall(call);
  return !ratelimit::SameLimit(before, call->config);
}

}  // namespace ratelimit_pg
