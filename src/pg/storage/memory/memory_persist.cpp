// Memory limits across a clean restart (memory_persist.h), in the order
// pg_stat_statements and pgstat keep their own: the postmaster reads the
// file while it makes shared memory, before it accepts a connection, and
// writes it when it exits after a clean shutdown, once every other process
// is gone (so every rolled-back grant has been given back).
//
// The file: a 64-byte header (magic, format, PostgreSQL major, CRC-32C,
// records, body bytes, the cluster's system identifier and the shutdown
// checkpoint it was written after, the tables' hash seeds), then per entry
// a 56-byte record head and its name and key bytes. The CRC covers the
// header from the records on and the body. A file is read only by the start
// that follows the shutdown that wrote it (the same checkpoint in
// pg_control): one left behind while the server ran without the preload,
// or copied from another cluster, is stale and dropped. It is renamed
// before it is read: without durability a file that stops a load is never
// read twice; with it, it is renamed to the base file, read again after a
// crash until the worker has logged it (one that cannot be renamed is not
// read, and this run's save replaces it).
// The save's rename is durable_rename's steps, one by one: a failure after
// the rename leaves the file in place, and is reported as such.
//
// One pass each way. The save counts the records as it writes them and
// writes the header again at the end, its CRC combined with the body's. The
// load checks each record as it restores it, and the length and CRC at the
// end: a file found damaged then leaves none of the entries it made. The
// records come in the order of the tables' buckets, and the load gives the
// empty tables the seeds they were written under, so each entry goes to the
// bucket after the last one's and the tables grow while they are nearly
// empty, not by rehashing millions of entries.
//
// A record is the entry's identity and row, not its layout in memory (the
// compact and long tables of 0.9.0 write what 0.8.0's one table wrote).
// Format 4 since 0.10.0 (format 3's header and the seeds); format 3, which
// 0.8.0 and 0.9.0 wrote, is still read (the tables keep their own seeds).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <sys/stat.h>

#include "storage/memory/memory_persist.h"

#include "shmem/shared_tables.h"
#include "storage/memory/memory_record.h"
#include "storage/memory/memory_recovery.h"
#include "storage/memory/memory_wal.h"
#include "support/clock.h"

extern "C" {
#include "access/xlog.h"
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "utils/memutils.h"
}

