// Pending grants (pending_grants.h): a backend-local list in
// TopMemoryContext, emptied at every transaction's end, with an index by
// identity so that a limit called again in one subtransaction keeps one
// record (a transaction's records cost O(limits it called), not O(calls)).
// The list, its index and what a subtransaction's end does to it are pure
// (grant_records.h, unit-tested); this file is their PostgreSQL side: the
// callbacks, the memory, the refunds. And the names whose config this
// transaction changed.
#include <cstring>

#include "decide/pending_grants.h"

#include "decide/decide.h"
#include "decide/grant_records.h"
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

bool SameIdentity(const LimitId& x, const LimitId& y) { return CompareLimitIds(x, y) == 0; }

// What the list needs to know of a record (grant_records.h).
struct GrantRules {
  // Whether two records are of one row under one limit (what the index keys by).
  static bool SameKey(const PendingGrant& a, const PendingGrant& b) {
    return a.hash == b.hash && SameIdentity(a.call.id, b.call.id) &&
           SameSettings(a.call.config, b.call.config);
  }
  // Whether record b can be carried by record a: the same row and life,
  // subtransaction and rules. A refund of a kind without windows does not
  // depend on the window. A windowed kind's does: a grant in a later window than a's means
  // the row has moved on (its window never moves back), so a's grants could
  // no longer be given back and b replaces them.
  static bool CarriedBy(const PendingGrant& a, const PendingGrant& b) {
    return a.active && b.active && a.storage == b.storage && a.subid == b.subid && a.keep == b.keep &&
           a.incarnation == b.incarnation && a.call.origin == b.call.origin &&
           a.call.owner_config == b.call.owner_config && SameSettings(a.call.config, b.call.config) &&
           SameIdentity(a.call.id, b.call.id);
  }
  // Adds b's amount to its carrier a (CarriedBy): the amounts of a kind
  // without windows add up, as do a window's in the same window; b in a
  // later window replaces a's (the row has moved on).
  static void Carry(PendingGrant* a, const PendingGrant& b) {
    if (!ratelimit::KindOf(b.call.config.kind).windowed || a->window == b.window) {
      a->amount += b.amount;
    } else {
      a->amount = b.amount;
      a->window = b.window;
    }
  }
};

MemoryContext list_context = nullptr;
using Records = GrantRecords<PendingGrant, GrantRules>;
Records grants;
static_assert(std::is_trivially_destructible_v<Records>);

// The first records of every transaction, and their identities' bytes, in
// storage kept for the backend's life: a transaction that calls a few limits
// allocates nothing for them. More go to list_context.
constexpr int kFirstRecords = 8;
constexpr int kFirstIdentityBytes = 1024;
PendingGrant first_records[kFirstRecords];
int first_ints[Records::IntsFor(kFirstRecords)];
char first_identity_bytes[kFirstIdentityBytes];
int identity_bytes_used = 0;

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

void Clear() {
  note_count = 0;
  own_config_write = false;
  if (list_context != nullptr) MemoryContextReset(list_context);
  grants.Reset();
  identity_bytes_used = 0;
  notes = nullptr;
  note_capacity = 0;
}

