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
  LimitSettings config;
  // Inline entries: a request found valid for this config as a call alone
  // uses it (no definition, no override: CheckedAlone), and whether it is a
  // shadow refusal that can never fit; validation is a function of the two.
  bool checked;
  Request checked_request;
  bool checked_never_fits;
};

// One table per kind of entry: a call looks up both its inline config and
// its name (the owner rule), which must never evict each other.
CacheEntry entries[2][kCacheSlots];
// Per kind, the entry found or made last: an application calls with one
// config again and again, and comparing its bytes costs less than hashing
// them.
CacheEntry* last_used[2] = {nullptr, nullptr};
MemoryContext cache_context = nullptr;

int TableOf(EntryKind kind) { return kind == EntryKind::kNamed ? 1 : 0; }

CacheEntry& SlotFor(EntryKind kind, const char* key, int len) {
  uint32 hash = hash_bytes(reinterpret_cast<const unsigned char*>(key), len);
  return entries[TableOf(kind)][hash % kCacheSlots];
}

bool EntryIs(const CacheEntry& entry, EntryKind kind, const char* key, int len) {
  return entry.kind == kind && entry.key_len == len && std::memcmp(entry.key, key, len) == 0;
}

// The cached entry of `key`; named entries only if read in `generation`.
CacheEntry* FindEntry(EntryKind kind, const char* key, int len, uint64 generation) {
  CacheEntry* entry = last_used[TableOf(kind)];
  if (entry == nullptr || !EntryIs(*entry, kind, key, len)) {
    entry = &SlotFor(kind, key, len);
    if (!EntryIs(*entry, kind, key, len)) return nullptr;
    last_used[TableOf(kind)] = entry;
  }
  if (entry->generation != generation) return nullptr;
  return entry;
}

// Caches a config; the entry, or nullptr for a key too long to cache.
CacheEntry* Remember(EntryKind kind, const char* key, int len, uint64 generation, const LimitSettings& config,
                     bool defined = true) {
  if (len > kMaxCachedKeyBytes) return nullptr;
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
  entry.checked = false;
  entry.kind = kind;
  last_used[TableOf(kind)] = &entry;
  return &entry;
}

// Where a config not cached (a key too long) is kept until the next lookup
// of its kind.
LimitSettings uncached_inline;
LimitSettings uncached_named;

// The parsed inline config: its cache entry's (*entry: the entry), or, if
// too long to cache, parsed anew (*entry nullptr).
const LimitSettings* InlineConfigOf(Jsonb* config, SpiConnection* spi, CacheEntry** entry) {
  const char* bytes = VARDATA_ANY(config);
  int len = VARSIZE_ANY_EXHDR(config);
  *entry = FindEntry(EntryKind::kInline, bytes, len, 0);
  if (*entry != nullptr) return &(*entry)->config;
  NeedSpi(spi);
  LimitSettings parsed{};
  ParseConfigJsonb(config, &parsed);  // raises on a bad config: nothing is cached
  *entry = Remember(EntryKind::kInline, bytes, len, 0, parsed);
  if (*entry != nullptr) return &(*entry)->config;
  uncached_inline = parsed;
  return &uncached_inline;
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

// A config its owner set as calls apply it (ratelimit::OwnerBounded), its
// storage options kept.
LimitSettings OwnerBoundedSettings(const LimitSettings& owner) {
  LimitSettings bounded = owner;
  static_cast<LimitConfig&>(bounded) = ratelimit::OwnerBounded(owner);
  return bounded;
}

}  // namespace

void ApplyStorageRules(LimitSettings* config) {
  if (!StorageFor(config->options).keeps_shards) config->shards = 1;
}

void InlineConfig(Jsonb* config, LimitSettings* out, SpiConnection* spi) {
  CacheEntry* entry = nullptr;
  *out = *InlineConfigOf(config, spi, &entry);
}

namespace {

// A name's definition, cached until the definitions generation moves
// (`generation`, read before the lookup: a change during it makes the entry
// miss next time); nullptr for a name without one.
const LimitSettings* NamedConfig(const LimitId& id, uint64 generation, SpiConnection* spi = nullptr) {
  if (const CacheEntry* cached = FindEntry(EntryKind::kNamed, id.name, id.name_len, generation))
    return cached->defined ? &cached->config : nullptr;
  NeedSpi(spi);
  LimitSettings config{};
  bool defined = LookupDefinedConfig(id.name_text, &config);
  // An undefined name is remembered too: inline calls ask on every call.
  const CacheEntry* made = Remember(EntryKind::kNamed, id.name, id.name_len, generation, config, defined);
  if (!defined) return nullptr;
  if (made != nullptr) return &made->config;
  uncached_named = config;
  return &uncached_named;
}

}  // namespace

