// The load of the DDL-under-load tests (see ddl_load.h): every client
// thread and the DDL session, started and stopped together (the trigger-key
// threads separately).

#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "ddl_load.h"

namespace ddl_load {

class Load {
 public:
  explicit Load(Shared& s) : s_(s) {}
  ~Load() { Stop(); }

  // Opens every connection first, then starts the threads.
  void Start() {
    const bool quiet = true;  // lost connections are counted, not printed
    for (int i = 0; i < kMixed + kParked + kCleanup + 2; ++i) {
      workers_.push_back(std::make_unique<Worker>());
      OpenWorker(s_, *workers_.back(), 0xdd100000u + i, quiet);
    }
    int i = 0;
    for (int n = 0; n < kMixed; ++n, ++i) Spawn(i, &MixedTx, 0);
    for (int n = 0; n < kParked; ++n, ++i) Spawn(i, &ParkedTx, 200);
    for (int n = 0; n < kCleanup; ++n, ++i) Spawn(i, &CleanupTx, 20);
    Worker* ddl = workers_[i].get();
    Worker* straddle = workers_[i + 1].get();
    {
      // The straddle keys' rows exist (but for the "new" ones), so that a
      // straddled write is an update.
      pqxx::work tx(*straddle->conn);
      for (int k = 0; k < 8; ++k) Call(*straddle, tx, s_.limits.straddle, ("s" + std::to_string(k)).c_str());
      tx.commit();
      // A DDL step that would wait for the straddling transaction fails
      // instead of blocking its own session until statement_timeout.
      pqxx::nontransaction(*ddl->conn).exec0("SET lock_timeout = '10s'");
    }
    threads_.emplace_back([this, ddl, straddle] { DdlLoop(s_, *ddl, *straddle); });
    ddl_ = ddl;
  }

  // Opens the trigger-key threads' connections before the phase trigger
  // exists. Each warms up, then opens a transaction that reads (at most the
  // table's AccessShareLock, which CREATE TRIGGER does not wait for) and
  // waits there for the trigger (up to 3 s) before granting on trigger keys
  // in that same transaction: a backend that knew the table before the
  // trigger existed (see StraddleTriggerCreation). Then they run TriggerTx
  // until StopTriggerKeys. Returns once every thread is in its waiting
  // transaction (or gone).
  void StartTriggerKeys() {
    for (int n = 0; n < kTrigger; ++n) {
      trigger_workers_.push_back(std::make_unique<Worker>());
      Worker* w = trigger_workers_.back().get();
      OpenWorker(s_, *w, 0xdd200000u + n, true);
      trigger_threads_.emplace_back([this, w, n] {
        StraddleTriggerCreation(s_, *w, n);
        TxLoop(s_, *w, &TriggerTx, 0, s_.stop_triggered);
      });
    }
    auto all_waiting = [&] {
      for (const auto& w : trigger_workers_)
        if (w->alive && !w->waiting_for_trigger) return false;
      return true;
    };
    while (!all_waiting()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  void StopTriggerKeys() {
    s_.stop_triggered = true;
    for (auto& t : trigger_threads_) t.join();
    trigger_threads_.clear();
  }

  void Stop() {
    s_.stop = true;
    StopTriggerKeys();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  // Waits until at least `min_time` has passed and the DDL session has
  // done `steps` more steps (or its connection is gone).
  void WaitForDdl(Clock::duration min_time, long steps) {
    const auto t0 = Clock::now();
    const long target = s_.ddl_steps.load() + steps;
    while (Clock::now() - t0 < min_time || (s_.ddl_steps.load() < target && ddl_->alive))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // Waits until a transaction that granted on trigger keys has committed (or
  // every trigger-key thread is gone).
  void WaitForTriggerCommit() {
    auto any_alive = [&] {
      for (const auto& w : trigger_workers_)
        if (w->alive) return true;
      return false;
    };
    while (s_.trigger_commits.load() == 0 && any_alive())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // Waits until the DDL session runs step `index` of its cycle (or its
  // connection is gone).
  void WaitForDdlStep(int index) {
    while (s_.ddl_current.load() != index && ddl_->alive)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  Counters Clients() const {
    Counters all;
    for (const auto& w : workers_)
      if (w.get() != ddl_) all.Merge(w->counters);
    for (const auto& w : trigger_workers_) all.Merge(w->counters);
    return all;
  }
  const Counters& Ddl() const { return ddl_->counters; }

  std::vector<TxRecord> Records() const {
    std::vector<TxRecord> all;
    for (const auto* list : {&workers_, &trigger_workers_})
      for (const auto& w : *list) all.insert(all.end(), w->records.begin(), w->records.end());
    return all;
  }

 private:
  static constexpr int kMixed = 3, kParked = 2, kCleanup = 1, kTrigger = 3;

  void Spawn(int index, bool (*tx_fn)(Shared&, Worker&, pqxx::work&, Grants&), int pause_ms) {
    Worker* w = workers_[index].get();
    threads_.emplace_back([this, w, tx_fn, pause_ms] { TxLoop(s_, *w, tx_fn, pause_ms, never_); });
  }

  Shared& s_;
  std::atomic<bool> never_{false};
  std::vector<std::unique_ptr<Worker>> workers_, trigger_workers_;
  std::vector<std::thread> threads_, trigger_threads_;
  Worker* ddl_ = nullptr;
};

// Measurement lines of a load that ran `seconds`: the clients, the
// straddles and the DDL session.
void PrintLoad(const Load& load, const Shared& s, double seconds);

// Expects no unexpected error of the clients or of the DDL session, and no
// amcheck finding between the DDL steps; `when` ("" or " before the crash")
// is added to the failure messages' subjects.
void ExpectNoErrorsOrFindings(const Load& load, Shared& s, const char* when);

}  // namespace ddl_load