// The hash of what the index keys a record by: its identity and the
// limit's main numbers (SameSettings decides; equal limits hash equal).
uint32 RecordHash(const LimitCall& call) {
  const LimitId& id = call.id;
  uint32 h = hash_bytes(reinterpret_cast<const unsigned char*>(id.name), id.name_len);
  if (id.key != nullptr)
    h = hash_combine(h, hash_bytes(reinterpret_cast<const unsigned char*>(id.key), id.key_len) + 1);
  const LimitConfig& c = call.config;
  auto period = static_cast<uint64>(c.period);
  h = hash_combine(h, static_cast<uint32>(c.kind) + 1);
  return hash_combine(h, murmurhash32(static_cast<uint32>(period) ^ static_cast<uint32>(period >> 32)));
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

// Gives back the active grants of subtransaction subid (every one if
// InvalidSubTransactionId), newest first, and drops them. Runs in an abort:
// takes only the storage's short locks, allocates nothing, raises nothing
// (the clock is read without parsing; the step only runs the core).
void GiveBack(SubTransactionId subid) {
  int first = subid == InvalidSubTransactionId ? 0 : grants.FirstOf(subid);
  if (first == grants.Count()) return;
  Micros now = ClockNow();
  grants.RollBack(first, [now](PendingGrant& grant) {
    GiveBackContext context{&grant, now};
    grant.storage->modify(grant.call.id, NewRowRoom{false, 0}, GiveBackStep, &context);
  });
}

void OnXact(XactEvent event, void*) {
  switch (event) {
    case XACT_EVENT_PRE_PREPARE:
      // A prepared transaction outlives this session, which would have to
      // give its grants back: the storage of the first says why not.
      for (int i = 0; i < grants.Count(); ++i)
        if (grants[i].active) grants[i].storage->raise_prepare_refused();
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

void OnSubXact(SubXactEvent event, SubTransactionId subid, SubTransactionId parent, void*) {
  if (event == SUBXACT_EVENT_ABORT_SUB) {
    GiveBack(subid);
    EndNotes(subid, parent, false);
    own_config_write = false;
  } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
    EndNotes(subid, parent, true);
    grants.MoveToParent(subid, parent);
  }
}

// Room for one more record (and its index slots); may raise.
void GrowRecords() {
  if (list_context == nullptr)
    list_context = AllocSetContextCreate(TopMemoryContext, "ratelimit pending grants", ALLOCSET_SMALL_SIZES);
  if (!grants.Full()) return;
  if (grants.Capacity() == 0) {
    grants.Adopt(first_records, first_ints, kFirstRecords);
    return;
  }
  int grown = grants.Grown();
  auto* more = static_cast<PendingGrant*>(MemoryContextAlloc(list_context, sizeof(PendingGrant) * grown));
  auto* ints = static_cast<int*>(MemoryContextAlloc(list_context, sizeof(int) * grants.IntsFor(grown)));
  grants.Adopt(more, ints, grown);
}

// A copy of an identity's bytes for the transaction's records.
const char* CopyIdentityBytes(const char* bytes, int len) {
  char* copy;
  if (len + 1 <= kFirstIdentityBytes - identity_bytes_used) {
    copy = first_identity_bytes + identity_bytes_used;
    identity_bytes_used += len + 1;
  } else {
    copy = static_cast<char*>(MemoryContextAlloc(list_context, len + 1));
  }
  std::memcpy(copy, bytes, len);
  return copy;
}

}  // namespace

void RegisterPendingGrantCallbacks() {
  RegisterXactCallback(OnXact, nullptr);
  RegisterSubXactCallback(OnSubXact, nullptr);
}

int ReservePendingGrant(const Storage& storage, const LimitCall& call) {
  GrowRecords();
  // Built where it goes, every field set.
  PendingGrant& grant = grants.Next();
  grant.storage = &storage;
  grant.call = call;
  grant.amount = 0;
  grant.window = 0;
  grant.incarnation = 0;
  grant.keep = false;
  grant.active = false;
  grant.hash = RecordHash(call);
  LimitId& id = grant.call.id;
  id.name_text = nullptr;
  id.key_text = nullptr;
  int known = grants.NewestOfKey(grant);
  grant.below = known;
  if (known >= 0) {
    id.name = grants[known].call.id.name;  // the same limit again: its bytes are there already
    id.key = grants[known].call.id.key;
  } else {
    id.name = CopyIdentityBytes(id.name, id.name_len);
    if (id.key != nullptr) id.key = CopyIdentityBytes(id.key, id.key_len);
  }
  grant.call.inline_config = nullptr;
  grant.subid = GetCurrentSubTransactionId();
  return grants.AddNext();
}

void RememberGrant(int record, const Decision& decision, bool keep, uint64 incarnation) {
  PendingGrant& grant = grants[record];
  grant.amount = grant.call.request.count;
  grant.window = decision.next.ts;
  grant.incarnation = incarnation;
  grant.keep = keep;
  grant.active = true;
  // A transaction calling one limit again keeps one record (a refund of
  // a + b is a refund of a, then of b: both are capped at capacity alone).
  grants.Remember(record);
}

void ForgetPendingGrant(int record) {
  grants.Forget(record);  // if not the newest, left inactive: dropped at its level's end
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
