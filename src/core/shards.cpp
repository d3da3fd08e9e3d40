// Sharded limits: the power of two choices over shard rows, balanced takes,
// totals, and refunds that fill the emptiest shards first. Built on the
// per-row primitives alone (not on the single-row decisions of limiter.cpp).
#include "shards.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "primitives.h"

namespace ratelimit {

using detail::CanTake;
using detail::FirstWhere;
using detail::Fits;
using detail::GiveBack;
using detail::LeaveAt;
using detail::OutOfDeficitBy;
using detail::SearchLimit;
using detail::Seconds;
using detail::TakeFrom;
using detail::View;
using detail::ViewAt;
using detail::WhenAvailable;

namespace {

// How many tokens to take from each of one or two shards.
struct TakePlan {
  bool ok = false;
  bool fits = false;  // no deficit is left behind
  double take[2] = {0, 0};
  bool chosen[2] = {false, false};
  bool balanced = false;  // both shards are left at exactly `level`
  double level = 0;
};

constexpr Micros kEarliest = std::numeric_limits<Micros>::min();

// Takes everything from shard i.
TakePlan Single(int i, double count, bool fits) {
  TakePlan plan;
  plan.ok = true;
  plan.fits = fits;
  plan.take[i] = count;
  plan.chosen[i] = true;
  return plan;
}

// Takes from both shards so they end at the same level.
TakePlan Balanced(const View* views, int hi, int lo, double count, bool fits) {
  TakePlan plan;
  plan.ok = true;
  plan.fits = fits;
  plan.balanced = true;
  plan.level = (views[hi].avail + views[lo].avail - count) / 2;
  plan.take[lo] = std::max(0.0, views[lo].avail - plan.level);
  plan.take[hi] = count - plan.take[lo];
  plan.chosen[0] = plan.chosen[1] = true;
  return plan;
}

// The power of two choices: the shard with more tokens if it has enough;
// else both together, balanced; else (reserving) the deficit spread so the
// shards end level, within each shard's maxReserved.
TakePlan PlanTakes(const LimitConfig& config, const View* views, int count, const Request& request) {
  int hi = (count == 2 && views[1].avail > views[0].avail) ? 1 : 0;
  int lo = 1 - hi;
  double c = request.count;
  if (Fits(config, views[hi], c)) return Single(hi, c, true);
  if (count == 2 && views[hi].avail + views[lo].avail - c >= 0) return Balanced(views, hi, lo, c, true);
  if (!request.reserve) return TakePlan{};
  double deficit = MaxDeficit(config);
  if (count == 1 || views[hi].avail - c >= views[lo].avail) {
    if (CanTake(config, views[hi], c, deficit)) return Single(hi, c, false);
    return TakePlan{};
  }
  if ((views[hi].avail + views[lo].avail - c) / 2 >= -deficit) return Balanced(views, hi, lo, c, false);
  return TakePlan{};
}

// The latest effective now among the views.
Micros LatestEff(const View* views, int count) {
  Micros eff = views[0].eff;
  for (int i = 1; i < count; ++i) eff = std::max(eff, views[i].eff);
  return eff;
}

// Views of every input at one moment: the latest of `now` and the inputs'
// own timestamps (a single row is seen at max(now, its ts) the same way).
// Seen at different moments, a shard whose ts is ahead of the clock would
// be balanced against the other's tokens of an earlier moment, and a
// reservation would be told to wait longer than the same call without
// reserve (whose retry search sees both shards at one moment).
void ViewsAt(const LimitConfig& config, const ShardInput* inputs, int count, Micros now, Micros origin,
             View* views) {
  for (int i = 0; i < count; ++i) views[i] = ViewAt(config, inputs[i].state, now, origin);
  Micros eff = LatestEff(views, count);
  for (int i = 0; i < count; ++i) views[i] = ViewAt(config, views[i].base, eff, origin);
}

// The first moment from `from` at which the shards could grant the request.
Micros WhenGrantable(const LimitConfig& config, const View* views, int count, Micros from, Micros origin,
                     const Request& request) {
  return FirstWhere(from, SearchLimit(from), [&](Micros t) {
    View later[2];
    for (int i = 0; i < count; ++i) later[i] = ViewAt(config, views[i].base, t, origin);
    return PlanTakes(config, later, count, request).ok;
  });
}

// Applies a granted plan: the writes, the estimated remaining total, and
// when the reserved work may run. A plan that leaves a deficit stores each
// shard out of deficit by `unreserved_at`, when the same call without
// reserve would be granted.
void ApplyPlan(const LimitConfig& config, const View* views, const TakePlan& plan, Micros origin,
               Micros unreserved_at, int total_shards, ShardDecision* out) {
  double left = 0;
  for (int i = 0; i < out->count; ++i) {
    View stored = views[i];
    double end = plan.balanced ? plan.level : views[i].avail - plan.take[i];
    if (plan.chosen[i]) {
      ShardWrite& write = out->writes[i];
      write.write = true;
      write.next =
          plan.balanced ? LeaveAt(config, views[i], plan.level) : TakeFrom(config, views[i], plan.take[i]);
      if (!plan.fits) {
        write.next = OutOfDeficitBy(config, write.next, unreserved_at, origin);
        end = write.next.value;
      }
      stored = ViewAt(config, write.next, views[i].eff, origin);
      write.full_at = WhenAvailable(config, stored, Capacity(config));
      if (!plan.fits)
        out->summary.retry_at = std::max(out->summary.retry_at, WhenAvailable(config, stored, 0));
    }
    left += end;
    out->summary.full_at = std::max(out->summary.full_at, WhenAvailable(config, stored, Capacity(config)));
  }
  out->summary.ok = true;
  out->summary.has_retry = !plan.fits;
  out->summary.remaining = left * total_shards / out->count;
}

// How much raising every shard below `level` up to it (each capped at its
// own ceiling) gives in total.
double GivenAtLevel(const double* avail, const double* ceiling, int count, double level) {
  double total = 0;
  for (int i = 0; i < count; ++i) total += std::clamp(level - avail[i], 0.0, ceiling[i] - avail[i]);
  return total;
}

// Water-filling: the level L such that raising every shard below L up to L,
// never above its own ceiling, gives `amount` in total. The total is
// piecewise linear in L with breaks at the avails and ceilings, so L is
// found exactly on the segment where it crosses `amount`.
double WaterLevel(const double* avail, const double* ceiling, int count, double amount) {
  double breaks[2 * kMaxShards];
  for (int i = 0; i < count; ++i) {
    breaks[2 * i] = avail[i];
    breaks[2 * i + 1] = ceiling[i];
  }
  std::sort(breaks, breaks + 2 * count);
  double level = breaks[0];
  double given = 0;
  if (amount <= 0) return level;
  for (int b = 1; b < 2 * count; ++b) {
    if (breaks[b] <= level) continue;
    double next = GivenAtLevel(avail, ceiling, count, breaks[b]);
    if (next >= amount) return level + (amount - given) * (breaks[b] - level) / (next - given);
    level = breaks[b];
    given = next;
  }
  return level;
}

// The most a shard can hold after a refund: what its kind lets it take back.
double RefundCeiling(const LimitConfig& config, const View& view) {
  return view.avail + std::max(0.0, KindOf(config.kind).refund_room(config, view));
}

}  // namespace

bool ShardsCanEverGrant(const LimitConfig& config, const Request& request) noexcept {
  LimitConfig shard = ShardConfig(config);
  View full[2] = {ViewAt(shard, LimitState{}, 0, 0), ViewAt(shard, LimitState{}, 0, 0)};
  return PlanTakes(shard, full, 2, request).ok;
}

LimitConfig ShardConfig(const LimitConfig& config) noexcept {
  LimitConfig shard = config;
  double n = static_cast<double>(config.shards);
  shard.shards = 1;
  shard.rate = config.rate / n;
  if (KindOf(config.kind).takes_capacity) {
    shard.has_capacity = true;
    shard.capacity = Capacity(config) / n;
  }
  if (config.has_max_reserved) shard.max_reserved = config.max_reserved / n;
  return shard;
}

LimitConfig RowConfig(const LimitConfig& config) noexcept {
  return config.shards > 1 ? ShardConfig(config) : config;
}

void PickCandidates(int shards, double unit1, double unit2, int out[2]) noexcept {
  if (shards <= 1) {
    out[0] = out[1] = 0;
    return;
  }
  int a = std::min(shards - 1, static_cast<int>(unit1 * shards));
  int b = std::min(shards - 2, static_cast<int>(unit2 * (shards - 1)));
  if (b >= a) ++b;
  out[0] = std::min(a, b);
  out[1] = std::max(a, b);
}

ShardDecision DecideShards(const LimitConfig& shard_config, const ShardInput* inputs, int count, Micros now,
                           Micros origin, const Request& request, int total_shards) noexcept {
  View views[2];
  ViewsAt(shard_config, inputs, count, now, origin, views);
  ShardDecision out;
  out.count = count;
  out.summary.retry_at = out.summary.full_at = kEarliest;
  TakePlan plan = PlanTakes(shard_config, views, count, request);
  if (plan.ok) {
    Micros unreserved_at = plan.fits ? LatestEff(views, count)
                                     : WhenGrantable(shard_config, views, count, LatestEff(views, count),
                                                     origin, Request{request.count, false});
    ApplyPlan(shard_config, views, plan, origin, unreserved_at, total_shards, &out);
  } else {
    double avail = 0;
    for (int i = 0; i < count; ++i) {
      avail += views[i].avail;
      out.summary.full_at =
          std::max(out.summary.full_at, WhenAvailable(shard_config, views[i], Capacity(shard_config)));
    }
    out.summary.remaining = avail * total_shards / count;
    out.summary.has_retry = true;
    out.summary.retry_at =
        WhenGrantable(shard_config, views, count, LatestEff(views, count), origin, request);
  }
  if (out.summary.has_retry) out.summary.retry_after = Seconds(out.summary.retry_at - now);
  out.summary.reset_after = Seconds(std::max<Micros>(0, out.summary.full_at - now));
  return out;
}

double EstimatedTotal(const LimitConfig& shard_config, const ShardInput* observed, int count,
                      int total_shards, Micros now, Micros origin) noexcept {
  double sum = 0;
  for (int i = 0; i < count; ++i) sum += ViewAt(shard_config, observed[i].state, now, origin).avail;
  return count > 0 ? sum * total_shards / count : 0;
}

Decision ContendedRefusal(const Decision& decision, Micros now) noexcept {
  if (!decision.ok) return decision;
  Decision d = decision;
  d.ok = false;
  d.has_retry = true;
  d.retry_at = now + 1;
  d.retry_after = Seconds(1);
  return d;
}

Reading TotalValueAt(const LimitConfig& shard_config, const ShardInput* all, int total_shards, Micros now,
                     Micros origin) noexcept {
  Reading total{0, now};
  for (int i = 0; i < total_shards; ++i) {
    View v = ViewAt(shard_config, all[i].state, now, origin);
    total.value += v.avail;
    total.ts = i == 0 ? v.window_start : std::max(total.ts, v.window_start);
  }
  return total;
}

Decision CheckShards(const LimitConfig& shard_config, const ShardInput* all, int total_shards, Micros now,
                     Micros origin, const Request& request) noexcept {
  int best[2] = {-1, -1};
  double best_avail[2] = {0, 0};
  for (int i = 0; i < total_shards; ++i) {
    double avail = ViewAt(shard_config, all[i].state, now, origin).avail;
    if (best[0] < 0 || avail > best_avail[0]) {
      best[1] = best[0];
      best_avail[1] = best_avail[0];
      best[0] = i;
      best_avail[0] = avail;
    } else if (best[1] < 0 || avail > best_avail[1]) {
      best[1] = i;
      best_avail[1] = avail;
    }
  }
  ShardInput pair[2] = {all[best[0]], all[best[1] < 0 ? best[0] : best[1]]};
  Decision d =
      DecideShards(shard_config, pair, best[1] < 0 ? 1 : 2, now, origin, request, total_shards).summary;
  d.remaining = TotalValueAt(shard_config, all, total_shards, now, origin).value;
  return d;
}

Decision RefundShards(const LimitConfig& shard_config, const ShardInput* inputs, int count, Micros now,
                      Micros origin, double amount, ShardWrite* out) noexcept {
  double avail[kMaxShards];
  double ceiling[kMaxShards];
  count = std::min(count, kMaxShards);
  for (int i = 0; i < count; ++i) {
    View v = ViewAt(shard_config, inputs[i].state, now, origin);
    avail[i] = v.avail;
    ceiling[i] = RefundCeiling(shard_config, v);
  }
  double level = count > 0 ? WaterLevel(avail, ceiling, count, amount) : 0;
  Decision summary;
  summary.ok = true;
  summary.full_at = kEarliest;
  for (int i = 0; i < count; ++i) {
    View v = ViewAt(shard_config, inputs[i].state, now, origin);
    double give = std::clamp(level - avail[i], 0.0, ceiling[i] - avail[i]);
    out[i] = ShardWrite{};
    if (give > 0) {
      out[i].write = true;
      out[i].next = GiveBack(shard_config, v, give);
      v = ViewAt(shard_config, out[i].next, v.eff, origin);
      out[i].full_at = WhenAvailable(shard_config, v, Capacity(shard_config));
    }
    summary.remaining += v.avail;
    summary.full_at = std::max(summary.full_at, WhenAvailable(shard_config, v, Capacity(shard_config)));
  }
  summary.reset_after = Seconds(std::max<Micros>(0, summary.full_at - now));
  return summary;
}

}  // namespace ratelimit
