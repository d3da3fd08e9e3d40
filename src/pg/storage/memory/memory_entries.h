// The memory storage's entries (memory_entries.cpp), shared by the files
// of the memory storage: the Storage (memory_storage.cpp) and what the
// state file, redo and the durability worker do with the tables
// (memory_recovery.cpp). Nothing outside storage/memory includes it.
//
// An entry is keyed by its identity whole (the database, and name and key
// bytes, at most kIdentityBytes together): exact, with no collision to
// reason about, and ratelimit_status can show it. Each database has its own
// limits, as it has its own state table. It holds the row a table would hold (a
// RowWrite: state, kind tag, idle_at). A call takes the entry's partition
// lock only (dshash's: one of 128), for as long as the core decides.
//
// Two tables, so that the usual identity costs what it needs: a compact
// entry (112 bytes, 128 with dshash's item header: a DSA size class) holds
// a name and key of up to kMemoryCompactBytes together; a long one (296
// bytes, 320 with the header) up to kIdentityBytes. An identity lives in the
// one its length says, so each is found with one probe.
//
// Bounded: ratelimit.memory_max_keys entries of both tables together, of
// which entries made under callers' inline configs (not the owner's
// definitions or overrides) may take half, so a caller with nothing but
// PUBLIC's grants can never take a slot from the owner's defined limits.
// Long entries and distinct names (memory_names.h) are bounded each by
// PartMost() (1 % of memory_max_keys, at least 10,000 or all of them),
// with the same half for inline configs: with the preload, shared memory is
// reserved for that many long entries and names, not for memory_max_keys.
// An entry idle at now (back in its initial state) is the same as none; when
// a bound is reached a new key sweeps the idle ones out first (a sweep takes
// the partition locks one at a time), and only if they are live is there no
// room.
#pragma once

#include "storage/memory/memory_names.h"
#include "storage/memory/memory_record.h"
#include "shmem/shared_tables.h"
#include "shmem/slot_quota.h"

extern "C" {
#include "port/atomics.h"
#include "storage/condition_variable.h"
}

