// The open connections of one listener, so that shutdown can close the idle ones at once
// and let busy ones finish their response. I/O-thread owned.
#pragma once

#include <functional>
#include <list>
#include <utility>

namespace toolwarden::daemon {

class ConnectionSet {
 public:
  struct Entry {
    std::function<void()> close;
    bool busy = false;
  };

  /// Registers a connection for the lifetime of the guard.
  class Guard {
   public:
    Guard(ConnectionSet& set, std::function<void()> close)
        : set_(set), it_(set.entries_.insert(set.entries_.end(), Entry{std::move(close)})) {}
    ~Guard() {
      set_.entries_.erase(it_);
      set_.notify_if_drained();
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    void set_busy(bool busy) { it_->busy = busy; }

   private:
    ConnectionSet& set_;
    std::list<Entry>::iterator it_;
  };

  bool stopping() const { return stopping_; }
  std::size_t size() const { return entries_.size(); }

  /// Stops the listener's connections: idle ones are closed now; busy ones close after
  /// answering (their loops check stopping()). `on_drained` runs once none is left.
  void stop(std::function<void()> on_drained) {
    stopping_ = true;
    on_drained_ = std::move(on_drained);
    for (auto& e : entries_) {
      if (!e.busy) e.close();
    }
    notify_if_drained();
  }

 private:
  void notify_if_drained() {
    if (stopping_ && entries_.empty() && on_drained_) std::exchange(on_drained_, nullptr)();
  }

  std::function<void()> on_drained_;
  std::list<Entry> entries_;
  bool stopping_ = false;
};

}  // namespace toolwarden::daemon
