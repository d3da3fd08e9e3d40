// The memory storage's state file (memory_state_file.h). What it holds,
// and when a file is stale or damaged, is docs/memory.md, "Restarts"; here,
// its bytes: a 64-byte header (magic, format, PostgreSQL major, CRC-32C,
// records, body bytes, the cluster's system identifier and the shutdown
// checkpoint it was written after, the tables' hash seeds), then per entry
// a 56-byte record head and its name and key bytes. The CRC covers the
// header from the records on, then the body.
//
// One pass each way: the save counts the records as it writes them and
// writes the header again at the end, its CRC combined with the body's
// (ShiftCrc); the load checks each record as it restores it, and the
// length and CRC at the end. The records come in the order of the tables'
// buckets, and the load gives the empty tables the seeds they were written
// under, so the tables grow while nearly empty instead of rehashing.
// Format 4 since 0.10.0; format 3 (0.8.0's and 0.9.0's: a 48-byte header
// without the seeds) is still read.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "storage/memory/memory_state_file.h"

#include "storage/memory/memory_record.h"
#include "storage/memory/memory_recovery.h"

extern "C" {
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "utils/memutils.h"
}

namespace ratelimit_pg {

StateFileWrite state_file_write{};

namespace {

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

// What the load made, and the file it reads and its buffer (static: they
// outlive a PG_TRY's longjmp, after which the file is closed).
int64 restored = 0;
int64 skipped = 0;
FILE* load_file = nullptr;
char* load_buffer = nullptr;

// ---- writing ----

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

// Keeps the errno of the first step that failed; `done`: the step's success.
bool Step(bool ok, bool done) {
  if (ok && !done) state_file_write.write_errno = errno != 0 ? errno : EIO;
  return ok && done;
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
  if (!Step(true, FsyncPath(target, false, true) == 0) || !Step(true, rename(kMemoryTempFile, target) == 0)) {
    unlink(kMemoryTempFile);
    return false;
  }
  state_file_write.renamed = true;
  state_file_write.records_in_place = records;
  if (!Step(true, FsyncPath(target, false, false) == 0)) {
    state_file_write.not_durable = "could not fsync the file";
  } else if (!Step(true, FsyncPath(".", true, false) == 0)) {
    state_file_write.not_durable = "could not fsync the data directory";
  }
  return true;
}

// ---- reading ----

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

}  // namespace

// The header, written first as a placeholder, is written again with the
// counts and the CRC.
int64 WriteMemoryStateFile(const ControlFacts& facts, const char* target) {
  // What can raise comes before the file exists (the caller removes a
  // temporary file an error leaves anyway).
  FileHeader header{
      kMagic, kFormat, PG_VERSION_NUM / 10000, 0, 0, 0, facts.system_identifier, facts.checkpoint, 0, 0};
  MemoryTableSeeds(&header.compact_seed, &header.long_seed);
  char* buffer = static_cast<char*>(palloc(kBufferBytes));
  errno = 0;
  FILE* file = AllocateFile(kMemoryTempFile, PG_BINARY_W);
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
    unlink(kMemoryTempFile);
    return -1;
  }
  int64 records = static_cast<int64>(state.records);
  return RenameIntoPlace(records, target) ? records : -1;
}

ControlFacts ReadControlFacts() {
  bool crc_ok = false;
  ControlFileData* control = get_controlfile(DataDir, &crc_ok);
  ControlFacts facts{control->state == DB_SHUTDOWNED || control->state == DB_SHUTDOWNED_IN_RECOVERY,
                     control->system_identifier, control->checkPoint};
  if (!crc_ok) facts = ControlFacts{false, 0, 0};
  pfree(control);
  return facts;
}

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

bool LoadMemoryStateFile(const char* path, bool strict, StateFileLoad* out) {
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
  *out = StateFileLoad{check, failed, restored, skipped};
  return !failed && check == FileCheck::kGood;
}

}  // namespace ratelimit_pg