namespace ratelimit_pg {
namespace memory {

constexpr int kIdentityBytes = kMemoryIdentityBytes;
constexpr int kCompactBytes = kMemoryCompactBytes;
constexpr uint8 kNullKey = 0xFF;  // key_len of the NULL key

// An identity as both tables' keys begin: the database, the name's and the
// key's lengths, then the name and key bytes (zero after them). A table's
// key is its first 6 + capacity bytes.
struct IdentityKey {
  Oid database;
  uint8 name_len;
  uint8 key_len;  // kNullKey: the NULL key
  char bytes[kIdentityBytes];
};

// The row of an entry, packed: a RowWrite's values (keep_prev is a flag of
// the entry) and the entry's life.
struct PackedRow {
  double value;
  Micros ts;
  double prev;
  Micros idle_at;
  Micros period;
  uint64 incarnation;  // this life of the entry (StoredState's); 0: a placeholder
};

// An entry is made in two steps under its partition lock: inserted as a
// placeholder (incarnation 0: answers as no entry, counted nowhere, idle
// at once), then made live (counted, given an incarnation) once there is
// room. An error between them (dshash's allocation of the names table) leaves
// only a placeholder, which a sweep deletes: nothing is counted without its
// entry, and no PG_CATCH gives anything back.
template <int Capacity>
struct EntryOf {
  Oid database;
  uint8 name_len;
  uint8 key_len;
  char bytes[Capacity];
  // Bit 0: made under a caller's inline config (a slot of the callers'
  // share). Bits 1-7: the log epoch of the entry's last WAL record
  // (memory_guard.cpp re-logs an entry whose epoch is not the current one).
  uint8 inline_share;
  uint8 keep_prev;  // the RowWrite's
  PackedRow row;
};
using CompactEntry = EntryOf<kCompactBytes>;
using LongEntry = EntryOf<kIdentityBytes>;

static_assert(std::is_trivially_copyable_v<IdentityKey>);
static_assert(offsetof(CompactEntry, bytes) == offsetof(IdentityKey, bytes));
static_assert(offsetof(LongEntry, bytes) == offsetof(IdentityKey, bytes));
// What docs/memory.md says an entry takes: 112 and 296 bytes, with dshash's
// 16-byte item header 128 and 312, in the DSA's size classes 128 and 320
// (scripts/memory-sizing-test.sh measures the whole).
static_assert(sizeof(CompactEntry) == 112);
static_assert(sizeof(LongEntry) == 296);

// What the code needs of a table's entries.
struct Layout {
  int capacity;         // identity bytes
  size_t key_size;      // the first key_size bytes of an entry
  size_t flags_offset;  // inline_share, then keep_prev
  size_t row_offset;
  size_t entry_size;
};

// inline: one object in every file (their addresses tell the tables apart).
inline constexpr Layout kCompact = {kCompactBytes, offsetof(CompactEntry, inline_share),
                                    offsetof(CompactEntry, inline_share), offsetof(CompactEntry, row),
                                    sizeof(CompactEntry)};
inline constexpr Layout kLong = {kIdentityBytes, offsetof(LongEntry, inline_share),
                                 offsetof(LongEntry, inline_share), offsetof(LongEntry, row),
                                 sizeof(LongEntry)};
// The two tables, as DefineStorages registered them (shmem/shared_tables.h).
inline SharedTable memory_compact_table = kNoSharedTable;
inline SharedTable memory_long_table = kNoSharedTable;
inline constexpr const Layout* kLayouts[] = {&kCompact, &kLong};

struct MemoryHeader {
  uint64 seed;      // first: of the keys' hash
  SlotQuota slots;  // entries of both tables; the share: entries made under callers' inline configs
  // No entry is idle before next_idle_at (microseconds; a bound, never
  // later than the earliest idle_at): a full table is swept only from then
  // on, or while a sweep runs (sweeps > 0). A sweep sets it to the earliest
  // idle_at it leaves; a write of an earlier one lowers it.
  pg_atomic_uint64 next_idle_at;
  pg_atomic_uint32 sweeps;
  pg_atomic_uint64 incarnations;  // the last one given (of both tables)
  // With ratelimit.memory_durability = wal (memory_wal.h): the log epoch
  // (moved by memory_guard.cpp at each checkpoint it covers), and whether
  // its worker has logged every entry since the server started, without
  // which no write is logged (sleepers on durable_changed).
  pg_atomic_uint32 log_epoch;
  pg_atomic_uint32 durable;
  ConditionVariable durable_changed;
};

struct LongHeader {
  uint64 seed;      // first: of the keys' hash
  SlotQuota slots;  // long entries; the share as MemoryHeader's
};

extern MemoryHeader* header;
extern LongHeader* long_header;
extern int memory_max_keys;

// The tables (both, or neither: nullptr without shared memory).
struct Tables {
  dshash_table* of[2];
  dshash_table* For(const Layout& layout) const { return of[&layout == &kLong ? 1 : 0]; }
};

inline int UsedBytes(const IdentityKey& key) {
  return key.name_len + (key.key_len == kNullKey ? 0 : key.key_len);
}

inline const Layout& LayoutOf(const IdentityKey& key) {
  return UsedBytes(key) <= kCompactBytes ? kCompact : kLong;
}

// An entry's parts.
inline const IdentityKey& KeyIn(const void* entry) { return *static_cast<const IdentityKey*>(entry); }
inline const char* BytesIn(const void* entry) {
  return static_cast<const char*>(entry) + offsetof(IdentityKey, bytes);
}
inline uint8* FlagsIn(void* entry, const Layout& layout) {
  return static_cast<uint8*>(entry) + layout.flags_offset;
}
inline PackedRow* RowIn(void* entry, const Layout& layout) {
  return reinterpret_cast<PackedRow*>(static_cast<char*>(entry) + layout.row_offset);
}
inline const PackedRow* RowIn(const void* entry, const Layout& layout) {
  return reinterpret_cast<const PackedRow*>(static_cast<const char*>(entry) + layout.row_offset);
}
constexpr uint8 kInlineShareBit = 1;

inline bool InlineShare(const void* entry, const Layout& layout) {
  return (FlagsIn(const_cast<void*>(entry), layout)[0] & kInlineShareBit) != 0;
}

// An epoch as the entry's flag bits 1-7 hold it.
inline uint8 EpochBits(uint32 epoch) { return static_cast<uint8>((epoch & 0x7F) << 1); }
inline int KeyLen(const IdentityKey& key) { return key.key_len == kNullKey ? -1 : key.key_len; }

// The RowWrite an entry holds.
inline RowWrite RowOf(const void* entry, const Layout& layout) {
  const PackedRow* row = RowIn(entry, layout);
  RowWrite write{};
  write.next.exists = true;
  write.next.value = row->value;
  write.next.ts = row->ts;
  write.next.prev = row->prev;
  write.keep_prev = FlagsIn(const_cast<void*>(entry), layout)[1] != 0;
  write.idle_at = row->idle_at;
  write.period = row->period;
  return write;
}

// The record of an entry (its bytes are the entry's).
inline MemoryRecord RecordOf(const void* entry, const Layout& layout) {
  const IdentityKey& key = KeyIn(entry);
  MemoryRecord record{};
  record.database = key.database;
  record.name_len = key.name_len;
  record.key_len = KeyLen(key);
  record.bytes = BytesIn(entry);
  record.row = RowOf(entry, layout);
  record.inline_share = InlineShare(entry, layout);
  return record;
}

// Whether an entry is live (a placeholder is not), and idle at `now`.
inline bool Live(const void* entry, const Layout& layout) { return RowIn(entry, layout)->incarnation != 0; }

inline bool IdleAt(const void* entry, const Layout& layout, Micros now) {
  return now >= RowIn(entry, layout)->idle_at;
}

// ---- memory_entries.cpp ----

int MaxKeys();
// The most long entries, and distinct names: 1 % of memory_max_keys, at
// least 10,000 (or memory_max_keys, if fewer).
int PartMost();
dshash_hash HashKey(const void* v, size_t, void* arg);
int CompareKeys(const void* a, const void* b, size_t, void*);
void InitHeader(void* memory);
void InitLongHeader(void* memory);
Tables TablesOrNull();
Tables TablesOrRaise();
bool TryMakeKey(Oid database, int name_len, int key_len, const char* name, const char* key, IdentityKey* out);
bool TryKeyOf(const LimitId& id, IdentityKey* key);
IdentityKey KeyOf(const LimitId& id);
ModifyResult TakeRoom(const IdentityKey& key, const Layout& layout, const NewRowRoom& room);
void ReleaseRoom(const void* entry, const Layout& layout);
void Store(void* entry, const Layout& layout, const RowWrite& write);
bool SweepMayFree(Micros now);
int64 SweepIdle(const Tables& tables, Micros now, Oid database);
int64 ForgetDroppedDatabases(const Tables& tables);
void* FindOrInsert(dshash_table* table, const Layout& layout, const IdentityKey& key);
uint64 NewIncarnation();
void LogWrite(void* entry, const Layout& layout);
// A write's mark: logged (LogWrite), or, by a standby backend's own call,
// marked as the standby's own decision (kStandbyOwn), which redo may evict
// for the primary's entries; nothing otherwise (redo, a file's load).
void MarkWrite(void* entry, const Layout& layout, bool log);
// The epoch bits of an entry a standby's own call wrote (no epoch is
// current in recovery; the worker's first pass after a promotion re-logs
// and re-marks every entry).
constexpr uint8 kStandbyOwn = 0xFE;
inline bool StandbyOwn(const void* entry, const Layout& layout) {
  return (FlagsIn(const_cast<void*>(entry), layout)[0] & ~kInlineShareBit) == kStandbyOwn;
}
void WaitUntilDurable();
ModifyResult MakeLive(dshash_table* table, const Layout& layout, void* entry, const NewRowRoom& room,
                      uint64 incarnation, const RowWrite& write, bool log);
StoredState StoredOf(const void* entry, const Layout& layout);
void DeleteEntry(dshash_table* table, const Layout& layout, void* entry);

}  // namespace memory
}  // namespace ratelimit_pg
