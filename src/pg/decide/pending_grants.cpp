// Pending grants (pending_grants.h): a backend-local list in
// TopMemoryContext, emptied at every transaction's end, with an index by
// identity so that a limit called again in one subtransaction keeps one
// record (a transaction's records cost O(limits it called), not O(calls)).
// And the names whose config this transaction changed.
#include <cstring>

#include "decide/pending_grants.h"

#include "decide/decide.h"
#include "policy.h"
#include "support/clock.h"

extern "C" {
#include "access/xact.h"
#include "common/hashfn.h"
#include "utils/memutils.h"
}

namespace ratelimit_pg {
namespace {

struct PendingGrant {
  const Storage* storage;
  LimitCall call;  // identity bytes copied into the list's context
  double amount;
  Micros window;       // the window (of a window kind) the grant was taken from
  uint64 incarnation;  // the life of the row it was taken from (StoredState's)
  uint32 hash;         // of its key (RecordHash)
  int below;           // the newest record of its key when it was added (-1: none)
  SubTransactionId subid;
  bool keep;
  bool active;
};

static_assert(std::is_trivially_destructible_v<PendingGrant>);

MemoryContext list_context = nullptr;
PendingGrant* grants = nullptr;
int count = 0;
int capacity = 0;
// Open addressing over the records, keyed by row and limit (SameKey): slot
// -> index + 1 of the newest record of the key; 0 empty, -1 a tombstone
// (a key whose records were all dropped). 2 * capacity slots, kept up to
// date as records are added, carried, moved and dropped; rebuilt only when
// the records are reallocated or tombstones pile up.
int* index_slots = nullptr;
int tombstones = 0;
bool index_valid = false;
// Scratch for MoveToParent, capacity entries each (allocated with the records).
int* slot_scratch = nullptr;
int* carrier_scratch = nullptr;

// A name whose config this transaction changed (ratelimit_define and the
// others; a direct change of the definition table: every name).
struct ConfigNote {
  const char* name;  // nullptr: every name
  int name_len;
  SubTransactionId subid;
};
ConfigNote* notes = nullptr;
int note_count = 0;
int note_capacity = 0;
bool own_config_write = false;  // one of the functions above is writing the table

bool SameIdentity(const LimitId& x, const LimitId& y) { return CompareLimitIds(x, y) == 0; }

void Clear() {
  count = 0;
  note_count = 0;
  own_config_write = false;
  if (list_context != nullptr) MemoryContextReset(list_context);
  grants = nullptr;
  capacity = 0;
  index_slots = nullptr;
  slot_scratch = nullptr;
  carrier_scratch = nullptr;
  tombstones = 0;
  index_valid = false;
  notes = nullptr;
  note_capacity = 0;
}

// The hash of what the index keys a record by: its identity and the
// limit's main numbers (SameLimit decides; equal limits hash equal).
uint32 RecordHash(const LimitCall& call) {
  const LimitId& id = call.id;
  uint32 h = hash_bytes(reinterpret_cast<const unsigned char*>(id.name), id.name_len);
  if (id.key != nullptr)
    h = hash_combine(h, hash_bytes(reinterpret_cast<const unsigned char*>(id.key), id.key_len) + 1);
  const LimitConfig& c = call.config;
  Micros period = c.period;
  h = hash_combine(h, static_cast<uint32>(c.kind) + 1);
  return hash_combine(h, hash_bytes(reinterpret_cast<const unsigned char*>(&period), sizeof period));
}

// Whether two records are of one row under one limit (what the index keys by).
bool SameKey(const PendingGrant& a, const PendingGrant& b) {
  return a.hash == b.hash && SameIdentity(a.call.id, b.call.id) &&
         ratelimit::SameLimit(a.call.config, b.call.config);
}

int SlotMask() { return 2 * capacity - 1; }

// The slot of g's key: the one holding its newest record, else the first
// free one on its probe path (a tombstone, or the empty slot ending it).
int SlotOfKey(const PendingGrant& g) {
  int mask = SlotMask();
  int reuse = -1;
  for (int slot = static_cast<int>(g.hash) & mask;; slot = (slot + 1) & mask) {
    int at = index_slots[slot];
    if (at == 0) return reuse >= 0 ? reuse : slot;
    if (at < 0) {
      if (reuse < 0) reuse = slot;
    } else if (SameKey(grants[at - 1], g)) {
      return slot;
    }
  }
}

// The newest record in a slot, or -1.
int NewestIn(int slot) { return index_slots[slot] > 0 ? index_slots[slot] - 1 : -1; }

// Points a slot at record `at` (-1: leaves a tombstone).
void SetSlot(int slot, int at) {
  if (index_slots[slot] < 0) --tombstones;
  if (at < 0) ++tombstones;
  index_slots[slot] = at >= 0 ? at + 1 : -1;
}

// Makes the index hold the newest record of each key. Allocates nothing.
void RebuildIndex() {
  std::memset(index_slots, 0, sizeof(int) * 2 * capacity);
  tombstones = 0;
  for (int i = 0; i < count; ++i) index_slots[SlotOfKey(grants[i])] = i + 1;
  index_valid = true;
}

// Takes record i out of the index (it is being dropped): its key's slot
// goes back to the record before it, if the slot was its own.
void Unindex(int i) {
  int slot = SlotOfKey(grants[i]);
  if (index_slots[slot] == i + 1) SetSlot(slot, grants[i].below);
}

struct GiveBackContext {
  const PendingGrant* grant;
  Micros now;
};

// Gives a grant back to its row, as ratelimit_refund would now; a window
// kind only into the window it was taken from (else that window is over, and
// the grant with it), and only into the life of the row it was taken from
// (a reset or a sweep since made it anew). Pure: runs under the storage's lock.
bool GiveBackStep(const StoredState& stored, void* context, RowWrite* out) {
  const auto* refund = static_cast<const GiveBackContext*>(context);
  const LimitCall& call = refund->grant->call;
  if (!stored.state.exists) return false;  // no row: as full as a refund could make it
  if (stored.incarnation != refund->grant->incarnation) return false;
  LimitState live = LiveFor(call, stored, refund->now);
  if (!live.exists) return false;
  Decision d = ratelimit::RefundTaken(call.config, live, refund->now, call.origin, refund->grant->amount,
                                      refund->grant->window);
  if (!d.ok) return false;
  *out = WriteOf(call, d.next, d.full_at);
  return true;
}

// The records of subtransaction subid are the list's last ones: each was
// added while it was the innermost, or re-parented to it when a child it
// started committed. The index of its first.
int FirstOf(SubTransactionId subid) {
  int first = count;
  while (first > 0 && grants[first - 1].subid == subid) --first;
  return first;
}

// Gives back the active grants of subtransaction subid (every one if
// InvalidSubTransactionId), newest first, and drops them. Runs in an abort:
// takes only the storage's short locks, allocates nothing, raises nothing
// (the clock is read without parsing; the step only runs the core).
void GiveBack(SubTransactionId subid) {
  int first = subid == InvalidSubTransactionId ? 0 : FirstOf(subid);
  if (first == count) return;
  Micros now = ClockNow();
  for (int i = count - 1; i >= first; --i) {
    PendingGrant& grant = grants[i];
    if (grant.active) {
      GiveBackContext context{&grant, now};
      grant.storage->modify(grant.call.id, NewRowRoom{false, 0}, GiveBackStep, &context);
    }
    grant.active = false;
    Unindex(i);
    count = i;
  }
  if (tombstones > capacity) RebuildIndex();
}

bool AnyActive() {
  for (int i = 0; i < count; ++i)
    if (grants[i].active) return true;
  return false;
}

void OnXact(XactEvent event, void*) {
  switch (event) {
    case XACT_EVENT_PRE_PREPARE:
      if (AnyActive())
        ereport(ERROR,
                (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                 errmsg("cannot PREPARE a transaction that holds a grant of a memory rate limit"),
                 errdetail("A memory limit's grant is given back if its transaction rolls back; a prepared "
                           "transaction outlives this session, which would have to give it back."),
                 errhint("Take the grant outside the prepared transaction, or configure the limit with "
                         "\"on_rollback\": \"keep\".")));
      break;
    case XACT_EVENT_ABORT:
    case XACT_EVENT_PARALLEL_ABORT:
      GiveBack(InvalidSubTransactionId);
      Clear();
      break;
    case XACT_EVENT_COMMIT:
    case XACT_EVENT_PARALLEL_COMMIT:
    case XACT_EVENT_PREPARE:
      Clear();
      break;
    default:
      break;
  }
}

// The notes of a subtransaction that ends: dropped if it aborts, its
// parent's if it commits (they are the list's last, as grants are).
void EndNotes(SubTransactionId subid, SubTransactionId parent, bool commit) {
  while (note_count > 0 && notes[note_count - 1].subid == subid && !commit) --note_count;
  for (int i = note_count - 1; commit && i >= 0 && notes[i].subid == subid; --i) notes[i].subid = parent;
}

bool CarriedBy(const PendingGrant& a, const PendingGrant& b);
void Carry(PendingGrant* carrier, const PendingGrant& grant);

// A committed subtransaction's records become its parent's: each carried by
// the parent's newest record of its key where it can be (so a call per
// subtransaction, as a PL/pgSQL exception block makes, still keeps one
// record per limit), else moved down; the index follows, slot by slot. A
// record kept only for its subtransaction ("keep"), or never granted, is
// dropped. Allocates nothing.
void MoveToParent(SubTransactionId subid, SubTransactionId parent) {
  int first = FirstOf(subid);
  int n = count - first;
  // Before anything moves: each record's slot, and its key's newest record
  // in the parent (down its chain of earlier records).
  for (int k = 0; k < n; ++k) {
    const PendingGrant& grant = grants[first + k];
    slot_scratch[k] = index_slots[SlotOfKey(grant)] == first + k + 1 ? SlotOfKey(grant) : -1;
    int below = grant.below;
    while (below >= first) below = grants[below].below;
    carrier_scratch[k] = below;
  }
  int kept = first;
  for (int k = 0; k < n; ++k) {
    PendingGrant grant = grants[first + k];
    grant.subid = parent;
    int carrier = carrier_scratch[k];
    int at = -1;  // where the record is now (-1: dropped)
    if (grant.active && !grant.keep) {
      if (carrier >= 0 && CarriedBy(grants[carrier], grant)) {
        Carry(&grants[carrier], grant);
        at = carrier;
      } else {
        grant.below = carrier;
        grants[kept] = grant;
        at = kept++;
      }
    }
    if (slot_scratch[k] >= 0) SetSlot(slot_scratch[k], at >= 0 ? at : carrier);
  }
  count = kept;
}

void OnSubXact(SubXactEvent event, SubTransactionId subid, SubTransactionId parent, void*) {
  if (event == SUBXACT_EVENT_ABORT_SUB) {
    GiveBack(subid);
    EndNotes(subid, parent, false);
    own_config_write = false;
  } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
    EndNotes(subid, parent, true);
    MoveToParent(subid, parent);
  }
}

// Room for one more record (and its index slots); may raise.
void GrowRecords() {
  if (list_context == nullptr)
    list_context = AllocSetContextCreate(TopMemoryContext, "ratelimit pending grants", ALLOCSET_SMALL_SIZES);
  if (count < capacity) return;
  int grown = capacity == 0 ? 8 : capacity * 2;
  auto* more = static_cast<PendingGrant*>(MemoryContextAlloc(list_context, sizeof(PendingGrant) * grown));
  auto* slots = static_cast<int*>(MemoryContextAlloc(list_context, sizeof(int) * 4 * grown));
  if (count > 0) std::memcpy(more, grants, sizeof(PendingGrant) * count);
  grants = more;
  index_slots = slots;
  slot_scratch = slots + 2 * grown;
  carrier_scratch = slots + 3 * grown;
  capacity = grown;
  index_valid = false;
}

}  // namespace

