// Pending grants (pending_grants.h): a backend-local list in
// TopMemoryContext, emptied at every transaction's end.
#include <cstring>

#include "pending_grants.h"

#include "clock.h"
#include "decide.h"
#include "policy.h"

extern "C" {
#include "access/xact.h"
#include "utils/memutils.h"
}

namespace ratelimit_pg {
namespace {

struct PendingGrant {
  const Storage* storage;
  LimitCall call;  // identity bytes copied into the list's context
  double amount;
  Micros window;  // the window (of a window kind) the grant was taken from
  SubTransactionId subid;
  bool keep;
  bool active;
};

static_assert(std::is_trivially_destructible_v<PendingGrant>);

MemoryContext list_context = nullptr;
PendingGrant* grants = nullptr;
int count = 0;
int capacity = 0;

bool SameIdentity(const LimitId& x, const LimitId& y) {
  if (x.name_len != y.name_len || std::memcmp(x.name, y.name, x.name_len) != 0) return false;
  if ((x.key == nullptr) != (y.key == nullptr)) return false;
  return x.key == nullptr || (x.key_len == y.key_len && std::memcmp(x.key, y.key, x.key_len) == 0);
}

void Clear() {
  count = 0;
  if (list_context != nullptr) MemoryContextReset(list_context);
  grants = nullptr;
  capacity = 0;
}

struct RefundContext {
  const PendingGrant* grant;
  Micros now;
};

// Gives a grant back to its row, as ratelimit_refund would now; a window
// kind only into the window it was taken from (else that window is over, and
// the grant with it). Pure: runs under the storage's lock.
bool RefundStep(const StoredState& stored, void* context, RowWrite* out) {
  const auto* refund = static_cast<const RefundContext*>(context);
  const LimitCall& call = refund->grant->call;
  if (!stored.state.exists) return false;  // no row: as full as a refund could make it
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
// takes only the storage's short locks, allocates nothing, raises nothing.
void GiveBack(SubTransactionId subid) {
  int first = subid == InvalidSubTransactionId ? 0 : FirstOf(subid);
  if (first == count) return;
  Micros now = ClockNow();
  for (int i = count - 1; i >= first; --i) {
    PendingGrant& grant = grants[i];
    if (grant.active) {
      RefundContext context{&grant, now};
      grant.storage->modify(grant.call.id, NewRowRoom{false, 0}, RefundStep, &context);
    }
    grant.active = false;
    count = i;  // (an error midway leaves the rest to the transaction's abort)
  }
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

void OnSubXact(SubXactEvent event, SubTransactionId subid, SubTransactionId parent, void*) {
  if (event == SUBXACT_EVENT_ABORT_SUB) {
    GiveBack(subid);
  } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
    int kept = FirstOf(subid);
    for (int i = kept; i < count; ++i) {
      PendingGrant& grant = grants[i];
      if (grant.keep) continue;  // kept from now on: the all-or-nothing step it was taken in succeeded
      grant.subid = parent;
      grants[kept++] = grant;
    }
    count = kept;
  }
}

}  // namespace

void RegisterPendingGrantCallbacks() {
  RegisterXactCallback(OnXact, nullptr);
  RegisterSubXactCallback(OnSubXact, nullptr);
}

int ReservePendingGrant(const Storage& storage, const LimitCall& call) {
  if (list_context == nullptr)
    list_context = AllocSetContextCreate(TopMemoryContext, "ratelimit pending grants", ALLOCSET_SMALL_SIZES);
  if (count == capacity) {
    int grown = capacity == 0 ? 8 : capacity * 2;
    auto* more = static_cast<PendingGrant*>(MemoryContextAlloc(list_context, sizeof(PendingGrant) * grown));
    if (count > 0) std::memcpy(more, grants, sizeof(PendingGrant) * count);
    grants = more;
    capacity = grown;
  }
  PendingGrant& grant = grants[count];
  grant = PendingGrant{};
  grant.storage = &storage;
  grant.call = call;
  LimitId& id = grant.call.id;
  id.name_text = nullptr;
  id.key_text = nullptr;
  if (count > 0 && SameIdentity(grants[count - 1].call.id, id)) {
    id.name = grants[count - 1].call.id.name;  // the same limit again: its bytes are there already
    id.key = grants[count - 1].call.id.key;
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

// Whether two records give back into the same row under the same rules, so
// one can carry both amounts (a refund of a + b is a refund of a, then of b:
// both are capped at capacity alone).
bool SameRefund(const PendingGrant& a, const PendingGrant& b) {
  const LimitId& x = a.call.id;
  const LimitId& y = b.call.id;
  if (!a.active || a.storage != b.storage || a.subid != b.subid || a.keep != b.keep || a.window != b.window ||
      a.call.origin != b.call.origin || a.call.owner_config != b.call.owner_config ||
      !ratelimit::SameLimit(a.call.config, b.call.config))
    return false;
  return SameIdentity(x, y);
}

}  // namespace

void RememberGrant(int record, const Decision& decision, bool keep) {
  PendingGrant& grant = grants[record];
  grant.amount = grant.call.request.count;
  grant.window = decision.next.ts;
  grant.keep = keep;
  grant.active = true;
  // A transaction calling one limit again and again keeps one record.
  if (record == count - 1 && record > 0 && SameRefund(grants[record - 1], grant)) {
    grants[record - 1].amount += grant.amount;
    --count;
  }
}

void ForgetPendingGrant(int record) {
  if (record == count - 1) --count;  // else left inactive: dropped at the transaction's end
}

}  // namespace ratelimit_pg
