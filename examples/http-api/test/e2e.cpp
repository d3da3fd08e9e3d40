#include "e2e.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <thread>

namespace e2e {

Service g_service;

int Capacity(const json& config) { return config.value("capacity", config.at("rate").get<int>()); }

std::string Unique(const std::string& what) { return "e2e-" + std::to_string(getpid()) + "-" + what; }

httplib::Client Client() {
  httplib::Client client("127.0.0.1", g_service.port);
  client.set_connection_timeout(10);
  client.set_read_timeout(30);
  return client;
}

httplib::Result Post(const std::string& path, const std::string& body) {
  return Client().Post(path.c_str(), body, "application/json");
}

httplib::Result Post(const std::string& path, const json& body) { return Post(path, body.dump()); }

json Body(const httplib::Result& response) { return json::parse(response->body); }

long IntHeader(const httplib::Result& response, const char* name) {
  if (!response->has_header(name)) return -1;
  return std::stol(response->get_header_value(name));
}

bool Matches(const std::string& text, const char* pattern) {
  return std::regex_match(text, std::regex(pattern));
}

void Execute(const std::string& sql) {
  pqxx::connection conn("");
  pqxx::nontransaction(conn).exec(sql);
}

std::string LimitState(const std::string& name, const std::string& key) {
  return QueryValue<std::string>(
      "SELECT coalesce((SELECT value::text || ' ' || ts::text FROM ratelimit_state "
      "WHERE name = $1 AND key = $2 AND shard = 0), '')",
      name, key);
}

int RawResponse::Status() const {
  std::smatch match;
  if (!std::regex_search(text, match, std::regex("^HTTP/1\\.1 ([0-9]{3}) "))) return 0;
  return std::stoi(match[1]);
}

std::string RawResponse::Body() const {
  std::size_t end = text.find("\r\n\r\n");
  return end == std::string::npos ? "" : text.substr(end + 4);
}

namespace {

// A TCP connection to the service, or -1.
int Connect() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(g_service.port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

// Sends all of `data` unless the service closes the connection first.
void SendAll(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<std::size_t>(n);
  }
}

}  // namespace

RawResponse RawExchange(const std::string& head, const std::string& body, int wait_seconds) {
  RawResponse response;
  int fd = Connect();
  if (fd < 0) return response;
  timeval timeout{wait_seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::thread sender([fd, &head, &body] {
    SendAll(fd, head);
    SendAll(fd, body);
  });
  char buffer[4096];
  for (;;) {
    ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      response.text.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    // 0: closed; ECONNRESET: closed with the rest of our body unread.
    response.closed = n == 0 || errno == ECONNRESET;
    break;
  }
  shutdown(fd, SHUT_RDWR);  // a sender still blocked on a full buffer returns
  sender.join();
  close(fd);
  return response;
}

long PeakMemoryKb() {
  std::ifstream status("/proc/" + std::to_string(g_service.pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

namespace {

// The value of a required environment variable, or exits with a message.
std::string RequiredEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    std::cerr << "http_api_e2e: " << name << " is not set (run examples/http-api/run-e2e.sh)" << std::endl;
    std::exit(2);
  }
  return value;
}

}  // namespace
}  // namespace e2e

int main(int argc, char** argv) {
  using e2e::RequiredEnv;
  ::testing::InitGoogleTest(&argc, argv);
  e2e::g_service.port = std::stoi(RequiredEnv("HTTP_API_E2E_PORT"));
  e2e::g_service.pid = static_cast<pid_t>(std::stol(RequiredEnv("HTTP_API_E2E_PID")));
  e2e::g_service.messages_limit = nlohmann::json::parse(RequiredEnv("HTTP_API_MESSAGES_LIMIT"));
  e2e::g_service.signup_limit = nlohmann::json::parse(RequiredEnv("HTTP_API_SIGNUP_LIMIT"));
  e2e::g_service.completions_limit = nlohmann::json::parse(RequiredEnv("HTTP_API_COMPLETIONS_LIMIT"));
  e2e::g_service.playground_limit = nlohmann::json::parse(RequiredEnv("HTTP_API_PLAYGROUND_LIMIT"));
  return RUN_ALL_TESTS();
}
