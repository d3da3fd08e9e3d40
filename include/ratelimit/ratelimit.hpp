// ratelimit: a header-only C++17 client for the ratelimit PostgreSQL extension, over libpqxx (Debian's
// libpqxx-dev 6.4). Every function runs one parameterised statement in the caller's own transaction, so
// what it consumes commits or rolls back with the caller's work.
//
//   #include <ratelimit/ratelimit.hpp>
//
//   pqxx::connection conn("");
//   pqxx::work tx(conn);
//   ratelimit::Options options;
//   options.config = ratelimit::Config::token_bucket(10, std::chrono::minutes(1)).capacity(20).json();
//   ratelimit::Result r = ratelimit::limit(tx, "sendMessage", user_id, options);
//   if (!r.ok) return TooManyRequests(*r.retry_after);  // seconds; nothing was consumed
//   tx.exec_params0("INSERT INTO messages (user_id, body) VALUES ($1, $2)", user_id, body);
//   tx.commit();  // the token is spent only if this commits
//
//   // Or let a refusal abort the transaction (undoing every limit consumed earlier in it):
//   options.throws = true;
//   try {
//     ratelimit::limit(tx, "sendMessage", user_id, options);
//     ...
//   } catch (const ratelimit::RateLimited& e) {  // SQLSTATE PT429; the transaction is aborted
//     return TooManyRequests(e.retry_after());
//   }
//
//   // Several limits, all or nothing, in one call:
//   auto rows = ratelimit::limit_all(tx, {{"perUser", "u42"}, {"perTenant", "t7", std::nullopt, 2}});
//   ratelimit::Summary s = ratelimit::summarize(rows);  // s.ok, s.retry_after
//
// Errors: a refusal with throws = true is ratelimit::RateLimited (a pqxx::sql_error with SQLSTATE PT429);
// every other server error propagates unchanged as libpqxx throws it: pqxx::sql_error and subclasses with
// the extension's SQLSTATE (22023 bad config or count, 22004 NULL argument, 42704 no config). Two libpqxx
// 6.4 quirks: 40001/40P01 (retry the transaction) arrive as pqxx::serialization_failure /
// pqxx::deadlock_detected, which are not sql_errors there, and 42501 (not allowed) as
// pqxx::insufficient_privilege with an empty sqlstate(). A name, key, config or schema containing a NUL
// byte is rejected with std::invalid_argument before anything is sent (PostgreSQL text cannot hold one).
//
// Names and keys are sent as parameters, never spliced into SQL; the extension's schema (default "public",
// see extension_schema()) is quoted with quote_name. A key of std::nullopt is the limit's one global (NULL)
// key, distinct from the empty key "".
#ifndef RATELIMIT_RATELIMIT_HPP
#define RATELIMIT_RATELIMIT_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ratelimit/detail.hpp"

namespace ratelimit {

// The schema the extension is assumed to live in unless an Options or argument says otherwise.
inline constexpr char kDefaultSchema[] = "public";

// The SQLSTATE of a refused request with throws => true.
inline constexpr char kRateLimitedSqlstate[] = "PT429";

// A duration in a config: a std::chrono duration, an interval string ("1 minute"), or milliseconds().
class Duration {
 public:
  template <typename Rep, typename Period>
  Duration(std::chrono::duration<Rep, Period> d)  // NOLINT(google-explicit-constructor): implicit on purpose
      : json_(detail::json_number(std::chrono::duration<double, std::milli>(d).count(), "a duration")) {}
  Duration(const char* interval) : json_(detail::json_string(interval)) {}  // NOLINT: a PostgreSQL interval
  Duration(const std::string& interval) : json_(detail::json_string(interval)) {}  // NOLINT: likewise

  // A number of milliseconds, as the articles write periods.
  static Duration milliseconds(double ms) { return Duration(Json{detail::json_number(ms, "a duration")}); }

  // The JSON value: a number of milliseconds or an interval string.
  const std::string& json() const noexcept { return json_; }

