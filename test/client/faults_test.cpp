// Fault tests: what a caller's failures do to the limits. A backend killed in
// the middle of a transaction, the server crashing (pg_ctl stop -m immediate)
// under load and restarted, statement_timeout and lock_timeout firing while a
// call waits for a row lock, DROP/CREATE EXTENSION, and pg_dump/pg_restore.
// Not part of the ctest unit run: scripts/test.sh runs build/faults_test
// against its throwaway cluster.
//
// Connection parameters come from the environment (PGHOST, PGPORT, PGUSER,
// PGDATABASE), as exported by scripts/lib.sh's start_cluster; the user must be
// a superuser. Every test works in databases this program creates (and drops
// at the end), with the extension in schema public, so DROP EXTENSION or the
// crash never touches another program's limits.
//
// Restarting the server and pg_dump/pg_restore go through
// scripts/cluster-ctl.sh, which needs CLUSTER_DIR (and PG_BINDIR, optional) in
// the environment: scripts/test.sh exports them. The script's path is compiled
// in (RATELIMIT_CLUSTER_CTL) and may be overridden by the environment variable
// of that name. The crash test leaves the server running again, also when it
// fails.
//
// The limits use periods of ten years, so that over a test at most a few
// hundred-millionths of a token per token of capacity refill: stored values
// are exact integers (fixed windows) or within that of one (token buckets),
// and every check below can be exact.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <pqxx/pqxx>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

