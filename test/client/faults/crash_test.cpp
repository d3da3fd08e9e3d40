// The server crashes under load and restarts: every committed consumption
// survives, the bound holds across it, no repair needed (see faults.h).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "faults.h"

namespace faults {
namespace {

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

}  // namespace
}  // namespace faults