namespace {

// Changes whenever a definition or an override changes (both only grow).
uint64 ConfigGeneration() { return DefinitionsGeneration() + OverridesGeneration(); }

// The lock a SELECT takes on the definition and override tables, held to the
// transaction's end; taking it accepts the invalidations that DDL committed
// before it was granted.
void LockConfigTables() {
  LockCatalogRelation(DefinitionTableOid, AccessShareLock);
  LockCatalogRelation(OverrideTableOid, AccessShareLock);
  AcceptInvalidationMessages();
}

// One resolution of the call's config from the caches, each read again from
// its table (under that table's lock, config_rows.cpp) where its generation
// moved (definitions: the definitions generation, read before). The configs
// are used where the caches keep them: a lookup of one cache never replaces
// an entry of another (named and inline entries are in tables of their
// own). Returns the inline config's cache entry when the call's config is
// that config alone (no definition, no override), else nullptr.
CacheEntry* ResolveFromCaches(LimitCall* call, uint64 definitions, SpiConnection* spi) {
  const LimitSettings* defined = NamedConfig(call->id, definitions, spi);
  bool has_definition = defined != nullptr;
  LimitSettings overridden;
  bool has_override = LookupOverride(call->id, &overridden, spi);
  CacheEntry* alone = nullptr;
  if (call->inline_config != nullptr) {
    CacheEntry* entry = nullptr;
    const LimitSettings* given = InlineConfigOf(call->inline_config, spi, &entry);
    // A defined name's inline config must be a limit the owner set for it:
    // the definition, or this key's override (which is the one applied).
    if (has_definition && !SameSettings(*given, *defined) &&
        !(has_override && SameSettings(*given, overridden)))
      RaiseNotTheDefinition(call->id);
    call->config = has_definition ? OwnerBoundedSettings(*defined) : *given;
    if (!has_definition && !has_override) alone = entry;
  } else if (has_definition) {
    call->config = OwnerBoundedSettings(*defined);
  } else if (!has_override) {
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    errmsg("rate limit \"%.*s\" is not defined", EchoLength(call->id.name, call->id.name_len),
                           call->id.name),
                    errhint("Pass a config, or define the limit with ratelimit_define().")));
  }
  if (has_override) call->config = OwnerBoundedSettings(overridden);
  call->owner_config = has_definition || has_override;
  ApplyStorageRules(&call->config);
  return alone;
}

}  // namespace

bool OwnerConfigOf(const LimitId& id, LimitSettings* out) {
  LockConfigTables();
  if (LookupOverride(id, out)) return true;
  const LimitSettings* defined = NamedConfig(id, DefinitionsGeneration());
  if (defined != nullptr) *out = *defined;
  return defined != nullptr;
}

bool AppliedOwnerConfig(const LimitId& id, LimitSettings* out) {
  LimitSettings parsed;
  if (!OwnerConfigOf(id, &parsed)) return false;
  *out = OwnerBoundedSettings(parsed);
  ApplyStorageRules(out);
  return true;
}

