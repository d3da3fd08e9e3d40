// Client contention tests: many libpqxx connections (one per thread) against a
// live server with the extension installed. Not part of the ctest unit run;
// scripts/test.sh runs this binary against its throwaway cluster.
//
// Connection parameters come from the environment (PGHOST, PGPORT, PGUSER,
// PGDATABASE), as exported by scripts/lib.sh's start_cluster. The program runs
// CREATE EXTENSION IF NOT EXISTS ratelimit in that database.
//
// Every test uses its own limit names (prefixed with a per-run id), runs for a
// few seconds of the server's real clock (never ratelimit.now) and checks the
// committed admissions against exact upper bounds derived from the server's
// clock_timestamp() taken before the first call and after the last one.
//
// How a call's clock read is bracketed: TimedLimitSql() evaluates t0 =
// clock_timestamp() in a subquery the call's arguments depend on (LATERAL), so
// t0 is read before the call starts; t1 = clock_timestamp() is in the
// projection of the join, evaluated after the call has returned. The extension
// reads its clock (GetCurrentTimestamp(), the same clock as clock_timestamp())
// inside the call, so that read lies in [t0, t1]. These brackets let the tests
// attribute a grant to a window only when both ends agree.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

namespace {

using namespace client_test;

constexpr Micros kMicrosPerMilli = 1000;

// Set once by the environment below.
std::string g_schema;  // the extension's schema, quoted for SQL
std::string g_run_id;  // makes limit names unique per run

std::string Fn(const char* function) { return g_schema + "." + function; }

// A limit name of this run; each test passes its own suffix.
std::string LimitName(const std::string& test) { return "client_test." + g_run_id + "." + test; }

// The statement every hot-key worker runs: (ok, t0, t1) with the call's clock
// read in [t0, t1] (see the file comment). $2 NULL means the global key.
std::string TimedLimitSql() {
  return "SELECT r.ok, (extract(epoch FROM a.t0) * 1000000)::int8,"
         " (extract(epoch FROM clock_timestamp()) * 1000000)::int8"
         " FROM (SELECT clock_timestamp() AS t0 OFFSET 0) a"
         " CROSS JOIN LATERAL " +
         Fn("ratelimit_limit") + "($1, CASE WHEN a.t0 IS NULL THEN NULL ELSE $2 END, $3::jsonb) r";
}

std::string PlainLimitSql() { return "SELECT ok FROM " + Fn("ratelimit_limit") + "($1, $2, $3::jsonb)"; }

// A timed call (a committed grant, or a refusal): its clock read lies in [t0, t1].
struct Grant {
  Micros t0;
  Micros t1;
};

// What the workers of one test saw. Counts only; each test asserts which
// errors it expects.
struct Stats {
  std::vector<Grant> grants;    // grants of committed transactions
  std::vector<Grant> refusals;  // brackets of the refused calls
  long transactions = 0;
  long granted_calls = 0;  // granted, committed or not
  long refused_calls = 0;
  long rolled_back_on_purpose = 0;  // granted, then rolled back by the test
  long serialization_failures = 0;  // SQLSTATE 40001, retried
  long deadlocks = 0;               // SQLSTATE 40P01
  UnexpectedErrors unexpected;
  // The span of demand: the earliest t0 and the latest t1 of any timed call
  // (granted or refused, committed or not).
  Micros first_call = std::numeric_limits<Micros>::max();
  Micros last_call = std::numeric_limits<Micros>::min();

  void Merge(const Stats& other) {
    grants.insert(grants.end(), other.grants.begin(), other.grants.end());
    refusals.insert(refusals.end(), other.refusals.begin(), other.refusals.end());
    transactions += other.transactions;
    granted_calls += other.granted_calls;
    refused_calls += other.refused_calls;
    rolled_back_on_purpose += other.rolled_back_on_purpose;
    serialization_failures += other.serialization_failures;
    deadlocks += other.deadlocks;
    first_call = std::min(first_call, other.first_call);
    last_call = std::max(last_call, other.last_call);
    unexpected.Merge(other.unexpected);
  }
};

// One worker thread's world.
struct Worker {
  int index = 0;
  pqxx::connection* conn = nullptr;
  std::mt19937_64 rng;
  Stats stats;

  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }
};

// Runs n workers, each with its own connection, all released at once and
// stopped at a deadline. Connections are opened (and `prepare` run) before
// the start, so connecting never counts as test time.
class Workers {
 public:
  Workers(int n, const std::function<void(pqxx::connection&)>& prepare) {
    for (int i = 0; i < n; ++i) {
      conns_.push_back(Connect());
      if (prepare) prepare(*conns_.back());
    }
  }

  // Calls body(worker) in a loop until `deadline` (body runs one transaction
  // per call). Errors escaping body are classified by SQLSTATE into stats.
  // Blocks until every worker has stopped; returns the merged stats.
  Stats Run(Clock::time_point deadline, const std::function<void(Worker&)>& body) {
    std::vector<Worker> workers(conns_.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < conns_.size(); ++i) {
      workers[i].index = static_cast<int>(i);
      workers[i].conn = conns_[i].get();
      workers[i].rng.seed(0x5eed0000u + i);
      threads.emplace_back([&, i] { Loop(workers[i], deadline, body); });
    }
    for (auto& thread : threads) thread.join();
    Stats all;
    for (const auto& worker : workers) all.Merge(worker.stats);
    return all;
  }

 private:
  static void Loop(Worker& worker, Clock::time_point deadline, const std::function<void(Worker&)>& body) {
    while (Clock::now() < deadline) {
      try {
        body(worker);
      } catch (const pqxx::serialization_failure&) {
        ++worker.stats.serialization_failures;  // the loop retries
      } catch (const pqxx::deadlock_detected&) {
        ++worker.stats.deadlocks;
      } catch (const pqxx::broken_connection& e) {
        worker.stats.unexpected.Add(std::string("broken connection: ") + e.what());
        return;
      } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() == "40001") {
          ++worker.stats.serialization_failures;
        } else if (e.sqlstate() == "40P01") {
          ++worker.stats.deadlocks;
        } else {
          worker.stats.unexpected.Add("SQLSTATE " + e.sqlstate() + ": " + e.what());
        }
      } catch (const std::exception& e) {
        worker.stats.unexpected.Add(e.what());
      }
    }
  }

  std::vector<std::unique_ptr<pqxx::connection>> conns_;
};

