// What one kind of limit (one algorithm) is to the rest of the code: a
// table of operations, KindOps. Each kind's file in this folder defines one
// table and registry.cpp lists them; every other module reaches a kind only
// through its table (registry.h), so nothing outside src/core/kinds names
// a kind. docs/internals.md, "Adding a kind", walks through adding one.
#pragma once

#include <cstdint>

#include "types.h"

namespace ratelimit {
namespace detail {

// One row's state rolled forward to the effective now, as its kind's
// view_at computes it for the kind's other operations.
struct View {
  Micros eff = 0;           // max(now, stored ts)
  Micros window_start = 0;  // a windowed kind: start of the current window; else eff
  double avail = 0;         // tokens available at eff
  // A kind's own figures at eff, kept for its other operations (a kind
  // that counts its windows: what it counts as used, and the current and
  // previous windows' counts).
  double used = 0;
  double current = 0;
  double previous = 0;
  LimitState base;  // the stored state (a missing row: its initial state)
};

}  // namespace detail

// How a kind's stored rows say which kind wrote them, in the prev column
// (docs/internals.md, "Storage"). The stored encoding never changes.
enum class TagForm : std::uint8_t {
  kNull,      // prev is written NULL (the kind keeps nothing there)
  kConstant,  // prev is written as StoredTag::value, a negative constant
  kData,      // prev holds the kind's own figure (never negative): every value no tag claims
};

struct StoredTag {
  TagForm form;
  double value;  // kConstant: the tag itself (negative)
};

// One kind's operations. Flags and texts say what applies to the kind; the
// functions are its maths, each for one row of a valid config (a shard's
// share when sharded), called through the registry by small integer.
struct KindOps {
  const char* name;  // the config's "kind" value, in messages and ratelimit_status
  StoredTag tag;     // how its rows are told apart from other kinds' rows
  // Its rows may predate the tagging of kinds (0.5.0): a row tagged as
  // untagged (registry.h) is read as its row.
  bool reads_untagged_rows;
  // Decided on a grid of windows aligned to the limit's origin: "start"
  // applies, its rows are written with their period (and realigned when it
  // changes), and a rolled-back grant is given back only into its window.
  bool windowed;
  bool takes_capacity;             // "capacity" applies; else the capacity is the rate
  bool can_reserve;                // "maxReserved" and reserve apply
  const char* no_capacity_detail;  // when !takes_capacity: why "capacity" does not apply
  const char* no_reserve_detail;   // when !can_reserve: why "maxReserved" does not apply

  // Microseconds to refill from empty to full (at most the horizon).
  double (*refill_micros)(const LimitConfig& config);
  // The most tokens that refill within the horizon: how deep a
  // reservation may go (0 for a kind that cannot reserve).
  double (*refillable)(const LimitConfig& config);
  // The state a never-used row starts in at clock `now` (the same as no row).
  LimitState (*initial)(const LimitConfig& config, Micros now, Micros origin);
  // The row's state rolled forward to max(now, its ts).
  detail::View (*view_at)(const LimitConfig& config, const LimitState& state, Micros now, Micros origin);
  // Whether `count` can be taken now leaving at most `deficit` below zero:
  // the one test validation, decisions and retry searches all make.
  bool (*can_take)(const LimitConfig& config, const detail::View& view, double count, double deficit);
  // The state after taking `take` tokens (may leave a deficit).
  LimitState (*take)(const LimitConfig& config, const detail::View& view, double take);
  // The state that leaves exactly `level` tokens (balanced shard takes).
  LimitState (*leave_at)(const LimitConfig& config, const detail::View& view, double level);
  // The state after giving back up to `amount` tokens.
  LimitState (*give_back)(const LimitConfig& config, const detail::View& view, double amount);
  // The most a refund can give back to the row now.
  double (*refund_room)(const LimitConfig& config, const detail::View& view);
  // The earliest moment >= view.eff at which can_take(count, deficit)
  // holds, computed from the stored state exactly as a later call would.
  Micros (*when_available)(const LimitConfig& config, const detail::View& view, double count, double deficit);
  // The state holding `tokens` at `eff` (a windowed kind: in the window
  // containing eff): what a row carries onto a new config.
  LimitState (*holding)(const LimitConfig& config, Micros origin, Micros eff, double tokens);
};

}  // namespace ratelimit
