// Hot key, fixed and sliding windows: the exact admission bounds and the
// exact liveness floors of the window kinds under 32 connections (see
// contention.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
#include <map>

#include "contention.h"

namespace contention {
namespace {

struct Windows {
  Micros origin;
  Micros period;
  Micros Index(Micros t) const { return FloorDiv(t - origin, period); }
  Micros StartOf(Micros index) const { return origin + index * period; }
};

// Per window: the committed grants whose bracket [t0, t1] lies inside it.
// Grants straddling a boundary are left out (counted in `straddling`), which
// keeps any "count <= limit" check on these numbers sound.
std::map<Micros, std::vector<Grant>> GrantsByWindow(const std::vector<Grant>& grants, const Windows& windows,
                                                    long* straddling) {
  std::map<Micros, std::vector<Grant>> by_window;
  *straddling = 0;
  for (const Grant& g : grants) {
    Micros i = windows.Index(g.t0);
    if (windows.Index(g.t1) != i) {
      ++*straddling;
      continue;
    }
    by_window[i].push_back(g);
  }
  return by_window;
}

std::string WindowCounts(const std::map<Micros, std::vector<Grant>>& by_window, Micros first) {
  std::string out;
  for (const auto& entry : by_window)
    out += (out.empty() ? "" : " ") + std::to_string(entry.first - first) + ":" +
           std::to_string(entry.second.size());
  return out;
}

// Runs a hot-key window test: 32 connections on one key, windows aligned to
// B = t_start rounded down to the millisecond (passed as config "start"), so
// t_start is at most 1 ms into window 0, and the run stops at B + 3.5 periods,
// half way through window 3: every window of the run is known in advance.
struct WindowRun {
  Stats stats;
  Micros t_start;
  Micros t_end;
  Windows windows;
};

WindowRun RunHotWindow(pqxx::connection& main, const char* kind, double rate, Micros period_ms,
                       const double* capacity, const std::string& name) {
  Workers workers(32);
  Start start = TakeStart(main);
  Micros origin_ms = FloorDiv(start.server, kMicrosPerMilli);
  const std::string config = WindowConfig(kind, rate, period_ms, capacity, origin_ms);
  Windows windows{origin_ms * kMicrosPerMilli, period_ms * kMicrosPerMilli};
  Micros stop = windows.origin + 3 * windows.period + windows.period / 2;
  Stats stats = workers.Run(LocalDeadline(start, stop),
                            [&](Worker& w) { HotKeyTransaction<pqxx::work>(w, name, "hot", config, 0.10); });
  Micros t_end = ServerClock(main);
  return WindowRun{std::move(stats), start.server, t_end, windows};
}

// Per window: the committed grants whose bracket meets it. A grant's
// effective time is its own clock read (see CheckTokenBucketIntervals), so
// this over-counts the committed admissions of the window.
std::map<Micros, long> GrantsMeetingWindows(const std::vector<Grant>& grants, const Windows& windows) {
  std::map<Micros, long> count;
  for (const Grant& g : grants)
    for (Micros i = windows.Index(g.t0); i <= windows.Index(g.t1); ++i) ++count[i];
  return count;
}

// The exact liveness floor of the window kinds (see HotKeyFixedWindow and
// HotKeySlidingWindow): for each window w with a refusal certainly inside it,
// t0 the latest t0 of those refusals, the grants meeting w number at least
// rate - floor(grants meeting w-1 * weight at t0), computed as SlidingUsed
// computes it (weight 0 for a fixed window). Returns the report.
std::string CheckWindowFloors(const WindowRun& run, double rate, bool sliding) {
  long straddling = 0;
  const auto refusals = GrantsByWindow(run.stats.refusals, run.windows, &straddling);
  auto meeting = GrantsMeetingWindows(run.stats.grants, run.windows);
  const Micros first = run.windows.Index(run.t_start);
  std::string out;
  for (const auto& [w, refused] : refusals) {
    Micros t0 = refused.front().t0;
    for (const Grant& r : refused) t0 = std::max(t0, r.t0);
    double previous_share = 0;
    if (sliding) {
      const Micros into = t0 - run.windows.StartOf(w);
      const double weight =
          static_cast<double>(run.windows.period - into) / static_cast<double>(run.windows.period);
      previous_share = std::floor(static_cast<double>(meeting[w - 1]) * weight);
    }
    const double least = rate - previous_share;
    EXPECT_GE(static_cast<double>(meeting[w]), least)
        << "window " << w - first << ": refused at t0 " << t0 << " us, " << meeting[w - 1]
        << " grants meeting the previous window (the limiter starved callers)";
    out += (out.empty() ? "" : " ") + std::to_string(w - first) + ":" + std::to_string(meeting[w]) +
           ">=" + std::to_string(static_cast<long>(least));
  }
  if (out.empty())
    return "no refusal certainly inside a window (demand did not exceed supply): nothing to check";
  return std::to_string(refusals.size()) + " windows with refusals, grants meeting each >= floor {" + out +
         "}";
}

// b1. Hot key, fixed window with capacity = rate (no rollover).
//
// The exact bound: a new row starts with `capacity` tokens in the window of
// its first grant; each later window adds `rate`, capped at `capacity`, and
// grants never take the value below zero. Every grant's clock read lies in
// [t_start, t_end], so with K = the number of windows [t_start, t_end]
// touches, admitted <= capacity + rate * (K - 1) (= rate * K here). Per
// window, grants <= capacity; checked on the grants whose bracket lies inside
// one window (a sound under-count of that window).
//
// The exact floor: a refusal is decided from the latest committed state and
// writes nothing (docs/semantics.md, "Transactions, locking and isolation levels").
// Take a refusal whose bracket lies inside window w. A grant stores the
// start of the window of max(its clock read, the ts it read), so every
// stored ts is at most some grant's clock read, made before that grant
// committed, so before the refusal's t1: the row it saw has ts <= start of
// w, and its clock read is in w. A row of an earlier window (or none) holds
// capacity >= 1 tokens in w, so the row was w's, with value < 1: w already
// had rate (= capacity) committed grants. Those lie among the grants whose
// bracket meets w, so that count is >= rate, while the grants certainly in w
// are <= rate. A window without such a refusal (a slow run, demand below
// supply) is not checked. Rolled-back grants never reach a committed state.
TEST_F(ContentionTest, HotKeyFixedWindow) {
  const double rate = 100;
  const double capacity = rate;
  const Micros period_ms = 1000;
  WindowRun run =
      RunHotWindow(Conn(), "fixed window", rate, period_ms, &capacity, LimitName("hot_fixed_window"));
  const Stats& stats = run.stats;

  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.serialization_failures, 0);
  EXPECT_EQ(stats.deadlocks, 0);
  const Micros first = run.windows.Index(run.t_start);
  const Micros windows_touched = run.windows.Index(run.t_end) - first + 1;
  const double bound = capacity + rate * static_cast<double>(windows_touched - 1);
  const auto admitted = static_cast<double>(stats.grants.size());
  long straddling = 0;
  auto by_window = GrantsByWindow(stats.grants, run.windows, &straddling);
  char text[320];
  std::snprintf(text, sizeof text,
                "admitted %zu, bound %.0f (%.1f%%), %lld windows, per window {%s}, %ld straddling, %ld txns, "
                "%ld rolled back",
                stats.grants.size(), bound, 100 * admitted / bound, static_cast<long long>(windows_touched),
                WindowCounts(by_window, first).c_str(), straddling, stats.transactions,
                stats.rolled_back_on_purpose);
  PrintMeasure("hot key fixed window:", text);
  EXPECT_LE(admitted, bound);
  for (const auto& entry : by_window)
    EXPECT_LE(static_cast<double>(entry.second.size()), capacity) << "window " << entry.first - first;
  EXPECT_GT(stats.rolled_back_on_purpose, 0);
  PrintMeasure("hot key fixed window floors:", CheckWindowFloors(run, rate, false));
}

// The most a new sliding window row can admit to grants made in [from, to]
// (see HotKeySlidingWindow).
double SlidingWindowBound(const Windows& windows, double rate, Micros from, Micros to) {
  const Micros last = windows.Index(to);
  const Micros touched = last - windows.Index(from) + 1;
  if (touched < 2) return rate;  // one window: the new row has no previous count
  const Micros into = to - windows.StartOf(last);
  const double weight_end = static_cast<double>(windows.period - into) / static_cast<double>(windows.period);
  double last_two = 0;
  for (int n = 0; n <= static_cast<int>(rate); ++n)
    last_two = std::max(last_two, n + rate - std::floor(n * weight_end - 1e-9));
  return rate * static_cast<double>(touched - 2) + last_two;
}

// b2. Hot key, approximated sliding window.
//
// A grant at fraction f into window k needs
//   floor(N[k-1] * (1 - f)) + (grants so far in window k) + 1 <= rate,
// where N[k-1] is the committed count of window k-1 (0 for the new row's
// first window, and for a window after one without grants). Consequences:
// - Per window, N[k] <= rate (floor(...) >= 0). With K windows touched by
//   [t_start, t_end], admitted <= rate * K: the simple sound bound (the
//   brief's rate * (K + 1) is looser still).
// - Tighter, for the last window K of the run: its last grant is at a
//   fraction f <= f_end = (t_end - start of window K) / P, and
//   floor(n * (1 - f)) does not increase with f, so N[K] <= rate -
//   floor(N[K-1] * (1 - f_end)) and N[K-1] + N[K] <= max over n in
//   [0, rate] of n + rate - floor(n * (1 - f_end)) (with a tiny epsilon
//   against rounding). The exact bound used is
//     admitted <= rate * (K - 2) + that maximum      (K >= 2),
//   which for a run ending half way through window 3 is 100 * 2 + (100 +
//   100 - 50) = 350 at rate 100, instead of 400 (or 500).
// - At every grant g certainly in window k (bracket inside it): the grants
//   of window k that certainly precede it (t1 < g.t0: their clock reads are
//   earlier, so they come first in the chain of writes; see
//   CheckTokenBucketIntervals), plus g, plus
//   floor(N'[k-1] * (1 - f_hi)) <= rate, where N'[k-1] counts only grants
//   certainly in window k-1 and f_hi = (g.t1 - window start) / P. Every
//   term is an under-estimate of the extension's own, so this is sound.
//
// The exact floor, as for the fixed window (see HotKeyFixedWindow): a
// refusal whose bracket lies inside window w saw a row of w or w-1 (one
// older, or none, has nothing in the sliding window and grants) at a clock
// read c in w, and floor(prev * weight(c)) + current + 1 > rate. current
// counts committed grants of w; prev counts committed grants of w-1, so it is
// at most the grants meeting w-1; weight(c) <= weight(t0), and the
// extension's doubles round monotonically. Hence
//   grants meeting w >= rate - floor(grants meeting w-1 * weight(t0)),
// strongest for the latest such t0 (weight 0 at the end of w gives rate).
TEST_F(ContentionTest, HotKeySlidingWindow) {
  const double rate = 100;
  const Micros period_ms = 1000;
  WindowRun run =
      RunHotWindow(Conn(), "sliding window", rate, period_ms, nullptr, LimitName("hot_sliding_window"));
  const Stats& stats = run.stats;

  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.serialization_failures, 0);
  EXPECT_EQ(stats.deadlocks, 0);
  const Windows& windows = run.windows;
  const Micros first = windows.Index(run.t_start);
  const Micros windows_touched = windows.Index(run.t_end) - first + 1;
  const double bound = SlidingWindowBound(windows, rate, run.t_start, run.t_end);
  const auto admitted = static_cast<double>(stats.grants.size());
  long straddling = 0;
  auto by_window = GrantsByWindow(stats.grants, windows, &straddling);
  char text[320];
  std::snprintf(text, sizeof text,
                "admitted %zu, bound %.0f (%.1f%%; loose bound %.0f), %lld windows, per window {%s}, "
                "%ld straddling, %ld txns, %ld rolled back",
                stats.grants.size(), bound, 100 * admitted / bound,
                rate * static_cast<double>(windows_touched + 1), static_cast<long long>(windows_touched),
                WindowCounts(by_window, first).c_str(), straddling, stats.transactions,
                stats.rolled_back_on_purpose);
  PrintMeasure("hot key sliding window:", text);
  EXPECT_LE(admitted, bound);
  EXPECT_GT(stats.rolled_back_on_purpose, 0);
  PrintMeasure("hot key sliding window floors:", CheckWindowFloors(run, rate, true));