 private:
  struct Json {
    std::string text;
  };
  explicit Duration(Json json) : json_(std::move(json.text)) {}
  std::string json_;
};

// An instant in a config (the window alignment `start`): a system_clock time point, a timestamptz string,
// or milliseconds_since_epoch().
class Instant {
 public:
  template <typename D>
  Instant(std::chrono::time_point<std::chrono::system_clock, D> t)  // NOLINT: implicit on purpose
      : json_(detail::json_number(
            static_cast<double>(
                std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count()) /
                1000.0,
            "an instant")) {}
  Instant(const char* timestamptz) : json_(detail::json_string(timestamptz)) {}  // NOLINT: a timestamptz
  Instant(const std::string& timestamptz) : json_(detail::json_string(timestamptz)) {}  // NOLINT: likewise

  // Milliseconds since 1970-01-01 UTC, as the articles write `start`.
  static Instant milliseconds_since_epoch(double ms) {
    return Instant(Json{detail::json_number(ms, "an instant")});
  }

  // The JSON value: milliseconds since the epoch or a timestamptz string.
  const std::string& json() const noexcept { return json_; }

 private:
  struct Json {
    std::string text;
  };
  explicit Instant(Json json) : json_(std::move(json.text)) {}
  std::string json_;
};

// Builds a limit's config JSON in the articles' shape:
// {"kind", "rate", "period", "capacity", "maxReserved", "start", "shards", "jitter", "shadow", "storage",
// "on_rollback"}.
// The server validates it (an inapplicable field is its 22023); json() throws std::invalid_argument only for
// what JSON cannot carry (a non-finite number, a NUL byte).
class Config {
 public:
  // A token bucket: `rate` tokens per `period`, refilled continuously.
  static Config token_bucket(double rate, Duration period) { return Config("token bucket", rate, period); }
  // Fixed windows of `period`, `rate` tokens added at each window start.
  static Config fixed_window(double rate, Duration period) { return Config("fixed window", rate, period); }
  // An approximated sliding window: at most `rate` per `period`.
  static Config sliding_window(double rate, Duration period) {
    return Config("sliding window", rate, period);
  }

  // The most tokens that can accumulate (token bucket, fixed window); defaults to rate.
  Config& capacity(double tokens) { return set(&capacity_, detail::json_number(tokens, "capacity")); }
  // How far below zero a reservation may go (token bucket, fixed window); absent is unlimited.
  Config& max_reserved(double tokens) {
    return set(&max_reserved_, detail::json_number(tokens, "maxReserved"));
  }
  // What windows are aligned to (fixed and sliding window); absent derives it from the key.
  Config& start(const Instant& at) { return set(&start_, at.json()); }
  // Spreads the limit over `count` rows (1-1024) for hot global limits.
  Config& shards(int count) { return set(&shards_, std::to_string(count)); }
  // Random extra delay on refusals' retry_after: true is up to one period, false none.
  Config& jitter(bool enabled) { return set(&jitter_, enabled ? "true" : "false"); }
  // Random extra delay on refusals' retry_after, up to `most`.
  Config& jitter(const Duration& most) { return set(&jitter_, most.json()); }
  // Random extra delay up to an interval string (so a string literal does not pick jitter(bool)).
  Config& jitter(const char* most) { return jitter(Duration(most)); }
  // Shadow mode: refusals are answered as grants (nothing consumed) and counted in stats().
  Config& shadow(bool enabled) { return set(&shadow_, enabled ? "true" : "false"); }
  // Keeps the limit in the server's shared memory ("storage": "memory"): a grant is seen by every session at
  // once, without a row lock or WAL, works in read-only transactions and on standbys, and is not durable.
  Config& memory() { return set(&storage_, "\"memory\""); }
  // (Memory only.) The most entries this limit's name may hold over all its keys ("memoryKeys").
  Config& memory_keys(long long most) { return set(&memory_keys_, std::to_string(most)); }
  // (Memory only.) keep: a grant stays even when its transaction rolls back ("on_rollback": "keep");
  // false: it is given back (the default).
  Config& keep_on_rollback(bool keep = true) { return set(&on_rollback_, keep ? "\"keep\"" : "\"refund\""); }

  // The config as JSON text, for Options::config, Limit::config, value() or define().
  std::string json() const {
    std::string out =
        "{\"kind\": " + detail::json_string(kind_) + ", \"rate\": " + rate_ + ", \"period\": " + period_;
    append(&out, "capacity", capacity_);
    append(&out, "maxReserved", max_reserved_);
    append(&out, "start", start_);
    append(&out, "shards", shards_);
    append(&out, "jitter", jitter_);
    append(&out, "shadow", shadow_);
    append(&out, "storage", storage_);
    append(&out, "on_rollback", on_rollback_);
    append(&out, "memoryKeys", memory_keys_);
    out += '}';
    return out;
  }

