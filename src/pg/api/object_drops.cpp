// Forgetting a dropped database's or extension's memory limits and stats
// names at commit (object_drops.h).
#include "api/object_drops.h"

#include "shmem/stats.h"
#include "storage/storage.h"

extern "C" {
#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/builtins.h"
}

namespace ratelimit_pg {
namespace {

object_access_hook_type previous_hook = nullptr;

// The databases this transaction drops (or drops the extension of), each
// with the subtransaction that dropped it; a handful at most.
struct PendingForget {
  Oid database;
  SubTransactionId subtransaction;
};
constexpr int kMostPending = 16;
PendingForget pending[kMostPending];
int pending_count = 0;

// Whether this transaction dropped the extension of `database` (or it).
int PendingIndex(Oid database) {
  for (int i = 0; i < pending_count; ++i)
    if (pending[i].database == database) return i;
  return -1;
}

// Each storage that keeps rows outside the database's tables.
void ForEachForgettingStorage(Oid database, bool at_commit) {
  const Storage* const* storages;
  int count = AllStorages(&storages);
  for (int s = 0; s < count; ++s)
    if (storages[s]->forget_database != nullptr) storages[s]->forget_database(database, at_commit);
}

// While the DROP runs (an error here fails the DROP): the storages make
// ready what their forgetting at commit needs.
void Remember(Oid database) {
  if (PendingIndex(database) >= 0 || pending_count == kMostPending) return;  // a handful at most
  ForEachForgettingStorage(database, false);
  pending[pending_count++] = PendingForget{database, GetCurrentSubTransactionId()};
}

// Whether `extension` is this library's extension (its row is still there
// while the drop runs).
bool IsRatelimit(Oid extension) {
  char* name = get_extension_name(extension);
  return name != nullptr && strcmp(name, "ratelimit") == 0;
}

// CREATE EXTENSION ratelimit in the transaction that dropped it (seen at the
// first object its script creates): the new extension's memory limits and
// names start afresh now, so that the drop's forgetting at commit cannot
// take what the new one grants after. (A rollback then keeps the dropped
// extension, with its memory limits forgotten: they start full.)
void ForgetAtRecreate() {
  int i = PendingIndex(MyDatabaseId);
  if (i < 0 || !creating_extension || !IsRatelimit(CurrentExtensionObject)) return;
  ForEachForgettingStorage(MyDatabaseId, true);
  ForgetStatsOfDatabase(MyDatabaseId);
  pending[i] = pending[--pending_count];
}

void OnObjectAccess(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id, void* arg) {
  if (previous_hook != nullptr) previous_hook(access, class_id, object_id, sub_id, arg);
  if (access == OAT_POST_CREATE && pending_count > 0) ForgetAtRecreate();
  if (access != OAT_DROP || sub_id != 0) return;
  if (class_id == DatabaseRelationId) {
    Remember(object_id);
  } else if (class_id == ExtensionRelationId && IsRatelimit(object_id)) {
    Remember(MyDatabaseId);
  }
}

// At commit, after the drop is durable: nothing here can fail.
void ForgetPending() {
  for (int i = 0; i < pending_count; ++i) {
    ForEachForgettingStorage(pending[i].database, true);
    ForgetStatsOfDatabase(pending[i].database);
  }
  pending_count = 0;
}

// A prepared transaction's commit or rollback runs in whichever session
// finishes it, where nothing pending here is known: this session's next
// commit would forget a database that ROLLBACK PREPARED kept, and COMMIT
// PREPARED would forget nothing.
void RefusePrepare() {
  ereport(ERROR,
          (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
           errmsg("cannot PREPARE a transaction that drops the extension ratelimit"),
           errdetail("The dropped database's memory limits and statistics are forgotten when the dropping "
                     "transaction commits, in its own session."),
           errhint("Drop the extension in a transaction that is not prepared.")));
}

void OnXact(XactEvent event, void*) {
  if (pending_count == 0) return;
  if (event == XACT_EVENT_PRE_PREPARE) {
    RefusePrepare();
  } else if (event == XACT_EVENT_COMMIT) {
    ForgetPending();
  } else if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) {
    pending_count = 0;
  }
}

// A rolled-back subtransaction's drops did not happen; a committed one's
// are its parent's.
void OnSubXact(SubXactEvent event, SubTransactionId sub, SubTransactionId parent, void*) {
  int kept = 0;
  for (int i = 0; i < pending_count; ++i) {
    if (pending[i].subtransaction == sub && event == SUBXACT_EVENT_ABORT_SUB) continue;
    if (pending[i].subtransaction == sub && event == SUBXACT_EVENT_COMMIT_SUB)
      pending[i].subtransaction = parent;
    pending[kept++] = pending[i];
  }
  pending_count = kept;
}

}  // namespace

void RegisterObjectDropHooks() {
  previous_hook = object_access_hook;
  object_access_hook = OnObjectAccess;
  RegisterXactCallback(OnXact, nullptr);
  RegisterSubXactCallback(OnSubXact, nullptr);
}

}  // namespace ratelimit_pg
