// A small pool of database connections. The HTTP server's worker threads
// each borrow one for a request, so the pool never holds more connections
// than there are workers, and a statement prepared on a connection is
// prepared once, not per request.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <pqxx/pqxx>

namespace http_api {

class ConnectionPool {
 public:
  // Runs once on every new connection (to prepare statements).
  using Setup = std::function<void(pqxx::connection&)>;

  // A borrowed connection, given back when the lease ends.
  class Lease {
   public:
    Lease(ConnectionPool& pool, std::unique_ptr<pqxx::connection> conn);
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();

    pqxx::connection& operator*() const { return *conn_; }

    // Drops the connection instead of giving it back (it broke); the pool
    // opens a new one when next needed.
    void Discard() { conn_.reset(); }

   private:
    ConnectionPool& pool_;
    std::unique_ptr<pqxx::connection> conn_;
  };

  ConnectionPool(std::string conninfo, std::size_t size, Setup setup);

  // An idle connection; opens one if fewer than `size` exist; else waits.
  Lease Acquire();

 private:
  std::unique_ptr<pqxx::connection> Connect();
  void GiveBack(std::unique_ptr<pqxx::connection> conn);

  const std::string conninfo_;
  const std::size_t size_;
  const Setup setup_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_;
  std::size_t open_ = 0;  // idle and lent connections
};

}  // namespace http_api
