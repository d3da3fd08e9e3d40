// The helpers faults.h declares.

#include "faults.h"

#include <thread>

namespace faults {

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
std::string SlowBucket(double capacity, int shards) {
  std::string shard_field = shards > 1 ? Format(R"(, "shards": %d)", shards) : "";
  return Format(R"({"kind": "token bucket", "rate": %.17g, "period": %s, "capacity": %.17g%s})", capacity,
                kPeriod, capacity, shard_field.c_str());
}

// A fixed window of ten years, aligned to 1970 (one started 2019-12-20, the
// next starts 2029-12-17): `capacity` tokens, and no refill during a test.
std::string LongWindow(double capacity, int shards) {
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
                                   const std::string& schema) {
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
                                   const std::string& schema) {
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
                    std::chrono::milliseconds timeout) {
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

}  // namespace faults
