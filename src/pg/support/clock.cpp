// The clock: clock_timestamp(), or the frozen ratelimit.now for tests.

#include "support/clock.h"

extern "C" {
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
}

#include "support/compat.h"

namespace ratelimit_pg {
namespace {

char* frozen_now_text = nullptr;  // the GUC's value; empty means the real clock
// The value parsed when it was set (its check hook's extra): reading the
// clock never parses, so it cannot raise (a rollback's refund reads it).
bool frozen = false;
Micros frozen_now = 0;

// Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01).
constexpr Micros kPostgresEpochOffset =
    Micros{POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE} * SECS_PER_DAY * USECS_PER_SEC;
// The instants the limiter works with: 0001-01-01 up to 100000-01-01 UTC
// (Unix microseconds). Every answer lies at most a few hundred years past
// the clock, so it stays far inside PostgreSQL's timestamp range.
constexpr Micros kEarliestSupported = Micros{-62135596800} * USECS_PER_SEC;
constexpr Micros kLatestSupported = Micros{3093527980800} * USECS_PER_SEC;

// Parses the GUC value at SET time so a bad timestamp fails there, not
// later. Check hooks must not throw: the parse error is a soft error
// (compat::CallInputFunction).
bool CheckFrozenNow(char** newval, void** extra, GucSource source) {
  (void)source;
  if (*newval == nullptr || (*newval)[0] == '\0') return true;
  Datum parsed;
  char* message = nullptr;
  bool valid = compat::CallInputFunction(timestamptz_in, *newval, &parsed, &message) &&
               TimestamptzSupported(DatumGetTimestampTz(parsed));
  if (!valid) {
    GUC_check_errdetail("ratelimit.now must be empty or a timestamptz from 0001-01-01 to 100000-01-01.");
    return false;
  }
  // An extra is the GUC machinery's to free: its allocator (compat.h).
  auto* value = static_cast<Micros*>(compat::AllocGucExtra(sizeof(Micros)));
  if (value == nullptr) return false;
  *value = UnixFromTimestamptz(DatumGetTimestampTz(parsed));
  *extra = value;
  return true;
}

void AssignFrozenNow(const char* newval, void* extra) {
  frozen = newval != nullptr && newval[0] != '\0' && extra != nullptr;
  frozen_now = frozen ? *static_cast<const Micros*>(extra) : 0;
}

}  // namespace

void DefineClockGuc() {
  DefineCustomStringVariable("ratelimit.now", "Freezes the rate limiter's clock (for tests).",
                             "A timestamptz; empty means clock_timestamp().", &frozen_now_text, "", PGC_SUSET,
                             0, CheckFrozenNow, AssignFrozenNow, nullptr);
}

bool TimestamptzSupported(TimestampTz ts) {
  if (TIMESTAMP_NOT_FINITE(ts)) return false;
  return ts >= kEarliestSupported - kPostgresEpochOffset && ts <= kLatestSupported - kPostgresEpochOffset;
}

Micros UnixFromTimestamptz(TimestampTz ts) { return ts + kPostgresEpochOffset; }

TimestampTz TimestamptzFromUnix(Micros micros) { return micros - kPostgresEpochOffset; }

LockedClock ClockForLock() { return LockedClock{frozen, frozen_now}; }

Micros LockedClock::Read() const { return frozen ? frozen_now : UnixFromTimestamptz(GetCurrentTimestamp()); }

Micros RealClockNow() { return UnixFromTimestamptz(GetCurrentTimestamp()); }

Micros ClockNow() { return frozen ? frozen_now : RealClockNow(); }

}  // namespace ratelimit_pg
