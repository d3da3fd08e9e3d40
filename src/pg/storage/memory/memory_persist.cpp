// Memory limits across a clean restart (memory_persist.h), in the order
// pg_stat_statements and pgstat keep their own: the postmaster reads the
// file while it makes shared memory, before it accepts a connection, and
// writes it when it exits after a clean shutdown, once every other process
// is gone (so every rolled-back grant has been given back). The file's
// format, its writer and its reader are memory_state_file.cpp's.
//
// A file is renamed before it is read: without durability a file that
// stops a load is never read twice; with it, it is renamed to the base
// file, read again after a crash until the worker has logged it (one that
// cannot be renamed is not read, and this run's save replaces it). The save's rename is durable_rename's
// steps, one by one: a failure after the rename leaves the file in place, and is reported as such.
#include <cerrno>
#include <cstdio>

#include <sys/stat.h>

#include "storage/memory/memory_persist.h"

#include "shmem/shared_tables.h"
#include "storage/memory/memory_state_file.h"
#include "storage/memory/memory_wal.h"

extern "C" {
#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "utils/memutils.h"
}

namespace ratelimit_pg {
namespace {

shmem_startup_hook_type previous_startup_hook = nullptr;

// ---- writing, from the postmaster's exit ----

// The file is in place, written whole (the next start reads it), but a step
// after its rename failed (`raised`: an error's message; otherwise the
// write's not_durable and write_errno): a crash of the machine may lose it.
void ReportNotDurable(const char* raised) {
  const StateFileWrite& write = state_file_write;
  const char* detail = "The next start reads them back; a crash of the machine before it may lose them.";
  if (raised != nullptr) {
    ereport(LOG, (errmsg("ratelimit: %lld memory limits written to \"%s\" but not made durable: %s",
                         static_cast<long long>(write.records_in_place), kMemoryStateFile, raised),
                  errdetail("%s", detail)));
    return;
  }
  errno = write.write_errno;
  ereport(LOG, (errcode_for_file_access(),
                errmsg("ratelimit: %lld memory limits written to \"%s\" but not made durable: %s: %m",
                       static_cast<long long>(write.records_in_place), kMemoryStateFile, write.not_durable),
                errdetail("%s", detail)));
}

// on_shmem_exit in the postmaster: after a clean shutdown every backend has
// exited (its rollbacks' refunds done), so the entries are final.
void SaveAtExit(int code, Datum) {
  if (code != 0) return;  // a crash: nothing is saved
  MemoryContext old = CurrentMemoryContext;
  volatile int64 written = -1;
  volatile bool clean = false;
  char* volatile raised = nullptr;  // the message of an error raised, if one was
  state_file_write = StateFileWrite{};
  PG_TRY();
  {
    ControlFacts facts = ReadControlFacts();
    clean = facts.shut_down;
    if (clean) written = WriteMemoryStateFile(facts, kMemoryStateFile);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(old);
    ErrorData* error = CopyErrorData();
    raised = error->message;
    LWLockReleaseAll();
    FlushErrorState();
    unlink(kMemoryTempFile);  // a partial file is never renamed into place
  }
  PG_END_TRY();
  DetachSharedTables();
  if (!clean) return;
  if (state_file_write.renamed && (raised != nullptr || state_file_write.not_durable != nullptr)) {
    ReportNotDurable(raised);
  } else if (written < 0 && raised != nullptr) {
    ereport(LOG, (errmsg("ratelimit: could not write \"%s\": %s; memory limits start afresh",
                         kMemoryStateFile, raised)));
  } else if (written < 0) {
    errno = state_file_write.write_errno;
    ereport(LOG,
            (errcode_for_file_access(),
             errmsg("ratelimit: could not write \"%s\": %m; memory limits start afresh", kMemoryStateFile)));
  } else {
    ereport(LOG, (errmsg("ratelimit: %lld memory limits written for the next start",
                         static_cast<long long>(written))));
  }
}

// ---- reading, in the postmaster's shared-memory startup ----

// What the load's LOG line says is wrong with a file.
const char* CheckDetail(FileCheck check) {
  switch (check) {
    case FileCheck::kHeader:
      return "Its header is not a ratelimit memory state header.";
    case FileCheck::kVersion:
      return "It was written by another format version or PostgreSQL major.";
    case FileCheck::kStale:
      return "It was not written by this cluster's last shutdown: the server has run without "
             "shared_preload_libraries = 'ratelimit' since, or the file comes from another cluster.";
    case FileCheck::kRecord:
      return "A record holds a value no memory limit can hold.";
    case FileCheck::kLength:
      return "Its length is not the one its header gives.";
    case FileCheck::kChecksum:
      return "Its checksum does not match its contents.";
    case FileCheck::kGood:
      break;
  }
  return "";
}

// The file could not be renamed for its load to `target` (something in its
// way that is not a file, such as a directory an operator made, which is
// not ours to remove; no permission): it stays where it is, unread, and the
// clean shutdown of this run writes this run's entries over it (after that
// shutdown it would be stale anyway).
void ReportNotRenamed(const char* target) {
  int error = errno;
  struct stat in_way;
  bool blocked = lstat(target, &in_way) == 0;
  errno = error;
  ereport(LOG, (errcode_for_file_access(),
                errmsg("ratelimit: could not rename \"%s\" to \"%s\": %m; memory limits start afresh",
                       kMemoryStateFile, target),
                errdetail("\"%s\" is left in place, unread; the next clean shutdown writes this run's memory "
                          "limits over it.",
                          kMemoryStateFile),
                blocked ? errhint("Remove \"%s\", which is in the way of every load.", target) : 0));
}

// The load's one LOG line; `name` the file as the operator knows it, `from`
// where its entries come from.
void ReportLoad(const char* name, const char* from, const StateFileLoad& load) {
  FileCheck check = load.check;
  if (load.failed) {
    ereport(LOG,
            (errmsg("ratelimit: reading \"%s\" failed after %lld memory limits; memory limits start afresh",
                    name, static_cast<long long>(load.restored))));
  } else if (check == FileCheck::kStale) {
    ereport(LOG, (errmsg("ratelimit: \"%s\" is stale and was dropped; memory limits start afresh", name),
                  errdetail("%s", CheckDetail(FileCheck::kStale))));
  } else if (check != FileCheck::kGood) {
    ereport(LOG, (errmsg("ratelimit: \"%s\" is damaged and was dropped; memory limits start afresh", name),
                  errdetail("%s", CheckDetail(check))));
  } else {
    ereport(LOG,
            (errmsg("ratelimit: %lld memory limits read back from %s", static_cast<long long>(load.restored),
                    from),
             load.skipped > 0 ? errdetail("%lld found no room.", static_cast<long long>(load.skipped)) : 0));
  }
}

// Renames `from` to `to` and syncs the directory; false (errno set) if the
// rename failed. A failed directory sync leaves either name, both whole.
bool RenameDurably(const char* from, const char* to) {
  if (rename(from, to) != 0) return false;
  (void)FsyncPath(".", true, false);
  return true;
}

// Whether this start keeps what it reads as the base file until the worker
// has logged it (memory_guard.cpp): with memory_durability = wal, on a
// primary. A standby's entries come from its primary's WAL, and it logs
// nothing of its own: its file is read once, as without durability.
bool KeepsBase() { return MemoryDurabilityWal() && access(STANDBY_SIGNAL_FILE, F_OK) != 0; }

// A base file left by a start whose worker had not logged every entry yet,
// or by a crash recovery (no shutdown's file after it): read whole, kept.
void LoadBase() {
  StateFileLoad load;
  if (!LoadMemoryStateFile(kMemoryBaseFile, false, &load)) unlink(kMemoryBaseFile);
  DetachSharedTables();
  ReportLoad(kMemoryBaseFile, "\"ratelimit_memory.base\" (not yet in the WAL again)", load);
}

void LoadAtStartup() {
  // What a load or a write that died left: never read.
  unlink(kMemoryLoadingFile);
  unlink(kMemoryTempFile);
  bool keep = KeepsBase();
  if (!keep) unlink(kMemoryBaseFile);
  // Kept, the shutdown's file becomes the base file (newer than any) before
  // it is read: if the postmaster dies during the load, the next start reads
  // it again, as nothing in the WAL after that shutdown holds its entries.
  // Otherwise it is read once.
  const char* target = keep ? kMemoryBaseFile : kMemoryLoadingFile;
  if (!(keep ? RenameDurably(kMemoryStateFile, target) : rename(kMemoryStateFile, target) == 0)) {
    if (errno != ENOENT) {
      ReportNotRenamed(target);
    } else if (keep && access(kMemoryBaseFile, F_OK) == 0) {
      LoadBase();
    }
    return;
  }
  StateFileLoad load;
  bool loaded = LoadMemoryStateFile(target, true, &load);
  DetachSharedTables();
  if (!(loaded && keep)) unlink(target);
  ReportLoad(kMemoryStateFile, "the last shutdown", load);
}

// After the shared tables are made (their hook runs first): in the
// postmaster only, load, then arrange the save at exit. A crash's
// reinitialization comes here again: the file is gone by then.
void StartupPersistence() {
  if (previous_startup_hook != nullptr) previous_startup_hook();
  if (IsUnderPostmaster) return;
  LoadAtStartup();
  on_shmem_exit(SaveAtExit, 0);
}

}  // namespace

void RegisterMemoryPersistence() {
  if (!process_shared_preload_libraries_in_progress) return;
  previous_startup_hook = shmem_startup_hook;
  shmem_startup_hook = StartupPersistence;
}

namespace {

// Writes every live entry as the base file (the save's statics say how it
// went); how many, or -1. Never raises: *raised_out is an error's message,
// if one was raised.
int64 WriteBaseFile(char** raised_out) {
  MemoryContext old = CurrentMemoryContext;
  volatile int64 written = -1;
  char* volatile raised = nullptr;
  state_file_write = StateFileWrite{};
  PG_TRY();
  { written = WriteMemoryStateFile(ReadControlFacts(), kMemoryBaseFile); }
  PG_CATCH();
  {
    MemoryContextSwitchTo(old);
    raised = CopyErrorData()->message;
    LWLockReleaseAll();
    FlushErrorState();
    unlink(kMemoryTempFile);
  }
  PG_END_TRY();
  *raised_out = raised;
  return written >= 0 && state_file_write.not_durable == nullptr ? written : -1;
}

// The LOG line of a base file that could not be kept (`raised`: an error's
// message, else the write's write_errno and not_durable say why); `detail`
// says what that costs.
void ReportBaseNotKept(const char* raised, const char* detail) {
  if (raised != nullptr) {
    ereport(LOG,
            (errmsg("ratelimit: could not keep the memory limits in \"%s\": %s", kMemoryBaseFile, raised),
             errdetail("%s", detail)));
    return;
  }
  const StateFileWrite& write = state_file_write;
  errno = write.write_errno;
  ereport(LOG, (errcode_for_file_access(),
                errmsg("ratelimit: could not keep the memory limits in \"%s\": %s%s%m", kMemoryBaseFile,
                       write.not_durable != nullptr ? write.not_durable : "",
                       write.not_durable != nullptr ? ": " : ""),
                errdetail("%s", detail)));
}

}  // namespace

void SaveRecoveredMemoryLimits() {
  char* raised = nullptr;
  int64 written = WriteBaseFile(&raised);
  if (written >= 0) {
    ereport(LOG, (errmsg("ratelimit: %lld memory limits recovered, kept in \"%s\" until they are in the WAL "
                         "again",
                         static_cast<long long>(written), kMemoryBaseFile)));
    return;
  }
  ReportBaseNotKept(raised,
                    "A crash before the worker \"ratelimit memory durability\" has logged them again "
                    "loses those last written before the latest checkpoint.");
}

bool SaveMemoryBaseAtWorkerExit() {
  char* raised = nullptr;
  int64 written = WriteBaseFile(&raised);
  if (written >= 0) {
    ereport(LOG, (errmsg("ratelimit: %lld memory limits kept in \"%s\" until the worker \"ratelimit memory "
                         "durability\" runs again",
                         static_cast<long long>(written), kMemoryBaseFile)));
    return true;
  }
  ReportBaseNotKept(raised, "The worker \"ratelimit memory durability\" is stopping.");
  return false;
}

void RemoveMemoryBase() {
  if (unlink(kMemoryBaseFile) == 0) {
    (void)FsyncPath(".", true, false);
  } else if (errno != ENOENT) {
    ereport(LOG,
            (errcode_for_file_access(), errmsg("ratelimit: could not remove \"%s\": %m", kMemoryBaseFile),
             errdetail("Every memory limit is in the WAL again; the file would be read after a crash.")));
  }
}

}  // namespace ratelimit_pg
