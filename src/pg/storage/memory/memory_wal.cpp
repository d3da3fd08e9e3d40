// Memory limits' WAL records (memory_wal.h): what is logged, and when.
#include <cstring>

#include "storage/memory/memory_wal.h"

#include "shmem/shared_tables.h"

extern "C" {
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "miscadmin.h"
#include "utils/guc.h"
}

namespace ratelimit_pg {
namespace {

enum Durability { kDurabilityOff, kDurabilityWal };

const config_enum_entry kDurabilityOptions[] = {
    {"off", kDurabilityOff, false}, {"wal", kDurabilityWal, false}, {nullptr, 0, false}};

int durability = kDurabilityWal;

// Appends the record's data and inserts it, out of the transaction's
// account: XactLastRecEnd is put back, so a commit without an xid does not
// take the record for its own WAL and wake the WAL writer (every commit of
// a busy server would; measured in bench/README.md, issue 38). The record
// is flushed by the next commit that flushes (any flush covers the WAL
// before it: a commit with an xid under synchronous_commit = on flushes its
// own decisions with its commit record), else within 50 ms by the
// durability worker (memory_guard.cpp's kLookMs, FlushMemoryWal).
XLogRecPtr Insert(uint8 type, const char* data, int len) {
  XLogRecPtr transaction_end = XactLastRecEnd;
  XLogBeginInsert();
  XLogRegisterData(const_cast<char*>(data), len);
  XLogRecPtr end = XLogInsert(static_cast<RmgrId>(kMemoryRmgrId), type);
  XactLastRecEnd = transaction_end;
  return end;
}

}  // namespace

// Set at server start, with the preload: the WAL resource manager and the
// worker can be registered only then. A library loaded later (no preload)
// shows it read-only as off, which it is there.
void DefineMemoryDurabilityGuc() {
  bool preloading = process_shared_preload_libraries_in_progress;
  DefineCustomEnumVariable(
      "ratelimit.memory_durability", "How memory limits survive a crash and a failover.",
      "wal: every write of a memory limit is a WAL record, replayed after a crash and on standbys (needs "
      "shared_preload_libraries = 'ratelimit'). off: memory limits keep their state across a clean restart "
      "only; a crash or a failover starts them full.",
      &durability, preloading ? kDurabilityWal : kDurabilityOff, kDurabilityOptions,
      preloading ? PGC_POSTMASTER : PGC_INTERNAL, 0, nullptr, nullptr, nullptr);
}

bool MemoryDurabilityWal() { return durability == kDurabilityWal; }

bool LogMemoryWrites() {
  return durability == kDurabilityWal && SharedTablesPreloaded() && !RecoveryInProgress();
}

XLogRecPtr LogMemoryEntry(const MemoryRecord& record) {
  char data[kMemoryRecordHeadBytes + 256];
  PackMemoryRecordHead(record, data);
  int len = MemoryRecordBytes(record);
  std::memcpy(data + kMemoryRecordHeadBytes, record.bytes, len);
  return Insert(kWalEntries, data, kMemoryRecordHeadBytes + len);
}

void LogMemoryDelete(const MemoryRecord& identity) {
  char data[sizeof(WalDeleteHead) + 256];
  WalDeleteHead head{identity.database, identity.name_len, identity.key_len};
  std::memcpy(data, &head, sizeof head);
  int len = MemoryRecordBytes(identity);
  std::memcpy(data + sizeof head, identity.bytes, len);
  (void)Insert(kWalDelete, data, static_cast<int>(sizeof head) + len);
}

void LogMemoryForgetDatabase(Oid database) {
  XLogRecPtr end = Insert(kWalForgetDatabase, reinterpret_cast<const char*>(&database), sizeof database);
  // Written at the drop's commit, after its commit record: flushed now, so
  // that a crash right after the drop cannot bring its entries back.
  XLogFlush(end);
}

// The end of the last record inserted, not where the next one would start
// (GetXLogInsertRecPtr): after a record that ends a page, or a WAL switch,
// that is past the next page's header, which no flush reaches, and
// XLogFlush would raise and end the worker.
void FlushMemoryWal() {
  XLogRecPtr inserted = GetXLogInsertEndRecPtr();
  if (inserted > GetFlushRecPtr(nullptr)) XLogFlush(inserted);
}

}  // namespace ratelimit_pg
