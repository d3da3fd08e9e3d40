// The owner's config rows: per-key overrides, the rows of ratelimit_override
// (name, key, config), and what a call needs to know of them cheaply; and
// named limits, the rows of ratelimit_definition (at the end).
//
// A call first asks whether its name has any override at all: a set of the
// names that have one, and of the (name, key) pairs, loaded once per backend
// and reloaded only after an invalidation of the override table
// (ratelimit_override/unoverride and any direct DML send one, through its
// statement trigger, as for definitions). A name outside the set pays one
// hash lookup and nothing else; a key of such a name without an override,
// two. Only an overridden key reads its config, once, into a small cache
// stamped with the same generation. (Past kMaxTrackedOverrides overrides the
// sets are not kept, and every call looks its key up through that cache.)
//
// Lookups read with the latest snapshot (ExecuteConfigStatementLatest), so a
// cached answer is never older than the invalidation that stamps it, even
// in a REPEATABLE READ transaction.
#include <cstring>

#include "config/config_rows.h"

#include "config/config_json.h"
#include "config/config_sql.h"
#include "support/catalog.h"

extern "C" {
#include "common/hashfn.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
}

namespace ratelimit_pg {
namespace {

// More overrides than this: every call looks its key up.
constexpr int kMaxTrackedOverrides = 65536;
constexpr int kKeySlots = 256;               // direct-mapped; a collision replaces
constexpr int kMaxCachedIdBytes = 2 * 1024;  // longer (name, key) pairs are looked up every time

// ---- the set of names with any override ---------------------------------

// A name (key_len -1) or a (name, key) pair with an override.
struct NameSlot {
  uint32 hash;
  int name_len;
  int key_len;
  char* bytes;  // name then key; nullptr: empty slot
};

struct NameSet {
  uint64 generation;  // 0: not loaded
  bool all;           // too many overrides to track: every key may have one
  int mask;           // slots - 1 (a power of two minus one)
  NameSlot* slots;
  int used;  // slots taken (0: no override at all, nothing to look up)
};

NameSet names{};
MemoryContext names_context = nullptr;

uint32 HashBytes(const char* bytes, int len) {
  return hash_bytes(reinterpret_cast<const unsigned char*>(bytes), len);
}

// The hash of a name (key nullptr) or of a (name, key) pair.
uint32 EntryHash(const char* name, int name_len, const char* key, int key_len) {
  uint32 hash = HashBytes(name, name_len);
  return key == nullptr ? hash : hash_combine(hash, HashBytes(key, key_len));
}

bool SlotIs(const NameSlot& slot, uint32 hash, const char* name, int name_len, const char* key, int key_len) {
  return slot.hash == hash && slot.name_len == name_len && slot.key_len == (key ? key_len : -1) &&
         std::memcmp(slot.bytes, name, name_len) == 0 &&
         (key == nullptr || std::memcmp(slot.bytes + name_len, key, key_len) == 0);
}

// Whether the set has the name (key nullptr) or the pair.
bool InSet(const char* name, int name_len, const char* key, int key_len) {
  uint32 hash = EntryHash(name, name_len, key, key_len);
  for (int i = static_cast<int>(hash) & names.mask;; i = (i + 1) & names.mask) {
    const NameSlot& slot = names.slots[i];
    if (slot.bytes == nullptr) return false;
    if (SlotIs(slot, hash, name, name_len, key, key_len)) return true;
  }
}

void AddEntry(const char* name, int name_len, const char* key, int key_len) {
  if (InSet(name, name_len, key, key_len)) return;
  uint32 hash = EntryHash(name, name_len, key, key_len);
  int i = static_cast<int>(hash) & names.mask;
  while (names.slots[i].bytes != nullptr) i = (i + 1) & names.mask;
  NameSlot& slot = names.slots[i];
  int len = name_len + (key ? key_len : 0);
  slot.bytes = static_cast<char*>(MemoryContextAlloc(names_context, len > 0 ? len : 1));
  std::memcpy(slot.bytes, name, name_len);
  if (key != nullptr) std::memcpy(slot.bytes + name_len, key, key_len);
  slot.hash = hash;
  slot.name_len = name_len;
  slot.key_len = key ? key_len : -1;
  ++names.used;
}

// Reloads the set from the table (SPI connected). Memory of the previous set
// is freed first; the set is marked loaded only once complete.
void LoadNames(uint64 current) {
  names.generation = 0;
  if (names_context == nullptr)
    names_context = AllocSetContextCreate(TopMemoryContext, "ratelimit override names", ALLOCSET_SMALL_SIZES);
  MemoryContextReset(names_context);
  names.slots = nullptr;
  names.used = 0;
  ExecuteConfigStatementLatest(ConfigStatement::kOverrideNames, nullptr, nullptr, SPI_OK_SELECT,
                               kMaxTrackedOverrides + 1);
  uint64 count = SPI_processed;
  names.all = count > static_cast<uint64>(kMaxTrackedOverrides);
  if (!names.all) {
    int slots = 16;
    while (static_cast<uint64>(slots) < count * 4) slots *= 2;  // a name and a pair per row
    names.mask = slots - 1;
    names.slots = static_cast<NameSlot*>(MemoryContextAllocZero(names_context, sizeof(NameSlot) * slots));
    TupleDesc desc = SPI_tuptable->tupdesc;
    for (uint64 row = 0; row < count; ++row) {
      bool isnull = false;
      text* name = DatumGetTextPP(SPI_getbinval(SPI_tuptable->vals[row], desc, 1, &isnull));
      text* key = DatumGetTextPP(SPI_getbinval(SPI_tuptable->vals[row], desc, 2, &isnull));
      AddEntry(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), nullptr, 0);
      AddEntry(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
    }
  }
  SPI_freetuptable(SPI_tuptable);
  names.generation = current;
}

// ---- (name, key) configs --------------------------------------------------

struct KeySlot {
  uint64 generation;  // 0: empty
  bool has_override;
  LimitSettings config;
  int name_len;
  int key_len;
  char* bytes;  // name then key, in key_context
};

KeySlot key_slots[kKeySlots];
MemoryContext key_context = nullptr;

KeySlot& SlotFor(const LimitId& id) {
  uint32 hash = HashBytes(id.name, id.name_len) * 31 + HashBytes(id.key, id.key_len);
  return key_slots[hash % kKeySlots];
}

bool SlotMatches(const KeySlot& slot, const LimitId& id, uint64 current) {
  return slot.generation == current && slot.name_len == id.name_len && slot.key_len == id.key_len &&
         std::memcmp(slot.bytes, id.name, id.name_len) == 0 &&
         std::memcmp(slot.bytes + id.name_len, id.key, id.key_len) == 0;
}

void RememberKey(const LimitId& id, uint64 current, bool has_override, const LimitSettings& config) {
  if (id.name_len + id.key_len > kMaxCachedIdBytes) return;
  if (key_context == nullptr)
    key_context = AllocSetContextCreate(TopMemoryContext, "ratelimit override keys", ALLOCSET_SMALL_SIZES);
  KeySlot& slot = SlotFor(id);
  slot.generation = 0;
  if (slot.bytes != nullptr) pfree(slot.bytes);
  slot.bytes = static_cast<char*>(MemoryContextAlloc(key_context, id.name_len + id.key_len + 1));
  std::memcpy(slot.bytes, id.name, id.name_len);
  std::memcpy(slot.bytes + id.name_len, id.key, id.key_len);
  slot.name_len = id.name_len;
  slot.key_len = id.key_len;
  slot.has_override = has_override;
  slot.config = config;
  slot.generation = current;
}

}  // namespace

bool LookupOverride(const LimitId& id, LimitSettings* out, SpiConnection* spi) {
  if (id.key_text == nullptr || !OidIsValid(OverrideTableOid())) return false;
  uint64 current = OverridesGeneration();
  if (names.generation != current) {
    NeedSpi(spi);
    LoadNames(current);
  }
  if (!names.all && (names.used == 0 || !InSet(id.name, id.name_len, nullptr, 0) ||
                     !InSet(id.name, id.name_len, id.key, id.key_len)))
    return false;
  const KeySlot& slot = SlotFor(id);
  if (SlotMatches(slot, id, current)) {
    if (slot.has_override) *out = slot.config;
    return slot.has_override;
  }
  NeedSpi(spi);
  Jsonb* stored = ReadOverrideConfig(id.name_text, id.key_text);
  LimitSettings config{};
  if (stored != nullptr) ParseConfigJsonb(stored, &config);
  RememberKey(id, current, stored != nullptr, config);
  if (stored != nullptr) *out = config;
  return stored != nullptr;
}

Jsonb* ReadOverrideConfig(text* name, text* key) {
  Datum values[2] = {PointerGetDatum(name), PointerGetDatum(key)};
  char nulls[2] = {' ', ' '};
  ExecuteConfigStatementLatest(ConfigStatement::kOverrideLookup, values, nulls, SPI_OK_SELECT, 1);
  Jsonb* config = nullptr;
  if (SPI_processed == 1) {
    bool isnull = false;
    config = DatumGetJsonbP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
  }
  return config;
}

void UpsertOverride(text* name, text* key, Jsonb* config) {
  Datum values[3] = {PointerGetDatum(name), PointerGetDatum(key), JsonbPGetDatum(config)};
  char nulls[3] = {' ', ' ', ' '};
  ExecuteConfigStatement(ConfigStatement::kOverrideUpsert, values, nulls, SPI_OK_INSERT, 0);
}

bool DeleteOverride(text* name, text* key) {
  Datum values[2] = {PointerGetDatum(name), PointerGetDatum(key)};
  char nulls[2] = {' ', ' '};
  ExecuteConfigStatement(ConfigStatement::kOverrideDelete, values, nulls, SPI_OK_DELETE, 0);
  return SPI_processed > 0;
}

// Named limits: the rows of ratelimit_definition. Any change to the table,
// through ratelimit_define/undefine or direct DML (its statement trigger),
// sends a relcache invalidation of the table, which moves the definitions
// generation (catalog.h) that config_cache.cpp's named entries carry.

bool LookupDefinedConfig(text* name, LimitSettings* config) {
  Datum values[1] = {PointerGetDatum(name)};
  char nulls[1] = {' '};
  ExecuteConfigStatementLatest(ConfigStatement::kDefinitionLookup, values, nulls, SPI_OK_SELECT, 1);
  if (SPI_processed == 0) return false;
  bool isnull = false;
  Datum stored = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
  ParseConfigJsonb(DatumGetJsonbP(stored), config);
  return true;
}

void UpsertDefinition(text* name, Jsonb* config) {
  Datum values[2] = {PointerGetDatum(name), JsonbPGetDatum(config)};
  char nulls[2] = {' ', ' '};
  ExecuteConfigStatement(ConfigStatement::kDefinitionUpsert, values, nulls, SPI_OK_INSERT, 0);
}

bool DeleteDefinition(text* name) {
  Datum values[1] = {PointerGetDatum(name)};
  char nulls[1] = {' '};
  ExecuteConfigStatement(ConfigStatement::kDefinitionDelete, values, nulls, SPI_OK_DELETE, 0);
  return SPI_processed > 0;
}

}  // namespace ratelimit_pg
