#include "daemon/jobs.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "store/digest.hpp"

namespace toolwarden::daemon {
namespace asio = boost::asio;

void CallState::request_cancel(CancelReason why) {
  int expected = static_cast<int>(CancelReason::none);
  cancel.compare_exchange_strong(expected, static_cast<int>(why));
  if (on_cancel) on_cancel();
}

std::string_view JobState::state(std::int64_t now) const {
  if (record.revoked) return "revoked";
  if (now >= record.expires_at) return "expired";
  return "live";
}

void JobRegistry::add(std::shared_ptr<JobState> job) {
  if (!job->record.revoked) by_token_digest_[job->record.token_sha256] = job;
  by_id_[job->record.id] = std::move(job);
}

std::shared_ptr<JobState> JobRegistry::find(const std::string& job_id) const {
  auto it = by_id_.find(job_id);
  return it == by_id_.end() ? nullptr : it->second;
}

std::shared_ptr<JobState> JobRegistry::authenticate(std::string_view token,
                                                    std::int64_t now) const {
  if (token.empty()) return nullptr;
  const std::string digest = store::sha256_hex(token);
  auto it = by_token_digest_.find(digest);
  if (it == by_token_digest_.end()) return nullptr;
  const auto& job = it->second;
  if (!store::constant_time_equal(job->record.token_sha256, digest)) return nullptr;
  if (!job->live(now)) return nullptr;
  return job;
}

bool JobRegistry::binding_holds(const JobState& job, std::int64_t generation, std::int64_t now) {
  return job.live(now) && job.record.generation == generation;
}

void JobRegistry::revoke(JobState& job) {
  by_token_digest_.erase(job.record.token_sha256);
  job.record.revoked = true;
  cancel_calls(job, CancelReason::revoked);
  wake_waiters(job);
}

void JobRegistry::renew(JobState& job, std::int64_t generation, std::string token_sha256,
                        std::int64_t expires_at) {
  by_token_digest_.erase(job.record.token_sha256);
  cancel_calls(job, CancelReason::revoked);
  job.record.generation = generation;
  job.record.token_sha256 = std::move(token_sha256);
  job.record.expires_at = expires_at;
  if (!job.record.revoked) by_token_digest_[job.record.token_sha256] = by_id_.at(job.record.id);
}

asio::awaitable<bool> JobRegistry::acquire_slot(std::shared_ptr<JobState> job) {
  const auto generation = job->record.generation;
  if (job->running < max_concurrent_ && job->waiters.empty()) {
    ++job->running;
    co_return true;
  }
  auto ex = co_await asio::this_coro::executor;
  auto waiter = std::make_shared<JobState::Waiter>(
      JobState::Waiter{asio::steady_timer(ex, asio::steady_timer::time_point::max())});
  job->waiters.push_back(waiter);
  co_await waiter->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  const bool gone = stopping_ || job->record.revoked || job->record.generation != generation;
  if (waiter->granted && gone) release_slot(*job);  // pass the slot on
  co_return waiter->granted && !gone;
}

void JobRegistry::release_slot(JobState& job) {
  if (!job.waiters.empty()) {
    auto next = std::move(job.waiters.front());
    job.waiters.pop_front();
    next->granted = true;  // the slot moves to it; `running` stays the same
    next->timer.cancel();
    return;
  }
  --job.running;
}

std::shared_ptr<CallState> JobRegistry::begin_call(JobState& job, boost::json::value request_id) {
  auto call = std::make_shared<CallState>();
  call->request_id = std::move(request_id);
  call->generation = job.record.generation;
  if (stopping_) call->cancel = static_cast<int>(CancelReason::shutdown);
  job.in_flight.push_back(call);
  return call;
}

void JobRegistry::end_call(JobState& job, const std::shared_ptr<CallState>& call) {
  job.in_flight.remove(call);
}

bool JobRegistry::cancel_request(JobState& job, const boost::json::value& request_id) {
  bool found = false;
  for (auto& call : job.in_flight) {
    if (call->request_id == request_id) {
      call->request_cancel(CancelReason::client);
      found = true;
    }
  }
  return found;
}

std::shared_ptr<CallState> JobRegistry::find_call(const JobState& job,
                                                  const boost::json::value& request_id) {
  for (const auto& call : job.in_flight)
    if (call->request_id == request_id) return call;
  return nullptr;
}

void JobRegistry::cancel_all() {
  stopping_ = true;
  for (auto& [id, job] : by_id_) {
    cancel_calls(*job, CancelReason::shutdown);
    wake_waiters(*job);
  }
}

void JobRegistry::cancel_calls(JobState& job, CancelReason why) {
  for (auto& call : job.in_flight) {
    if (why == CancelReason::revoked) call->binding_lost.store(true);
    call->request_cancel(why);
  }
}

void JobRegistry::wake_waiters(JobState& job) {
  for (auto& w : job.waiters) w->timer.cancel();
  job.waiters.clear();
}

std::size_t JobRegistry::live_count(std::int64_t now) const {
  std::size_t n = 0;
  for (const auto& [id, job] : by_id_) n += job->live(now) ? 1 : 0;
  return n;
}

std::size_t JobRegistry::calls_in_flight() const {
  std::size_t n = 0;
  for (const auto& [id, job] : by_id_) n += job->in_flight.size();
  return n;
}

std::vector<std::shared_ptr<JobState>> JobRegistry::all() const {
  std::vector<std::shared_ptr<JobState>> out;
  for (const auto& [id, job] : by_id_) out.push_back(job);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a->record.created_at != b->record.created_at
               ? a->record.created_at < b->record.created_at
               : a->record.id < b->record.id;
  });
  return out;
}

}  // namespace toolwarden::daemon
