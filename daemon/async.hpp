// Bridges from the I/O thread to the threads that may block: the store's writer thread and
// the blocking pool. A coroutine awaits the work; its result comes back on the I/O executor.
// No exception crosses the event loop: failures arrive as an exception_ptr in a tuple.
//
// Pass a named lambda (`auto work = ...; co_await in_store(w, std::move(work))`): GCC 12
// destroys temporaries of a co_await full-expression twice when they own heap memory.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <exception>
#include <memory>
#include <tuple>
#include <type_traits>

#include "store/writer.hpp"

namespace toolwarden::daemon {

namespace asio = boost::asio;

/// Runs `fn(Store&)` inside the writer's next transaction; resumes after it committed.
template <class Fn, class T = std::invoke_result_t<Fn&, store::Store&>>
asio::awaitable<std::tuple<std::exception_ptr, T>> in_store(store::Writer& writer, Fn fn) {
  auto ex = co_await asio::this_coro::executor;
  auto initiate = [&writer, ex](auto handler, Fn work) {
    auto h = std::make_shared<decltype(handler)>(std::move(handler));
    auto out = std::make_shared<T>();
    writer.submit(
        [work = std::make_shared<Fn>(std::move(work)), out](store::Store& s) { *out = (*work)(s); },
        [h, out, ex](std::exception_ptr e) {
          asio::post(ex, [h, out, e]() mutable { std::move (*h)(e, std::move(*out)); });
        });
  };
  auto token = asio::as_tuple(asio::use_awaitable);
  co_return co_await asio::async_initiate<decltype(token), void(std::exception_ptr, T)>(
      initiate, token, std::move(fn));
}

/// Runs `fn()` on the blocking pool; resumes on the caller's executor with its result.
template <class Fn, class T = std::invoke_result_t<Fn&>>
asio::awaitable<std::tuple<std::exception_ptr, T>> off_loop(asio::thread_pool& pool, Fn fn) {
  auto ex = co_await asio::this_coro::executor;
  auto initiate = [&pool, ex](auto handler, Fn work) {
    auto h = std::make_shared<decltype(handler)>(std::move(handler));
    asio::post(pool, [h, ex, work = std::move(work)]() mutable {
      std::exception_ptr err;
      auto out = std::make_shared<T>();
      try {
        *out = work();
      } catch (...) {
        err = std::current_exception();
      }
      asio::post(ex, [h, out, err]() mutable { std::move (*h)(err, std::move(*out)); });
    });
  };
  auto token = asio::as_tuple(asio::use_awaitable);
  co_return co_await asio::async_initiate<decltype(token), void(std::exception_ptr, T)>(
      initiate, token, std::move(fn));
}

/// Runs `work()` on the blocking pool and then, handed over from the pool thread itself,
/// `record(Store&)` in the writer's next transaction; resumes on the caller's executor after
/// that committed. The same as off_loop followed by in_store, less one wake-up of the I/O
/// thread in between. `work` must not throw: whatever it did has to be recorded.
template <class Work, class Record, class T = std::invoke_result_t<Record&, store::Store&>>
asio::awaitable<std::tuple<std::exception_ptr, T>> off_loop_then_store(asio::thread_pool& pool,
                                                                       store::Writer& writer,
                                                                       Work work, Record record) {
  static_assert(std::is_nothrow_invocable_v<Work&>, "work must not throw");
  auto ex = co_await asio::this_coro::executor;
  auto initiate = [&pool, &writer, ex](auto handler, Work work, Record record) {
    auto h = std::make_shared<decltype(handler)>(std::move(handler));
    asio::post(pool, [&writer, h, ex, work = std::move(work),
                      record = std::move(record)]() mutable {
      work();
      auto out = std::make_shared<T>();
      writer.submit([record = std::make_shared<Record>(std::move(record)),
                     out](store::Store& s) { *out = (*record)(s); },
                    [h, out, ex](std::exception_ptr e) {
                      asio::post(ex, [h, out, e]() mutable { std::move (*h)(e, std::move(*out)); });
                    });
    });
  };
  auto token = asio::as_tuple(asio::use_awaitable);
  co_return co_await asio::async_initiate<decltype(token), void(std::exception_ptr, T)>(
      initiate, token, std::move(work), std::move(record));
}

}  // namespace toolwarden::daemon