// Freshness: why a call needs no relation lock to see every committed change
// of the config tables (the same argument is in docs/internals.md, "Config
// freshness").
//
// 1. Every committed change of either table sends an invalidation of it,
//    and that moves its generation (catalog.cpp), which every cached config
//    carries: ratelimit_define, ratelimit_override and direct DML through the
//    tables' statement triggers (InvalidateDefinitions/Overrides), DDL
//    (ALTER, TRUNCATE, VACUUM FULL, DROP) through PostgreSQL itself, and an
//    overflowed invalidation queue resets every generation.
// 2. A committing transaction becomes visible (ProcArrayEndTransaction),
//    then sends its invalidations (AtEOXact_Inval), then releases its locks,
//    and only then does its COMMIT return. So a call that starts after
//    another session's COMMIT returned finds the invalidations queued, and
//    AcceptInvalidationMessages at its start takes them: the change applies
//    to that call. A call that waited for another transaction's lock (a
//    row lock: RefreshConfig after the wait) waited past its AtEOXact_Inval
//    too.
// 3. A call overlapping another transaction's commit, between its
//    ProcArrayEndTransaction and its AtEOXact_Inval, may still use a cached
//    config that a snapshot taken now would see replaced: that call is
//    ordered before the commit, which has not returned. The ACCESS SHARE
//    locks never closed this window for ratelimit_define, ratelimit_override
//    or DML (ROW EXCLUSIVE does not conflict with ACCESS SHARE); they only
//    made a call wait for DDL in progress on the tables, and DDL wait for
//    the caller's transaction. Without them a call reads any table its
//    caches miss under that table's own ACCESS SHARE lock (the lookup's,
//    ExecuteStatementLatest: lock, then look), which waits for such DDL and
//    accepts its invalidations; if that moved a generation, the call
//    resolves again (the loop below), so it never joins a cached part older
//    than the DDL to a part read after it, nor keeps a row read with a
//    snapshot taken before the wait (the latest snapshot is taken before
//    the statement's plan locks the table). What such a read cached carries
//    the generation from before it, so it is never taken for current.
// 4. Nothing of a memory call lasts to its transaction's end that a later
//    change of config could invalidate: its pending grant keeps the config
//    it was taken under for the refund, and a change its own transaction
//    makes is noted and refused (ConfigChangedHere). A storage whose
//    calls stand for SQL statements on the tables, undone by the transaction
//    (Storage::locks_config_tables: the table), still holds the two locks to
//    the transaction's end, as a SELECT on the tables would: taken after the
//    lock-free resolution, which is done again if taking them accepted a
//    change (lock, then look, as before).
//
// A call not connected to SPI yet (spi) connects before the catalog is read
// (the config tables not known since an invalidation), before a table is
// read or a config parsed (a cache's miss), and before the locks of a
// storage whose steps run SQL.
namespace {

// ResolveConfig; the inline config's cache entry when the call's config is
// that config alone (ResolveFromCaches).
CacheEntry* ResolveConfigAlone(LimitCall* call, SpiConnection* spi) {
  AcceptInvalidationMessages();
  bool locked = false;
  for (;;) {
    if (!ConfigTablesKnown()) NeedSpi(spi);
    uint64 definitions = DefinitionsGeneration();
    call->generation = definitions + OverridesGeneration();
    CacheEntry* alone = ResolveFromCaches(call, definitions, spi);
    if (!locked && StorageFor(*call).locks_config_tables) {
      NeedSpi(spi);
      LockConfigTables();
      locked = true;
    }
    if (ConfigGeneration() == call->generation) return alone;
  }
}

// The request validated against the call's config (22023); in shadow mode
// a count that can never fit is a refusal like any other (never_fits):
// answered ok and counted, never an error that breaks the request.
void ValidateCallRequest(LimitCall* call) {
  const LimitSettings& config = call->config;
  const Request& request = call->request;
  call->never_fits = false;
  if (config.shadow) {
    RaiseIfInvalid(ratelimit::ValidateRequestForm(config, request));
    call->never_fits = ratelimit::NeverGrantable(config, request);
  }
  if (!call->never_fits) RaiseIfInvalid(ratelimit::ValidateRequest(config, request));
}

bool SameRequest(const Request& a, const Request& b) { return a.count == b.count && a.reserve == b.reserve; }

// ValidateCallRequest, skipped for a request the inline config's entry
// (`alone`: the call's config is that config alone, which validation depends
// on with the request) found valid last time.
void ValidateCallRequestOf(LimitCall* call, CacheEntry* alone) {
  if (alone != nullptr && alone->checked && SameRequest(alone->checked_request, call->request)) {
    call->never_fits = alone->checked_never_fits;
    return;
  }
  ValidateCallRequest(call);
  if (alone == nullptr) return;
  alone->checked_request = call->request;
  alone->checked_never_fits = call->never_fits;
  alone->checked = true;
}

}  // namespace

void ResolveConfig(LimitCall* call, SpiConnection* spi) { (void)ResolveConfigAlone(call, spi); }

void CompleteLimitCall(LimitCall* call, SpiConnection* spi) {
  ValidateCallRequestOf(call, ResolveConfigAlone(call, spi));
  call->origin =
      ratelimit::WindowOrigin(call->config, call->id.name, call->id.name_len, call->id.key, call->id.key_len);
}

bool RefreshConfig(LimitCall* call) {
  AcceptInvalidationMessages();
  if (ConfigGeneration() == call->generation) return false;
  LimitSettings before = call->config;
  CompleteLimitCall(call);
  return !SameSettings(before, call->config);
}

}  // namespace ratelimit_pg
