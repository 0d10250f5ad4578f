// The live view of jobs: token digests → job, per-job concurrency and in-flight calls.
// Owned by the I/O thread (every method runs on the I/O executor); the store holds the
// durable copy and is written first for creation, last for revocation (fail closed).
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "policy/grant.hpp"
#include "store/store.hpp"

namespace toolwarden::daemon {

/// Why a call is being cancelled.
enum class CancelReason { none, client, revoked, shutdown };

/// One in-flight tools/call. The flag is read by worker threads, hence atomic.
struct CallState {
  boost::json::value request_id;
  std::int64_t generation = 0;
  std::atomic<int> cancel{static_cast<int>(CancelReason::none)};
  /// Set when the job is revoked or renewed (I/O thread); read by the writer thread as it
  /// records the call's completion. A revoke sets it before queuing `job.revoked`, so a call
  /// recorded after that event is always recorded as revoked. No other reason hides it, as
  /// the first cancel reason hides later ones.
  std::atomic<bool> binding_lost{false};
  /// Set while the call waits on something that must be told (a sandbox run). I/O thread.
  std::function<void()> on_cancel;
  bool cancelled() const { return cancel.load() != static_cast<int>(CancelReason::none); }
  /// For progress notifications: when the call began and the output its sandbox wrote so far
  /// (counted on the supervisor thread).
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::atomic<std::uint64_t> output_bytes{0};
  /// Marks the call cancelled (the first reason wins) and tells whoever it waits on.
  void request_cancel(CancelReason why);
};

class Tool;

struct JobState {
  store::Job record;  // token_sha256 is the current generation's digest
  policy::Grant grant;
  /// The job's custom tools (SPEC §11), made from the grant's pins; immutable once added.
  std::map<std::string, std::shared_ptr<const Tool>, std::less<>> custom_tools;
  int running = 0;
  /// Calls waiting for a slot, first come first served; a released slot is handed to the
  /// first waiter directly, so a newly arriving call cannot take it.
  struct Waiter {
    boost::asio::steady_timer timer;
    bool granted = false;
  };
  std::deque<std::shared_ptr<Waiter>> waiters;
  std::list<std::shared_ptr<CallState>> in_flight;

  bool live(std::int64_t now) const { return !record.revoked && now < record.expires_at; }
  std::string_view state(std::int64_t now) const;
};

class JobRegistry {
 public:
  explicit JobRegistry(int max_concurrent_calls) : max_concurrent_(max_concurrent_calls) {}

  void add(std::shared_ptr<JobState> job);
  std::shared_ptr<JobState> find(const std::string& job_id) const;
  /// The live job whose current token is `token`, or null. Digest lookup, then a
  /// constant-time comparison of the stored digest.
  std::shared_ptr<JobState> authenticate(std::string_view token, std::int64_t now) const;
  /// True while the call's (job, generation) binding still holds.
  static bool binding_holds(const JobState& job, std::int64_t generation, std::int64_t now);

  /// Revocation: the token dies at once and the job's in-flight calls are cancelled.
  void revoke(JobState& job);
  /// Renewal: new generation and token digest; the old token dies as with revoke.
  void renew(JobState& job, std::int64_t generation, std::string token_sha256,
             std::int64_t expires_at);

  /// Waits for one of the job's max_concurrent_calls slots. False when the job was revoked or
  /// the daemon is stopping meanwhile.
  boost::asio::awaitable<bool> acquire_slot(std::shared_ptr<JobState> job);
  void release_slot(JobState& job);

  std::shared_ptr<CallState> begin_call(JobState& job, boost::json::value request_id);
  void end_call(JobState& job, const std::shared_ptr<CallState>& call);
  /// notifications/cancelled: cancels the job's in-flight call with that request id.
  bool cancel_request(JobState& job, const boost::json::value& request_id);
  /// The in-flight call with this request id, or null.
  static std::shared_ptr<CallState> find_call(const JobState& job,
                                              const boost::json::value& request_id);
  /// Daemon shutdown: cancel every call and wake every waiter.
  void cancel_all();

  std::size_t live_count(std::int64_t now) const;
  std::size_t calls_in_flight() const;
  std::vector<std::shared_ptr<JobState>> all() const;

 private:
  static void cancel_calls(JobState& job, CancelReason why);
  static void wake_waiters(JobState& job);

  int max_concurrent_;
  bool stopping_ = false;
  std::unordered_map<std::string, std::shared_ptr<JobState>> by_id_;
  std::unordered_map<std::string, std::shared_ptr<JobState>> by_token_digest_;
};

}  // namespace toolwarden::daemon
