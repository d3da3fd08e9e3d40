// A per-backend cache of parsed configs, so a call neither re-parses its
// inline jsonb nor looks up its named definition every time.
//
// Inline configs are keyed by their jsonb bytes (jsonb is normalised: equal
// documents have equal bytes). Named configs are keyed by name and carry the
// definitions generation they were read in; any change to the definition
// table (ratelimit_define/undefine, or direct DML through its trigger) sends
// a relcache invalidation that bumps the generation in every backend.
#include <cstring>

#include "pg_adapter.h"

extern "C" {
#include "common/hashfn.h"
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
  char* key;  // in cache_context
  LimitConfig config;
};

CacheEntry entries[kCacheSlots];
MemoryContext cache_context = nullptr;
uint64 definitions_generation = 1;
Oid watched_definition_table = InvalidOid;

void OnRelcacheInvalidation(Datum arg, Oid relid) {
  (void)arg;
  if (relid == InvalidOid || relid == watched_definition_table) ++definitions_generation;
}

int SlotFor(EntryKind kind, const char* key, int len) {
  uint32 hash = hash_bytes(reinterpret_cast<const unsigned char*>(key), len) ^ static_cast<uint32>(kind);
  return static_cast<int>(hash % kCacheSlots);
}

const LimitConfig* Find(EntryKind kind, const char* key, int len) {
  const CacheEntry& entry = entries[SlotFor(kind, key, len)];
  if (entry.kind != kind || entry.key_len != len || std::memcmp(entry.key, key, len) != 0) return nullptr;
  if (kind == EntryKind::kNamed && entry.generation != definitions_generation) return nullptr;
  return &entry.config;
}

void Remember(EntryKind kind, const char* key, int len, uint64 generation, const LimitConfig& config) {
  if (len > kMaxCachedKeyBytes) return;
  if (cache_context == nullptr)
    cache_context = AllocSetContextCreate(TopMemoryContext, "ratelimit config cache", ALLOCSET_SMALL_SIZES);
  CacheEntry& entry = entries[SlotFor(kind, key, len)];
  if (entry.key != nullptr) pfree(entry.key);
  entry.kind = EntryKind::kEmpty;
  entry.key = static_cast<char*>(MemoryContextAlloc(cache_context, len > 0 ? len : 1));
  std::memcpy(entry.key, key, len);
  entry.key_len = len;
  entry.generation = generation;
  entry.config = config;
  entry.kind = kind;
}

}  // namespace

void RegisterConfigCacheInvalidation() { CacheRegisterRelcacheCallback(OnRelcacheInvalidation, 0); }

void WatchDefinitionTable(Oid definition_table) { watched_definition_table = definition_table; }

void InlineConfig(Jsonb* config, LimitConfig* out) {
  const char* bytes = VARDATA_ANY(config);
  int len = VARSIZE_ANY_EXHDR(config);
  if (const LimitConfig* cached = Find(EntryKind::kInline, bytes, len)) {
    *out = *cached;
    return;
  }
  ParseConfigJsonb(config, out);  // raises on a bad config: nothing is cached
  Remember(EntryKind::kInline, bytes, len, 0, *out);
}

bool NamedConfig(const LimitId& id, LimitConfig* out) {
  if (const LimitConfig* cached = Find(EntryKind::kNamed, id.name, id.name_len)) {
    *out = *cached;
    return true;
  }
  uint64 generation = definitions_generation;  // read before the lookup: a change during it misses next time
  if (!LookupDefinedConfig(id.name_text, out)) return false;
  Remember(EntryKind::kNamed, id.name, id.name_len, generation, *out);
  return true;
}

}  // namespace ratelimit_pg
