// The rule of slot_quota.cpp as pure code over any atomic counter, so the
// unit tests (test/unit/quota_rule_test.cpp) run it with std::atomic and
// threads, without a server. No PostgreSQL header, no allocation, no
// exception.
//
// A slot is taken by a compare-and-swap that never moves a counter past its
// bound: a reservation refused leaves no transient count behind that could
// refuse another (with add-then-check, a flood of refused callers' attempts
// at a full share made the owner's last free slot look taken for a
// moment). The callers' share is taken first: a reservation that got a
// share slot but found the quota full gives back only that share slot,
// which no owner's reservation reads.
//
// Ops has the static functions
//   std::uint32_t Load(Counter*)
//   bool CompareExchange(Counter*, std::uint32_t* expected, std::uint32_t desired)
//       (on failure *expected is the value seen, as C++'s and PostgreSQL's do)
//   void SubOne(Counter*)
#pragma once

#include <cstdint>

namespace ratelimit_pg {

// One more on *counter if it is below `most`; false, nothing changed, if not.
template <class Ops, class Counter>
bool TakeOneBelow(Counter* counter, std::uint32_t most) {
  std::uint32_t seen = Ops::Load(counter);
  while (seen < most)
    if (Ops::CompareExchange(counter, &seen, seen + 1)) return true;
  return false;
}

// Takes a slot of `most` (shared: also one of the share's `shared_most`);
// false, nothing taken, when there is none.
template <class Ops, class Counter>
bool ReserveWithin(Counter* used, Counter* shared_used, std::uint32_t most, std::uint32_t shared_most,
                   bool shared) {
  if (shared && !TakeOneBelow<Ops>(shared_used, shared_most)) return false;
  if (TakeOneBelow<Ops>(used, most)) return true;
  if (shared) Ops::SubOne(shared_used);
  return false;
}

}  // namespace ratelimit_pg
