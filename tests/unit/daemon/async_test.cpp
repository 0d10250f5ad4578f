// The bridges of daemon/async.hpp: each piece of work runs on the thread it is meant for, in
// order, and the coroutine resumes on its own executor with the store's verdict.
#include "daemon/async.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <thread>

#include "store/clock.hpp"
#include "store/digest.hpp"

namespace toolwarden::daemon {
namespace {
namespace fs = std::filesystem;

class AsyncBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tw-async-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    store::Store s(dir_ / "store.db");
    store::Job j;
    j.id = "job_a";
    j.token_sha256 = store::sha256_hex("token");
    j.worktree = "/tmp";
    j.grant_json = "{}";
    j.created_at = store::unix_now();
    j.expires_at = j.created_at + 60;
    s.insert_job(j);
    writer_.emplace(std::move(s));
  }
  void TearDown() override {
    writer_.reset();
    fs::remove_all(dir_);
  }

  fs::path dir_;
  std::optional<store::Writer> writer_;
};

struct Seen {
  std::thread::id work, record, resumed;
  int work_value = 0;
  int seen_by_record = 0;
  std::int64_t seq = 0;
  bool failed = false;
};

TEST_F(AsyncBridgeTest, PoolWorkIsRecordedByTheWriterAndTheCallerResumesAtHome) {
  asio::io_context io;
  asio::thread_pool pool(2);
  Seen seen;
  const auto home = std::this_thread::get_id();
  std::promise<void> recorded;
  auto body = [&]() -> asio::awaitable<void> {
    int value = 0;
    auto work = [&]() noexcept {
      seen.work = std::this_thread::get_id();
      value = 42;
    };
    auto record = [&](store::Store& s) {
      seen.record = std::this_thread::get_id();
      seen.seen_by_record = value;
      const auto n = s.next_sequence("job_a");
      s.append_event({"job_a", n, "tool.completed", {}});
      recorded.set_value();
      return n;
    };
    auto [err, n] = co_await off_loop_then_store(pool, *writer_, std::move(work), record);
    seen.resumed = std::this_thread::get_id();
    seen.failed = err != nullptr;
    seen.seq = n;
  };
  asio::co_spawn(io, body, asio::detached);
  // Runs after the body's first step and holds the I/O thread: the hand-over from the pool to
  // the writer must not need it.
  bool recorded_while_io_busy = false;
  asio::post(io, [&] {
    recorded_while_io_busy =
        recorded.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  });
  io.run();
  pool.join();

  EXPECT_TRUE(recorded_while_io_busy);
  EXPECT_FALSE(seen.failed);
  EXPECT_EQ(seen.seq, 1);
  EXPECT_EQ(seen.seen_by_record, 42);
  EXPECT_NE(seen.work, home);
  EXPECT_NE(seen.record, home);
  EXPECT_NE(seen.record, seen.work);
  EXPECT_EQ(seen.resumed, home);
  writer_->stop();
  store::Store again(dir_ / "store.db");
  EXPECT_TRUE(again.verify_chain().ok);
}

TEST_F(AsyncBridgeTest, AFailedRecordResumesTheCallerWithTheErrorAndLeavesNothing) {
  asio::io_context io;
  asio::thread_pool pool(1);
  bool ran = false;
  std::exception_ptr error;
  auto body = [&]() -> asio::awaitable<void> {
    auto work = [&]() noexcept { ran = true; };
    auto record = [&](store::Store& s) {
      s.append_event({"job_a", s.next_sequence("job_a"), "tool.completed", {}});
      throw std::runtime_error("the disk is full");
      return 0;
    };
    auto [err, n] = co_await off_loop_then_store(pool, *writer_, std::move(work), record);
    error = err;
  };
  asio::co_spawn(io, body, asio::detached);
  io.run();
  pool.join();

  EXPECT_TRUE(ran);
  ASSERT_NE(error, nullptr);
  EXPECT_THROW(std::rethrow_exception(error), std::runtime_error);
  writer_->stop();
  // The item's savepoint was rolled back: no event, and its sequence number is not used up.
  store::Store again(dir_ / "store.db");
  EXPECT_EQ(again.next_sequence("job_a"), 1);
}

}  // namespace
}  // namespace toolwarden::daemon