// One transaction on a hot key: call, then roll back each worker's first grant
// (so every run, however slow, has rollbacks) and ~10% of the others on
// purpose, and commit the rest. Only committed grants are recorded.
template <typename Transaction>
void HotKeyTransaction(Worker& w, const std::string& name, const std::string& key, const std::string& config,
                       double rollback_share) {
  Transaction tx(*w.conn);
  ++w.stats.transactions;
  static const std::string sql = TimedLimitSql();
  pqxx::row row = tx.exec_params1(sql, name, key, config);
  bool ok = row[0].as<bool>();
  Grant grant{row[1].as<Micros>(), row[2].as<Micros>()};
  w.stats.first_call = std::min(w.stats.first_call, grant.t0);
  w.stats.last_call = std::max(w.stats.last_call, grant.t1);
  if (!ok) {
    ++w.stats.refused_calls;
    w.stats.refusals.push_back(grant);
    tx.commit();  // a refusal wrote nothing; committing it is harmless
    return;
  }
  ++w.stats.granted_calls;
  if (w.stats.granted_calls == 1 || w.Chance(rollback_share)) {
    tx.abort();
    ++w.stats.rolled_back_on_purpose;
    return;
  }
  tx.commit();
  w.stats.grants.push_back(grant);
}

// The hot-key workers run TimedLimitSql() as an unnamed statement (no
// session-level prepared statement), so they also run through a pooler in
// transaction mode (scripts/pgbouncer-test.sh).
void PrepareTimedLimit(pqxx::connection& conn) { (void)conn; }

std::string TokenBucketConfig(double rate, Micros period_ms, double capacity) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                R"({"kind": "token bucket", "rate": %.17g, "period": %lld, "capacity": %.17g})", rate,
                static_cast<long long>(period_ms), capacity);
  return buf;
}

std::string WindowConfig(const char* kind, double rate, Micros period_ms, const double* capacity,
                         Micros start_ms) {
  char buf[200];
  char cap[48] = "";
  if (capacity != nullptr) std::snprintf(cap, sizeof cap, R"(, "capacity": %.17g)", *capacity);
  std::snprintf(buf, sizeof buf, R"({"kind": "%s", "rate": %.17g, "period": %lld%s, "start": %lld})", kind,
                rate, static_cast<long long>(period_ms), cap, static_cast<long long>(start_ms));
  return buf;
}

Micros FloorDiv(Micros a, Micros b) { return a / b - ((a % b != 0 && a < 0) ? 1 : 0); }

// A point on the server's clock and the local steady clock at (about) the
// same moment, to turn server-clock deadlines into local ones.
struct Start {
  Micros server;
  Clock::time_point local;
};

Start TakeStart(pqxx::connection& conn) {
  Micros server = ServerClock(conn);
  return Start{server, Clock::now()};
}

Clock::time_point LocalDeadline(const Start& start, Micros server_deadline) {
  return start.local + std::chrono::microseconds(server_deadline - start.server);
}

// Token bucket interval check: the grants whose clock read certainly lies in
// [a, b] never exceed capacity + rate * (b - a) / period. Along the chain of
// committed writes the clock reads increase (a call decides after the
// previous grant committed: its optimistic write fails and it decides again
// under the lock otherwise), so each effective time max(clock, stored ts) is
// the call's own clock read. Those grants then have effective times in
// [a, b]: the first sees at most `capacity` tokens, and at most
// rate * (b - a) / period refill until the last. Checked for every a = some
// grant's t0 and b = some grant's t1. Returns the smallest slack seen.
double CheckTokenBucketIntervals(const std::vector<Grant>& grants, double capacity, double rate,
                                 Micros period_us) {
  double min_slack = INFINITY;
  std::vector<Micros> ends;
  for (const Grant& first : grants) {
    Micros a = first.t0;
    ends.clear();
    for (const Grant& g : grants)
      if (g.t0 >= a) ends.push_back(g.t1);
    std::sort(ends.begin(), ends.end());
    for (size_t k = 0; k < ends.size(); ++k) {
      double bound = capacity + rate * static_cast<double>(ends[k] - a) / static_cast<double>(period_us);
      double count = static_cast<double>(k + 1);
      EXPECT_LE(count, bound) << "grants certainly within [" << a << ", " << ends[k] << "] us";
      min_slack = std::min(min_slack, bound - count);
      if (count > bound) return min_slack;  // one report is enough
    }
  }
  return min_slack;
}

// ---------------------------------------------------------------------------

class ContentionTest : public ConnectedTest {};

// Runs a hot-key token bucket test: 32 connections on one key for 3 s, some
// grants rolled back on purpose (see HotKeyTransaction). The bound on admissions is
// capacity + rate * elapsed over the whole run; demand_bound is the same over
// the span from the first to the last call.
struct TokenBucketRun {
  Stats stats;
  double elapsed_s;
  double bound;
  double demand_bound;
  double admitted;
};

TokenBucketRun RunHotTokenBucket(pqxx::connection& main, const std::string& name, const std::string& config,
                                 double rate, double capacity) {
  Workers workers(32, PrepareTimedLimit);
  Start start = TakeStart(main);
  Stats stats = workers.Run(start.local + std::chrono::seconds(3),
                            [&](Worker& w) { HotKeyTransaction<pqxx::work>(w, name, "hot", config, 0.10); });
  Micros t_end = ServerClock(main);
  const double elapsed_s = static_cast<double>(t_end - start.server) / kMicrosPerSecond;
  const double demand_s = static_cast<double>(stats.last_call - stats.first_call) / kMicrosPerSecond;
  const auto admitted = static_cast<double>(stats.grants.size());
  return TokenBucketRun{std::move(stats), elapsed_s, capacity + rate * elapsed_s, capacity + rate * demand_s,
                        admitted};
}

