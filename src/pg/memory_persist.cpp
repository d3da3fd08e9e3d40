// The memory persistence worker (memory_persist.h).
#include <cstdio>

#include "memory_persist.h"

#include "clock.h"
#include "memory_storage.h"

extern "C" {
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
}

namespace ratelimit_pg {
namespace {

constexpr const char* kStateFile = "ratelimit_memory.state";
constexpr const char* kTempFile = "ratelimit_memory.state.tmp";

struct FileHeader {
  uint32 layout;
  uint32 reserved;
  int64 count;
};

// Reads the entries back, then deletes the file: a crash after this start
// must not bring them back.
void LoadState() {
  FILE* file = AllocateFile(kStateFile, PG_BINARY_R);
  if (file == nullptr) {
    if (errno != ENOENT)
      ereport(LOG, (errcode_for_file_access(), errmsg("ratelimit: could not read \"%s\": %m", kStateFile)));
    return;
  }
  FileHeader header{};
  int64 loaded = 0;
  int64 skipped = 0;
  if (fread(&header, sizeof header, 1, file) == 1 && header.layout == MemoryEntryLayout()) {
    for (int64 i = 0; i < header.count; ++i) {
      bool stored = false;
      if (!ReadMemoryEntry(file, &stored)) break;
      if (stored) {
        ++loaded;
      } else {
        ++skipped;
      }
    }
  } else {
    ereport(LOG, (errmsg("ratelimit: \"%s\" is of another layout; memory limits start afresh", kStateFile)));
  }
  FreeFile(file);
  if (unlink(kStateFile) != 0 && errno != ENOENT)
    ereport(LOG, (errcode_for_file_access(), errmsg("ratelimit: could not remove \"%s\": %m", kStateFile)));
  ereport(LOG, (errmsg("ratelimit: %lld memory limits read back from the last shutdown",
                       static_cast<long long>(loaded)),
                skipped > 0 ? errdetail("%lld found no room.", static_cast<long long>(skipped)) : 0));
}

// Writes every live entry to a temporary file, then renames it durably.
void DumpState() {
  FILE* file = AllocateFile(kTempFile, PG_BINARY_W);
  if (file == nullptr) {
    ereport(LOG, (errcode_for_file_access(), errmsg("ratelimit: could not write \"%s\": %m", kTempFile)));
    return;
  }
  FileHeader header{MemoryEntryLayout(), 0, 0};
  bool ok = fwrite(&header, sizeof header, 1, file) == 1;
  if (ok) header.count = WriteMemoryEntries(file, ClockNow());
  ok = ok && header.count >= 0 && fseek(file, 0, SEEK_SET) == 0 &&
       fwrite(&header, sizeof header, 1, file) == 1;
  ok = ok && fflush(file) == 0 && pg_fsync(fileno(file)) == 0;
  if (FreeFile(file) != 0) ok = false;
  if (!ok) {
    ereport(LOG, (errcode_for_file_access(), errmsg("ratelimit: could not write \"%s\": %m", kTempFile)));
    unlink(kTempFile);
    return;
  }
  if (durable_rename(kTempFile, kStateFile, LOG) == 0)
    ereport(LOG, (errmsg("ratelimit: %lld memory limits written for the next start",
                         static_cast<long long>(header.count))));
}

}  // namespace

void RegisterMemoryPersistWorker() {
  if (!process_shared_preload_libraries_in_progress) return;
  BackgroundWorker worker{};
  worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
  worker.bgw_start_time = BgWorkerStart_PostmasterStart;
  // Restarted after a crash (which reinitializes shared memory: nothing to read).
  worker.bgw_restart_time = 1;
  strlcpy(worker.bgw_library_name, "ratelimit", BGW_MAXLEN);
  strlcpy(worker.bgw_function_name, "ratelimit_memory_persist_main", BGW_MAXLEN);
  strlcpy(worker.bgw_name, "ratelimit memory keeper", BGW_MAXLEN);
  strlcpy(worker.bgw_type, "ratelimit memory keeper", BGW_MAXLEN);
  RegisterBackgroundWorker(&worker);
}

}  // namespace ratelimit_pg

extern "C" void ratelimit_memory_persist_main(Datum) {
  pqsignal(SIGHUP, SignalHandlerForConfigReload);
  pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
  BackgroundWorkerUnblockSignals();
  ratelimit_pg::LoadState();
  while (!ShutdownRequestPending) {
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L, PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    if (ConfigReloadPending) {
      ConfigReloadPending = false;
      ProcessConfigFile(PGC_SIGHUP);
    }
  }
  ratelimit_pg::DumpState();
  proc_exit(0);
}