namespace ratelimit_pg {
namespace {

constexpr const char* kStateFile = "ratelimit_memory.state";
constexpr const char* kTempFile = "ratelimit_memory.state.tmp";
constexpr const char* kLoadingFile = "ratelimit_memory.state.loading";
// With ratelimit.memory_durability = wal: the entries a start read back, or
// a crash recovery ended with, kept until the worker has logged every entry
// again (memory_guard.cpp), so that a crash before that reads them again.
constexpr const char* kBaseFile = "ratelimit_memory.base";
constexpr uint32 kMagic = 0x524C4D53;  // "SMLR" on disk: ratelimit memory state
constexpr uint32 kFormat = 4;
constexpr uint32 kFormat3 = 3;  // 0.8.0's and 0.9.0's: read, never written
constexpr int kHeadBytes = kMemoryRecordHeadBytes;

struct FileHeader {
  uint32 magic;
  uint32 format;
  uint32 pg_major;
  uint32 crc;  // CRC-32C of the 32 bytes from records on, then the body
  uint64 records;
  uint64 body_bytes;
  uint64 system_identifier;  // pg_control's when it was written
  uint64 checkpoint;         // pg_control's checkPoint: the shutdown's
  // Format 4 on: the hash seeds of the compact and the long table it was
  // written from, in whose order the records are.
  uint64 compact_seed;
  uint64 long_seed;
};
static_assert(sizeof(FileHeader) == 64);
constexpr size_t kHeader3Bytes = 48;
// The header's bytes the CRC covers: from records on.
size_t CheckedHeaderBytes(uint32 format) { return format == kFormat3 ? 32 : 48; }

shmem_startup_hook_type previous_startup_hook = nullptr;
// What the load made, and the file it reads and its buffer (static: they
// outlive a PG_TRY's longjmp, after which the file is closed).
int64 restored = 0;
int64 skipped = 0;
FILE* load_file = nullptr;
char* load_buffer = nullptr;

// ---- writing, from the postmaster's exit ----

// Records are packed into a buffer of this size and written a buffer at a
// time; the load reads the same way.
constexpr size_t kBufferBytes = 1 << 20;

// The CRC-32C register after `len` zero bytes more, from `crc`: what the
// header's part of the checksum, which the body follows in the file but is
// known only once the body is written, adds to the body's (taken from 0).
// The register is linear over GF(2): crc(A B) = shift(crc(A), |B|) xor
// crc0(B). zlib's crc32_combine, for the CRC-32C polynomial.
uint32 Gf2Times(const uint32* matrix, uint32 vector) {
  uint32 sum = 0;
  for (; vector != 0; vector >>= 1, ++matrix)
    if (vector & 1) sum ^= *matrix;
  return sum;
}

void Gf2Square(uint32* square, const uint32* matrix) {
  for (int n = 0; n < 32; ++n) square[n] = Gf2Times(matrix, matrix[n]);
}

uint32 ShiftCrc(uint32 crc, uint64 len) {
  uint32 odd[32];  // one zero bit
  uint32 even[32];
  odd[0] = 0x82F63B78;  // CRC-32C, reflected
  for (int n = 1; n < 32; ++n) odd[n] = uint32{1} << (n - 1);
  Gf2Square(even, odd);  // two zero bits
  Gf2Square(odd, even);  // four
  while (len != 0) {     // a byte, then each further power of two bytes
    Gf2Square(even, odd);
    if (len & 1) crc = Gf2Times(even, crc);
    len >>= 1;
    if (len == 0) break;
    Gf2Square(odd, even);
    if (len & 1) crc = Gf2Times(odd, crc);
    len >>= 1;
  }
  return crc;
}

// One pass over the entries: records packed into `buffer`, written when it
// fills, counted for the header written last.
struct WriteState {
  FILE* file;
  char* buffer;
  size_t used;
  pg_crc32c body_crc;  // the body's register, from 0
  uint64 records;
  uint64 bytes;
};

bool FlushBuffer(WriteState* state) {
  if (state->used == 0) return true;
  COMP_CRC32C(state->body_crc, state->buffer, state->used);
  bool ok = fwrite(state->buffer, state->used, 1, state->file) == 1;
  state->used = 0;
  return ok;
}

// Packs a record into the buffer, unless the reader would not take it back
// (one written under a test clock far in the future may not be): that one
// is left out, so that it cannot make the reader drop the whole file.
bool WriteRecord(const MemoryRecord& record, void* context) {
  auto* state = static_cast<WriteState*>(context);
  int len = MemoryRecordBytes(record);
  if (state->used + kHeadBytes + len > kBufferBytes && !FlushBuffer(state)) return false;
  char* head = state->buffer + state->used;
  PackMemoryRecordHead(record, head);
  MemoryRecord check;
  if (!UnpackMemoryRecordHead(head, &check)) return true;
  std::memcpy(head + kHeadBytes, record.bytes, len);
  state->used += kHeadBytes + len;
  state->records += 1;
  state->bytes += kHeadBytes + len;
  return true;
}

// What pg_control says now: whether the server shut down cleanly (its last
// checkpoint was a shutdown checkpoint; an immediate stop leaves it "in
// production"), and which cluster and checkpoint it is (0: unreadable).
struct ControlFacts {
  bool shut_down;
  uint64 system_identifier;
  uint64 checkpoint;
};

ControlFacts ReadControlFacts() {
  bool crc_ok = false;
  ControlFileData* control = get_controlfile(DataDir, &crc_ok);
  ControlFacts facts{control->state == DB_SHUTDOWNED || control->state == DB_SHUTDOWNED_IN_RECOVERY,
                     control->system_identifier, control->checkPoint};
  if (!crc_ok) facts = ControlFacts{false, 0, 0};
  pfree(control);
  return facts;
}

// How the last save went, past its count: the errno of its first failed
// step; whether its file was renamed into place, with how many records;
// and, if a step after the rename failed, which (the file is then in place
// but may not survive a crash of the machine).
int write_errno = 0;
bool renamed = false;
int64 records_in_place = 0;
const char* not_durable = nullptr;

// Keeps the errno of the first step that failed; `done`: the step's success.
bool Step(bool ok, bool done) {
  if (ok && !done) write_errno = errno != 0 ? errno : EIO;
  return ok && done;
}

// fsync_fname_ext's steps (fd.c) without its ereport, so that the caller
// says what the failure means: 0, or -1 with errno set. A file that does
// not exist counts as synced when `missing_ok`; a directory that cannot be
// fsynced (EBADF, EINVAL on some systems) counts as synced, as there.
int FsyncPath(const char* path, bool is_dir, bool missing_ok) {
  int fd = OpenTransientFile(path, PG_BINARY | (is_dir ? O_RDONLY : O_RDWR));
  if (fd < 0) return missing_ok && errno == ENOENT ? 0 : -1;
  int rc = pg_fsync(fd);
  if (rc != 0 && is_dir && (errno == EBADF || errno == EINVAL)) rc = 0;
  int error = errno;
  CloseTransientFile(fd);
  errno = error;
  return rc;
}

// durable_rename's steps (fd.c) for the temporary file, already fsynced as
// it was written, taken one by one: durable_rename logs the step that
// failed and returns -1 whether the rename was done or not, and the save
// must know which (once renamed, the file is in place and the next start
// reads it). False if the file is not in place (the temporary file
// removed); true with not_durable set if it is, but a step after failed.
bool RenameIntoPlace(int64 records, const char* target) {
  errno = 0;
  // The old file synced first, as there: after a crash one of the two is whole.
  if (!Step(true, FsyncPath(target, false, true) == 0) || !Step(true, rename(kTempFile, target) == 0)) {
    unlink(kTempFile);
    return false;
  }
  renamed = true;
  records_in_place = records;
  if (!Step(true, FsyncPath(target, false, false) == 0)) {
    not_durable = "could not fsync the file";
  } else if (!Step(true, FsyncPath(".", true, false) == 0)) {
    not_durable = "could not fsync the data directory";
  }
  return true;
}

// Writes every live entry to the temporary file, in one pass (the header,
// written first as a placeholder, is written again with the counts and the
// CRC), then renames it durably; how many, or -1 (the temporary file
// removed).
int64 WriteStateFile(const ControlFacts& facts, const char* target) {
  // What can raise comes before the file exists (SaveAtExit's handler
  // removes a temporary file an error leaves anyway).
  FileHeader header{
      kMagic, kFormat, PG_VERSION_NUM / 10000, 0, 0, 0, facts.system_identifier, facts.checkpoint, 0, 0};
  MemoryTableSeeds(&header.compact_seed, &header.long_seed);
  char* buffer = static_cast<char*>(palloc(kBufferBytes));
  errno = 0;
  FILE* file = AllocateFile(kTempFile, PG_BINARY_W);
  if (!Step(true, file != nullptr)) {
    pfree(buffer);
    return -1;
  }
  WriteState state{file, buffer, 0, 0, 0, 0};
  bool ok = Step(true, fwrite(&header, sizeof header, 1, file) == 1);
  ok =
      Step(ok, ok && ForEachMemoryEntry(MemorySweepClock(), WriteRecord, &state) >= 0 && FlushBuffer(&state));
  header.records = state.records;
  header.body_bytes = state.bytes;
  pg_crc32c crc;
  INIT_CRC32C(crc);
  COMP_CRC32C(crc, &header.records, CheckedHeaderBytes(kFormat));
  crc = ShiftCrc(crc, state.bytes) ^ state.body_crc;
  FIN_CRC32C(crc);
  header.crc = crc;
  ok = Step(ok, ok && fseek(file, 0, SEEK_SET) == 0 && fwrite(&header, sizeof header, 1, file) == 1);
  ok = Step(ok, ok && fflush(file) == 0 && pg_fsync(fileno(file)) == 0);
  ok = Step(ok, FreeFile(file) == 0);
  pfree(state.buffer);
  if (!ok) {
    unlink(kTempFile);
    return -1;
  }
  int64 records = static_cast<int64>(state.records);
  return RenameIntoPlace(records, target) ? records : -1;
}

// The file is in place, written whole (the next start reads it), but a step
// after its rename failed (`raised`: an error's message; otherwise
// not_durable and write_errno): a crash of the machine may lose it.
void ReportNotDurable(const char* raised) {
  const char* detail = "The next start reads them back; a crash of the machine before it may lose them.";
  if (raised != nullptr) {
    ereport(LOG, (errmsg("ratelimit: %lld memory limits written to \"%s\" but not made durable: %s",
                         static_cast<long long>(records_in_place), kStateFile, raised),
                  errdetail("%s", detail)));
    return;
  }
  errno = write_errno;
  ereport(LOG, (errcode_for_file_access(),
                errmsg("ratelimit: %lld memory limits written to \"%s\" but not made durable: %s: %m",
                       static_cast<long long>(records_in_place), kStateFile, not_durable),
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
  write_errno = 0;
  renamed = false;
  not_durable = nullptr;
  PG_TRY();
  {
    ControlFacts facts = ReadControlFacts();
    clean = facts.shut_down;
    if (clean) written = WriteStateFile(facts, kStateFile);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(old);
    ErrorData* error = CopyErrorData();
    raised = error->message;
    LWLockReleaseAll();
    FlushErrorState();
    unlink(kTempFile);  // a partial file is never renamed into place
  }
  PG_END_TRY();
  DetachSharedTables();
  if (!clean) return;
  if (renamed && (raised != nullptr || not_durable != nullptr)) {
    ReportNotDurable(raised);
  } else if (written < 0 && raised != nullptr) {
    ereport(LOG, (errmsg("ratelimit: could not write \"%s\": %s; memory limits start afresh", kStateFile,
                         raised)));
  } else if (written < 0) {
    errno = write_errno;
    ereport(LOG, (errcode_for_file_access(),
                  errmsg("ratelimit: could not write \"%s\": %m; memory limits start afresh", kStateFile)));
  } else {
    ereport(LOG, (errmsg("ratelimit: %lld memory limits written for the next start",
                         static_cast<long long>(written))));
  }
}

// ---- reading, in the postmaster's shared-memory startup ----

enum class FileCheck { kGood, kHeader, kVersion, kStale, kRecord, kLength, kChecksum };

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

// The file read a buffer at a time (the records point into it).
struct Reader {
  FILE* file;
  char* buffer;
  size_t at;
  size_t end;

  // The next n bytes (at most kBufferBytes), or nullptr at the file's end.
  const char* Take(size_t n) {
    if (end - at < n) {
      std::memmove(buffer, buffer + at, end - at);
      end -= at;
      at = 0;
      end += fread(buffer + end, 1, kBufferBytes - end, file);
      if (end < n) return nullptr;
    }
    const char* taken = buffer + at;
    at += n;
    return taken;
  }

  bool AtEnd() { return end == at && fgetc(file) == EOF; }
};

// Reads the next record into *record (its bytes in the reader's buffer, to
// the next Take); kGood, or what is wrong with it.
FileCheck ReadRecord(Reader* reader, MemoryRecord* record, pg_crc32c* crc) {
  const char* head = reader->Take(kHeadBytes);
  if (head == nullptr) return FileCheck::kLength;
  if (!UnpackMemoryRecordHead(head, record)) return FileCheck::kRecord;
  COMP_CRC32C(*crc, head, kHeadBytes);  // before the next Take moves the buffer
  int len = MemoryRecordBytes(*record);
  record->bytes = reader->Take(len);
  if (record->bytes == nullptr) return FileCheck::kLength;
  COMP_CRC32C(*crc, record->bytes, len);
  return FileCheck::kGood;
}

// The header, checked before any entry is made.
// A base file (`strict` false) is read whenever it is there: the worker
// removes it once every entry is logged, and no write is logged before.
FileCheck CheckHeader(FILE* file, FileHeader* header, bool strict) {
  if (fread(header, kHeader3Bytes, 1, file) != 1 || header->magic != kMagic) return FileCheck::kHeader;
  if ((header->format != kFormat && header->format != kFormat3) || header->pg_major != PG_VERSION_NUM / 10000)
    return FileCheck::kVersion;
  if (header->format == kFormat && fread(reinterpret_cast<char*>(header) + kHeader3Bytes,
                                         sizeof(FileHeader) - kHeader3Bytes, 1, file) != 1)
    return FileCheck::kLength;
  ControlFacts facts = ReadControlFacts();
  if (facts.system_identifier == 0 || header->system_identifier != facts.system_identifier ||
      (strict && header->checkpoint != facts.checkpoint))
    return FileCheck::kStale;
  return FileCheck::kGood;
}

// One pass: each record is checked and made an entry (counted in restored,
// or skipped when it found no room), and the length and checksum are
// checked at the end; what is wrong with the file, if anything (the caller
// then removes every entry made).
FileCheck RestoreRecords(Reader* reader, const FileHeader& header) {
  pg_crc32c crc;
  INIT_CRC32C(crc);
  COMP_CRC32C(crc, &header.records, CheckedHeaderBytes(header.format));
  uint64 body = 0;
  MemoryRecord record;
  for (uint64 i = 0; i < header.records; ++i) {
    FileCheck check = ReadRecord(reader, &record, &crc);
    if (check != FileCheck::kGood) return check;
    body += kHeadBytes + MemoryRecordBytes(record);
    if (RestoreMemoryEntry(record)) {
      ++restored;
    } else {
      ++skipped;
    }
  }
  if (body != header.body_bytes || !reader->AtEnd()) return FileCheck::kLength;
  FIN_CRC32C(crc);
  return EQ_CRC32C(crc, header.crc) ? FileCheck::kGood : FileCheck::kChecksum;
}

// Loads `path` (left open in load_file); what is wrong with it, if
// anything. A file found damaged after entries were made leaves none of them.
FileCheck LoadRenamedFile(const char* path, bool strict) {
  load_file = AllocateFile(path, PG_BINARY_R);
  if (load_file == nullptr) return FileCheck::kHeader;
  FileHeader header{};
  FileCheck check = CheckHeader(load_file, &header, strict);
  if (check != FileCheck::kGood) return check;
  // The tables, still empty, take the seeds the records are ordered by: each
  // entry then goes to the bucket after the last one's, and the tables grow
  // while they hold few entries.
  if (header.format == kFormat) SetMemoryTableSeeds(header.compact_seed, header.long_seed);
  load_buffer = static_cast<char*>(palloc(kBufferBytes));
  Reader reader{load_file, load_buffer, 0, 0};
  check = RestoreRecords(&reader, header);
  if (check != FileCheck::kGood) ForgetMemoryEntries();
  return check;
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
                       kStateFile, target),
                errdetail("\"%s\" is left in place, unread; the next clean shutdown writes this run's memory "
                          "limits over it.",
                          kStateFile),
                blocked ? errhint("Remove \"%s\", which is in the way of every load.", target) : 0));
}

// Loads `path`, each entry as it is read; a file found damaged or an
// error leaves none of its entries. Whether it loaded; *check what is wrong.
bool LoadChecked(const char* path, bool strict, FileCheck* check_out, bool* failed_out) {
  MemoryContext old = CurrentMemoryContext;
  restored = 0;
  skipped = 0;
  volatile FileCheck check = FileCheck::kGood;
  volatile bool failed = false;
  PG_TRY();
  { check = LoadRenamedFile(path, strict); }
  PG_CATCH();
  {
    MemoryContextSwitchTo(old);
    LWLockReleaseAll();
    FlushErrorState();
    failed = true;
  }
  PG_END_TRY();
  if (failed) {
    // The entries made so far come from a file not yet checked whole: none stays.
    PG_TRY();
    { ForgetMemoryEntries(); }
    PG_CATCH();
    {
      MemoryContextSwitchTo(old);
      LWLockReleaseAll();
      FlushErrorState();
    }
    PG_END_TRY();
  }
  if (load_file != nullptr) FreeFile(load_file);  // never inherited by the postmaster's children
  load_file = nullptr;
  if (load_buffer != nullptr) pfree(load_buffer);
  load_buffer = nullptr;
  *check_out = check;
  *failed_out = failed;
  return !failed && check == FileCheck::kGood;
}

// The load's one LOG line; `name` the file as the operator knows it, `from`
// where its entries come from.
void ReportLoad(const char* name, const char* from, FileCheck check, bool failed) {
  if (failed) {
    ereport(LOG,
            (errmsg("ratelimit: reading \"%s\" failed after %lld memory limits; memory limits start afresh",
                    name, static_cast<long long>(restored))));
  } else if (check == FileCheck::kStale) {
    ereport(LOG, (errmsg("ratelimit: \"%s\" is stale and was dropped; memory limits start afresh", name),
                  errdetail("%s", CheckDetail(FileCheck::kStale))));
  } else if (check != FileCheck::kGood) {
    ereport(LOG, (errmsg("ratelimit: \"%s\" is damaged and was dropped; memory limits start afresh", name),
                  errdetail("%s", CheckDetail(check))));
  } else {
    ereport(LOG, (errmsg("ratelimit: %lld memory limits read back from %s", static_cast<long long>(restored),
                         from),
                  skipped > 0 ? errdetail("%lld found no room.", static_cast<long long>(skipped)) : 0));
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
  FileCheck check;
  bool failed;
  if (!LoadChecked(kBaseFile, false, &check, &failed)) unlink(kBaseFile);
  DetachSharedTables();
  ReportLoad(kBaseFile, "\"ratelimit_memory.base\" (not yet in the WAL again)", check, failed);
}

void LoadAtStartup() {
  // What a load or a write that died left: never read.
  unlink(kLoadingFile);
  unlink(kTempFile);
  bool keep = KeepsBase();
  if (!keep) unlink(kBaseFile);
  // Kept, the shutdown's file becomes the base file (newer than any) before
  // it is read: if the postmaster dies during the load, the next start reads
  // it again, as nothing in the WAL after that shutdown holds its entries.
  // Otherwise it is read once.
  const char* target = keep ? kBaseFile : kLoadingFile;
  if (!(keep ? RenameDurably(kStateFile, target) : rename(kStateFile, target) == 0)) {
    if (errno != ENOENT) {
      ReportNotRenamed(target);
    } else if (keep && access(kBaseFile, F_OK) == 0) {
      LoadBase();
    }
    return;
  }
  FileCheck check;
  bool failed;
  bool loaded = LoadChecked(target, true, &check, &failed);
  DetachSharedTables();
  if (!(loaded && keep)) unlink(target);
  ReportLoad(kStateFile, "the last shutdown", check, failed);
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
  write_errno = 0;
  renamed = false;
  not_durable = nullptr;
  PG_TRY();
  { written = WriteStateFile(ReadControlFacts(), kBaseFile); }
  PG_CATCH();
  {
    MemoryContextSwitchTo(old);
    raised = CopyErrorData()->message;
    LWLockReleaseAll();
    FlushErrorState();
    unlink(kTempFile);
  }
  PG_END_TRY();
  *raised_out = raised;
  return written >= 0 && not_durable == nullptr ? written : -1;
}

// The LOG line of a base file that could not be kept (`raised`: an error's
// message, else write_errno and not_durable say why); `detail` says what
// that costs.
void ReportBaseNotKept(const char* raised, const char* detail) {
  if (raised != nullptr) {
    ereport(LOG, (errmsg("ratelimit: could not keep the memory limits in \"%s\": %s", kBaseFile, raised),
                  errdetail("%s", detail)));
    return;
  }
  errno = write_errno;
  ereport(LOG, (errcode_for_file_access(),
                errmsg("ratelimit: could not keep the memory limits in \"%s\": %s%s%m", kBaseFile,
                       not_durable != nullptr ? not_durable : "", not_durable != nullptr ? ": " : ""),
                errdetail("%s", detail)));
}

}  // namespace

void SaveRecoveredMemoryLimits() {
  char* raised = nullptr;
  int64 written = WriteBaseFile(&raised);
  if (written >= 0) {
    ereport(LOG, (errmsg("ratelimit: %lld memory limits recovered, kept in \"%s\" until they are in the WAL "
                         "again",
                         static_cast<long long>(written), kBaseFile)));
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
                         static_cast<long long>(written), kBaseFile)));
    return true;
  }
  ReportBaseNotKept(raised, "The worker \"ratelimit memory durability\" is stopping.");
  return false;
}

void RemoveMemoryBase() {
  if (unlink(kBaseFile) == 0) {
    (void)FsyncPath(".", true, false);
  } else if (errno != ENOENT) {
    ereport(LOG, (errcode_for_file_access(), errmsg("ratelimit: could not remove \"%s\": %m", kBaseFile),
                  errdetail("Every memory limit is in the WAL again; the file would be read after a crash.")));
  }
}

}  // namespace ratelimit_pg