// a. Hot key, token bucket. 32 connections hammer one key for 3 s, one call
// per transaction, some grants rolled back on purpose (HotKeyTransaction).
//
// The exact bound: the committed grants on the key form one chain of writes
// (each is decided on the row as the previous committed grant left it, under
// the row lock), with effective times e_1 <= ... <= e_n, each a clock read
// made inside the call. The row is new, so e_1 starts from a full bucket of
// `capacity`, and between e_1 and e_n at most rate * (e_n - e_1) / period
// tokens refill; every grant takes one token and the value never goes below
// zero. So n <= capacity + rate * (e_n - e_1) / period. t_start is read
// (a separate statement) before any call and t_end after every call has
// returned, so t_start <= e_1 and e_n <= t_end, and
//     admitted <= capacity + rate * (t_end - t_start) / period.
// A call whose clock read came just before t_end is covered: e_n <= t_end.
// (The extension's doubles add rounding errors far below the slack of the
// round trips between t_start and the first clock read.)
// Rolled-back grants are not counted: their tokens return to the bucket.
//
// Liveness is reported, not asserted: the share of capacity + rate * (span
// of demand, [earliest t0, latest t1] of all calls) / period admitted. Alone
// on a 2-core machine it is ~99%. No exact floor exists: a token that refills
// while the bucket is full is lost, and nothing but timing tells a bucket
// left full because the callers were descheduled from a limiter that starved
// them (a loaded ASan run once admitted 332 of 349.9, 94.9%). The benchmark
// collects the [ measured ] line.
TEST_F(ContentionTest, HotKeyTokenBucket) {
  const double rate = 100, capacity = 50;
  const Micros period_ms = 1000;
  TokenBucketRun run = RunHotTokenBucket(Conn(), LimitName("hot_token_bucket"),
                                         TokenBucketConfig(rate, period_ms, capacity), rate, capacity);
  const Stats& stats = run.stats;
  const double bound = run.bound, demand_bound = run.demand_bound, admitted = run.admitted;
  const double elapsed_s = run.elapsed_s;

  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.serialization_failures, 0);
  EXPECT_EQ(stats.deadlocks, 0);
  char text[320];
  std::snprintf(text, sizeof text,
                "admitted %zu, bound %.3f (%.1f%%), over the demand span %.3f (%.1f%%), elapsed %.3f s, "
                "%ld txns, %ld refused, %ld rolled back",
                stats.grants.size(), bound, 100 * admitted / bound, demand_bound,
                100 * admitted / demand_bound, elapsed_s, stats.transactions, stats.refused_calls,
                stats.rolled_back_on_purpose);
  PrintMeasure("hot key token bucket:", text);
  EXPECT_LE(admitted, bound);
  EXPECT_GT(stats.rolled_back_on_purpose, 0);
  double slack = CheckTokenBucketIntervals(stats.grants, capacity, rate, period_ms * kMicrosPerMilli);
  std::snprintf(text, sizeof text, "smallest slack %.3f tokens over all intervals", slack);
  PrintMeasure("hot key token bucket intervals:", text);
}

// a2. Hot key, token bucket spread over 8 shards (each 1/8 of rate and
// capacity), with the same 32 connections. Shard rows are locked FOR UPDATE
// SKIP LOCKED (or waited for in canonical order) and written directly, so
// this checks that path keeps the exact bound: each shard is a token bucket
// of its own, and summed over the shards admitted <= capacity + rate *
// elapsed / period, as for one row. Liveness is reported only (see
// HotKeyTokenBucket); two random candidates may both be empty while another
// shard has a token, so the power of two choices admits a little less than
// one row would.
TEST_F(ContentionTest, HotKeySharded) {
  const double rate = 200, capacity = 100;
  const Micros period_ms = 1000;
  const std::string name = LimitName("hot_sharded");
  std::string config = TokenBucketConfig(rate, period_ms, capacity);
  config.insert(config.rfind('}'), ", \"shards\": 8");
  TokenBucketRun run = RunHotTokenBucket(Conn(), name, config, rate, capacity);
  const Stats& stats = run.stats;
  const double bound = run.bound, demand_bound = run.demand_bound, admitted = run.admitted;

  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.serialization_failures, 0);
  EXPECT_EQ(stats.deadlocks, 0);
  char text[320];
  std::snprintf(
      text, sizeof text,
      "admitted %zu, bound %.3f (%.1f%%), over the demand span %.3f (%.1f%%), %ld txns, %ld refused",
      stats.grants.size(), bound, 100 * admitted / bound, demand_bound, 100 * admitted / demand_bound,
      stats.transactions, stats.refused_calls);
  PrintMeasure("hot key, 8 shards:", text);
  EXPECT_LE(admitted, bound);
  // Every shard row exists (created on the first grant) and none holds more than its capacity.
  pqxx::work tx(Conn());
  auto shards = tx.exec_params1(
      "SELECT count(*) FROM " + Fn("ratelimit_state") + " WHERE name = $1 AND key = 'hot' AND value <= $2",
      name, capacity / 8 + 1e-9);
  EXPECT_EQ(shards[0].as<int>(), 8);
}

// The windows of a run: origin B (a window boundary), period P. Window i is
// [B + i*P, B + (i+1)*P).
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
  Workers workers(32, PrepareTimedLimit);
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

