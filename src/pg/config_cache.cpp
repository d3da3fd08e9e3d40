// A per-backend cache of parsed configs, so a call neither re-parses its
// inline jsonb nor looks up its named definition every time.
//
// Inline configs are keyed by their jsonb bytes (jsonb is normalised: equal
// documents have equal bytes). Named configs are keyed by name and carry the
// definitions generation they were read in (definitions.cpp): any change to
// the definition table makes every backend's named entries stale.
#include <cstring>

#include "pg_adapter.h"

extern "C" {
#include "common/hashfn.h"
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

int SlotFor(EntryKind kind, const char* key, int len) {
  uint32 hash = hash_bytes(reinterpret_cast<const unsigned char*>(key), len) ^ static_cast<uint32>(kind);
  return static_cast<int>(hash % kCacheSlots);
}

// The cached config of `key`; named entries only if read in `generation`.
const LimitConfig* Find(EntryKind kind, const char* key, int len, uint64 generation) {
  const CacheEntry& entry = entries[SlotFor(kind, key, len)];
  if (entry.kind != kind || entry.key_len != len || std::memcmp(entry.key, key, len) != 0) return nullptr;
  if (entry.generation != generation) return nullptr;
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

bool NamedConfig(const LimitId& id, LimitConfig* out) {
  // Read before the lookup: a change during it makes the entry miss next time.
  uint64 generation = DefinitionsGeneration();
  if (const LimitConfig* cached = Find(EntryKind::kNamed, id.name, id.name_len, generation)) {
    *out = *cached;
    return true;
  }
  if (!LookupDefinedConfig(id.name_text, out)) return false;
  Remember(EntryKind::kNamed, id.name, id.name_len, generation, *out);
  return true;
}

}  // namespace ratelimit_pg
