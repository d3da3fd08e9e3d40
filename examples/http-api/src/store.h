// The SQL the service runs: its schema, its limits, and one function per
// prepared statement. Each statement runs in the caller's transaction, so a
// limit call and the insert it guards commit or roll back together.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "options.h"

namespace http_api {

// The limits' names, as ratelimit_define stores them and the RateLimit
// headers show them.
inline constexpr char kMessagesLimit[] = "messages";
inline constexpr char kSignupLimit[] = "signup";
inline constexpr char kCompletionsLimit[] = "completions";
// The playground's limits, one per kind: never defined, each key carries
// its own inline config. Named apart so that the RateLimit headers of a Hit
// tell the three policies apart.
inline constexpr const char* kPlaygroundLimits[] = {"playground-token-bucket", "playground-fixed-window",
                                                    "playground-sliding-window"};
// How many new playground keys the whole service admits (defined at startup
// from Options::playground_limit); a key lives kPlaygroundKeyLifetime.
inline constexpr char kPlaygroundKeysLimit[] = "playground-keys";
inline constexpr char kPlaygroundKeyLifetime[] = "1 hour";

// Creates the tables if missing and, with the limiter, defines the limits
// with the configs of `options`. Safe to run from several processes at once.
void PrepareDatabase(pqxx::connection& conn, const Options& options);

// Prepares the statements below on a new connection (the limit statements
// only with the limiter: without it the extension need not be installed).
void PrepareStatements(pqxx::connection& conn, bool limiter);

// One ratelimit_limit answer and the HTTP headers ratelimit_headers made of it.
struct Verdict {
  bool ok = false;
  std::optional<double> retry_after;    // seconds; set when refused or reserved for later
  std::optional<std::string> retry_at;  // the same moment, ISO 8601
  nlohmann::json headers;               // header name -> value, all strings
};

// Takes one token of the user's message limit.
Verdict LimitMessage(pqxx::work& tx, const std::string& user);

// Takes one token of the global sign-up limit (key NULL).
Verdict LimitSignup(pqxx::work& tx);

// Takes (or reserves, when the bucket is empty) `tokens` of the user's
// completion limit.
Verdict LimitCompletion(pqxx::work& tx, const std::string& user, int tokens);

// The id of the new message.
std::int64_t InsertMessage(pqxx::work& tx, const std::string& user, const std::string& text);

// The id of the new sign-up, or nothing if the email has signed up already.
std::optional<std::int64_t> InsertSignup(pqxx::work& tx, const std::string& email);

struct Completion {
  std::int64_t id = 0;
  std::string scheduled_at;  // ISO 8601
};

// Stores a completion to run at `run_at` (ISO 8601), or now if not given.
Completion InsertCompletion(pqxx::work& tx, const std::string& user, int tokens,
                            const std::optional<std::string>& run_at);

// One answer of ratelimit_simulate, its time given as milliseconds after
// the simulation's origin.
struct SimulatedCall {
  double t = 0;
  double count = 0;
  bool ok = false;
  std::optional<double> remaining;
  std::optional<double> retry_after;
};

// ratelimit_simulate(config, arrivals, counts): `offsets` and `counts` are
// JSON arrays of the same length, each arrival given as whole milliseconds
// after `origin_ms` (since 1970). Not a prepared statement: the function is
// new in the extension's 0.8.0, and the other endpoints work without it.
std::vector<SimulatedCall> Simulate(pqxx::work& tx, const std::string& config, const std::string& offsets,
                                    const std::string& counts, std::int64_t origin_ms);

// A real ratelimit_limit answer for the playground's Hit button, its time
// as milliseconds after `origin_ms`, and its ratelimit_headers.
struct PlaygroundHit {
  double t = 0;
  bool ok = false;
  std::optional<double> remaining;
  std::optional<double> retry_after;
  nlohmann::json headers;  // header name -> value, all strings
};

// ratelimit_limit(name, key, config) in the caller's transaction.
PlaygroundHit HitPlayground(pqxx::work& tx, const char* name, const std::string& key,
                            const std::string& config, std::int64_t origin_ms);

// Forgets the playground keys admitted more than kPlaygroundKeyLifetime ago,
// and resets their limits (kPlaygroundLimits), so that their rows go.
void PurgeExpiredPlaygroundKeys(pqxx::work& tx);

// Records the playground key; true if it is new (then the caller takes one
// token of kPlaygroundKeysLimit for it, in the same transaction).
bool AdmitPlaygroundKey(pqxx::work& tx, const std::string& key);

// Takes one token of kPlaygroundKeysLimit (key NULL: one for the service).
Verdict LimitPlaygroundKeys(pqxx::work& tx);

// Whether the database answers (for GET /healthz).
void Ping(pqxx::connection& conn);

}  // namespace http_api
