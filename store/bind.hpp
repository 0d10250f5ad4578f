// Binds a statement's parameters in order, one argument per `?`, so no call site numbers its
// parameters by hand. Internal to store/.
#pragma once

#include <SQLiteCpp/Statement.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace toolwarden::store {

/// Bytes bound as a BLOB, kept exactly, whatever their encoding.
struct Blob {
  std::string_view bytes;
};

namespace detail {

template <class T>
void bind_one(SQLite::Statement& q, int index, const T& value) {
  q.bind(index, value);
}
inline void bind_one(SQLite::Statement& q, int index, bool value) { q.bind(index, value ? 1 : 0); }
inline void bind_one(SQLite::Statement& q, int index, Blob value) {
  q.bind(index, value.bytes.data(), static_cast<int>(value.bytes.size()));
}
/// An empty optional is SQL NULL.
template <class T>
void bind_one(SQLite::Statement& q, int index, const std::optional<T>& value) {
  if (value) {
    bind_one(q, index, *value);
  } else {
    q.bind(index);
  }
}

}  // namespace detail

/// Clears the statement's previous bindings, then binds `values` to parameters 1..N.
template <class... Values>
void bind_all(SQLite::Statement& q, const Values&... values) {
  q.clearBindings();
  int index = 0;
  (detail::bind_one(q, ++index, values), ...);
}

}  // namespace toolwarden::store
