#include "policy/error_code.hpp"

namespace toolwarden::policy {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kDeniedTool:
      return "DENIED_TOOL";
    case ErrorCode::kDeniedArguments:
      return "DENIED_ARGUMENTS";
    case ErrorCode::kDeniedPath:
      return "DENIED_PATH";
    case ErrorCode::kDeniedScope:
      return "DENIED_SCOPE";
    case ErrorCode::kDeniedSymlink:
      return "DENIED_SYMLINK";
    case ErrorCode::kDeniedHardlink:
      return "DENIED_HARDLINK";
    case ErrorCode::kDeniedFile:
      return "DENIED_FILE";
    case ErrorCode::kDeniedSize:
      return "DENIED_SIZE";
    case ErrorCode::kDeniedBinary:
      return "DENIED_BINARY";
    case ErrorCode::kDeniedReadOnly:
      return "DENIED_READ_ONLY";
    case ErrorCode::kDeniedContent:
      return "DENIED_CONTENT";
    case ErrorCode::kDeniedQuery:
      return "DENIED_QUERY";
    case ErrorCode::kDeniedCommand:
      return "DENIED_COMMAND";
    case ErrorCode::kDeniedIntegrity:
      return "DENIED_INTEGRITY";
    case ErrorCode::kDeniedConflict:
      return "DENIED_CONFLICT";
    case ErrorCode::kNotFound:
      return "NOT_FOUND";
    case ErrorCode::kSandboxUnavailable:
      return "SANDBOX_UNAVAILABLE";
    case ErrorCode::kCancelled:
      return "CANCELLED";
    case ErrorCode::kLocalToolFailed:
      return "LOCAL_TOOL_FAILED";
    case ErrorCode::kMissingEnv:
      return "MISSING_ENV";
  }
  return "LOCAL_TOOL_FAILED";
}

}  // namespace toolwarden::policy
