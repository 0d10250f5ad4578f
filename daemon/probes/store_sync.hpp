// The blocking twin of in_store (daemon/async.hpp) for code that already runs on the blocking
// pool: queue `fn(Store&)` for the writer's next transaction and wait for its commit. Never
// call it on the I/O thread or the writer's own thread.
#pragma once

#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "store/writer.hpp"

namespace toolwarden::daemon {

/// Returns fn's result once its transaction committed; rethrows what fn or the commit threw.
template <class Fn, class T = std::invoke_result_t<Fn&, store::Store&>>
T store_sync(store::Writer& writer, Fn fn) {
  auto promise = std::make_shared<std::promise<T>>();
  auto future = promise->get_future();
  auto out = std::make_shared<std::optional<T>>();
  auto work = std::make_shared<Fn>(std::move(fn));
  writer.submit([work, out](store::Store& s) { out->emplace((*work)(s)); },
                [promise, out](std::exception_ptr e) {
                  if (e || !out->has_value()) {
                    promise->set_exception(
                        e ? e : std::make_exception_ptr(std::runtime_error("store work lost")));
                  } else {
                    promise->set_value(std::move(**out));
                  }
                });
  return future.get();
}

}  // namespace toolwarden::daemon