void RegisterPendingGrantCallbacks() {
  RegisterXactCallback(OnXact, nullptr);
  RegisterSubXactCallback(OnSubXact, nullptr);
}

int ReservePendingGrant(const Storage& storage, const LimitCall& call) {
  GrowRecords();
  if (!index_valid) RebuildIndex();
  PendingGrant& grant = grants[count];
  grant = PendingGrant{};
  grant.storage = &storage;
  grant.call = call;
  grant.hash = RecordHash(call);
  LimitId& id = grant.call.id;
  id.name_text = nullptr;
  id.key_text = nullptr;
  int known = NewestIn(SlotOfKey(grant));
  grant.below = known;
  if (known >= 0) {
    id.name = grants[known].call.id.name;  // the same limit again: its bytes are there already
    id.key = grants[known].call.id.key;
  } else {
    char* name = static_cast<char*>(MemoryContextAlloc(list_context, id.name_len + 1));
    std::memcpy(name, id.name, id.name_len);
    id.name = name;
    if (id.key != nullptr) {
      char* key = static_cast<char*>(MemoryContextAlloc(list_context, id.key_len + 1));
      std::memcpy(key, id.key, id.key_len);
      id.key = key;
    }
  }
  grant.call.inline_config = nullptr;
  grant.subid = GetCurrentSubTransactionId();
  return count++;
}