  // Per window, and at every grant (see above).
  long instant_checks = 0;
  double min_slack = INFINITY;
  for (const auto& entry : by_window) {
    const std::vector<Grant>& current = entry.second;
    EXPECT_LE(static_cast<double>(current.size()), rate) << "window " << entry.first - first;
    auto prev_it = by_window.find(entry.first - 1);
    const double prev = prev_it == by_window.end() ? 0 : static_cast<double>(prev_it->second.size());
    const Micros window_start = windows.StartOf(entry.first);
    for (const Grant& g : current) {
      long before = 0;
      for (const Grant& h : current)
        if (h.t1 < g.t0) ++before;
      const double f_hi = static_cast<double>(g.t1 - window_start) / static_cast<double>(windows.period);
      const double used =
          std::max(0.0, std::floor(prev * (1 - f_hi) - 1e-9)) + static_cast<double>(before) + 1;
      ++instant_checks;
      min_slack = std::min(min_slack, rate - used);
      if (used > rate) {
        ADD_FAILURE() << "window " << entry.first - first << ": a grant at fraction <= " << f_hi << " after "
                      << before << " grants of the window with " << prev << " in the previous one";
        break;
      }
    }
  }
  std::snprintf(text, sizeof text, "%ld grants checked, smallest slack %.0f", instant_checks, min_slack);
  PrintMeasure("hot key sliding window instants:", text);
}

}  // namespace
}  // namespace contention
