#include "store/writer.hpp"

#include <stdexcept>

namespace toolwarden::store {

Writer::Writer(Store store) : store_(std::move(store)) {
  // The chain_head row is written once per batch, just before its commit.
  store_.defer_chain_head(true);
  thread_ = std::thread([this] { run(); });
}

Writer::~Writer() { stop(); }

void Writer::submit(Work work, Done done) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push_back(Item{std::move(work), std::move(done)});
      cv_.notify_one();
      return;
    }
  }
  done(std::make_exception_ptr(std::runtime_error("store is shut down")));
}

void Writer::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

std::size_t Writer::largest_batch() const {
  std::lock_guard lock(mu_);
  return largest_batch_;
}

void Writer::run() {
  for (;;) {
    std::deque<Item> batch;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      batch.swap(queue_);
      largest_batch_ = std::max(largest_batch_, batch.size());
    }
    run_batch(batch);
  }
}

void Writer::control(std::optional<SQLite::Statement>& slot, const char* sql) {
  if (!slot) slot.emplace(store_.db(), sql);
  // Reset whatever happens, so a failed COMMIT or BEGIN leaves no statement mid-step.
  struct Reset {
    SQLite::Statement& q;
    ~Reset() { q.tryReset(); }
  } reset{*slot};
  slot->exec();
}

void Writer::run_batch(std::deque<Item>& batch) {
  std::vector<std::exception_ptr> outcomes(batch.size());
  auto& db = store_.db();
  std::exception_ptr batch_error;
  try {
    control(begin_, "BEGIN IMMEDIATE");
    for (std::size_t i = 0; i < batch.size(); ++i) {
      control(savepoint_, "SAVEPOINT item");
      auto mark = store_.chain_mark();
      try {
        batch[i].work(store_);
        control(release_, "RELEASE item");
      } catch (...) {
        outcomes[i] = std::current_exception();
        control(rollback_to_, "ROLLBACK TO item");
        control(release_, "RELEASE item");
        store_.restore_chain(std::move(mark));
      }
    }
    store_.flush_chain_head();
    control(commit_, "COMMIT");
  } catch (...) {
    // BEGIN or COMMIT failed (disk full, I/O error): nothing of the batch is durable.
    batch_error = std::current_exception();
    db.tryExec("ROLLBACK");
    try {
      store_.reload_chain_head();
    } catch (...) {
    }
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    batch[i].done(batch_error ? batch_error : outcomes[i]);
  }
}

}  // namespace toolwarden::store