namespace {

// Whether record b can be carried by record a: the same row and life,
// subtransaction and rules. A token bucket's refund does not depend on the
// window. A window kind's does: a grant in a later window than a's means the
// row has moved on (its window never moves back), so a's grants could no
// longer be given back and b replaces them.
bool CarriedBy(const PendingGrant& a, const PendingGrant& b) {
  return a.active && b.active && a.storage == b.storage && a.subid == b.subid && a.keep == b.keep &&
         a.incarnation == b.incarnation && a.call.origin == b.call.origin &&
         a.call.owner_config == b.call.owner_config && ratelimit::SameLimit(a.call.config, b.call.config) &&
         SameIdentity(a.call.id, b.call.id);
}

// Adds b's amount to its carrier a (CarriedBy): a token bucket's amounts
// add up, as do a window's in the same window; b in a later window
// replaces a's (the row has moved on).
void Carry(PendingGrant* a, const PendingGrant& b) {
  if (b.call.config.kind == ratelimit::Kind::kTokenBucket || a->window == b.window) {
    a->amount += b.amount;
  } else {
    a->amount = b.amount;
    a->window = b.window;
  }
}

}  // namespace

void RememberGrant(int record, const Decision& decision, bool keep, uint64 incarnation) {
  PendingGrant& grant = grants[record];
  grant.amount = grant.call.request.count;
  grant.window = decision.next.ts;
  grant.incarnation = incarnation;
  grant.keep = keep;
  grant.active = true;
  // A transaction calling one limit again keeps one record (a refund of
  // a + b is a refund of a, then of b: both are capped at capacity alone).
  int slot = SlotOfKey(grant);
  int known = NewestIn(slot);
  if (record == count - 1 && known >= 0 && known != record && CarriedBy(grants[known], grant)) {
    Carry(&grants[known], grant);
    --count;
    return;
  }
  SetSlot(slot, record);
}

