// The worker that keeps memory limits in the WAL across checkpoints
// (memory_guard.h).
#include "storage/memory/memory_guard.h"

#include "storage/memory/memory_persist.h"
#include "storage/memory/memory_recovery.h"
#include "storage/memory/memory_wal.h"
#include "support/clock.h"

extern "C" {
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/sinvaladt.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/wait_event.h"
}

#include "support/compat.h"

namespace ratelimit_pg {
namespace {

// How often the worker looks for a new redo point (the most a checkpoint
// waits for it, beside the time it takes to log the entries) and flushes the
// memory limits' records no commit flushed (memory_wal.cpp's Insert): the
// most a crash loses of them, beside the flush's own time.
constexpr long kLookMs = 50;

// The redo point after which every live entry has a record (invalid: none
// yet, since the worker started).
XLogRecPtr covered_redo = InvalidXLogRecPtr;

// Under ProcArrayLock exclusively (so that no checkpoint collects the
// waiting ids meanwhile): whether the current redo point is covered, and if
// it is, a new virtual transaction id, which lets every checkpoint that
// waits on the old one complete. In recovery nothing is logged and no
// checkpoint (only restart points, which do not wait) runs here.
bool MoveOnIfCovered(XLogRecPtr* redo) {
  (void)RecoveryInProgress();  // its first call outside the lock (it may allocate)
  LWLockAcquire(ProcArrayLock, LW_EXCLUSIVE);
  bool in_recovery = RecoveryInProgress();
  *redo = GetRedoRecPtr();
  bool covered = in_recovery || *redo == covered_redo;
  if (covered) compat::SetOwnLocalTransactionId(GetNextLocalTransactionId());
  LWLockRelease(ProcArrayLock);
  return covered;
}

// Logs every live entry last logged before `redo` again, after it; the
// first time, the base file goes and writes may be logged.
void Cover(XLogRecPtr redo) {
  uint32 epoch = BeginMemoryLogEpoch();
  XLogRecPtr end;
  int64 logged = RelogStaleMemoryEntries(epoch, RealClockNow(), &end);
  // On disk before anything relies on them: the checkpoint's record would
  // flush them, but the first pass removes the base file, and no commit
  // follows the worker's records.
  if (end != InvalidXLogRecPtr) XLogFlush(end);
  bool first = covered_redo == InvalidXLogRecPtr;
  covered_redo = redo;
  if (!first) {
    ereport(DEBUG1, (errmsg("ratelimit: %lld memory limits logged again for a checkpoint",
                            static_cast<long long>(logged))));
    return;
  }
  RemoveMemoryBase();
  SetMemoryDurable(true);
  ereport(LOG,
          (errmsg("ratelimit: memory limits are durable: %lld in the WAL", static_cast<long long>(logged))));
}

// Once this process is gone, a checkpoint can complete with nobody to log
// the entries again after its redo point (until the postmaster starts
// another worker, a second later, and it has made its first pass): so
// before it lets checkpoints go, on a primary, the entries are kept in the
// base file, as a start keeps them. If that fails, a PANIC: the crash
// restart replays them from the WAL, as no checkpoint has completed without
// them (this process's PGPROC, still holding them back, goes with it).
void OnExit(int, Datum) {
  LWLockReleaseAll();  // a FATAL raised while a partition lock was held
  SetMemoryDurable(false);
  if (!RecoveryInProgress() && !SaveMemoryBaseAtWorkerExit())
    ereport(PANIC, (errmsg("ratelimit: the worker \"ratelimit memory durability\" stops and could not keep "
                           "the memory limits in \"ratelimit_memory.base\""),
                    errdetail("A checkpoint without the worker would leave memory limits out of the WAL a "
                              "crash recovery replays; a crash restart replays them instead.")));
  MyProc->delayChkptFlags &= ~DELAY_CHKPT_COMPLETE;
}

}  // namespace

void RegisterMemoryGuard() {
  if (!process_shared_preload_libraries_in_progress || !MemoryDurabilityWal()) return;
  BackgroundWorker worker{};
  snprintf(worker.bgw_name, BGW_MAXLEN, "ratelimit memory durability");
  snprintf(worker.bgw_type, BGW_MAXLEN, "ratelimit memory durability");
  worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
  worker.bgw_start_time = BgWorkerStart_ConsistentState;
  worker.bgw_restart_time = 1;
  snprintf(worker.bgw_library_name, BGW_MAXLEN, "ratelimit");
  snprintf(worker.bgw_function_name, BGW_MAXLEN, "ratelimit_memory_guard_main");
  RegisterBackgroundWorker(&worker);
}

}  // namespace ratelimit_pg

extern "C" {

PGDLLEXPORT void ratelimit_memory_guard_main(Datum);

// The worker's body: connected to no database (it needs a PGPROC in the
// proc array, not a catalog), it keeps DELAY_CHKPT_COMPLETE set and looks
// for a new redo point every kLookMs.
void ratelimit_memory_guard_main(Datum) {
  pqsignal(SIGTERM, die);
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  BackgroundWorkerUnblockSignals();
  BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);
  before_shmem_exit(ratelimit_pg::OnExit, 0);
  ratelimit_pg::compat::SetOwnLocalTransactionId(GetNextLocalTransactionId());
  MyProc->delayChkptFlags |= DELAY_CHKPT_COMPLETE;
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    if (ConfigReloadPending) {
      ConfigReloadPending = false;
      ProcessConfigFile(PGC_SIGHUP);
    }
    XLogRecPtr redo;
    if (!ratelimit_pg::MoveOnIfCovered(&redo)) {
      ratelimit_pg::Cover(redo);
      continue;  // moves on at the next look, if no checkpoint began meanwhile
    }
    if (!RecoveryInProgress()) ratelimit_pg::FlushMemoryWal();
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ratelimit_pg::kLookMs,
                    PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
  }
}

}  // extern "C"
