// ratelimit-http-api: an example HTTP service whose endpoints are rate
// limited by the ratelimit extension, in the transaction that does the work.
// See README.md for the endpoints and flags.
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <iostream>
#include <thread>

#include <httplib.h>

#include "api.h"
#include "options.h"
#include "playground.h"
#include "pool.h"
#include "routes.h"
#include "store.h"

namespace {

using http_api::Options;

// Persistent connections are kept for this many requests (httplib's default,
// 5, would make a benchmark measure TCP handshakes).
constexpr std::size_t kKeepAliveMaxCount = 1000;

// SIGINT and SIGTERM, blocked in every thread so that only sigwait sees them.
sigset_t TerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

// Stops the server at the first SIGINT or SIGTERM. A signal handler could
// not call Server::stop() safely; a thread waiting in sigwait can.
void StopOnSignal(httplib::Server& server) {
  sigset_t signals = TerminationSignals();
  int signal = 0;
  sigwait(&signals, &signal);
  server.stop();
}

// The port a socket is bound to, or -1 if it is no listening TCP socket.
int ListeningPort(int fd) {
  int listening = 0;
  socklen_t size = sizeof listening;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) != 0 || !listening) return -1;
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return -1;
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  return -1;
}

// Debian's cpp-httplib is a compiled library: its listen() keeps httplib's
// backlog of 5 whatever CPPHTTPLIB_LISTEN_BACKLOG our files see, and a burst
// of new connections (the end-to-end test's concurrent requests, a
// benchmark's clients) overflows that accept queue. listen() again on the
// bound socket sets the backlog (Linux takes it for a listening socket); the
// socket is the one listening on our port.
void RaiseListenBacklog(int port) {
  for (int fd = 0; fd < 1024; ++fd)
    if (ListeningPort(fd) == port) listen(fd, SOMAXCONN);
}

// Binds the listening socket; the port, or -1.
int Bind(httplib::Server& server, const Options& options) {
  int port = options.port == 0 ? server.bind_to_any_port(options.host)
                               : (server.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port > 0) RaiseListenBacklog(port);
  return port;
}

void ConfigureServer(httplib::Server& server, const Options& options) {
  int threads = options.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_keep_alive_max_count(kKeepAliveMaxCount);
  // httplib writes the headers and the body separately: with Nagle's
  // algorithm the body then waits for the client's delayed ACK (~40 ms).
  server.set_tcp_nodelay(true);
}

// Serves until SIGINT or SIGTERM; the exit status.
int Serve(const Options& options) {
  http_api::ConnectionPool pool(options.conninfo, options.threads, [&options](pqxx::connection& conn) {
    http_api::PrepareStatements(conn, options.limiter);
  });
  http_api::Api api(pool, options.limiter);
  httplib::Server server;
  ConfigureServer(server, options);
  // Before any route: every request's body is bounded from here on.
  http_api::JsonRoutes routes(server);
  http_api::RegisterRoutes(server, routes, api);
  // The playground calls the extension: not served without the limiter.
  http_api::Playground playground(pool);
  if (options.limiter) http_api::RegisterPlaygroundRoutes(server, routes, playground);
  int port = Bind(server, options);
  if (port < 0) {
    std::cerr << "ratelimit-http-api: cannot listen on " << options.host << ":" << options.port << std::endl;
    return 1;
  }
  // The first line of stdout, flushed: scripts wait for it to learn the port.
  std::cout << "listening on " << options.host << ":" << port << std::endl;
  std::thread stopper(StopOnSignal, std::ref(server));
  bool served = server.listen_after_bind();
  // If listening failed, no signal came: send one so the stopper returns.
  kill(getpid(), SIGTERM);
  stopper.join();
  return served ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = http_api::ParseOptions(argc, argv);
  } catch (const http_api::UsageError& e) {
    std::cerr << "ratelimit-http-api: " << e.what() << std::endl;
    return 2;
  }
  if (options.help) {
    std::cout << http_api::Usage();
    return 0;
  }
  // Before any thread starts, so that every thread inherits the mask.
  sigset_t signals = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  try {
    pqxx::connection conn(options.conninfo);
    http_api::PrepareDatabase(conn, options);
  } catch (const std::exception& e) {
    std::cerr << "ratelimit-http-api: cannot prepare the database: " << e.what() << std::endl;
    return 1;
  }
  return Serve(options);
}