void ForgetPendingGrant(int record) {
  if (record == count - 1) --count;  // else left inactive: dropped at the transaction's end
}

void EndOwnConfigWrite() { own_config_write = false; }

void NoteDirectConfigChange() {
  if (!own_config_write) NoteConfigChange(nullptr);
}

void NoteConfigChange(const LimitId* id) {
  if (list_context == nullptr)
    list_context = AllocSetContextCreate(TopMemoryContext, "ratelimit pending grants", ALLOCSET_SMALL_SIZES);
  if (note_count == note_capacity) {
    int grown = note_capacity == 0 ? 4 : note_capacity * 2;
    auto* more = static_cast<ConfigNote*>(MemoryContextAlloc(list_context, sizeof(ConfigNote) * grown));
    if (note_count > 0) std::memcpy(more, notes, sizeof(ConfigNote) * note_count);
    notes = more;
    note_capacity = grown;
  }
  ConfigNote note{nullptr, 0, GetCurrentSubTransactionId()};
  if (id == nullptr && note_count > 0 && notes[note_count - 1].name == nullptr &&
      notes[note_count - 1].subid == note.subid)
    return;  // every name is noted already
  if (id != nullptr) {
    char* name = static_cast<char*>(MemoryContextAlloc(list_context, id->name_len + 1));
    std::memcpy(name, id->name, id->name_len);
    note.name = name;
    note.name_len = id->name_len;
    own_config_write = true;
  }
  notes[note_count++] = note;
}

bool ConfigChangedHere(const LimitId& id) {
  for (int i = 0; i < note_count; ++i) {
    const ConfigNote& note = notes[i];
    if (note.name == nullptr) return true;
    if (note.name_len == id.name_len && std::memcmp(note.name, id.name, id.name_len) == 0) return true;
  }
  return false;
}

}  // namespace ratelimit_pg