// c. Many keys: 10,000 keys, 16 connections, random keys for 3 s (half of
// the calls on any of the 10,000 keys, half on keys 0..999, so that even a
// slow run calls many keys more often than their capacity, some of them
// concurrently), one call per transaction, ~10% of the grants rolled back on
// purpose.
// Token bucket capacity 2, 1 token per minute. Per key, exactly:
//   committed admissions <= capacity + rate * elapsed / period
// (which is < 3 unless the run took a minute), and admissions >=
// min(committed calls, 2): a call is refused only when the committed state
// holds < 1 token, and that value is at least capacity minus the committed
// grants so far (refills only add), so two committed grants came first
// (every one of which is counted). Together: admissions == min(committed
// calls, 2), no key over-admitted and none refused while it has tokens. How
// many keys were called more often than their capacity depends on the
// machine's speed; it is reported.
TEST_F(ContentionTest, ManyKeys) {
  const int keys = 10000;
  const double rate = 1, capacity = 2;
  const Micros period_ms = 60000;
  const std::string name = LimitName("many_keys");
  const std::string config = TokenBucketConfig(rate, period_ms, capacity);
  const std::string sql = PlainLimitSql();

  const int threads = 16;
  std::vector<std::vector<int>> calls(threads, std::vector<int>(keys)),
      granted(threads, std::vector<int>(keys));
  Workers workers(threads, [&](pqxx::connection& conn) { conn.prepare("limit", sql); });
  Start start = TakeStart(Conn());
  Stats stats = workers.Run(start.local + std::chrono::seconds(3), [&](Worker& w) {
    int k = std::uniform_int_distribution<int>(0, w.Chance(0.5) ? keys - 1 : keys / 10 - 1)(w.rng);
    pqxx::work tx(*w.conn);
    ++w.stats.transactions;
    bool ok = tx.exec_prepared1("limit", name, "k" + std::to_string(k), config)[0].as<bool>();
    if (ok && w.Chance(0.10)) {
      tx.abort();
      ++w.stats.rolled_back_on_purpose;
      return;
    }
    tx.commit();
    ++calls[w.index][k];
    if (ok) {
      ++granted[w.index][k];
      ++w.stats.granted_calls;
    } else {
      ++w.stats.refused_calls;
    }
  });
  Micros t_end = ServerClock(Conn());

  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.serialization_failures, 0);
  EXPECT_EQ(stats.deadlocks, 0);
  const double elapsed_s = static_cast<double>(t_end - start.server) / kMicrosPerSecond;
  const double refill =
      rate * elapsed_s * kMicrosPerSecond / static_cast<double>(period_ms * kMicrosPerMilli);
  const double bound = capacity + refill;
  long keys_touched = 0, keys_at_bound = 0, keys_beyond = 0, admitted = 0, over = 0, starved = 0;
  for (int k = 0; k < keys; ++k) {
    int c = 0, g = 0;
    for (int t = 0; t < threads; ++t) {
      c += calls[t][k];
      g += granted[t][k];
    }
    admitted += g;
    keys_touched += c > 0;
    keys_at_bound += g == static_cast<int>(capacity);
    keys_beyond += c > static_cast<int>(capacity);
    if (g > bound && over++ < 5) ADD_FAILURE() << "key k" << k << ": " << g << " admissions > " << bound;
    if (g < std::min(c, static_cast<int>(capacity)) && starved++ < 5)
      ADD_FAILURE() << "key k" << k << ": " << g << " admissions for " << c << " committed calls";
  }
  char text[320];
  std::snprintf(text, sizeof text,
                "%ld committed txns, %ld admitted, %ld refused; %ld keys used, %ld at the bound (%.2f), "
                "%ld with more calls than capacity; %ld rolled back; elapsed %.3f s",
                stats.transactions - stats.rolled_back_on_purpose, admitted, stats.refused_calls,
                keys_touched, keys_at_bound, bound, keys_beyond, stats.rolled_back_on_purpose, elapsed_s);
  PrintMeasure("many keys:", text);
  EXPECT_EQ(over, 0);
  EXPECT_EQ(starved, 0);
}

// d. Rolled-back transactions return their tokens, for each kind: take every
// token inside transactions (and a savepoint) that roll back, including while
// another caller waits on the row lock, then show the full capacity is still
// grantable. Runs once on a key with no row yet (INSERT path) and once on a
// key whose row exists (UPDATE path).
class RollbackTest : public ContentionTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(RollbackTest, RolledBackTokensReturn) {
  const std::string kind = GetParam();
  const int capacity = 5;
  const std::string name = LimitName(std::string("rollback.") + kind);
  const Micros now_ms = FloorDiv(ServerClock(Conn()), kMicrosPerMilli);
  // One hour periods, windows starting now: no refill or window change during the test.
  const std::string config = kind == "token bucket"
                                 ? TokenBucketConfig(capacity, 3600000, capacity)
                                 : WindowConfig(kind.c_str(), capacity, 3600000, nullptr, now_ms);
  const std::string limit_sql =
      "SELECT ok, remaining FROM " + Fn("ratelimit_limit") + "($1, $2, $3::jsonb, $4)";
  Conn().prepare("limit", limit_sql);
  auto waiter_conn = Connect();
  waiter_conn->prepare("limit", limit_sql);
  const int waiter_pid = waiter_conn->backendpid();
  auto probe_conn = Connect();

  // Takes every token in `tx`, then checks one more is refused.
  auto take_all = [&](pqxx::transaction_base& tx, const std::string& key) {
    for (int i = 0; i < capacity; ++i)
      ASSERT_TRUE(tx.exec_prepared1("limit", name, key, config, 1.0)[0].as<bool>()) << kind << " token " << i;
    ASSERT_FALSE(tx.exec_prepared1("limit", name, key, config, 1.0)[0].as<bool>()) << kind << " one too many";
  };

  for (const std::string key : {"new", "existing"}) {
    SCOPED_TRACE(kind + ", key " + key);
    if (key == "existing") {
      pqxx::work tx(Conn());  // count 0 writes the row without taking a token
      ASSERT_TRUE(tx.exec_prepared1("limit", name, key, config, 0.0)[0].as<bool>());
      tx.commit();
    }
    for (int round = 0; round < 3; ++round) {
      pqxx::work tx(Conn());
      take_all(tx, key);
      tx.abort();
    }
    {
      // A rolled-back savepoint returns its tokens to the same transaction.
      pqxx::work tx(Conn());
      tx.exec0("SAVEPOINT s");
      take_all(tx, key);
      tx.exec0("ROLLBACK TO SAVEPOINT s");
      take_all(tx, key);
      tx.abort();
    }
    {
      // A caller that comes while every token is taken by an open
      // transaction waits on the row lock (the committed state still shows
      // tokens), and gets one when that transaction rolls back.
      pqxx::work holder(Conn());
      take_all(holder, key);
      auto waiter = std::async(std::launch::async, [&] {
        pqxx::work tx(*waiter_conn);
        pqxx::row row = tx.exec_prepared1("limit", name, key, config, 1.0);
        tx.abort();
        return std::make_pair(row[0].as<bool>(), row[1].as<double>());
      });
      // Until the waiter blocks on the holder's lock or returns (it must
      // not; its statement_timeout ends a hang): no time limit of our own.
      bool waiting = false;
      while (!waiting && waiter.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
        pqxx::nontransaction probe(*probe_conn);
        waiting = probe
                      .exec_params1(
                          "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity"
                          " WHERE pid = $1",
                          waiter_pid)[0]
                      .as<bool>();
      }
      EXPECT_TRUE(waiting) << "the second caller did not wait for the holder's row lock";
      EXPECT_NE(waiter.wait_for(std::chrono::milliseconds(0)), std::future_status::ready);
      holder.abort();
      auto [ok, remaining] = waiter.get();  // bounded by its statement_timeout
      EXPECT_TRUE(ok) << "the waiter was refused although the holder rolled back";
      EXPECT_EQ(remaining, capacity - 1);
    }
    {
      pqxx::nontransaction tx(Conn());
      double value = tx.exec_params1("SELECT value FROM " + Fn("ratelimit_value") + "($1, $2, $3::jsonb)",
                                     name, key, config)[0]
                         .as<double>();
      EXPECT_EQ(value, capacity);
    }
    {
      pqxx::work tx(Conn());
      take_all(tx, key);  // the full capacity, committed
      tx.commit();
    }
    pqxx::work tx(Conn());
    EXPECT_FALSE(tx.exec_prepared1("limit", name, key, config, 1.0)[0].as<bool>())
        << "committed tokens came back";
  }
}

