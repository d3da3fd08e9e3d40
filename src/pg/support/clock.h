// The clock (clock.cpp): clock_timestamp(), or the superuser-only frozen
// ratelimit.now for tests, and conversions to the core's Unix microseconds.
#pragma once

#include "support/limit_call.h"

extern "C" {
#include "datatype/timestamp.h"
}

namespace ratelimit_pg {

void DefineClockGuc();
// Now: the frozen value (parsed when it was set) or the system clock. Never
// raises or allocates, so an abort path may read it.
Micros ClockNow();
// The system clock, whatever ratelimit.now says.
Micros RealClockNow();
// A clock to read under a short lock (a storage's, where nothing may
// allocate or raise): frozen, the value read when it was made; else the
// system clock, read at each Read().
struct LockedClock {
  bool frozen;
  Micros frozen_now;
  Micros Read() const;
};
LockedClock ClockForLock();
// Whether a timestamp lies in 0001-01-01 .. 100000-01-01 (the range the
// limiter accepts for its clock and for config start), so converting it to
// Unix microseconds and adding any answer's offset cannot overflow.
bool TimestamptzSupported(TimestampTz ts);
// Unix microseconds of a (finite, in-range) timestamp, and back.
Micros UnixFromTimestamptz(TimestampTz ts);
TimestampTz TimestamptzFromUnix(Micros micros);

}  // namespace ratelimit_pg