 private:
  Config(const char* kind, double rate, const Duration& period)
      : kind_(kind), rate_(detail::json_number(rate, "rate")), period_(period.json()) {}
  Config& set(std::optional<std::string>* field, std::string json) {
    *field = std::move(json);
    return *this;
  }
  static void append(std::string* out, const char* name, const std::optional<std::string>& json) {
    if (json) *out += std::string(", \"") + name + "\": " + *json;
  }

  std::string kind_, rate_, period_;
  std::optional<std::string> capacity_, max_reserved_, start_, shards_, jitter_, shadow_, storage_,
      on_rollback_, memory_keys_;
};

// How limit() and check() call: the arguments of ratelimit_limit after name and key.
struct Options {
  std::optional<std::string> config{};  // JSON text (see Config); nullopt uses the name's defined config
  double count = 1;                     // tokens to take
  bool reserve = false;                 // may go below zero (up to maxReserved); see Result::retry_after
  bool throws = false;                  // a refusal throws RateLimited and aborts the transaction
  std::string schema = kDefaultSchema;  // the extension's schema (quoted when used)
};

// The answer of limit(), check() and refund() (the extension's ratelimit_result).
struct Result {
  bool ok = false;                      // granted
  std::optional<double> retry_after{};  // seconds until the request could succeed (or a reservation may run);
                                        // nullopt when granted without waiting
  std::optional<TimePoint> retry_at{};  // the same moment on the server's clock
  double remaining = 0;                 // tokens left (negative when reserved; on a refusal: available now)
  double reset_after = 0;               // seconds until the limit is full again
};

// One limit of a limit_all() call.
struct Limit {
  std::string name{};
  std::optional<std::string> key{};     // nullopt: the global key
  std::optional<std::string> config{};  // JSON text; nullopt: the defined config
  double count = 1;
  bool reserve = false;
};

// One row of limit_all()'s answer, in input order.
struct LimitAllRow : Result {
  std::string name{};
  std::optional<std::string> key{};
};

// limit_all()'s answer as one: bool_and(ok) and max(retry_after).
struct Summary {
  bool ok = true;                       // every limit granted (true for no limits)
  std::optional<double> retry_after{};  // the largest retry_after of any row, if any has one
};

// The tokens available now (a never-used limit is full) and the time they refer to.
struct Value {
  double value = 0;
  TimePoint ts{};  // token bucket: the effective now; window kinds: the current window's start
};

// A request refused with throws = true: SQLSTATE PT429, details from the error's DETAIL JSON. Being a
// pqxx::sql_error, handlers that sort errors by sqlstate() still see it. The server has aborted the
// transaction, undoing everything consumed in it.
class RateLimited : public pqxx::sql_error {
 public:
  RateLimited(const pqxx::sql_error& cause, detail::Refusal refusal)
      : pqxx::sql_error(cause.what(), cause.query(), kRateLimitedSqlstate), refusal_(std::move(refusal)) {}

  // The refused limit's name.
  const std::string& name() const noexcept { return refusal_.name; }
  // Its key; nullopt for the global (NULL) key.
  const std::optional<std::string>& key() const noexcept { return refusal_.key; }
  // Seconds until the request could succeed.
  double retry_after() const noexcept { return refusal_.retry_after; }
  // That moment, parsed from retry_at_text() (nullopt only if the server wrote something unparsable).
  const std::optional<TimePoint>& retry_at() const noexcept { return refusal_.retry_at; }
  // That moment as the server wrote it (ISO 8601, in UTC since 0.11.0; any
  // offset is read).
  const std::string& retry_at_text() const noexcept { return refusal_.retry_at_text; }
  // The tokens available now (NaN if the server did not say).
  double remaining() const noexcept { return refusal_.remaining; }

