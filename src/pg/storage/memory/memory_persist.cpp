// Memory limits across a clean restart (memory_persist.h), in the order
// pg_stat_statements and pgstat keep their own: the postmaster reads the
// file while it makes shared memory, before it accepts a connection, and
// writes it when it exits after a clean shutdown, once every other process
// is gone (so every rolled-back grant has been given back).
//
// The file: a 48-byte header (magic, format, PostgreSQL major, CRC-32C,
// records, body bytes, the cluster's system identifier and the shutdown
// checkpoint it was written after), then per entry a 56-byte record head
// and its name and key bytes. The CRC covers the header from the records
// on and the body. A file is read only by the start that follows the
// shutdown that wrote it (the same checkpoint in pg_control): one left
// behind while the server ran without the preload, or copied from another
// cluster, is stale and dropped. It is renamed before it is read: a file
// that stops a load is never read twice.
//
// A record is the entry's identity and row, not its layout in memory (the
// compact and long tables of 0.9.0 write what 0.8.0's one table wrote):
// format 3 since 0.8.0, read by 0.9.0 from a file 0.8.0 wrote.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "storage/memory/memory_persist.h"

#include "shmem/shared_tables.h"
#include "storage/memory/memory_storage.h"
#include "support/clock.h"

extern "C" {
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
constexpr uint32 kMagic = 0x524C4D53;  // "SMLR" on disk: ratelimit memory state
constexpr uint32 kFormat = 3;
constexpr int kHeadBytes = 56;
// A value no limit can hold (configs are bounded by ratelimit::kMaxMagnitude).
constexpr double kMostValue = 2 * ratelimit::kMaxMagnitude;

struct FileHeader {
  uint32 magic;
  uint32 format;
  uint32 pg_major;
  uint32 crc;  // CRC-32C of the 32 bytes from records on, then the body
  uint64 records;
  uint64 body_bytes;
  uint64 system_identifier;  // pg_control's when it was written
  uint64 checkpoint;         // pg_control's checkPoint: the shutdown's
};
static_assert(sizeof(FileHeader) == 48);
constexpr int kCheckedHeaderBytes = 32;  // from records on

shmem_startup_hook_type previous_startup_hook = nullptr;
// What the load made, and the file it reads (static: they outlive a
// PG_TRY's longjmp, after which the file is closed).
int64 restored = 0;
int64 skipped = 0;
FILE* load_file = nullptr;

// The 56-byte head of a record (native byte order): database, name_len,
// key_len, exists, keep_prev, inline_share, a zero byte, value, ts, prev,
// idle_at, period.
void PackHead(const MemoryRecord& record, char* out) {
  std::memset(out, 0, kHeadBytes);
  std::memcpy(out, &record.database, 4);
  std::memcpy(out + 4, &record.name_len, 4);
  std::memcpy(out + 8, &record.key_len, 4);
  out[12] = record.row.next.exists ? 1 : 0;
  out[13] = record.row.keep_prev ? 1 : 0;
  out[14] = record.inline_share ? 1 : 0;
  std::memcpy(out + 16, &record.row.next.value, 8);
  std::memcpy(out + 24, &record.row.next.ts, 8);
  std::memcpy(out + 32, &record.row.next.prev, 8);
  std::memcpy(out + 40, &record.row.idle_at, 8);
  std::memcpy(out + 48, &record.row.period, 8);
}

bool IsFlag(char c) { return c == 0 || c == 1; }

bool ValidValue(double v) { return std::isfinite(v) && std::fabs(v) <= kMostValue; }

bool ValidTime(Micros t) { return TimestamptzSupported(TimestamptzFromUnix(t)); }

// Reads a head back into *out (bytes not set); false unless every field is
// one a live entry can hold. The lengths are checked before they are added.
bool UnpackHead(const char* in, MemoryRecord* out) {
  *out = MemoryRecord{};
  std::memcpy(&out->database, in, 4);
  std::memcpy(&out->name_len, in + 4, 4);
  std::memcpy(&out->key_len, in + 8, 4);
  if (!IsFlag(in[12]) || !IsFlag(in[13]) || !IsFlag(in[14]) || in[15] != 0 || in[12] != 1) return false;
  out->row.next.exists = true;
  out->row.keep_prev = in[13] == 1;
  out->inline_share = in[14] == 1;
  std::memcpy(&out->row.next.value, in + 16, 8);
  std::memcpy(&out->row.next.ts, in + 24, 8);
  std::memcpy(&out->row.next.prev, in + 32, 8);
  std::memcpy(&out->row.idle_at, in + 40, 8);
  std::memcpy(&out->row.period, in + 48, 8);
  int most = MemoryIdentityBytes();
  if (out->database == InvalidOid || out->name_len < 1 || out->name_len > most || out->key_len < -1 ||
      out->key_len > most || out->name_len + std::max(0, out->key_len) > most)
    return false;
  return ValidValue(out->row.next.value) && ValidValue(out->row.next.prev) && ValidTime(out->row.next.ts) &&
         ValidTime(out->row.idle_at) && out->row.period >= 0;
}

int IdentityBytes(const MemoryRecord& record) { return record.name_len + std::max(0, record.key_len); }

// ---- writing, from the postmaster's exit ----

struct WriteState {
  FILE* file;
  pg_crc32c crc;
  uint64 records;
  uint64 bytes;
};

// Whether the reader would take a record back (one written under a test
// clock far in the future may not be): one it would not is left out, so
// that it cannot make the reader drop the whole file.
bool Writable(const MemoryRecord& record) {
  char head[kHeadBytes];
  PackHead(record, head);
  MemoryRecord check;
  return UnpackHead(head, &check);
}

bool CountRecord(const MemoryRecord& record, void* context) {
  auto* state = static_cast<WriteState*>(context);
  if (!Writable(record)) return true;
  ++state->records;
  state->bytes += kHeadBytes + IdentityBytes(record);
  return true;
}

bool WriteRecord(const MemoryRecord& record, void* context) {
  auto* state = static_cast<WriteState*>(context);
  if (!Writable(record)) return true;
  ++state->records;
  char head[kHeadBytes];
  PackHead(record, head);
  int len = IdentityBytes(record);
  COMP_CRC32C(state->crc, head, kHeadBytes);
  COMP_CRC32C(state->crc, record.bytes, len);
  if (fwrite(head, kHeadBytes, 1, state->file) != 1) return false;
  return len == 0 || fwrite(record.bytes, len, 1, state->file) == 1;
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

// Writes every live entry to the temporary file, then renames it durably;
// how many, or -1 (the temporary file removed).
int64 WriteStateFile(const ControlFacts& facts) {
  Micros now = MemorySweepClock();
  WriteState counted{nullptr, 0, 0, 0};
  ForEachMemoryEntry(now, CountRecord, &counted);
  FILE* file = AllocateFile(kTempFile, PG_BINARY_W);
  if (file == nullptr) return -1;
  FileHeader header{kMagic,          kFormat,       PG_VERSION_NUM / 10000,  0,
                    counted.records, counted.bytes, facts.system_identifier, facts.checkpoint};
  WriteState state{file, 0, 0, 0};
  INIT_CRC32C(state.crc);
  COMP_CRC32C(state.crc, &header.records, kCheckedHeaderBytes);
  bool ok = fwrite(&header, sizeof header, 1, file) == 1;
  ok = ok && ForEachMemoryEntry(now, WriteRecord, &state) >= 0 && state.records == counted.records;
  FIN_CRC32C(state.crc);
  header.crc = state.crc;
  ok = ok && fseek(file, 0, SEEK_SET) == 0 && fwrite(&header, sizeof header, 1, file) == 1;
  ok = ok && fflush(file) == 0 && pg_fsync(fileno(file)) == 0;
  if (FreeFile(file) != 0) ok = false;
  if (!ok || durable_rename(kTempFile, kStateFile, LOG) != 0) {
    unlink(kTempFile);
    return -1;
  }
  return static_cast<int64>(counted.records);
}

// on_shmem_exit in the postmaster: after a clean shutdown every backend has
// exited (its rollbacks' refunds done), so the entries are final.
void SaveAtExit(int code, Datum) {
  if (code != 0) return;  // a crash: nothing is saved
  MemoryContext old = CurrentMemoryContext;
  volatile int64 written = -1;
  volatile bool clean = false;
  PG_TRY();
  {
    ControlFacts facts = ReadControlFacts();
    clean = facts.shut_down;
    if (clean) written = WriteStateFile(facts);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(old);
    LWLockReleaseAll();
    FlushErrorState();
  }
  PG_END_TRY();
  DetachSharedTables();
  if (!clean) return;
  if (written < 0) {
    ereport(LOG, (errcode_for_file_access(),
                  errmsg("ratelimit: could not write \"%s\"; memory limits start afresh", kStateFile)));
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

// Reads the next record (head and identity into *bytes); false at a bad one.
bool ReadRecord(FILE* file, char* bytes, MemoryRecord* record, pg_crc32c* crc) {
  char head[kHeadBytes];
  if (fread(head, kHeadBytes, 1, file) != 1 || !UnpackHead(head, record)) return false;
  int len = IdentityBytes(*record);
  if (len > 0 && fread(bytes, len, 1, file) != 1) return false;
  record->bytes = bytes;
  COMP_CRC32C(*crc, head, kHeadBytes);
  COMP_CRC32C(*crc, bytes, len);
  return true;
}

// The first pass: the header, every record and the checksum, before any
// entry is made.
FileCheck CheckFile(FILE* file, FileHeader* header, char* bytes) {
  if (fread(header, sizeof(FileHeader), 1, file) != 1 || header->magic != kMagic) return FileCheck::kHeader;
  if (header->format != kFormat || header->pg_major != PG_VERSION_NUM / 10000) return FileCheck::kVersion;
  pg_crc32c crc;
  INIT_CRC32C(crc);
  COMP_CRC32C(crc, &header->records, kCheckedHeaderBytes);
  uint64 body = 0;
  MemoryRecord record;
  for (uint64 i = 0; i < header->records; ++i) {
    if (!ReadRecord(file, bytes, &record, &crc)) return feof(file) ? FileCheck::kLength : FileCheck::kRecord;
    body += kHeadBytes + IdentityBytes(record);
  }
  if (body != header->body_bytes || fgetc(file) != EOF) return FileCheck::kLength;
  FIN_CRC32C(crc);
  if (!EQ_CRC32C(crc, header->crc)) return FileCheck::kChecksum;
  ControlFacts facts = ReadControlFacts();
  if (facts.system_identifier == 0 || header->system_identifier != facts.system_identifier ||
      header->checkpoint != facts.checkpoint)
    return FileCheck::kStale;
  return FileCheck::kGood;
}

// The second pass: every record made an entry (counted in restored, or
// skipped when it found no room).
void RestoreRecords(FILE* file, const FileHeader& header, char* bytes) {
  pg_crc32c crc;
  INIT_CRC32C(crc);
  MemoryRecord record;
  for (uint64 i = 0; i < header.records && ReadRecord(file, bytes, &record, &crc); ++i) {
    if (RestoreMemoryEntry(record)) {
      ++restored;
    } else {
      ++skipped;
    }
  }
}

// Loads the file renamed to kLoadingFile (left open in load_file); the
// check's result.
FileCheck LoadRenamedFile(char* bytes) {
  load_file = AllocateFile(kLoadingFile, PG_BINARY_R);
  if (load_file == nullptr) return FileCheck::kHeader;
  FileHeader header{};
  FileCheck check = CheckFile(load_file, &header, bytes);
  if (check == FileCheck::kGood && fseek(load_file, sizeof(FileHeader), SEEK_SET) == 0)
    RestoreRecords(load_file, header, bytes);
  return check;
}

void LoadAtStartup() {
  // What a load or a write that died left: never read.
  unlink(kLoadingFile);
  unlink(kTempFile);
  if (rename(kStateFile, kLoadingFile) != 0) {
    if (errno != ENOENT)
      ereport(LOG, (errcode_for_file_access(), errmsg("ratelimit: could not read \"%s\": %m", kStateFile)));
    return;
  }
  MemoryContext old = CurrentMemoryContext;
  restored = 0;
  skipped = 0;
  volatile FileCheck check = FileCheck::kGood;
  volatile bool failed = false;
  char* bytes = static_cast<char*>(palloc(MemoryIdentityBytes() + 1));
  PG_TRY();
  { check = LoadRenamedFile(bytes); }
  PG_CATCH();
  {
    MemoryContextSwitchTo(old);
    LWLockReleaseAll();
    FlushErrorState();
    failed = true;
  }
  PG_END_TRY();
  if (load_file != nullptr) FreeFile(load_file);  // never inherited by the postmaster's children
  load_file = nullptr;
  pfree(bytes);
  DetachSharedTables();
  unlink(kLoadingFile);
  if (failed) {
    ereport(LOG, (errmsg("ratelimit: reading \"%s\" failed after %lld memory limits; the rest start afresh",
                         kStateFile, static_cast<long long>(restored))));
  } else if (check == FileCheck::kStale) {
    ereport(LOG,
            (errmsg("ratelimit: \"%s\" is stale and was dropped; memory limits start afresh", kStateFile),
             errdetail("%s", CheckDetail(FileCheck::kStale))));
  } else if (check != FileCheck::kGood) {
    ereport(LOG,
            (errmsg("ratelimit: \"%s\" is damaged and was dropped; memory limits start afresh", kStateFile),
             errdetail("%s", CheckDetail(static_cast<FileCheck>(check)))));
  } else {
    ereport(LOG, (errmsg("ratelimit: %lld memory limits read back from the last shutdown",
                         static_cast<long long>(restored)),
                  skipped > 0 ? errdetail("%lld found no room.", static_cast<long long>(skipped)) : 0));
  }
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

}  // namespace ratelimit_pg
