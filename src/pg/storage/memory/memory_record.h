// One memory entry as it leaves shared memory (memory_record.cpp): its
// identity's lengths and bytes and its row, packed into a 56-byte head and
// the bytes. The saved state file (memory_state_file) and the WAL records
// (memory_wal) carry the same head, and both read it back through the one
// check here: a record is taken only if every field is one a live entry
// can hold.
#pragma once

#include "storage/seam.h"

namespace ratelimit_pg {

// One entry, by value (bytes points at its name, then its key).
struct MemoryRecord {
  Oid database;
  int32 name_len;
  int32 key_len;      // -1: the NULL key
  const char* bytes;  // the name, then the key
  RowWrite row;
  bool inline_share;
};

constexpr int kMemoryRecordHeadBytes = 56;

// Writes record's head (native byte order): database, name_len, key_len,
// exists, keep_prev, inline_share, a zero byte, value, ts, prev, idle_at,
// period.
void PackMemoryRecordHead(const MemoryRecord& record, char* out);
// Reads a head back into *out (bytes not set); false unless every field is
// one a live entry can hold (the lengths checked before they are added).
bool UnpackMemoryRecordHead(const char* in, MemoryRecord* out);
// The name's and key's bytes together.
int MemoryRecordBytes(const MemoryRecord& record);

}  // namespace ratelimit_pg