// A kind parameter's test name: the kind with '_' for ' ' ("token_bucket").
std::string KindTestName(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), ' ', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Kinds, RollbackTest,
                         ::testing::Values("token bucket", "fixed window", "sliding window"), KindTestName);

// e. Two limits in one transaction, consumed by concurrent clients in
// opposite orders with separate ratelimit_limit calls. 16 connections: 4 take
// a then b and 4 take b then a, holding the first row lock 10 ms
// (pg_sleep) before the second call to provoke the deadlock; 4 + 4 more take
// only a or only b, so that each limit's demand stays far above its supply
// even while the pairs are stuck. (With 16 pair connections nearly every
// transaction ends in a deadlock: ~15 of ~300 committed in 3 s, 10% of the
// bound, which would leave the bound untested. Rate 20/s for the same
// reason: deadlocked pairs hold the rows for 20 ms at a time, the
// deadlock_timeout set here.)
//
// PostgreSQL's deadlock detector aborts some transactions with 40P01; that
// must be the only error, and the committed admissions of each limit stay
// within the token bucket's exact bound (see HotKeyTokenBucket: every
// committed grant on a limit is part of that limit's chain of writes,
// whatever else its transaction did). When a pair's second call is refused,
// the pair rolls back (all or nothing, as docs/semantics.md advises) or, for half
// of them, commits the first grant alone (a caller for whom the second limit
// is optional).
//
// Single-limit transactions are deadlock victims too (about half of the
// 40P01s): one waiting for a row holds that row's tuple lock, which the
// opposite-order pair queues behind, so it closes the cycle. Callers of a
// limit that others take in opposite orders must all retry 40P01.
//
// TwoLimitsOneCall below takes the same two limits through one
// ratelimit_limit_all call instead: no deadlock at all.
TEST_F(ContentionTest, TwoLimitsOppositeOrders) {
  const double rate = 20, capacity = 5;
  const Micros period_ms = 1000;
  const std::string names[2] = {LimitName("pair.a"), LimitName("pair.b")};
  const std::string config = TokenBucketConfig(rate, period_ms, capacity);
  const std::string sql = "SELECT ok FROM " + Fn("ratelimit_limit") + "($1, NULL, $2::jsonb)";

  bool fast_deadlock_detection = true;
  const int threads = 16;
  // Worker roles by index % 4: 0 pair a then b, 1 pair b then a, 2 only a,
  // 3 only b. Per worker: [0] committed grants on a, [1] on b, [2] pairs
  // committed with both grants, [3] pairs aborted by 40P01.
  std::vector<std::array<long, 4>> counts(threads, std::array<long, 4>{});
  Workers workers(threads, [&](pqxx::connection& conn) {
    conn.prepare("limit", sql);
    try {
      pqxx::nontransaction tx(conn);
      tx.exec0("SET deadlock_timeout = '20ms'");  // superuser only; else the default 1 s
    } catch (const pqxx::sql_error&) {
      fast_deadlock_detection = false;
    }
  });
  Start start = TakeStart(Conn());
  Stats stats = workers.Run(start.local + std::chrono::seconds(3), [&](Worker& w) {
    const int role = w.index % 4;
    const int first = role % 2;  // the limit taken first (or only)
    std::array<long, 4>& mine = counts[w.index];
    pqxx::work tx(*w.conn);
    ++w.stats.transactions;
    if (role >= 2) {
      if (tx.exec_prepared1("limit", names[first], config)[0].as<bool>()) {
        tx.commit();
        ++mine[first];
      } else {
        ++w.stats.refused_calls;
      }
      return;
    }
    try {
      if (!tx.exec_prepared1("limit", names[first], config)[0].as<bool>()) {
        ++w.stats.refused_calls;
        return;  // nothing taken; tx rolls back
      }
      tx.exec("SELECT pg_sleep(0.01)");
      const bool second = tx.exec_prepared1("limit", names[1 - first], config)[0].as<bool>();
      if (!second) {
        ++w.stats.refused_calls;
        if (w.Chance(0.5)) return;  // all or nothing: tx rolls back
      }
      tx.commit();
      ++mine[first];
      if (second) {
        ++mine[1 - first];
        ++mine[2];
      }
    } catch (const pqxx::deadlock_detected&) {
      ++mine[3];
      throw;
    }
  });
  Micros t_end = ServerClock(Conn());
  long admitted[2] = {0, 0}, both[2] = {0, 0}, pair_deadlocks[2] = {0, 0};
  for (int i = 0; i < threads; ++i) {
    admitted[0] += counts[i][0];
    admitted[1] += counts[i][1];
    if (i % 4 < 2) {
      both[i % 4] += counts[i][2];
      pair_deadlocks[i % 4] += counts[i][3];
    }
  }

  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.serialization_failures, 0);
  const double elapsed_s = static_cast<double>(t_end - start.server) / kMicrosPerSecond;
  const double bound = capacity + rate * elapsed_s;
  char text[360];
  std::snprintf(
      text, sizeof text,
      "admitted a %ld, b %ld, bound %.3f (%.1f%%, %.1f%%); pairs committed both a->b %ld, b->a %ld; "
      "40P01 %ld (pairs a->b %ld, b->a %ld, single-limit %ld)%s; %ld txns, elapsed %.3f s",
      admitted[0], admitted[1], bound, 100 * static_cast<double>(admitted[0]) / bound,
      100 * static_cast<double>(admitted[1]) / bound, both[0], both[1], stats.deadlocks, pair_deadlocks[0],
      pair_deadlocks[1], stats.deadlocks - pair_deadlocks[0] - pair_deadlocks[1],
      fast_deadlock_detection ? "" : " (deadlock_timeout 1 s)", stats.transactions, elapsed_s);
  PrintMeasure("two limits, opposite orders:", text);
  for (int limit = 0; limit < 2; ++limit)
    EXPECT_LE(static_cast<double>(admitted[limit]), bound) << "limit " << names[limit];
  EXPECT_GE(stats.deadlocks, 1) << "the opposite orders never deadlocked: the test did not provoke the race";
  EXPECT_GE(pair_deadlocks[0] + pair_deadlocks[1], 1) << "no pair transaction was a deadlock victim";
}