 private:
  detail::Refusal refusal_;
};

// The RateLimited an error is, for PT429 errors from your own SQL (nullopt for other errors, or if the
// message lacks the DETAIL: the connection's verbosity was terse when the error arrived). It reads the first
// DETAIL-shaped line; keys cannot fake one, but a limit name written to contain one could (the API's own
// calls also check the name against the names they sent).
inline std::optional<RateLimited> as_rate_limited(const pqxx::sql_error& error) {
  if (error.sqlstate() != kRateLimitedSqlstate) return std::nullopt;
  std::optional<detail::Refusal> refusal = detail::find_refusal(error.what(), nullptr);
  if (!refusal) return std::nullopt;
  return RateLimited(error, std::move(*refusal));
}

namespace detail {

// Statement parameters in text form; nullopt is SQL NULL.
class Params {
 public:
  // A text parameter (a NUL byte is std::invalid_argument).
  Params& text(const std::string& value, const char* what) {
    require_no_nul(value, what);
    values_.emplace_back(value);
    return *this;
  }
  // A nullable text parameter.
  Params& text(const std::optional<std::string>& value, const char* what) {
    if (!value) {
      values_.emplace_back(std::nullopt);
      return *this;
    }
    return text(*value, what);
  }
  // A float8 parameter in round-trip text form (Infinity and NaN included; no locale involved).
  Params& number(double value) {
    values_.emplace_back(float8_text(value));
    return *this;
  }
  // A boolean parameter.
  Params& boolean(bool value) {
    values_.emplace_back(value ? "true" : "false");
    return *this;
  }
  // Runs `sql` with these as $1, $2, ...
  pqxx::result exec(pqxx::transaction_base& tx, const std::string& sql) const {
    std::vector<const char*> pointers;
    pointers.reserve(values_.size());
    for (const auto& value : values_) pointers.push_back(value ? value->c_str() : nullptr);
    return tx.exec_params(sql, pqxx::prepare::make_dynamic_params(pointers));
  }

 private:
  std::vector<std::optional<std::string>> values_;
};

// schema.function, the schema quoted as an identifier.
inline std::string qualified(pqxx::transaction_base& tx, const std::string& schema, const char* function) {
  require_no_nul(schema, "the schema");
  return tx.quote_name(schema) + "." + function;
}

// Raises libpq's error verbosity from terse to normal while alive, so that a PT429 carries its DETAIL.
class VerbosityGuard {
 public:
  explicit VerbosityGuard(pqxx::connection_base& conn) : conn_(conn), saved_(conn.get_verbosity()) {
    if (saved_ == pqxx::connection_base::terse) conn_.set_verbosity(pqxx::connection_base::normal);
  }
  ~VerbosityGuard() {
    if (saved_ == pqxx::connection_base::terse) conn_.set_verbosity(saved_);
  }
  VerbosityGuard(const VerbosityGuard&) = delete;
  VerbosityGuard& operator=(const VerbosityGuard&) = delete;

