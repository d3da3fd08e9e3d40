// What the end-to-end tests of ratelimit-http-api share: the running
// service's address and limits, an HTTP client, a raw socket for requests
// an HTTP client would not send, and queries on the service's database.
// run-e2e.sh starts the service and runs the program with:
//   HTTP_API_E2E_PORT           the service's port on 127.0.0.1
//   HTTP_API_E2E_PID            the service's process id (its memory is read)
//   HTTP_API_MESSAGES_LIMIT, HTTP_API_SIGNUP_LIMIT, HTTP_API_COMPLETIONS_LIMIT,
//   HTTP_API_PLAYGROUND_LIMIT   the limit configs the service was started with
//                               (the service reads the same variables)
//   PGHOST, PGPORT, PGUSER, PGDATABASE   the service's database (a superuser:
//                               tests add a trigger, age rows, reset a limit)
// Each test uses users, emails and sessions of its own; the global limits
// are used by one test each, so the database must be fresh for each run.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

namespace e2e {

using nlohmann::json;

// The service, and the configs it runs with (set by main()).
struct Service {
  int port = 0;
  pid_t pid = 0;
  json messages_limit;
  json signup_limit;
  json completions_limit;
  json playground_limit;
};
extern Service g_service;

// The tokens a fresh limit holds: its capacity, which defaults to its rate.
int Capacity(const json& config);

// A user, email or session unique to this run and test.
std::string Unique(const std::string& what);

httplib::Client Client();
httplib::Result Post(const std::string& path, const std::string& body);
httplib::Result Post(const std::string& path, const json& body);
json Body(const httplib::Result& response);

// An integer header, or -1 when absent.
long IntHeader(const httplib::Result& response, const char* name);

bool Matches(const std::string& text, const char* pattern);

// The one value of a query on the service's database.
template <typename T, typename... Args>
T QueryValue(const std::string& sql, Args&&... args) {
  pqxx::connection conn("");
  pqxx::nontransaction tx(conn);
  return tx.exec_params1(sql, std::forward<Args>(args)...)[0].template as<T>();
}

// Runs statements on the service's database.
void Execute(const std::string& sql);

// The stored state of a limit's key: value and ts as text, "" if no row.
std::string LimitState(const std::string& name, const std::string& key);

// What a raw exchange on one connection came to: what the service wrote,
// and whether it closed the connection after it.
struct RawResponse {
  std::string text;
  bool closed = false;
  int Status() const;        // of the first response; 0 if none
  std::string Body() const;  // of the first response
};

// Connects, sends `head` and then `body` (from another thread, which stops
// when the service closes the connection), and reads until the service
// closes it or `wait_seconds` pass without a byte.
RawResponse RawExchange(const std::string& head, const std::string& body, int wait_seconds = 20);

// The service's peak resident memory so far (VmHWM), in kB.
long PeakMemoryKb();

}  // namespace e2e