// e'. The same two limits through one all-or-nothing ratelimit_limit_all call,
// half of the 16 clients listing them a, b and half b, a, each holding its
// locks a little (pg_sleep) before committing. The call locks rows in one
// canonical order, so no deadlock ever reaches a caller: no 40P01 at all, no
// other error. All or nothing: every committed call consumed both limits, so
// the admissions of a and b are equal, and each within the exact bound.
TEST_F(ContentionTest, TwoLimitsOneCall) {
  const double rate = 20, capacity = 5;
  const Micros period_ms = 1000;
  const std::string names[2] = {LimitName("all.a"), LimitName("all.b")};
  const std::string config = TokenBucketConfig(rate, period_ms, capacity);
  const std::string sql = "SELECT bool_and(ok) FROM " + Fn("ratelimit_limit_all") +
                          "(jsonb_build_array(jsonb_build_object('name', $1::text, 'config', $3::jsonb),"
                          " jsonb_build_object('name', $2::text, 'config', $3::jsonb)))";
  const int threads = 16;
  std::vector<long> committed(threads, 0);
  Workers workers(threads, [&](pqxx::connection& conn) {
    conn.prepare("limit_all", sql);
    pqxx::nontransaction tx(conn);
    tx.exec0("SET deadlock_timeout = '20ms'");  // would find any deadlock fast
  });
  Start start = TakeStart(Conn());
  Stats stats = workers.Run(start.local + std::chrono::seconds(3), [&](Worker& w) {
    const int first = w.index % 2;
    pqxx::work tx(*w.conn);
    ++w.stats.transactions;
    if (!tx.exec_prepared1("limit_all", names[first], names[1 - first], config)[0].as<bool>()) {
      ++w.stats.refused_calls;
      return;
    }
    tx.exec("SELECT pg_sleep(0.005)");
    tx.commit();
    ++committed[w.index];
  });
  Micros t_end = ServerClock(Conn());
  long admitted = 0;
  for (long n : committed) admitted += n;
  pqxx::work check(Conn());
  pqxx::result rows = check.exec_params(
      "SELECT value, ts FROM " + Fn("ratelimit_state") + " WHERE name IN ($1, $2) ORDER BY name", names[0],
      names[1]);
  check.commit();

  const double elapsed_s = static_cast<double>(t_end - start.server) / kMicrosPerSecond;
  const double bound = capacity + rate * elapsed_s;
  char text[240];
  std::snprintf(text, sizeof text,
                "admitted %ld (both limits), bound %.3f (%.1f%%); 40P01 %ld; %ld txns, %.3f s", admitted,
                bound, 100 * static_cast<double>(admitted) / bound, stats.deadlocks, stats.transactions,
                elapsed_s);
  PrintMeasure("two limits, one call:", text);
  EXPECT_EQ(stats.deadlocks, 0) << "a deadlock reached a caller of ratelimit_limit_all";
  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_LE(static_cast<double>(admitted), bound);
  // Every call wrote both rows with one clock reading: the rows are identical.
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0].as<double>(), rows[1][0].as<double>());
  EXPECT_EQ(rows[0][1].as<std::string>(), rows[1][1].as<std::string>());
}

// f. REPEATABLE READ and SERIALIZABLE callers on a hot key (16 connections,
// one level per test, some grants rolled back on purpose). A call that
// would write a row changed since the snapshot fails with 40001; the worker
// retries the transaction. Never a wrong admission: committed admissions stay
// within the exact token bucket bound (see HotKeyTokenBucket), and 40001 is
// the only error.
//
// Liveness is reported only (see HotKeyTokenBucket): the share of capacity +
// rate * (demand span) / period admitted, which would show a limiter that
// failed every contended call with 40001. Alone on a 2-core machine both
// levels reach ~99%; with a second copy of this program running at the same
// time SERIALIZABLE fell to ~80%, every call then being granted or failing
// with 40001: the machine, not the limiter, was the bottleneck.
template <pqxx::isolation_level Level>
void RunIsolationHotKey(pqxx::connection& main, const std::string& name, const char* label) {
  const double rate = 100, capacity = 50;
  const Micros period_ms = 1000;
  const std::string config = TokenBucketConfig(rate, period_ms, capacity);

  Workers workers(16, PrepareTimedLimit);
  Start start = TakeStart(main);
  Stats stats = workers.Run(start.local + std::chrono::milliseconds(2500), [&](Worker& w) {
    HotKeyTransaction<pqxx::transaction<Level>>(w, name, "hot", config, 0.10);
  });
  Micros t_end = ServerClock(main);

  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.deadlocks, 0);
  const double elapsed_s = static_cast<double>(t_end - start.server) / kMicrosPerSecond;
  const double bound = capacity + rate * elapsed_s;
  const double demand_s = static_cast<double>(stats.last_call - stats.first_call) / kMicrosPerSecond;
  const double demand_bound = capacity + rate * demand_s;
  const auto admitted = static_cast<double>(stats.grants.size());
  char text[360];
  std::snprintf(text, sizeof text,
                "admitted %zu, bound %.3f (%.1f%%), over the demand span %.3f (%.1f%%), 40001 retried %ld, "
                "%ld txns, %ld refused, %ld rolled back, elapsed %.3f s",
                stats.grants.size(), bound, 100 * admitted / bound, demand_bound,
                100 * admitted / demand_bound, stats.serialization_failures, stats.transactions,
                stats.refused_calls, stats.rolled_back_on_purpose, elapsed_s);
  PrintMeasure(label, text);
  EXPECT_LE(admitted, bound);
  EXPECT_GT(stats.serialization_failures, 0) << "no contention: the retry path was not exercised";
  CheckTokenBucketIntervals(stats.grants, capacity, rate, period_ms * kMicrosPerMilli);
}

TEST_F(ContentionTest, HotKeyRepeatableRead) {
  RunIsolationHotKey<pqxx::repeatable_read>(Conn(), LimitName("hot_repeatable_read"),
                                            "hot key REPEATABLE READ:");
}

