// The store's single owner thread. Work items are queued from any thread and run in order;
// whatever has queued up while a transaction ran is committed together in the next one
// (group commit: one fsync for many calls). A work item's completion runs only after its
// transaction committed, so nothing is acknowledged that a crash could take back.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "store/store.hpp"

namespace toolwarden::store {

class Writer {
 public:
  /// Runs inside the batch transaction (within its own savepoint). Throwing rolls back only
  /// this item's changes.
  using Work = std::function<void(Store&)>;
  /// Called on the writer thread after the commit (or the failure) with the item's outcome.
  using Done = std::function<void(std::exception_ptr)>;

  explicit Writer(Store store);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  /// Queues one item. After stop() the item fails at once with a runtime_error.
  void submit(Work work, Done done);

  /// Finishes every queued item, then ends the thread. Idempotent.
  void stop();

  /// Largest number of items committed in one transaction so far (a benchmark figure).
  std::size_t largest_batch() const;

 private:
  struct Item {
    Work work;
    Done done;
  };
  void run();
  void run_batch(std::deque<Item>& batch);
  /// Runs one of the batch's control statements (BEGIN, SAVEPOINT, ...), prepared once.
  void control(std::optional<SQLite::Statement>& slot, const char* sql);

  Store store_;
  // Writer thread only: parsing these afresh for every item cost more than the item's inserts.
  std::optional<SQLite::Statement> begin_, commit_, savepoint_, release_, rollback_to_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  std::size_t largest_batch_ = 0;
  std::thread thread_;  // started in the constructor body, after every member exists
};

}  // namespace toolwarden::store
