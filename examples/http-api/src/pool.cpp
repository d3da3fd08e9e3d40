#include "pool.h"

#include <utility>

namespace http_api {

ConnectionPool::Lease::Lease(ConnectionPool& pool, std::unique_ptr<pqxx::connection> conn)
    : pool_(pool), conn_(std::move(conn)) {}

ConnectionPool::Lease::~Lease() { pool_.GiveBack(std::move(conn_)); }

ConnectionPool::ConnectionPool(std::string conninfo, std::size_t size, Setup setup)
    : conninfo_(std::move(conninfo)), size_(size), setup_(std::move(setup)) {}

ConnectionPool::Lease ConnectionPool::Acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  returned_.wait(lock, [this] { return !idle_.empty() || open_ < size_; });
  if (!idle_.empty()) {
    std::unique_ptr<pqxx::connection> conn = std::move(idle_.back());
    idle_.pop_back();
    return Lease(*this, std::move(conn));
  }
  ++open_;  // reserve the slot, then connect without holding the lock
  lock.unlock();
  try {
    return Lease(*this, Connect());
  } catch (...) {
    GiveBack(nullptr);
    throw;
  }
}

std::unique_ptr<pqxx::connection> ConnectionPool::Connect() {
  auto conn = std::make_unique<pqxx::connection>(conninfo_);
  setup_(*conn);
  return conn;
}

// A null or closed connection frees its slot instead of going back.
void ConnectionPool::GiveBack(std::unique_ptr<pqxx::connection> conn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (conn && conn->is_open())
      idle_.push_back(std::move(conn));
    else
      --open_;
  }
  returned_.notify_one();
}

}  // namespace http_api