TEST_F(ContentionTest, HotKeySerializable) {
  RunIsolationHotKey<pqxx::serializable>(Conn(), LimitName("hot_serializable"), "hot key SERIALIZABLE:");
}

// ---------------------------------------------------------------------------
// Memory limits ("storage": "memory"): a grant is taken at once, with no row
// lock, and a rollback (of the transaction, of a savepoint, by an error)
// gives it back. They run where shared memory serves them: with
// shared_preload_libraries = 'ratelimit' (scripts/memory-test.sh runs them
// so), or from PostgreSQL 17 through the DSM registry; on 15 and 16 without
// the preload (the main cluster of scripts/test.sh) every test is skipped,
// saying so, and any other error of the probe fails.
class MemoryContentionTest : public ContentionTest {
 protected:
  void SetUp() override {
    ContentionTest::SetUp();
    pqxx::nontransaction tx(Conn());
    const int version = tx.exec1("SELECT current_setting('server_version_num')::int")[0].as<int>();
    const bool preloaded =
        tx.exec1("SELECT current_setting('shared_preload_libraries') ~ '(^|[ ,])ratelimit($|[ ,])'")[0]
            .as<bool>();
    try {
      tx.exec1(
          "SELECT " + Fn("ratelimit_check") +
          "('client_test.memory_probe', NULL, '{\"kind\": \"token bucket\", \"rate\": 1, \"period\": 1000, "
          "\"storage\": \"memory\"}')");
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() == "55000" && version < 170000 && !preloaded)
        GTEST_SKIP() << "memory limits need shared_preload_libraries = 'ratelimit' on PostgreSQL "
                     << version / 10000 << " (scripts/memory-test.sh runs these tests with it)";
      FAIL() << "the memory storage probe failed: SQLSTATE " << e.sqlstate() << ": " << e.what();
    }
    if (version < 170000 && !preloaded) FAIL() << "a memory limit answered on 15 without the preload";
  }

  // Resets this test's limits, so that their entries do not stay live in a
  // cluster with a small ratelimit.memory_max_keys.
  void ResetLimit(const std::string& name, const std::string& key) {
    pqxx::nontransaction tx(Conn());
    tx.exec_params1("SELECT " + Fn("ratelimit_reset") + "($1, $2)", name, key);
  }

  double Value(const std::string& name, const std::string& key, const std::string& config) {
    pqxx::nontransaction tx(Conn());
    return tx
        .exec_params1("SELECT value FROM " + Fn("ratelimit_value") + "($1, $2, $3::jsonb)", name, key,
                      config)[0]
        .as<double>();
  }
};

std::string WithMemory(std::string config) {
  config.insert(config.rfind('}'), ", \"storage\": \"memory\"");
  return config;
}

// How a memory worker's transaction ends (chosen at random): committed, or
// its grant given back by ROLLBACK, by a rolled-back savepoint (the
// transaction then commits), or by an error.
enum class Ending { kCommit, kRollback, kSavepoint, kError };

Ending PickEnding(Worker& w) {
  double p = std::uniform_real_distribution<double>(0, 1)(w.rng);
  if (w.stats.granted_calls == 0 || p < 0.10)
    return Ending::kRollback;  // every worker rolls back once at least
  if (p < 0.20) return Ending::kSavepoint;
  if (p < 0.25) return Ending::kError;
  return Ending::kCommit;
}

// One memory transaction on `key`, ended as PickEnding says; a committed
// grant's bracket goes to w.stats.grants (and counts in
// (*committed_per_key)[key_index]).
void MemoryTransaction(Worker& w, const std::string& name, const std::string& key, const std::string& config,
                       std::vector<int>* committed_per_key = nullptr, int key_index = 0) {
  static const std::string sql = TimedLimitSql();
  Ending ending = PickEnding(w);
  pqxx::work tx(*w.conn);
  ++w.stats.transactions;
  if (ending == Ending::kSavepoint) tx.exec0("SAVEPOINT s");
  pqxx::row row = tx.exec_params1(sql, name, key, config);
  bool ok = row[0].as<bool>();
  Grant grant{row[1].as<Micros>(), row[2].as<Micros>()};
  w.stats.first_call = std::min(w.stats.first_call, grant.t0);
  w.stats.last_call = std::max(w.stats.last_call, grant.t1);
  if (!ok) {
    ++w.stats.refused_calls;
    tx.commit();
    return;
  }
  ++w.stats.granted_calls;
  switch (ending) {
    case Ending::kRollback:
      tx.abort();
      ++w.stats.rolled_back_on_purpose;
      return;
    case Ending::kSavepoint:
      tx.exec0("ROLLBACK TO SAVEPOINT s");
      tx.commit();
      ++w.stats.rolled_back_on_purpose;
      return;
    case Ending::kError:
      try {
        tx.exec0("SELECT 1 / 0");
      } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != "22012") throw;
      }
      ++w.stats.rolled_back_on_purpose;
      return;  // the transaction aborted; pqxx::work rolls it back
    case Ending::kCommit:
      tx.commit();
      w.stats.grants.push_back(grant);
      if (committed_per_key != nullptr) ++(*committed_per_key)[key_index];
      return;
  }
}

// m1. Hot key, memory token bucket: 32 connections, one key, 3 s, grants
// given back by rollbacks, savepoints and errors. The exact bound is the
// table's (HotKeyTokenBucket): a call decides at a clock read made inside
// it (before it takes the entry's lock), and the state never moves back in
// time, so the chain of writes has effective times in [t_start, t_end]; a
// rolled-back grant is refunded (at most what it took, capped at capacity),
// so the tokens taken net of refunds, which are at least the committed
// grants, stay within capacity + rate * (t_end - t_start) / period.
// (HotKeyTokenBucket's per-interval check does not apply: a call whose clock
// read came before another's may take the lock after it, and then decides at
// that later call's time, max(its clock, the stored ts), which can lie past
// its own bracket; measured once: 57 grants certainly within an interval
// allowing 56.8.)
TEST_F(MemoryContentionTest, HotKeyTokenBucket) {
  const double rate = 100, capacity = 50;
  const std::string name = LimitName("memory_hot_token_bucket");
  const std::string config = WithMemory(TokenBucketConfig(rate, 1000, capacity));
  Workers workers(32, PrepareTimedLimit);
  Start start = TakeStart(Conn());
  Stats stats = workers.Run(start.local + std::chrono::seconds(3),
                            [&](Worker& w) { MemoryTransaction(w, name, "hot", config); });
  Micros t_end = ServerClock(Conn());
  const double elapsed_s = static_cast<double>(t_end - start.server) / kMicrosPerSecond;
  const double bound = capacity + rate * elapsed_s;
  const auto admitted = static_cast<double>(stats.grants.size());
  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.serialization_failures, 0);
  EXPECT_EQ(stats.deadlocks, 0);
  char text[320];
  std::snprintf(text, sizeof text, "admitted %zu, bound %.3f (%.1f%%), %ld txns, %ld refused, %ld given back",
                stats.grants.size(), bound, 100 * admitted / bound, stats.transactions, stats.refused_calls,
                stats.rolled_back_on_purpose);
  PrintMeasure("memory hot key token bucket:", text);
  EXPECT_LE(admitted, bound);
  EXPECT_GT(stats.rolled_back_on_purpose, 0);
  ResetLimit(name, "hot");
}

