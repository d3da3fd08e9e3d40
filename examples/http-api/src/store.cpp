#include "store.h"

namespace http_api {
namespace {

// Serialises schema creation between services starting at the same time:
// concurrent CREATE TABLE IF NOT EXISTS of one table can fail on the catalog's
// unique index. Any constant works; this one is "rl-http" in ASCII.
constexpr std::int64_t kSchemaLockId = 0x726c2d68747470;

constexpr char kCreateTables[] = R"(
CREATE TABLE IF NOT EXISTS messages (
  id bigserial PRIMARY KEY,
  user_id text NOT NULL,
  body text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS signups (
  id bigserial PRIMARY KEY,
  email text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS completions (
  id bigserial PRIMARY KEY,
  user_id text NOT NULL,
  tokens int NOT NULL,
  scheduled_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS playground_keys (
  key text PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX IF NOT EXISTS playground_keys_created_at ON playground_keys (created_at))";

// A prepared statement: the name it is prepared under, and its text.
struct Statement {
  const char* name;
  const char* sql;
};

// The limit statements: the verdict and its headers in one round trip. The
// names are kMessagesLimit, kSignupLimit and kCompletionsLimit.
// retry_at goes out through to_json for ISO 8601 whatever the DateStyle.
constexpr Statement kLimitMessage{
    "limit_message",
    "SELECT r.ok, r.retry_after, to_json(r.retry_at) #>> '{}', ratelimit_headers('messages', r) "
    "FROM ratelimit_limit('messages', $1) r"};
constexpr Statement kLimitSignup{
    "limit_signup",
    "SELECT r.ok, r.retry_after, to_json(r.retry_at) #>> '{}', ratelimit_headers('signup', r) "
    "FROM ratelimit_limit('signup') r"};
constexpr Statement kLimitCompletion{
    "limit_completion",
    "SELECT r.ok, r.retry_after, to_json(r.retry_at) #>> '{}', ratelimit_headers('completions', r) "
    "FROM ratelimit_limit('completions', $1, count => $2, reserve => true) r"};

constexpr Statement kInsertMessage{"insert_message",
                                   "INSERT INTO messages (user_id, body) VALUES ($1, $2) RETURNING id"};
// ON CONFLICT instead of catching the unique violation: a repeated email is
// an answer (409), not an error.
constexpr Statement kInsertSignup{
    "insert_signup", "INSERT INTO signups (email) VALUES ($1) ON CONFLICT (email) DO NOTHING RETURNING id"};
constexpr Statement kInsertCompletion{
    "insert_completion",
    "INSERT INTO completions (user_id, tokens, scheduled_at) "
    "VALUES ($1, $2, coalesce($3::timestamptz, now())) RETURNING id, to_json(scheduled_at) #>> '{}'"};

// The arrivals are whole milliseconds after the origin, so that their
// timestamps are exact; the answers' times go back the same way (numeric, exact).
constexpr char kSimulate[] = R"(
SELECT (extract(epoch FROM r.at - o.origin) * 1000)::float8, r.count, r.ok, r.remaining, r.retry_after
FROM (SELECT timestamptz 'epoch' + $3::bigint * interval '1 millisecond' AS origin) o,
LATERAL ratelimit_simulate(
  $1::jsonb,
  ARRAY(SELECT o.origin + a.ms::bigint * interval '1 millisecond'
        FROM jsonb_array_elements_text($2::jsonb) WITH ORDINALITY a(ms, i) ORDER BY a.i),
  ARRAY(SELECT c.n::float8 FROM jsonb_array_elements_text($4::jsonb) WITH ORDINALITY c(n, i) ORDER BY c.i))
  WITH ORDINALITY r(at, count, ok, remaining, retry_after, i)
ORDER BY r.i)";

// clock_timestamp() after the call: the moment the limiter decided, as near
// as SQL can tell.
constexpr char kHitPlayground[] = R"(
SELECT (extract(epoch FROM clock_timestamp()) * 1000 - $3::bigint)::float8, r.ok, r.remaining, r.retry_after,
       ratelimit_headers($4, r, $2::jsonb)
FROM ratelimit_limit($4, $1, $2::jsonb) r)";

// The expired keys' rows go with ratelimit_reset (a row of a limit used
// with a long period is never idle, so ratelimit_cleanup would keep it).
// $1: the limits' names; $2: the lifetime.
constexpr char kPurgePlaygroundKeys[] = R"(
WITH expired AS (
  DELETE FROM playground_keys WHERE created_at < now() - $2::interval RETURNING key)
SELECT count(ratelimit_reset(n.name, e.key))
FROM expired e CROSS JOIN jsonb_array_elements_text($1::jsonb) n(name))";

constexpr Statement kLimitPlaygroundKeys{
    "limit_playground_keys",
    "SELECT r.ok, r.retry_after, to_json(r.retry_at) #>> '{}', ratelimit_headers('playground-keys', r) "
    "FROM ratelimit_limit('playground-keys') r"};

std::optional<double> OptionalDouble(const pqxx::field& field) {
  if (field.is_null()) return std::nullopt;
  return field.as<double>();
}

void Prepare(pqxx::connection& conn, const Statement& statement) {
  conn.prepare(statement.name, statement.sql);
}

Verdict VerdictFromRow(const pqxx::row& row) {
  Verdict verdict;
  verdict.ok = row[0].as<bool>();
  if (!row[1].is_null()) verdict.retry_after = row[1].as<double>();
  if (!row[2].is_null()) verdict.retry_at = row[2].as<std::string>();
  verdict.headers = nlohmann::json::parse(row[3].c_str());
  return verdict;
}

void DefineLimit(pqxx::work& tx, const char* name, const std::string& config) {
  tx.exec_params("SELECT ratelimit_define($1, $2::jsonb)", name, config);
}

}  // namespace

void PrepareDatabase(pqxx::connection& conn, const Options& options) {
  pqxx::work tx(conn);
  tx.exec_params("SELECT pg_advisory_xact_lock($1)", kSchemaLockId);
  tx.exec(kCreateTables);
  if (options.limiter) {
    DefineLimit(tx, kMessagesLimit, options.messages_limit);
    DefineLimit(tx, kSignupLimit, options.signup_limit);
    DefineLimit(tx, kCompletionsLimit, options.completions_limit);
    DefineLimit(tx, kPlaygroundKeysLimit, options.playground_limit);
  }
  tx.commit();
}

void PrepareStatements(pqxx::connection& conn, bool limiter) {
  if (limiter) {
    Prepare(conn, kLimitMessage);
    Prepare(conn, kLimitSignup);
    Prepare(conn, kLimitCompletion);
    Prepare(conn, kLimitPlaygroundKeys);
  }
  Prepare(conn, kInsertMessage);
  Prepare(conn, kInsertSignup);
  Prepare(conn, kInsertCompletion);
}

Verdict LimitMessage(pqxx::work& tx, const std::string& user) {
  return VerdictFromRow(tx.exec_prepared1(kLimitMessage.name, user));
}

Verdict LimitSignup(pqxx::work& tx) { return VerdictFromRow(tx.exec_prepared1(kLimitSignup.name)); }

Verdict LimitCompletion(pqxx::work& tx, const std::string& user, int tokens) {
  return VerdictFromRow(tx.exec_prepared1(kLimitCompletion.name, user, tokens));
}

std::int64_t InsertMessage(pqxx::work& tx, const std::string& user, const std::string& text) {
  return tx.exec_prepared1(kInsertMessage.name, user, text)[0].as<std::int64_t>();
}

std::optional<std::int64_t> InsertSignup(pqxx::work& tx, const std::string& email) {
  pqxx::result inserted = tx.exec_prepared(kInsertSignup.name, email);
  if (inserted.empty()) return std::nullopt;
  return inserted[0][0].as<std::int64_t>();
}

Completion InsertCompletion(pqxx::work& tx, const std::string& user, int tokens,
                            const std::optional<std::string>& run_at) {
  pqxx::row row = tx.exec_prepared1(kInsertCompletion.name, user, tokens, run_at);
  return Completion{row[0].as<std::int64_t>(), row[1].as<std::string>()};
}

std::vector<SimulatedCall> Simulate(pqxx::work& tx, const std::string& config, const std::string& offsets,
                                    const std::string& counts, std::int64_t origin_ms) {
  std::vector<SimulatedCall> calls;
  for (const pqxx::row& row : tx.exec_params(kSimulate, config, offsets, origin_ms, counts)) {
    calls.push_back(SimulatedCall{row[0].as<double>(), row[1].as<double>(), row[2].as<bool>(),
                                  OptionalDouble(row[3]), OptionalDouble(row[4])});
  }
  return calls;
}

PlaygroundHit HitPlayground(pqxx::work& tx, const char* name, const std::string& key,
                            const std::string& config, std::int64_t origin_ms) {
  pqxx::row row = tx.exec_params1(kHitPlayground, key, config, origin_ms, name);
  return PlaygroundHit{row[0].as<double>(), row[1].as<bool>(), OptionalDouble(row[2]), OptionalDouble(row[3]),
                       nlohmann::json::parse(row[4].c_str())};
}

void PurgeExpiredPlaygroundKeys(pqxx::work& tx) {
  nlohmann::json names = nlohmann::json::array();
  for (const char* name : kPlaygroundLimits) names.push_back(name);
  tx.exec_params1(kPurgePlaygroundKeys, names.dump(), kPlaygroundKeyLifetime);
}

bool AdmitPlaygroundKey(pqxx::work& tx, const std::string& key) {
  return !tx.exec_params(
                "INSERT INTO playground_keys (key) VALUES ($1) ON CONFLICT (key) DO NOTHING RETURNING 1", key)
              .empty();
}

Verdict LimitPlaygroundKeys(pqxx::work& tx) {
  return VerdictFromRow(tx.exec_prepared1(kLimitPlaygroundKeys.name));
}

void Ping(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  tx.exec1("SELECT 1");
}

}  // namespace http_api
