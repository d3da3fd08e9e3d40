// The packed form of a memory entry (memory_record.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "storage/memory/memory_record.h"

#include "storage/memory/memory_names.h"
#include "support/clock.h"

namespace ratelimit_pg {
namespace {

// A value no limit can hold (configs are bounded by ratelimit::kMaxMagnitude).
constexpr double kMostValue = 2 * ratelimit::kMaxMagnitude;

bool IsFlag(char c) { return c == 0 || c == 1; }

bool ValidValue(double v) { return std::isfinite(v) && std::fabs(v) <= kMostValue; }

bool ValidTime(Micros t) { return TimestamptzSupported(TimestamptzFromUnix(t)); }

}  // namespace

void PackMemoryRecordHead(const MemoryRecord& record, char* out) {
  std::memset(out, 0, kMemoryRecordHeadBytes);
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

bool UnpackMemoryRecordHead(const char* in, MemoryRecord* out) {
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
  int most = kMemoryIdentityBytes;
  if (out->database == InvalidOid || out->name_len < 1 || out->name_len > most || out->key_len < -1 ||
      out->key_len > most || out->name_len + std::max(0, out->key_len) > most)
    return false;
  return ValidValue(out->row.next.value) && ValidValue(out->row.next.prev) && ValidTime(out->row.next.ts) &&
         ValidTime(out->row.idle_at) && out->row.period >= 0;
}

int MemoryRecordBytes(const MemoryRecord& record) { return record.name_len + std::max(0, record.key_len); }

}  // namespace ratelimit_pg