// m2. Every rolled-back grant is given back exactly once, for each kind: 32
// connections on one hot key that does not refill during the test (a
// capacity of 100,000 refilled over an hour, or windows of a day that began
// 12 hours ago), so the limit's value at the end shows exactly the tokens
// kept: capacity - value == the committed grants (up to the refill of the
// run, < 0.03 token in 100 s). A grant given back twice, or never, breaks
// the equality by one token.
class MemoryGiveBackTest : public MemoryContentionTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(MemoryGiveBackTest, CommittedEqualsTaken) {
  const std::string kind = GetParam();
  const double capacity = 100000;
  const std::string name = LimitName(std::string("memory_give_back.") + kind);
  const Micros half_day_ago_ms = FloorDiv(ServerClock(Conn()), kMicrosPerMilli) - 12 * 3600 * 1000;
  const std::string config =
      WithMemory(kind == "token bucket"
                     ? TokenBucketConfig(capacity, 3600000 * 100000LL, capacity)
                     : WindowConfig(kind.c_str(), capacity, 24 * 3600 * 1000, nullptr, half_day_ago_ms));
  Workers workers(32, PrepareTimedLimit);
  Start start = TakeStart(Conn());
  Stats stats = workers.Run(start.local + std::chrono::seconds(3),
                            [&](Worker& w) { MemoryTransaction(w, name, "hot", config); });
  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  EXPECT_EQ(stats.refused_calls, 0);
  const double taken = capacity - Value(name, "hot", config);
  const auto committed = static_cast<double>(stats.grants.size());
  char text[320];
  std::snprintf(text, sizeof text, "%.0f committed, %.3f taken, %ld given back, %ld txns", committed, taken,
                stats.rolled_back_on_purpose, stats.transactions);
  PrintMeasure(("memory give back, " + kind + ":").c_str(), text);
  EXPECT_GT(stats.rolled_back_on_purpose, 0);
  EXPECT_NEAR(taken, committed, 0.03);
  ResetLimit(name, "hot");
}

INSTANTIATE_TEST_SUITE_P(Kinds, MemoryGiveBackTest,
                         ::testing::Values("token bucket", "fixed window", "sliding window"), KindTestName);

// m3. Random keys: 32 connections, 12 keys chosen at random, token buckets
// of capacity 3 refilled 3 in 100 hours (< 0.001 token in 100 s), with rollbacks,
// savepoints and errors. Per key, exactly: the committed grants are at most
// capacity + refill, and equal capacity - value at the end (every
// rolled-back grant given back once). (A table limit would also admit
// min(calls, capacity); a memory limit may refuse a caller while a grant
// that later rolls back is outstanding, so no such floor holds.)
TEST_F(MemoryContentionTest, RandomKeys) {
  const int keys = 12;
  const double capacity = 3;
  const std::string name = LimitName("memory_random_keys");
  const std::string config = WithMemory(TokenBucketConfig(capacity, 100 * 3600000LL, capacity));
  const int threads = 32;
  std::vector<std::vector<int>> committed(threads, std::vector<int>(keys));
  Workers workers(threads, PrepareTimedLimit);
  Start start = TakeStart(Conn());
  Stats stats = workers.Run(start.local + std::chrono::seconds(3), [&](Worker& w) {
    int k = std::uniform_int_distribution<int>(0, keys - 1)(w.rng);
    MemoryTransaction(w, name, "k" + std::to_string(k), config, &committed[w.index], k);
  });
  EXPECT_EQ(stats.unexpected.count, 0) << Describe(stats.unexpected.messages);
  const double refill = 0.001;  // 100 s of it
  long admitted = 0;
  for (int k = 0; k < keys; ++k) {
    int c = 0;
    for (int t = 0; t < threads; ++t) c += committed[t][k];
    admitted += c;
    const std::string key = "k" + std::to_string(k);
    EXPECT_LE(c, capacity + refill) << key;
    EXPECT_NEAR(capacity - Value(name, key, config), c, refill + 1e-6) << key;
    ResetLimit(name, key);
  }
  char text[320];
  std::snprintf(text, sizeof text, "%ld admitted of %d keys x %.0f, %ld refused, %ld given back, %ld txns",
                admitted, keys, capacity, stats.refused_calls, stats.rolled_back_on_purpose,
                stats.transactions);
  PrintMeasure("memory random keys:", text);
  EXPECT_GT(stats.rolled_back_on_purpose, 0);
}

// Creates the extension if needed, finds its schema, picks the run id and
// removes this run's rows at the end (best effort).
class ContentionEnvironment : public ServerEnvironment {
  void SetUpServer() override {
    auto conn = Connect();
    pqxx::nontransaction tx(*conn);
    tx.exec0("CREATE EXTENSION IF NOT EXISTS ratelimit");
    g_schema = tx.exec1(
                     "SELECT quote_ident(n.nspname) FROM pg_extension e"
                     " JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'ratelimit'")[0]
                   .as<std::string>();
    g_run_id = ProcessAndServerClockId(tx);
  }

  void TearDownServer() override {
    auto conn = Connect();
    pqxx::nontransaction tx(*conn);
    tx.exec_params0("DELETE FROM " + g_schema + ".ratelimit_state WHERE starts_with(name, $1)",
                    "client_test." + g_run_id + ".");
  }
};

}  // namespace

int main(int argc, char** argv) {
  return client_test::RunAllTests(argc, argv, new ContentionEnvironment, "client_tests");
}