namespace {

using namespace client_test;

// The period of every limit here: 3650 days.
constexpr double kPeriodSeconds = 3650.0 * 86400;
constexpr const char* kPeriod = R"("3650 days")";

// Set once by the environment below.
std::string g_run_id;  // makes database names unique per run
std::string g_db;      // the database most tests work in

std::string Fn(const char* function) { return std::string("public.") + function; }

// Creates a database of this run (dropped at the end).
std::string CreateRunDatabase(const std::string& suffix) {
  const std::string db = "ratelimit_faults_" + g_run_id + "_" + suffix;
  CreateDatabase(db);
  return db;
}

void CreateExtension(const std::string& db) {
  auto conn = ConnectTo(db);
  pqxx::nontransaction tx(*conn);
  tx.exec0("CREATE EXTENSION IF NOT EXISTS ratelimit SCHEMA public");
}

// A token bucket that refills all of `capacity` in ten years.
std::string SlowBucket(double capacity, int shards = 1) {
  std::string shard_field = shards > 1 ? Format(R"(, "shards": %d)", shards) : "";
  return Format(R"({"kind": "token bucket", "rate": %.17g, "period": %s, "capacity": %.17g%s})", capacity,
                kPeriod, capacity, shard_field.c_str());
}

// A fixed window of ten years, aligned to 1970 (one started 2019-12-20, the
// next starts 2029-12-17): `capacity` tokens, and no refill during a test.
std::string LongWindow(double capacity, int shards = 1) {
  std::string shard_field = shards > 1 ? Format(R"(, "shards": %d)", shards) : "";
  return Format(R"({"kind": "fixed window", "rate": %.17g, "period": %s, "start": 0%s})", capacity, kPeriod,
                shard_field.c_str());
}

std::string LongSlidingWindow(double rate) {
  return Format(R"({"kind": "sliding window", "rate": %.17g, "period": %s, "start": 0})", rate, kPeriod);
}

// Every column of the state rows of the limits whose name starts with
// `prefix` (all rows when empty), one string per row, exact: float8 values as
// their bits, timestamps in microseconds.
std::vector<std::string> StateRows(pqxx::transaction_base& tx, const std::string& prefix,
                                   const std::string& schema = "public") {
  pqxx::result rows = tx.exec_params(
      "SELECT format('%s|%s|%s|value %s (%s)|ts %s|prev %s|idle_at %s', name, coalesce(quote_literal(key), "
      "'NULL'), shard, value, encode(float8send(value), 'hex'), (extract(epoch FROM ts) * 1000000)::int8,"
      " coalesce(encode(float8send(prev), 'hex'), 'NULL'),"
      " coalesce(((extract(epoch FROM idle_at) * 1000000)::int8)::text, 'NULL'))"
      " FROM " +
          schema + ".ratelimit_state WHERE starts_with(name, $1) ORDER BY name, key NULLS FIRST, shard",
      prefix);
  std::vector<std::string> out;
  for (const auto& row : rows) out.push_back(row[0].as<std::string>());
  return out;
}

std::vector<std::string> StateRows(pqxx::connection& conn, const std::string& prefix,
                                   const std::string& schema = "public") {
  pqxx::nontransaction tx(conn);
  return StateRows(tx, prefix, schema);
}

// The sum of the stored values of a limit's rows (every shard), and how many
// rows it has.
std::pair<double, long> StoredTotal(pqxx::transaction_base& tx, const std::string& name, const char* key) {
  pqxx::row row = tx.exec_params1(
      "SELECT coalesce(sum(value), 0), count(*) FROM public.ratelimit_state"
      " WHERE name = $1 AND key IS NOT DISTINCT FROM $2",
      name, key);
  return {row[0].as<double>(), row[1].as<long>()};
}

// The available tokens now (ratelimit_value).
double Available(pqxx::transaction_base& tx, const std::string& name, const char* key,
                 const std::string& config) {
  return tx
      .exec_params1("SELECT value FROM " + Fn("ratelimit_value") + "($1, $2, $3::jsonb)", name, key,
                    config)[0]
      .as<double>();
}

struct CallResult {
  bool ok;
  double remaining;
};

CallResult Limit(pqxx::transaction_base& tx, const std::string& name, const char* key,
                 const std::string& config, double count) {
  pqxx::row row =
      tx.exec_params1("SELECT ok, remaining FROM " + Fn("ratelimit_limit") + "($1, $2, $3::jsonb, $4)", name,
                      key, config, count);
  return CallResult{row[0].as<bool>(), row[1].as<double>()};
}

// Waits up to `timeout` for `condition` (an SQL boolean about backend $1,
// evaluated on `probe`) to hold.
bool WaitForBackend(pqxx::connection& probe, int pid, const std::string& condition,
                    std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    {
      pqxx::nontransaction tx(probe);
      if (tx.exec_params1(
                "SELECT coalesce(bool_or(" + condition + "), false) FROM pg_stat_activity WHERE pid = $1",
                pid)[0]
              .as<bool>())
        return true;
    }
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// ---------------------------------------------------------------------------

class FaultsTest : public ConnectedTest {
 protected:
  FaultsTest() : ConnectedTest("dbname=" + g_db) {}
  std::string Name(const std::string& test) { return "faults." + test; }
};

// 1. A backend killed (pg_terminate_backend from another connection) in the
// middle of a transaction that consumed tokens: on four limits, through each
// write path (UPDATE of an existing row, INSERT of a new one, creating the
// rows of the two shards a sharded grant takes from, a sliding window's row), once while the victim is
// idle in its transaction and once while it runs a statement (pg_sleep).
//
// Its consumption is gone: every state row of the test is bit for bit what it
// was before the victim's transaction (the killed keys' rows back to what they
// were, the new ones absent), except for a bystander's transaction, open on
// another key during the kill and committed after it, whose consumption is
// there. The killed transaction's row locks are released: a caller with a
// short lock_timeout gets the killed key's tokens at once.
class TerminateTest : public FaultsTest, public ::testing::WithParamInterface<bool> {};

TEST_P(TerminateTest, KilledTransactionsConsumptionIsGone) {
  const bool running = GetParam();
  const std::string prefix = Name(running ? "terminate_running." : "terminate_idle.");
  const std::string bucket = prefix + "bucket", window = prefix + "window", sharded = prefix + "sharded",
                    sliding = prefix + "sliding";
  const std::string bucket_config = SlowBucket(10), window_config = LongWindow(10),
                    sharded_config = SlowBucket(40, 4), sliding_config = LongSlidingWindow(10);
  {
    pqxx::work tx(Conn());
    ASSERT_TRUE(Limit(tx, bucket, "victim", bucket_config, 2).ok);
    ASSERT_TRUE(Limit(tx, bucket, "bystander", bucket_config, 3).ok);
    ASSERT_TRUE(Limit(tx, window, "bystander", window_config, 4).ok);
    tx.commit();
  }
  const std::vector<std::string> before = StateRows(Conn(), prefix);
  ASSERT_EQ(before.size(), 3u) << Describe(before);

  auto victim = ConnectTo(g_db);
  const int victim_pid = victim->backendpid();
  auto victim_tx = std::make_unique<pqxx::work>(*victim);
  EXPECT_TRUE(Limit(*victim_tx, bucket, "victim", bucket_config, 5).ok);    // UPDATE of an existing row
  EXPECT_TRUE(Limit(*victim_tx, window, "victim", window_config, 6).ok);    // INSERT of a new row
  EXPECT_TRUE(Limit(*victim_tx, sharded, nullptr, sharded_config, 15).ok);  // creates 2 shard rows (10 each)
  EXPECT_TRUE(Limit(*victim_tx, sliding, "victim", sliding_config, 8).ok);  // a sliding window
  EXPECT_EQ(StateRows(*victim_tx, prefix).size(), 3u + 1 + 2 + 1) << "the victim's own view";

  auto bystander = ConnectTo(g_db);
  pqxx::work bystander_tx(*bystander);
  EXPECT_TRUE(Limit(bystander_tx, bucket, "bystander 2", bucket_config, 1).ok);

  auto probe = ConnectTo(g_db);
  std::future<std::string> sleeping;
  if (running) {
    sleeping = std::async(std::launch::async, [&]() -> std::string {
      try {
        victim_tx->exec("SELECT pg_sleep(15)");
        return "pg_sleep returned";
      } catch (const pqxx::broken_connection&) {
        return "broken connection";
      } catch (const std::exception& e) {
        return std::string("other error: ") + e.what();
      }
    });
    ASSERT_TRUE(WaitForBackend(*probe, victim_pid, "state = 'active' AND query LIKE '%pg_sleep%'"));
  } else {
    ASSERT_TRUE(WaitForBackend(*probe, victim_pid, "state = 'idle in transaction'"));
  }

  {
    pqxx::nontransaction killer(*probe);
    // Waits (up to 10 s) until the backend has exited.
    EXPECT_TRUE(killer.exec_params1("SELECT pg_terminate_backend($1, 10000)", victim_pid)[0].as<bool>());
    EXPECT_EQ(
        killer.exec_params1("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", victim_pid)[0].as<int>(),
        0);
  }
  if (running) {
    ASSERT_EQ(sleeping.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(sleeping.get(), "broken connection");
  } else {
    EXPECT_THROW(victim_tx->exec("SELECT 1"), pqxx::broken_connection);
  }
  victim_tx.reset();
  victim.reset();

  bystander_tx.commit();
  std::vector<std::string> after = StateRows(Conn(), prefix);
  std::vector<std::string> bystander_rows;
  after.erase(std::remove_if(after.begin(), after.end(),
                             [&](const std::string& row) {
                               bool mine = row.rfind(bucket + "|'bystander 2'|", 0) == 0;
                               if (mine) bystander_rows.push_back(row);
                               return mine;
                             }),
              after.end());
  EXPECT_EQ(after, before) << "state rows before the victim's transaction:" << Describe(before)
                           << "\nafter it was killed (without the bystander's new row):" << Describe(after);
  ASSERT_EQ(bystander_rows.size(), 1u) << "the bystander's committed consumption is missing";
  {
    pqxx::work tx(Conn());
    EXPECT_NEAR(StoredTotal(tx, bucket, "bystander 2").first, 9, 1e-6);
  }

  // The killed transaction's locks are gone: no waiting for any of its rows.
  pqxx::work tx(Conn());
  tx.exec0("SET LOCAL lock_timeout = '2s'");
  CallResult r = Limit(tx, bucket, "victim", bucket_config, 8);
  EXPECT_TRUE(r.ok) << "the killed consumption still counts";
  EXPECT_NEAR(r.remaining, 0, 1e-6);
  EXPECT_TRUE(Limit(tx, window, "victim", window_config, 10).ok);
  EXPECT_TRUE(Limit(tx, sharded, nullptr, sharded_config, 10).ok);
  EXPECT_NEAR(Available(tx, sharded, nullptr, sharded_config), 30, 1e-6);
  EXPECT_TRUE(Limit(tx, sliding, "victim", sliding_config, 10).ok);
  tx.commit();
}

INSTANTIATE_TEST_SUITE_P(Victim, TerminateTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "RunningStatement" : "IdleInTransaction");
                         });

// 2. The server crashes under load (pg_ctl stop -m immediate: every server
// process exits at once, nothing is checkpointed, the next start runs crash
// recovery) and is restarted (pg_ctl start -w), while 8 threads commit one
// ratelimit_limit call per transaction on four limits:
//   a       token bucket, capacity 1000: the crash comes once the client has
//           seen 500 committed admissions on it; after the restart it is
//           taken to exhaustion (the bound across the crash);
//   b       capacity 1,000,000: never exhausted, a plain counter;
//   c       capacity 20: exhausted before the crash (the crash waits for it);
//   global  the NULL key of a limit of 4 shards, capacity 1000, consumed on
//           both sides of the crash.
// ~10% of the granted calls are rolled back on purpose.
//
// Client log. A worker counts a call as a committed admission only when the
// call answered ok and its COMMIT returned success. A granted call whose
// COMMIT raised (the connection broke while committing: libpqxx's
// in_doubt_error) is unknown: it may or may not have committed. A call that
// failed before its COMMIT was sent committed nothing. Each call also
// returns its transaction id (pg_current_xact_id_if_assigned(), evaluated
// after the call: a grant writes, so it has one), so after the restart the
// unknown ones are resolved:
//   - an xid at or past the next_xid of the end-of-recovery checkpoint
//     never made it into the WAL that survived (a commit record carries its
//     xid, and replay moves next_xid past every xid it sees): not committed.
//     PostgreSQL hands such xids out again after the restart, so
//     pg_xact_status() on them reports another transaction (seen here: an
//     unknown call's xid "committed" by a grant made after the restart);
//   - the others, with pg_xact_status(): committed or aborted.
//
// What the state must show. Each limit's period is ten years: over the run
// (t_start..t_end on the server's clock) at most R = capacity * (t_end -
// t_start) / period tokens refill, about 3e-8 per token of capacity per
// second (0.03 tokens for b over 10 s). A token bucket row starts full;
// every committed grant takes 1 token and adds the refill since the row's
// previous write, which, the value staying below capacity minus 1 after the
// first grant, is never cut by the capacity. (For the sharded limit, the
// same per shard, with capacity/4 and rate/4; a full shard's refill is cut,
// which only lowers the sum.) So, with n the transactions that really
// committed a grant and v the stored value (summed over the shards):
//     capacity - v  <=  n  <=  capacity - v + R,
// and with R < 0.5 this names one integer: n is capacity - v rounded up
// (with 1e-6 of slack for the doubles' rounding), and the check is that it
// lies within R. Then, for every limit:
//   - known <= n <= known + unknown (every committed consumption survived,
//     and nothing else was written);
//   - exactly: n == known + (unknown ones resolved as committed), and no
//     unknown one is still 'in progress';
//   - the bound holds across the crash: n <= capacity (v >= 0);
//   - c, exhausted before the crash, is refused by every call made after the
//     restart; a, refused after the restart, has n == capacity exactly (a
//     refusal means the committed state held < 1 token, so n > capacity - 1).
// And the extension works without manual repair: connections opened after
// the restart see no error at all, and their calls grant and refuse.
struct CrashLimit {
  const char* label;
  std::string name;
  const char* key;
  double capacity;
  std::string config;
  double weight;
};

enum class Outcome { kCommitted, kUnknown, kRefused, kFailed, kRolledBack };

struct CallRecord {
  int limit;
  int phase;  // when the call started: 0 before the crash, 1 while down/restarting, 2 after the restart
  Outcome outcome;
  std::string xid;  // for grants
};

TEST_F(FaultsTest, CrashDuringLoadKeepsCommittedConsumption) {
  REQUIRE_CLUSTER_DIR();
  // The server runs again when this test ends, whatever happened.
  RestartGuard restart_guard("faults_test");

  const std::vector<CrashLimit> limits = {
      {"a", Name("crash.bucket"), "a", 1000, SlowBucket(1000), 0.3},
      {"b", Name("crash.bucket"), "b", 1e6, SlowBucket(1e6), 0.3},
      {"c", Name("crash.bucket"), "c", 20, SlowBucket(20), 0.1},
      {"global", Name("crash.sharded"), nullptr, 1000, SlowBucket(1000, 4), 0.3},
  };
  const int kA = 0, kB = 1, kC = 2, kGlobal = 3;
  const int threads = 8;
  const std::string sql = "SELECT r.ok, pg_current_xact_id_if_assigned()::text FROM " +
                          Fn("ratelimit_limit") + "($1, $2, $3::jsonb) r";

  std::atomic<int> phase{0};
  std::atomic<bool> stop{false};
  std::vector<std::atomic<long>> known(limits.size());
  std::atomic<long> refused_after_restart_a{0};
  std::vector<std::vector<CallRecord>> records(threads);
  std::vector<std::vector<std::string>> unexpected(
      threads);  // errors on connections opened after the restart
  std::atomic<long> connect_failures{0};

  const Micros t_start = ServerClock(Conn());
  auto worker = [&](int index) {
    std::mt19937_64 rng(0xc4a54000u + index);
    std::discrete_distribution<int> pick(
        {limits[0].weight, limits[1].weight, limits[2].weight, limits[3].weight});
    // The notice processor is silenced: libpqxx reports every lost
    // connection on stderr, and the test counts them instead.
    std::unique_ptr<pqxx::connection> conn;
    std::unique_ptr<pqxx::quiet_errorhandler> quiet;
    int conn_phase = 0;
    while (!stop.load()) {
      if (!conn) {
        try {
          conn_phase = phase.load();
          conn = ConnectTo(g_db);
          quiet = std::make_unique<pqxx::quiet_errorhandler>(*conn);
          conn->prepare("limit", sql);
        } catch (const std::exception&) {
          quiet.reset();
          conn.reset();
          ++connect_failures;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
      }
      const int k = pick(rng);
      CallRecord rec{k, phase.load(), Outcome::kFailed, ""};
      bool answered = false, ok = false, committing = false;
      try {
        pqxx::work tx(*conn);
        pqxx::row row = tx.exec_prepared1("limit", limits[k].name, limits[k].key, limits[k].config);
        answered = true;
        ok = row[0].as<bool>();
        if (ok) rec.xid = row[1].as<std::string>();
        if (!ok && k == kA && rec.phase == 2) ++refused_after_restart_a;
        if (ok && std::uniform_real_distribution<double>(0, 1)(rng) < 0.10) {
          tx.abort();
          rec.outcome = Outcome::kRolledBack;
        } else {
          committing = true;
          tx.commit();
          rec.outcome = ok ? Outcome::kCommitted : Outcome::kRefused;
          if (ok) ++known[k];
        }
      } catch (const std::exception& e) {
        // Not committed unless the COMMIT itself got no answer.
        rec.outcome = committing && ok  ? Outcome::kUnknown
                      : answered && !ok ? Outcome::kRefused
                                        : Outcome::kFailed;
        if (conn_phase == 2 && unexpected[index].size() < 5) unexpected[index].push_back(e.what());
        quiet.reset();
        conn.reset();
      }
      records[index].push_back(rec);
    }
  };

  std::vector<std::thread> pool;
  const auto t0 = Clock::now();
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker, i);
  // The crash: once a is half used and c exhausted (as far as the client
  // knows). Events, not durations, end the phases, so a slow or loaded
  // machine only makes them longer; the 120 s caps only keep a hang from
  // blocking forever.
  while (Clock::now() - t0 < std::chrono::seconds(120) &&
         (known[kA].load() < 500 || known[kC].load() < static_cast<long>(limits[kC].capacity)))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const long known_a_at_crash = known[kA].load(), known_c_at_crash = known[kC].load();
  const Micros server_before_crash = ServerClock(Conn());
  const auto t_crash = Clock::now();
  phase = 1;
  const int stop_rc = ClusterCtl("stop-immediate");
  const auto t_stopped = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // clients fail to connect meanwhile
  const int start_rc = ClusterCtl("start");
  const auto t_restarted = Clock::now();
  phase = 2;
  // After the restart: until a is refused (exhausted across the crash) and at
  // least 1 s has passed (or the 120 s cap).
  while (Clock::now() - t_restarted < std::chrono::seconds(120) &&
         (refused_after_restart_a.load() == 0 || Clock::now() - t_restarted < std::chrono::seconds(1)))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop = true;
  for (auto& thread : pool) thread.join();
  EXPECT_EQ(stop_rc, 0) << "cluster-ctl.sh stop-immediate failed";
  ASSERT_EQ(start_rc, 0) << "cluster-ctl.sh start failed";

  auto conn = ConnectTo(g_db);
  const Micros t_end = ServerClock(*conn);
  ASSERT_LT(static_cast<double>(t_end - t_start) / kMicrosPerSecond, 60) << "the server's clock jumped";

  // The first transaction id after crash recovery: the next_xid of the
  // end-of-recovery checkpoint (the server accepts connections only after it;
  // no later checkpoint is due within checkpoint_timeout and max_wal_size).
  const Checkpoint checkpoint = LatestCheckpoint(*conn);
  ASSERT_GE(checkpoint.time_s, server_before_crash / kMicrosPerSecond - 1)
      << "the latest checkpoint is not the end-of-recovery one";
  const std::uint64_t recovered_next_xid = checkpoint.next_xid;
  std::set<std::string> xids_after_restart;
  for (const auto& worker_records : records)
    for (const CallRecord& rec : worker_records)
      if (rec.phase >= 1 && !rec.xid.empty()) xids_after_restart.insert(rec.xid);

  // Tally the client's log.
  struct Tally {
    long known = 0, known_before_crash = 0, unknown = 0, unknown_committed = 0, unknown_aborted = 0;
    long unknown_lost = 0, unknown_xid_reused = 0;
    long granted_after_restart = 0, refused_after_restart = 0, committed_after_restart = 0;
    std::vector<std::string> unresolved;
  };
  std::vector<Tally> tally(limits.size());
  long transactions = 0, failed = 0, rolled_back = 0;
  std::vector<std::string> errors_after_restart;
  {
    pqxx::nontransaction tx(*conn);
    for (int i = 0; i < threads; ++i) {
      for (const auto& message : unexpected[i]) errors_after_restart.push_back(message);
      for (const CallRecord& rec : records[i]) {
        Tally& t = tally[rec.limit];
        ++transactions;
        failed += rec.outcome == Outcome::kFailed;
        rolled_back += rec.outcome == Outcome::kRolledBack;
        if (rec.outcome == Outcome::kCommitted) {
          ++t.known;
          t.known_before_crash += rec.phase == 0;
          t.committed_after_restart += rec.phase == 2;
        }
        if (rec.phase == 2 && (rec.outcome == Outcome::kCommitted || rec.outcome == Outcome::kRolledBack ||
                               rec.outcome == Outcome::kUnknown))
          ++t.granted_after_restart;
        if (rec.phase == 2 && rec.outcome == Outcome::kRefused) ++t.refused_after_restart;
        if (rec.outcome == Outcome::kUnknown) {
          ++t.unknown;
          // An xid the recovered WAL never mentions was handed out again
          // after the restart: pg_xact_status would report on that other
          // transaction.
          if (std::stoull(rec.xid) >= recovered_next_xid) {
            ++t.unknown_lost;
            t.unknown_xid_reused += xids_after_restart.count(rec.xid) > 0;
            continue;
          }
          std::string status =
              tx.exec_params1("SELECT coalesce(pg_xact_status($1::xid8), 'NULL')", rec.xid)[0]
                  .as<std::string>();
          if (status == "committed") {
            ++t.unknown_committed;
          } else if (status == "aborted") {
            ++t.unknown_aborted;
          } else {
            t.unresolved.push_back("xid " + rec.xid + ": " + status);
          }
        }
      }
    }
  }

  const double crash_s = Seconds(t_crash - t0), down_s = Seconds(t_restarted - t_crash),
               stop_s = Seconds(t_stopped - t_crash), run_s = Seconds(Clock::now() - t0);
  PrintMeasure(
      "crash:",
      Format("at %.3f s (client saw a %ld/1000, c %ld/20 committed), stop -m immediate %.3f s, down "
             "(stop + 0.3 s + start -w with recovery) %.3f s; %ld txns (%ld failed, %ld rolled back), "
             "%ld failed connects, run %.3f s",
             crash_s, known_a_at_crash, known_c_at_crash, stop_s, down_s, transactions, failed, rolled_back,
             connect_failures.load(), run_s));

  EXPECT_TRUE(errors_after_restart.empty())
      << "errors on connections opened after the restart:" << Describe(errors_after_restart);
  pqxx::work tx(*conn);
  std::vector<double> committed_grants(limits.size());
  for (size_t k = 0; k < limits.size(); ++k) {
    const CrashLimit& limit = limits[k];
    const Tally& t = tally[k];
    SCOPED_TRACE(std::string("limit ") + limit.label);
    auto [stored, rows] = StoredTotal(tx, limit.name, limit.key);
    const double consumed = limit.capacity - stored;
    const double refill =
        limit.capacity * static_cast<double>(t_end - t_start) / kMicrosPerSecond / kPeriodSeconds;
    ASSERT_LT(refill, 0.5) << "the run took too long for the exact check";
    const double n = std::ceil(consumed - 1e-6);
    committed_grants[k] = n;
    PrintMeasure(
        (std::string("crash, limit ") + limit.label + ":").c_str(),
        Format("capacity %.0f, stored %.9g in %ld rows -> %.0f committed grants (refill <= %.2g); client: "
               "%ld known (%ld before the crash), %ld unknown (%ld committed, %ld aborted, %ld not in the "
               "recovered "
               "WAL, %ld of whose xids were reused after the restart); after the restart %ld committed, %ld "
               "refused",
               limit.capacity, stored, rows, n, refill, t.known, t.known_before_crash, t.unknown,
               t.unknown_committed, t.unknown_aborted, t.unknown_lost, t.unknown_xid_reused,
               t.committed_after_restart, t.refused_after_restart));
    ASSERT_GT(rows, 0) << "the limit's state is gone";
    EXPECT_LE(n, consumed + refill + 1e-6)
        << "the stored value " << stored << " is no whole number of grants";
    EXPECT_GE(n, static_cast<double>(t.known)) << "committed admissions were lost in the crash";
    EXPECT_LE(n, static_cast<double>(t.known + t.unknown))
        << "more consumed than the client could have committed";
    EXPECT_TRUE(t.unresolved.empty()) << Describe(t.unresolved);
    EXPECT_EQ(n, static_cast<double>(t.known + t.unknown_committed))
        << "the state disagrees with the transactions pg_xact_status says committed";
    EXPECT_LE(n, limit.capacity) << "over-admitted";
    EXPECT_GE(stored, 0.0);
  }
  // c was exhausted before the crash and stays so.
  EXPECT_EQ(tally[kC].known_before_crash, static_cast<long>(limits[kC].capacity))
      << "c was not exhausted before the crash within the 120 s cap";
  EXPECT_EQ(tally[kC].granted_after_restart, 0) << "c, exhausted before the crash, granted after the restart";
  EXPECT_GT(tally[kC].refused_after_restart, 0);
  // a, b and global were consumed on both sides of the crash; a was
  // exhausted after it.
  for (int k : {kA, kB, kGlobal}) {
    EXPECT_GT(tally[k].known_before_crash, 0) << limits[k].label << " was not consumed before the crash";
    EXPECT_GT(tally[k].committed_after_restart, 0)
        << limits[k].label << " was not consumed after the restart";
  }
  ASSERT_GT(tally[kA].refused_after_restart, 0)
      << "a was not exhausted after the restart within the 120 s cap";
  EXPECT_EQ(committed_grants[kA], limits[kA].capacity);
  long after_restart = 0;
  for (const Tally& t : tally) after_restart += t.committed_after_restart + t.refused_after_restart;
  EXPECT_GT(after_restart, 0) << "no call succeeded after the restart";

  // And the other functions, in a new connection.
  const std::string fresh = Name("crash.after_restart");
  tx.exec_params1("SELECT " + Fn("ratelimit_define") + "($1, $2::jsonb)", fresh, SlowBucket(2));
  EXPECT_TRUE(tx.exec_params1("SELECT ok FROM " + Fn("ratelimit_limit") + "($1, 'k')", fresh)[0].as<bool>());
  EXPECT_TRUE(tx.exec_params1("SELECT ok FROM " + Fn("ratelimit_check") + "($1, 'k')", fresh)[0].as<bool>());
  EXPECT_TRUE(tx.exec_params1("SELECT ok FROM " + Fn("ratelimit_limit") + "($1, 'k')", fresh)[0].as<bool>());
  EXPECT_FALSE(tx.exec_params1("SELECT ok FROM " + Fn("ratelimit_limit") + "($1, 'k')", fresh)[0].as<bool>());
  tx.commit();
}

// 3. statement_timeout and lock_timeout firing while a call waits for a row
// lock that another transaction (the holder) has: on a key whose row the
// holder creates (the waiter's INSERT ... ON CONFLICT waits), on an existing
// row (UPDATE / SELECT ... FOR UPDATE waits), and on a limit of 2 shards
// whose rows the holder takes both of (count 6 > one shard's 5), new and
// existing (the waiter's SKIP LOCKED finds no free shard and waits).
//
// The waiter's transaction first takes 2 tokens of another limit, then:
//   - with a savepoint: the call fails with the timeout's SQLSTATE (57014 /
//     55P03) after waiting (seen in pg_stat_activity as a Lock wait), ROLLBACK
//     TO SAVEPOINT recovers the transaction (the SET LOCAL timeout undone
//     with it), a further call succeeds and the transaction commits: the 2 + 1
//     tokens of the other limit stay consumed;
//   - without: the call fails the same way, the transaction is aborted (25P02
//     on the next statement), ROLLBACK works, and its 4 tokens of the other
//     limit return.
// Nothing is half-written: after the holder commits, the held limit's rows
// are bit for bit what the holder's transaction saw of its own writes, and
// the totals are exactly the committed consumption.
struct TimeoutCase {
  const char* setting;
  const char* sqlstate;
  bool existing;
  int shards;
};

void PrintTo(const TimeoutCase& c, std::ostream* os) {
  *os << c.setting << ", " << (c.existing ? "existing" : "new") << " row, " << c.shards << " shard(s)";
}

class LockWaitTimeoutTest : public FaultsTest, public ::testing::WithParamInterface<TimeoutCase> {};

TEST_P(LockWaitTimeoutTest, CleanErrorAndNothingHalfWritten) {
  const TimeoutCase c = GetParam();
  const std::string prefix =
      Name(Format("timeout.%s.%s.%d.", c.setting, c.existing ? "existing" : "new", c.shards));
  const std::string held = prefix + "held", other = prefix + "other";
  const char* held_key = c.shards > 1 ? nullptr : "held";
  const std::string held_config = LongWindow(10, c.shards), other_config = LongWindow(10);
  const double before = c.existing ? 2 : 0, holder_count = c.shards > 1 ? 6 : 3;
  if (c.existing) {
    pqxx::work tx(Conn());
    ASSERT_TRUE(Limit(tx, held, held_key, held_config, before).ok);
    tx.commit();
  }

  auto holder = ConnectTo(g_db);
  pqxx::work holder_tx(*holder);
  ASSERT_TRUE(Limit(holder_tx, held, held_key, held_config, holder_count).ok);
  const std::vector<std::string> holder_view = StateRows(holder_tx, held);

  auto waiter = ConnectTo(g_db);
  const int waiter_pid = waiter->backendpid();
  auto probe = ConnectTo(g_db);
  const std::string set_timeout = std::string("SET LOCAL ") + c.setting + " = '300ms'";

  // The call that waits for the holder; returns the SQLSTATE it failed with.
  auto call_held = [&](pqxx::transaction_base& tx, bool expect_wait_seen) {
    const auto t0 = Clock::now();
    auto call = std::async(std::launch::async, [&]() -> std::string {
      try {
        Limit(tx, held, held_key, held_config, 1);
        return "no error";
      } catch (const pqxx::sql_error& e) {
        return e.sqlstate();
      }
    });
    if (expect_wait_seen) {
      EXPECT_TRUE(
          WaitForBackend(*probe, waiter_pid, "wait_event_type = 'Lock'", std::chrono::milliseconds(280)))
          << "the call did not wait for the holder's row lock";
    }
    EXPECT_EQ(call.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    std::string sqlstate = call.get();
    const double waited = Seconds(Clock::now() - t0);
    EXPECT_GE(waited, 0.25) << "failed before the timeout";
    return std::make_pair(sqlstate, waited);
  };

  double waited_savepoint = 0, waited_abort = 0;
  {
    pqxx::work tx(*waiter);
    ASSERT_TRUE(Limit(tx, other, "k", other_config, 2).ok);
    tx.exec0("SAVEPOINT before_call");
    tx.exec0(set_timeout);
    auto [sqlstate, waited] = call_held(tx, true);
    waited_savepoint = waited;
    EXPECT_EQ(sqlstate, c.sqlstate);
    tx.exec0("ROLLBACK TO SAVEPOINT before_call");
    EXPECT_EQ(tx.exec1(std::string("SHOW ") + c.setting)[0].as<std::string>(),
              std::string(c.setting) == "statement_timeout" ? "20s" : "0")
        << "the SET LOCAL after the savepoint was not undone";
    EXPECT_TRUE(Limit(tx, other, "k", other_config, 1).ok);
    tx.commit();
  }
  {
    pqxx::work tx(*waiter);
    ASSERT_TRUE(Limit(tx, other, "k", other_config, 4).ok);
    tx.exec0(set_timeout);
    auto [sqlstate, waited] = call_held(tx, false);
    waited_abort = waited;
    EXPECT_EQ(sqlstate, c.sqlstate);
    try {
      tx.exec("SELECT 1");
      ADD_FAILURE() << "the transaction went on after the error";
    } catch (const pqxx::sql_error& e) {
      EXPECT_EQ(e.sqlstate(), "25P02");
    }
    tx.abort();
  }
  {
    // The waiter's backend still works, and sees only the committed 3 tokens of `other`.
    pqxx::work tx(*waiter);
    EXPECT_EQ(Available(tx, other, "k", other_config), 7);
  }
  holder_tx.commit();

  {
    pqxx::work tx(Conn());
    EXPECT_EQ(StateRows(tx, held), holder_view)
        << "the holder's rows, as it saw them before committing:" << Describe(holder_view);
    auto [held_total, held_rows] = StoredTotal(tx, held, held_key);
    EXPECT_EQ(held_total, 10 * 1.0 - before - holder_count) << "held: stored " << held_total;
    EXPECT_EQ(held_rows, c.shards);
    EXPECT_EQ(StoredTotal(tx, other, "k").first, 7);
  }
  {
    // Now the waiter gets the held limit's tokens without waiting.
    pqxx::work tx(*waiter);
    tx.exec0("SET LOCAL lock_timeout = '2s'");
    EXPECT_TRUE(Limit(tx, held, held_key, held_config, 1).ok);
    tx.commit();
  }
  PrintMeasure(
      Format("timeout %s, %s, %d shard(s):", c.setting, c.existing ? "existing" : "new", c.shards).c_str(),
      Format("failed after %.3f s (savepoint) and %.3f s (transaction)", waited_savepoint, waited_abort));
}

INSTANTIATE_TEST_SUITE_P(Timeouts, LockWaitTimeoutTest,
                         ::testing::Values(TimeoutCase{"statement_timeout", "57014", false, 1},
                                           TimeoutCase{"statement_timeout", "57014", true, 1},
                                           TimeoutCase{"statement_timeout", "57014", false, 2},
                                           TimeoutCase{"statement_timeout", "57014", true, 2},
                                           TimeoutCase{"lock_timeout", "55P03", false, 1},
                                           TimeoutCase{"lock_timeout", "55P03", true, 1},
                                           TimeoutCase{"lock_timeout", "55P03", false, 2},
                                           TimeoutCase{"lock_timeout", "55P03", true, 2}),
                         [](const ::testing::TestParamInfo<TimeoutCase>& info) {
                           return std::string(info.param.setting) +
                                  (info.param.existing ? "_existing" : "_new") +
                                  (info.param.shards > 1 ? "_sharded" : "");
                         });

// 4. DROP EXTENSION and CREATE EXTENSION again, in a database of its own,
// with three connections: A runs the DDL, B called the functions before
// (its backend kept prepared plans on the old tables) and C connects after.
//   - A DROP EXTENSION rolled back changes nothing: state and definitions
//     still there, in A and B.
//   - After DROP EXTENSION the functions are gone (42883) and so is the
//     state (the tables are gone).
//   - After CREATE EXTENSION the state is empty (limits are full), the
//     definitions are gone (42704 without a config, also in B, whose backend
//     had read the definition before), and the functions work in A, B and C,
//     each seeing the others' commits and definitions.
//   - A definition changed after the re-create reaches B, which had read it
//     (B follows the new definition table, not the dropped one).
//   - The same with the extension re-created in another schema, and then
//     back in public: the backends follow the tables to the new schema.
TEST(ExtensionLifecycleTest, DropAndRecreate) {
  const std::string db = CreateRunDatabase("lifecycle");
  CreateExtension(db);
  auto a = ConnectTo(db), b = ConnectTo(db);
  const std::string name = "lifecycle", config = SlowBucket(5);

  auto call = [&](pqxx::connection& conn, const std::string& schema, const char* key,
                  const std::optional<std::string>& cfg) {
    pqxx::work tx(conn);
    pqxx::row row =
        cfg ? tx.exec_params1("SELECT ok, remaining FROM " + schema + ".ratelimit_limit($1, $2, $3::jsonb)",
                              name, key, *cfg)
            : tx.exec_params1("SELECT ok, remaining FROM " + schema + ".ratelimit_limit($1, $2)", name, key);
    tx.commit();
    return CallResult{row[0].as<bool>(), row[1].as<double>()};
  };
  auto sqlstate_of = [&](pqxx::connection& conn, const std::string& sql) -> std::string {
    try {
      pqxx::work tx(conn);
      tx.exec(sql);
      tx.commit();
      return "no error";
    } catch (const pqxx::sql_error& e) {
      return e.sqlstate();
    }
  };
  auto ddl = [&](const std::string& sql) {
    pqxx::nontransaction tx(*a);
    tx.exec0(sql);
  };
  auto define = [&](pqxx::connection& conn, const std::string& schema, const std::string& cfg) {
    pqxx::work tx(conn);
    tx.exec_params1("SELECT " + schema + ".ratelimit_define($1, $2::jsonb)", name, cfg);
    tx.commit();
  };
  auto count_rows = [&](pqxx::connection& conn, const std::string& schema) {
    pqxx::nontransaction tx(conn);
    return tx.exec1("SELECT count(*) FROM " + schema + ".ratelimit_state")[0].as<long>();
  };

  {
    pqxx::work tx(*a);
    tx.exec_params1("SELECT public.ratelimit_define($1, $2::jsonb)", name, config);
    tx.commit();
  }
  EXPECT_NEAR(call(*a, "public", "k", std::nullopt).remaining, 4, 1e-6);
  EXPECT_NEAR(call(*b, "public", "k", std::nullopt).remaining, 3, 1e-6);

  {
    pqxx::work tx(*a);
    tx.exec0("DROP EXTENSION ratelimit");
    tx.abort();
  }
  EXPECT_NEAR(call(*a, "public", "k", std::nullopt).remaining, 2, 1e-6) << "after a rolled-back DROP";
  EXPECT_NEAR(call(*b, "public", "k", std::nullopt).remaining, 1, 1e-6) << "after a rolled-back DROP";

  ddl("DROP EXTENSION ratelimit");
  {
    pqxx::nontransaction tx(*a);
    EXPECT_TRUE(tx.exec1("SELECT to_regclass('public.ratelimit_state') IS NULL")[0].as<bool>());
    EXPECT_TRUE(tx.exec1("SELECT to_regclass('public.ratelimit_definition') IS NULL")[0].as<bool>());
  }
  EXPECT_EQ(sqlstate_of(*a, "SELECT public.ratelimit_limit('lifecycle', 'k')"), "42883");
  EXPECT_EQ(sqlstate_of(*b, "SELECT public.ratelimit_limit('lifecycle', 'k')"), "42883");

  ddl("CREATE EXTENSION ratelimit SCHEMA public");
  EXPECT_EQ(sqlstate_of(*a, "SELECT public.ratelimit_limit('lifecycle', 'k')"), "42704")
      << "the definition survived DROP EXTENSION";
  EXPECT_EQ(sqlstate_of(*b, "SELECT public.ratelimit_limit('lifecycle', 'k')"), "42704")
      << "B's backend still knows the definition it read before DROP EXTENSION";
  {
    pqxx::work tx(*a);
    EXPECT_EQ(Available(tx, name, "k", config), 5) << "the state survived DROP EXTENSION";
  }
  EXPECT_NEAR(call(*a, "public", "k", config).remaining, 4, 1e-6);
  EXPECT_NEAR(call(*b, "public", "k", config).remaining, 3, 1e-6)
      << "B's backend, which called before the DROP";
  {
    auto c = ConnectTo(db);
    EXPECT_NEAR(call(*c, "public", "k", config).remaining, 2, 1e-6) << "a new backend";
    pqxx::work tx(*c);
    tx.exec_params1("SELECT public.ratelimit_define($1, $2::jsonb)", name, config);
    tx.commit();
  }
  EXPECT_NEAR(call(*a, "public", "k", std::nullopt).remaining, 1, 1e-6)
      << "a definition made by another backend";
  EXPECT_NEAR(call(*b, "public", "k", std::nullopt).remaining, 0, 1e-6)
      << "a definition made by another backend";
  // B now holds the new definition; a change to it reaches B (B follows the
  // new definition table, not the dropped one).
  define(*a, "public", SlowBucket(50));
  EXPECT_NEAR(call(*b, "public", "k2", std::nullopt).remaining, 49, 1e-6) << "B kept the old definition";
  EXPECT_EQ(count_rows(*a, "public"), 2);

  // Another schema.
  ddl("DROP EXTENSION ratelimit");
  ddl("CREATE SCHEMA rl_elsewhere");
  ddl("CREATE EXTENSION ratelimit SCHEMA rl_elsewhere");
  EXPECT_NEAR(call(*a, "rl_elsewhere", "k", config).remaining, 4, 1e-6);
  EXPECT_NEAR(call(*b, "rl_elsewhere", "k", config).remaining, 3, 1e-6);
  EXPECT_EQ(count_rows(*a, "rl_elsewhere"), 1);
  define(*a, "rl_elsewhere", config);
  EXPECT_NEAR(call(*b, "rl_elsewhere", "k", std::nullopt).remaining, 2, 1e-6);
  // And back.
  ddl("DROP EXTENSION ratelimit");
  ddl("DROP SCHEMA rl_elsewhere");
  ddl("CREATE EXTENSION ratelimit SCHEMA public");
  EXPECT_EQ(sqlstate_of(*b, "SELECT public.ratelimit_limit('lifecycle', 'k')"), "42704")
      << "B's backend still knows the definition of the dropped schema";
  EXPECT_NEAR(call(*b, "public", "k", config).remaining, 4, 1e-6);
  EXPECT_NEAR(call(*a, "public", "k", config).remaining, 3, 1e-6);
  EXPECT_EQ(count_rows(*a, "public"), 1);
}

// 5. pg_dump -Fc of a database that uses the extension, pg_restore into a new
// database. The source has definitions (one sharded, {"shards": 4}) and state
// on several keys: a NULL key, '' and a non-ASCII key, an exhausted key, a
// sharded limit, a fixed and a sliding window, fractional counts.
//   - The restored state rows (name, key, shard, value, ts, prev, idle_at)
//     and definitions are identical to the source's, bit for bit.
//   - Under one frozen clock (ratelimit.now), ratelimit_value and
//     ratelimit_check answer the same on both databases, and the same
//     sequence of ratelimit_limit calls gets the same answers (an exhausted
//     key stays exhausted, a partly used one grants what is left).
//   - Limits defined only in the dump work without a config on the restored
//     database.
TEST(DumpRestoreTest, StateAndDefinitionsSurvive) {
  REQUIRE_CLUSTER_DIR();
  const std::string src = CreateRunDatabase("dump_src");
  CreateExtension(src);
  auto s = ConnectTo(src);
  const std::string defined = "dump.defined", sharded = "dump.sharded", window = "dump.window",
                    sliding = "dump.sliding";
  const std::string defined_config = SlowBucket(5), sharded_config = SlowBucket(40, 4),
                    window_config = LongWindow(3), sliding_config = LongSlidingWindow(4);
  // (name, key, config or "" for the definition): every limit the test calls.
  struct Use {
    std::string name;
    const char* key;
    std::string config;
  };
  const std::vector<Use> uses = {
      {defined, "alice", ""},    {defined, "bob", ""},         {defined, nullptr, ""},
      {defined, "", ""},         {defined, "ключ ✓", ""},      {defined, "never used", ""},
      {sharded, nullptr, ""},    {window, "w", window_config}, {sliding, "s", sliding_config},
      {defined, "fraction", ""},
  };
  auto limit = [&](pqxx::transaction_base& tx, const Use& u, double count) {
    pqxx::row row = u.config.empty()
                        ? tx.exec_params1("SELECT ok, remaining, retry_after, reset_after FROM " +
                                              Fn("ratelimit_limit") + "($1, $2, count => $3)",
                                          u.name, u.key, count)
                        : tx.exec_params1("SELECT ok, remaining, retry_after, reset_after FROM " +
                                              Fn("ratelimit_limit") + "($1, $2, $3::jsonb, $4)",
                                          u.name, u.key, u.config, count);
    return row;
  };
  {
    pqxx::work tx(*s);
    tx.exec_params1("SELECT " + Fn("ratelimit_define") + "($1, $2::jsonb)", defined, defined_config);
    tx.exec_params1("SELECT " + Fn("ratelimit_define") + "($1, $2::jsonb)", sharded, sharded_config);
    EXPECT_TRUE(limit(tx, uses[0], 2)[0].as<bool>());  // alice: 3 left
    EXPECT_TRUE(limit(tx, uses[1], 5)[0].as<bool>());  // bob: exhausted
    EXPECT_TRUE(limit(tx, uses[2], 1)[0].as<bool>());  // NULL key
    EXPECT_TRUE(limit(tx, uses[3], 4)[0].as<bool>());  // ''
    EXPECT_TRUE(limit(tx, uses[4], 1)[0].as<bool>());
    for (int i = 0; i < 7; ++i) EXPECT_TRUE(limit(tx, uses[6], 3)[0].as<bool>());  // sharded: 21 of 40
    EXPECT_TRUE(limit(tx, uses[7], 3)[0].as<bool>());                              // window: exhausted
    EXPECT_TRUE(limit(tx, uses[8], 2)[0].as<bool>());
    EXPECT_TRUE(limit(tx, uses[9], 0.1)[0].as<bool>());
    EXPECT_TRUE(limit(tx, uses[9], 1.7)[0].as<bool>());
    // A per-key override (0.5.0): bob's row is carried into it.
    tx.exec_params1("SELECT " + Fn("ratelimit_override") + "($1, 'bob', $2::jsonb)", defined, SlowBucket(7));
    tx.commit();
  }
  const std::vector<std::string> src_rows = StateRows(*s, "");
  // 8 keys, the sharded one with a row for each shard its calls locked (two
  // random candidates a call: 1 to 4 rows).
  ASSERT_GE(src_rows.size(), 9u) << Describe(src_rows);
  ASSERT_LE(src_rows.size(), 12u) << Describe(src_rows);
  const std::string definitions_sql =
      "SELECT name || ' ' || config::text FROM public.ratelimit_definition ORDER BY name";
  auto definitions = [&](pqxx::connection& conn) {
    pqxx::nontransaction tx(conn);
    std::vector<std::string> out;
    for (const auto& row : tx.exec(definitions_sql)) out.push_back(row[0].as<std::string>());
    return out;
  };
  const std::vector<std::string> src_definitions = definitions(*s);
  ASSERT_EQ(src_definitions.size(), 2u);

  const std::string dump = ClusterDir() + "/faults_" + g_run_id + ".dump";
  const auto t0 = Clock::now();
  ASSERT_EQ(ClusterCtl("dump " + ShellQuote(src) + " " + ShellQuote(dump)), 0) << "pg_dump failed";
  const std::string dst = CreateRunDatabase("dump_dst");
  const int restore_rc = ClusterCtl("restore " + ShellQuote(dst) + " " + ShellQuote(dump));
  const double dump_restore_s = Seconds(Clock::now() - t0);
  std::remove(dump.c_str());
  ASSERT_EQ(restore_rc, 0) << "pg_restore failed";

  auto d = ConnectTo(dst);
  EXPECT_EQ(StateRows(*d, ""), src_rows) << "source:" << Describe(src_rows);
  EXPECT_EQ(definitions(*d), src_definitions);
  {
    const std::string overrides_sql =
        "SELECT string_agg(name || ' ' || key || ' ' || config::text, ', ' ORDER BY name, key) FROM "
        "public.ratelimit_override";
    pqxx::nontransaction tx(*d);
    pqxx::nontransaction stx(*s);
    EXPECT_EQ(tx.exec1(overrides_sql)[0].as<std::string>(""),
              stx.exec1(overrides_sql)[0].as<std::string>(""));
    EXPECT_NE(stx.exec1(overrides_sql)[0].as<std::string>(""), "") << "the override is in the source";
  }
  {
    pqxx::nontransaction tx(*d);
    pqxx::nontransaction stx(*s);
    const std::string version = "SELECT extversion FROM pg_extension WHERE extname = 'ratelimit'";
    EXPECT_EQ(tx.exec1(version)[0].as<std::string>(), stx.exec1(version)[0].as<std::string>());
  }

  // One frozen clock for both: a second after every stored ts.
  std::string frozen;
  {
    pqxx::nontransaction tx(*s);
    frozen = tx.exec1("SELECT (max(ts) + interval '1 second')::text FROM public.ratelimit_state")[0]
                 .as<std::string>();
  }
  for (auto* conn : {s.get(), d.get()}) {
    pqxx::nontransaction tx(*conn);
    tx.exec_params1("SELECT set_config('ratelimit.now', $1, false)", frozen);
  }
  auto answers = [&](pqxx::connection& conn) {
    std::vector<std::string> out;
    pqxx::work tx(conn);
    for (const Use& u : uses) {
      const std::string cfg = u.config.empty() ? "NULL" : tx.quote(u.config) + "::jsonb";
      pqxx::row v = tx.exec_params1(
          "SELECT format('%s|%s', value, ts) FROM " + Fn("ratelimit_value") + "($1, $2, " + cfg + ")", u.name,
          u.key);
      pqxx::row c = tx.exec_params1(
          "SELECT format('%s|%s|%s|%s|%s', ok, retry_after, retry_at, remaining, "
          "reset_after) FROM " +
              Fn("ratelimit_check") + "($1, $2, " + cfg + ")",
          u.name, u.key);
      out.push_back(u.name + "/" + (u.key ? u.key : "NULL") + ": value " + v[0].as<std::string>() +
                    "; check " + c[0].as<std::string>());
    }
    // Consume: everything that is left on the non-sharded keys, one more
    // each (refused), and 1 on the sharded limit (its shard choice is
    // random, so only ok is compared).
    for (const Use& u : uses) {
      if (u.name == sharded) {
        out.push_back("sharded limit ok " + limit(tx, u, 1)[0].as<std::string>());
        continue;
      }
      for (int i = 0; i < 2; ++i) {
        pqxx::row left =
            tx.exec_params1("SELECT value FROM " + Fn("ratelimit_value") + "($1, $2, " +
                                (u.config.empty() ? "NULL" : tx.quote(u.config) + "::jsonb") + ")",
                            u.name, u.key);
        const double count = i == 0 ? std::max(1.0, std::floor(left[0].as<double>())) : 1.0;
        pqxx::row r = limit(tx, u, count);
        out.push_back(u.name + "/" + (u.key ? u.key : "NULL") + Format(" take %g: ", count) +
                      r[0].as<std::string>() + " " + r[1].c_str() + " " + r[2].c_str() + " " + r[3].c_str());
      }
    }
    tx.commit();
    return out;
  };
  const std::vector<std::string> src_answers = answers(*s), dst_answers = answers(*d);
  EXPECT_EQ(dst_answers, src_answers)
      << "source:" << Describe(src_answers) << "\nrestored:" << Describe(dst_answers);
  // Spot checks of what those answers say.
  {
    pqxx::work tx(*d);
    tx.exec_params1("SELECT set_config('ratelimit.now', $1, true)", frozen);
    EXPECT_FALSE(limit(tx, uses[1], 1)[0].as<bool>()) << "bob was exhausted in the source";
    EXPECT_FALSE(limit(tx, uses[7], 1)[0].as<bool>()) << "the window was exhausted in the source";
    EXPECT_TRUE(limit(tx, Use{defined, "fresh", ""}, 5)[0].as<bool>()) << "a never-used key is full";
    EXPECT_TRUE(limit(tx, uses[6], 1)[0].as<bool>()) << "the sharded limit works";
  }
  bool alice_granted_rest = false;
  for (const auto& line : dst_answers)
    if (line.rfind(defined + "/alice take 3: t", 0) == 0) alice_granted_rest = true;
  EXPECT_TRUE(alice_granted_rest) << "alice's 3 remaining tokens:" << Describe(dst_answers);
  PrintMeasure("dump/restore:",
               Format("%zu state rows, %zu definitions identical; pg_dump + pg_restore %.3f s",
                      src_rows.size(), src_definitions.size(), dump_restore_s));
}

// Creates this run's main database with the extension, and drops every
// database of the run at the end (best effort).
class FaultsEnvironment : public ServerEnvironment {
  void SetUpServer() override {
    pqxx::connection conn("");
    pqxx::nontransaction tx(conn);
    g_run_id = std::to_string(getpid());
    if (!IsSuperuser(tx)) {
      FAIL() << "faults_test needs a superuser (pg_terminate_backend, ratelimit.now, CREATE DATABASE)";
    }
    g_db = CreateRunDatabase("main");
    CreateExtension(g_db);
  }
};

}  // namespace

int main(int argc, char** argv) {
  // A write to a connection the server closed must fail, not kill the program.
  signal(SIGPIPE, SIG_IGN);
  return client_test::RunAllTests(argc, argv, new FaultsEnvironment, "faults_test");
}
