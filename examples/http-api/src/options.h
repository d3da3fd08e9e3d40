// The service's settings: command-line flags, each with an environment
// variable as its fallback (a flag wins over its variable).
#pragma once

#include <stdexcept>
#include <string>

namespace http_api {

struct Options {
  std::string host = "127.0.0.1";
  int port = 8080;       // 0: the kernel picks a free port (printed on startup)
  std::string conninfo;  // a libpq connection string; empty: the PG* environment variables
  int threads = 8;       // HTTP worker threads, and at most as many database connections
  bool limiter = true;   // false (--no-limiter): the same transactions without the limit call
  bool help = false;     // --help: print the usage and exit
  // The limits' configs (ratelimit_define validates them at startup).
  std::string messages_limit =
      R"({"kind": "token bucket", "rate": 10, "period": "1 minute", "capacity": 20})";
  std::string signup_limit = R"({"kind": "fixed window", "rate": 100, "period": "1 hour"})";
  std::string completions_limit =
      R"({"kind": "token bucket", "rate": 40000, "period": "1 minute", "maxReserved": 100000})";
  // New playground keys (a page's session, origin and config) for the whole service.
  std::string playground_limit = R"({"kind": "fixed window", "rate": 1000, "period": "1 hour"})";
};

// A flag or variable that cannot be used; the message names it.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The options given by argv and the environment; throws UsageError.
Options ParseOptions(int argc, const char* const* argv);

// The --help text: every flag, its variable and its default.
std::string Usage();

}  // namespace http_api