 private:
  pqxx::connection_base& conn_;
  pqxx::connection_base::error_verbosity saved_;
};

// Runs one statement; a PT429 naming one of `names` becomes RateLimited, everything else propagates.
inline pqxx::result exec_limit(pqxx::transaction_base& tx, const std::string& sql, const Params& params,
                               const std::vector<std::string>& names) {
  VerbosityGuard guard(tx.conn());
  try {
    return params.exec(tx, sql);
  } catch (const pqxx::sql_error& error) {
    if (error.sqlstate() != kRateLimitedSqlstate) throw;
    std::optional<Refusal> refusal = find_refusal(error.what(), &names);
    if (!refusal) throw;  // no readable DETAIL: the plain PT429 error
    throw RateLimited(error, std::move(*refusal));
  }
}

// The columns ok, retry_after, retry_at (Unix microseconds), remaining, reset_after from `first` on.
inline constexpr char kResultColumns[] =
    "r.ok, r.retry_after, (extract(epoch FROM r.retry_at) * 1000000)::int8, r.remaining, r.reset_after";

// Reads the kResultColumns starting at column `first`.
inline void read_result(const pqxx::row& row, pqxx::row::size_type first, Result* out) {
  out->ok = row[first].as<bool>();
  out->retry_after.reset();
  out->retry_at.reset();
  if (!row[first + 1].is_null()) out->retry_after = row[first + 1].as<double>();
  if (!row[first + 2].is_null())
    out->retry_at = TimePoint(std::chrono::microseconds(row[first + 2].as<long long>()));
  out->remaining = row[first + 3].as<double>();
  out->reset_after = row[first + 4].as<double>();
}

// ratelimit_limit or ratelimit_check with the same arguments.
inline Result limit_or_check(pqxx::transaction_base& tx, const char* function, const std::string& name,
                             const std::optional<std::string>& key, const Options& options) {
  const std::string sql = std::string("SELECT ") + kResultColumns + " FROM " +
                          qualified(tx, options.schema, function) +
                          "($1::text, $2::text, $3::jsonb, $4::float8, $5::boolean, $6::boolean) r";
  Params params;
  params.text(name, "the name").text(key, "the key").text(options.config, "the config");
  params.number(options.count).boolean(options.reserve).boolean(options.throws);
  pqxx::row row = exec_limit(tx, sql, params, {name}).at(0);
  Result result;
  read_result(row, 0, &result);
  return result;
}

}  // namespace detail

// Consumes options.count tokens of limit `name` for `key` (ratelimit_limit), locking its row in `tx` when
// granted. A refusal consumes nothing; with options.throws it throws RateLimited.
inline Result limit(pqxx::transaction_base& tx, const std::string& name,
                    const std::optional<std::string>& key = std::nullopt, const Options& options = {}) {
  return detail::limit_or_check(tx, "ratelimit_limit", name, key, options);
}

// What limit() would answer now, from the latest committed state (ratelimit_check); takes no lock, writes
// nothing. With options.throws a refusal throws RateLimited.
inline Result check(pqxx::transaction_base& tx, const std::string& name,
                    const std::optional<std::string>& key = std::nullopt, const Options& options = {}) {
  return detail::limit_or_check(tx, "ratelimit_check", name, key, options);
}

// Forgets the limit's state so it is full again (ratelimit_reset; owner only unless granted); true if there
// was any.
inline bool reset(pqxx::transaction_base& tx, const std::string& name,
                  const std::optional<std::string>& key = std::nullopt,
                  const std::string& schema = kDefaultSchema) {
  detail::Params params;
  params.text(name, "the name").text(key, "the key");
  return params
      .exec(tx, "SELECT " + detail::qualified(tx, schema, "ratelimit_reset") + "($1::text, $2::text)")
      .at(0)
      .at(0)
      .as<bool>();
}

// The tokens available now, without locking or writing (ratelimit_value).
inline Value value(pqxx::transaction_base& tx, const std::string& name,
                   const std::optional<std::string>& key = std::nullopt,
                   const std::optional<std::string>& config = std::nullopt,
                   const std::string& schema = kDefaultSchema) {
  detail::Params params;
  params.text(name, "the name").text(key, "the key").text(config, "the config");
  pqxx::row row = params
                      .exec(tx, "SELECT v.value, (extract(epoch FROM v.ts) * 1000000)::int8 FROM " +
                                    detail::qualified(tx, schema, "ratelimit_value") +
                                    "($1::text, $2::text, $3::jsonb) v")
                      .at(0);
  return Value{row[0].as<double>(), TimePoint(std::chrono::microseconds(row[1].as<long long>()))};
}

// One HTTP response header: (name, value).
using Header = std::pair<std::string, std::string>;

// The HTTP response headers for `result`, an answer of limit `name` (ratelimit_headers), from the limit's
// config (nullopt: the defined one): RateLimit-Policy, RateLimit, Retry-After (only when refused or reserved
// for later) and X-RateLimit-Limit/-Remaining/-Reset. Every value is a whole, non-negative number or a
// structured-field string; set them on the response as they are.
inline std::vector<Header> headers(pqxx::transaction_base& tx, const std::string& name, const Result& result,
                                   const std::optional<std::string>& config = std::nullopt,
                                   const std::string& schema = kDefaultSchema) {
  detail::Params params;
  params.text(name, "the name").boolean(result.ok);
  params.text(result.retry_after ? std::optional<std::string>(detail::float8_text(*result.retry_after))
                                 : std::nullopt,
              "retry_after");
  params.text(
      result.retry_at
          ? std::optional<std::string>(std::to_string(
                std::chrono::duration_cast<std::chrono::microseconds>(result.retry_at->time_since_epoch())
                    .count()))
          : std::nullopt,
      "retry_at");
  params.number(result.remaining).number(result.reset_after).text(config, "the config");
  const std::string sql =
      "SELECT h.key, h.value FROM pg_catalog.jsonb_each_text(" +
      detail::qualified(tx, schema, "ratelimit_headers") +
      "($1::text, ROW($2::boolean, $3::float8, 'epoch'::timestamptz + $4::int8 * interval '1 microsecond', "
      "$5::float8, $6::float8)::" +
      detail::qualified(tx, schema, "ratelimit_result") + ", $7::jsonb)) h";
  std::vector<Header> out;
  for (const pqxx::row& row : params.exec(tx, sql))
    out.emplace_back(row[0].as<std::string>(), row[1].as<std::string>());
  return out;
}

// Gives `count` tokens back (ratelimit_refund; owner only unless granted): capped at capacity, never below
// the current value.
inline Result refund(pqxx::transaction_base& tx, const std::string& name,
                     const std::optional<std::string>& key = std::nullopt, double count = 1,
                     const std::optional<std::string>& config = std::nullopt,
                     const std::string& schema = kDefaultSchema) {
  detail::Params params;
  params.text(name, "the name").text(key, "the key").number(count).text(config, "the config");
  pqxx::row row = params
                      .exec(tx, std::string("SELECT ") + detail::kResultColumns + " FROM " +
                                    detail::qualified(tx, schema, "ratelimit_refund") +
                                    "($1::text, $2::text, $3::float8, $4::jsonb) r")
                      .at(0);
  Result result;
  detail::read_result(row, 0, &result);
  return result;
}

// Validates and stores a named limit's config (ratelimit_define; owner only unless granted).
inline void define(pqxx::transaction_base& tx, const std::string& name, const std::string& config,
                   const std::string& schema = kDefaultSchema) {
  detail::Params params;
  params.text(name, "the name").text(config, "the config");
  params.exec(tx, "SELECT " + detail::qualified(tx, schema, "ratelimit_define") + "($1::text, $2::jsonb)");
}

// Removes a named limit's config (ratelimit_undefine; owner only unless granted); true if there was one.
inline bool undefine(pqxx::transaction_base& tx, const std::string& name,
                     const std::string& schema = kDefaultSchema) {
  detail::Params params;
  params.text(name, "the name");
  return params.exec(tx, "SELECT " + detail::qualified(tx, schema, "ratelimit_undefine") + "($1::text)")
      .at(0)
      .at(0)
      .as<bool>();
}

// Gives one key of a limit its own config (ratelimit_override; owner only unless granted): from now on
// (name, key) uses `config`, whatever config calls pass. The key's stored tokens carry over (capped at the
// new capacity; a new kind resets them). Transactional, like everything here.
inline void override(pqxx::transaction_base& tx, const std::string& name, const std::string& key,
                     const std::string& config, const std::string& schema = kDefaultSchema) {
  detail::Params params;
  params.text(name, "the name").text(key, "the key").text(config, "the config");
  params.exec(tx, "SELECT " + detail::qualified(tx, schema, "ratelimit_override") +
                      "($1::text, $2::text, $3::jsonb)");
}

// Removes a key's override (ratelimit_unoverride; owner only unless granted); true if there was one.
inline bool unoverride(pqxx::transaction_base& tx, const std::string& name, const std::string& key,
                       const std::string& schema = kDefaultSchema) {
  detail::Params params;
  params.text(name, "the name").text(key, "the key");
  return params
      .exec(tx, "SELECT " + detail::qualified(tx, schema, "ratelimit_unoverride") + "($1::text, $2::text)")
      .at(0)
      .at(0)
      .as<bool>();
}

// One row of stats(): the decisions about one limit name since stats_reset.
struct Stat {
  std::optional<std::string> name{};  // nullopt: the overflow row (names past ratelimit.stats_max_names)
  long long granted = 0;              // decisions of limit/limit_all that consumed, and refunds
  long long refused = 0;
  long long shadow_refused = 0;  // refusals answered as grants by a shadow limit
  double tokens_granted = 0;     // net of refunds
  long long lock_waits = 0;      // calls that waited for another transaction's row lock
  TimePoint stats_reset{};
  long long memory_full = 0;  // calls of a memory limit that found no room (ratelimit.memory_max_keys)
};

// The ratelimit_stats view, ordered by name (the overflow row last). Empty when the server gives the
// extension no shared memory (before PostgreSQL 17 without shared_preload_libraries = 'ratelimit').
inline std::vector<Stat> stats(pqxx::transaction_base& tx, const std::string& schema = kDefaultSchema) {
  pqxx::result rows = tx.exec(
      "SELECT name, granted, refused, shadow_refused, tokens_granted, lock_waits,"
      " (extract(epoch FROM stats_reset) * 1000000)::int8,"
      // memory_full from 0.6.0 on (0 before)
      " coalesce((to_jsonb(s) ->> 'memory_full')::int8, 0) FROM " +
      detail::qualified(tx, schema, "ratelimit_stats") + " s ORDER BY name NULLS LAST");
  std::vector<Stat> out(rows.size());
  for (pqxx::result::size_type i = 0; i < rows.size(); ++i) {
    const pqxx::row& row = rows[i];
    if (!row[0].is_null()) out[i].name = row[0].as<std::string>();
    out[i].granted = row[1].as<long long>();
    out[i].refused = row[2].as<long long>();
    out[i].shadow_refused = row[3].as<long long>();
    out[i].tokens_granted = row[4].as<double>();
    out[i].lock_waits = row[5].as<long long>();
    out[i].stats_reset = TimePoint(std::chrono::microseconds(row[6].as<long long>()));
    out[i].memory_full = row[7].as<long long>();
  }
  return out;
}

// Empties the ratelimit_stats view (ratelimit_stats_reset; owner only unless granted).
inline void stats_reset(pqxx::transaction_base& tx, const std::string& schema = kDefaultSchema) {
  tx.exec("SELECT " + detail::qualified(tx, schema, "ratelimit_stats_reset") + "()");
}

// Several limits, all or nothing (ratelimit_limit_all): one row per limit in input order; if any row is
// refused nothing was consumed. With `throws`, a refusal throws RateLimited naming the first refused limit.
inline std::vector<LimitAllRow> limit_all(pqxx::transaction_base& tx, const std::vector<Limit>& limits,
                                          bool throws = false, const std::string& schema = kDefaultSchema) {
  // The array is built by the server from parameters: five per limit, then throws.
  std::string elements;
  detail::Params params;
  std::vector<std::string> names;
  names.reserve(limits.size());
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const Limit& limit = limits[i];
    const auto p = [&](std::size_t offset) { return "$" + std::to_string(5 * i + 1 + offset); };
    if (i > 0) elements += ", ";
    // count goes through numeric so that jsonb keeps every digit, whatever extra_float_digits says.
    elements += "jsonb_build_object('name', " + p(0) + "::text, 'key', " + p(1) + "::text, 'config', " +
                p(2) + "::jsonb, 'count', " + p(3) + "::numeric, 'reserve', " + p(4) + "::boolean)";
    params.text(limit.name, "a name").text(limit.key, "a key").text(limit.config, "a config");
    params.number(limit.count).boolean(limit.reserve);
    names.push_back(limit.name);
  }
  params.boolean(throws);
  const std::string sql = "SELECT r.name, r.key, " + std::string(detail::kResultColumns) + " FROM " +
                          detail::qualified(tx, schema, "ratelimit_limit_all") + "(jsonb_build_array(" +
                          elements + "), $" + std::to_string(5 * limits.size() + 1) +
                          "::boolean) WITH ORDINALITY AS r(name, key, ok, retry_after, retry_at, remaining, "
                          "reset_after, n) ORDER BY r.n";
  pqxx::result result = detail::exec_limit(tx, sql, params, names);
  std::vector<LimitAllRow> rows(result.size());
  for (pqxx::result::size_type i = 0; i < result.size(); ++i) {
    rows[i].name = result[i][0].as<std::string>();
    if (!result[i][1].is_null()) rows[i].key = result[i][1].as<std::string>();
    detail::read_result(result[i], 2, &rows[i]);
  }
  return rows;
}

// bool_and(ok) and max(retry_after) of limit_all()'s rows, as the SQL in docs/api.md computes them.
inline Summary summarize(const std::vector<LimitAllRow>& rows) {
  Summary summary;
  for (const LimitAllRow& row : rows) {
    summary.ok = summary.ok && row.ok;
    if (row.retry_after)
      summary.retry_after = std::max(summary.retry_after.value_or(*row.retry_after), *row.retry_after);
  }
  return summary;
}

// The schema the extension is installed in (unquoted, for Options::schema), or nullopt if it is not.
inline std::optional<std::string> extension_schema(pqxx::transaction_base& tx) {
  pqxx::result rows = tx.exec(
      "SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = "
      "e.extnamespace"
      " WHERE e.extname = 'ratelimit'");
  if (rows.empty()) return std::nullopt;
  return rows[0][0].as<std::string>();
}

}  // namespace ratelimit

#endif  // RATELIMIT_RATELIMIT_HPP
