// Redo of memory limits' WAL records (memory_redo.h).
#include <cstring>

#include "storage/memory/memory_redo.h"

#include "storage/memory/memory_names.h"
#include "storage/memory/memory_persist.h"
#include "storage/memory/memory_recovery.h"
#include "storage/memory/memory_wal.h"
#include "support/clock.h"

extern "C" {
#include "access/xlog_internal.h"
#include "access/xlogreader.h"
#include "access/xlogrecovery.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "utils/memutils.h"
}

namespace ratelimit_pg {
namespace {

// What this redo did, for the LOG lines (the startup process's own).
struct RedoCounts {
  int64 applied;
  int64 idle;
  int64 no_room;
  int64 damaged;  // records (or their rest) that are not ours to apply
  int64 failed;   // records whose application raised (caught)
};
RedoCounts counts;

// One LOG line the first time a kind of skip happens in a redo; the rest
// are counted and summed up at its end.
void LogFirstSkip(int64 count, const char* what) {
  if (count != 1) return;
  ereport(LOG, (errmsg("ratelimit: %s", what),
                errdetail("Further ones are counted and reported when recovery ends.")));
}

void CountNoRoom() {
  ++counts.no_room;
  LogFirstSkip(counts.no_room,
               "a memory limit in the WAL found no room and was skipped: ratelimit.memory_max_keys is "
               "smaller than the memory limits the WAL holds");
}

void CountDamaged() {
  ++counts.damaged;
  LogFirstSkip(counts.damaged,
               "a WAL record of resource manager \"ratelimit_memory\" is not one this version "
               "can apply, and was skipped");
}

// A kWalEntries record: heads and bytes, each checked before it is applied.
void RedoEntries(const char* data, uint32 len) {
  Micros now = RealClockNow();
  uint32 at = 0;
  while (at < len) {
    MemoryRecord record;
    if (len - at < kMemoryRecordHeadBytes || !UnpackMemoryRecordHead(data + at, &record) ||
        len - at - kMemoryRecordHeadBytes < static_cast<uint32>(MemoryRecordBytes(record))) {
      CountDamaged();
      return;
    }
    record.bytes = data + at + kMemoryRecordHeadBytes;
    at += kMemoryRecordHeadBytes + MemoryRecordBytes(record);
    switch (ApplyMemoryRecord(record, now)) {
      case RedoOutcome::kApplied:
        ++counts.applied;
        break;
      case RedoOutcome::kIdle:
        ++counts.idle;
        break;
      case RedoOutcome::kNoRoom:
        CountNoRoom();
        break;
    }
  }
}

// A kWalDelete record: the identity's lengths, then its bytes.
void RedoDelete(const char* data, uint32 len) {
  WalDeleteHead head;
  if (len < sizeof head) return CountDamaged();
  std::memcpy(&head, data, sizeof head);
  MemoryRecord identity{};
  identity.database = head.database;
  identity.name_len = head.name_len;
  identity.key_len = head.key_len;
  if (head.name_len < 1 || head.name_len > kMemoryIdentityBytes || head.key_len < -1 ||
      head.key_len > kMemoryIdentityBytes ||
      len - sizeof head != static_cast<uint32>(MemoryRecordBytes(identity)))
    return CountDamaged();
  identity.bytes = data + sizeof head;
  (void)RemoveMemoryIdentity(identity);
}

void RedoForgetDatabase(const char* data, uint32 len) {
  Oid database;
  if (len != sizeof database) return CountDamaged();
  std::memcpy(&database, data, sizeof database);
  (void)ForgetMemoryDatabase(database, false);
}

void Apply(uint8 record_type, const char* data, uint32 len) {
  switch (record_type) {
    case kWalEntries:
      return RedoEntries(data, len);
    case kWalDelete:
      return RedoDelete(data, len);
    case kWalForgetDatabase:
      return RedoForgetDatabase(data, len);
    default:
      return CountDamaged();
  }
}

// rm_redo. What it calls does not raise for a record it cannot apply; an
// error anyway (none is known) is caught here, counted and logged, so that
// it can never stop a server from starting or a standby from replaying.
void Redo(XLogReaderState* record) {
  uint8 record_type = XLogRecGetInfo(record) & kWalTypeMask;
  const char* data = XLogRecGetData(record);
  uint32 len = XLogRecGetDataLen(record);
  MemoryContext caller = CurrentMemoryContext;
  PG_TRY();
  { Apply(record_type, data, len); }
  PG_CATCH();
  {
    MemoryContextSwitchTo(caller);
    ErrorData* error = CopyErrorData();
    FlushErrorState();
    LWLockReleaseAll();  // a partition lock of the tables, the only locks redo takes
    ++counts.failed;
    ereport(LOG, (errmsg("ratelimit: a memory limit's WAL record could not be applied and was skipped: %s",
                         error->message)));
    FreeErrorData(error);
  }
  PG_END_TRY();
}

const char* Identify(uint8 info) {
  switch (info & kWalTypeMask) {
    case kWalEntries:
      return "ENTRIES";
    case kWalDelete:
      return "DELETE";
    case kWalForgetDatabase:
      return "FORGET_DATABASE";
    default:
      return nullptr;
  }
}

void Describe(StringInfo buf, XLogReaderState* record) {
  uint32 len = XLogRecGetDataLen(record);
  switch (XLogRecGetInfo(record) & kWalTypeMask) {
    case kWalEntries:
      appendStringInfo(buf, "%u bytes of entries", len);
      break;
    case kWalForgetDatabase:
      if (len == sizeof(Oid)) {
        Oid database;
        std::memcpy(&database, XLogRecGetData(record), sizeof database);
        appendStringInfo(buf, "database %u", database);
      }
      break;
    default:
      appendStringInfo(buf, "%u bytes", len);
      break;
  }
}

void Startup() { counts = RedoCounts{}; }

// At the end of recovery: what was skipped, summed up; and the recovered
// entries saved for the next start until the worker has logged them all
// again (memory_persist.h), whenever an end-of-recovery checkpoint follows:
// after a crash, and after an archive recovery or a standby that stopped at
// its recovery target (StandbyMode is still set then; that checkpoint runs
// while the worker, if it runs, sees recovery in progress and lets it
// complete). Only pg_promote's promotion (PromoteIsTriggered) writes an
// end-of-recovery record instead, and the checkpoint after it waits for the
// worker's first pass.
void Cleanup() {
  if (counts.no_room + counts.damaged + counts.failed > 0)
    ereport(LOG, (errmsg("ratelimit: recovery skipped %lld memory limits for want of room, %lld WAL records "
                         "it could not read and %lld it could not apply; it applied %lld",
                         static_cast<long long>(counts.no_room), static_cast<long long>(counts.damaged),
                         static_cast<long long>(counts.failed), static_cast<long long>(counts.applied))));
  if (MemoryDurabilityWal() && !PromoteIsTriggered()) SaveRecoveredMemoryLimits();
}

const RmgrData kMemoryRmgr = {
    .rm_name = "ratelimit_memory",
    .rm_redo = Redo,
    .rm_desc = Describe,
    .rm_identify = Identify,
    .rm_startup = Startup,
    .rm_cleanup = Cleanup,
    .rm_mask = nullptr,
    .rm_decode = nullptr,
};

}  // namespace

void RegisterMemoryRedo() {
  if (!process_shared_preload_libraries_in_progress) return;
  RegisterCustomRmgr(static_cast<RmgrId>(kMemoryRmgrId), const_cast<RmgrData*>(&kMemoryRmgr));
}

}  // namespace ratelimit_pg
