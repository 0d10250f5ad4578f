// The stable error codes of SPEC §6, plus MISSING_ENV of §11. A denial is a value: code + short
// reason.
#pragma once

#include <string>
#include <string_view>
#include <variant>

namespace toolwarden::policy {

enum class ErrorCode {
  kDeniedTool,
  kDeniedArguments,
  kDeniedPath,
  kDeniedScope,
  kDeniedSymlink,
  kDeniedHardlink,
  kDeniedFile,
  kDeniedSize,
  kDeniedBinary,
  kDeniedReadOnly,
  kDeniedContent,
  kDeniedQuery,
  kDeniedCommand,
  kDeniedIntegrity,
  kDeniedConflict,
  kNotFound,
  kSandboxUnavailable,
  kCancelled,
  kLocalToolFailed,
  kMissingEnv,  // a custom tool's required_env or secrets not set in the daemon (SPEC §11)
};

/// The SPEC spelling, e.g. "DENIED_PATH".
std::string_view to_string(ErrorCode code);

struct Denial {
  ErrorCode code;
  std::string reason;  // never host paths outside the worktree, file contents or stderr
};

/// A value or the denial that prevented it.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Denial denial) : v_(std::move(denial)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<T>(v_); }
  const T& value() const { return std::get<T>(v_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Denial& denial() const { return std::get<Denial>(v_); }

 private:
  std::variant<T, Denial> v_;
};

/// Result of a check that has no value.
struct Allowed {};
using Check = Result<Allowed>;

inline Denial deny(ErrorCode code, std::string reason) { return Denial{code, std::move(reason)}; }

}  // namespace toolwarden::policy
