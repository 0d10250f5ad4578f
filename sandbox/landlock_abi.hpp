// Landlock's kernel ABI as of ABI 7. Debian 12's kernel headers stop at ABI 2, but the
// kernel the daemon runs on may offer more: the constants are stable UAPI, so they are
// spelled out here and used only when the probed ABI has them.
#pragma once

#include <cstdint>

namespace toolwarden::sandbox::landlock {

inline constexpr std::uint64_t kExecute = 1ull << 0;
inline constexpr std::uint64_t kWriteFile = 1ull << 1;
inline constexpr std::uint64_t kReadFile = 1ull << 2;
inline constexpr std::uint64_t kReadDir = 1ull << 3;
inline constexpr std::uint64_t kRemoveDir = 1ull << 4;
inline constexpr std::uint64_t kRemoveFile = 1ull << 5;
inline constexpr std::uint64_t kMakeChar = 1ull << 6;
inline constexpr std::uint64_t kMakeDir = 1ull << 7;
inline constexpr std::uint64_t kMakeReg = 1ull << 8;
inline constexpr std::uint64_t kMakeSock = 1ull << 9;
inline constexpr std::uint64_t kMakeFifo = 1ull << 10;
inline constexpr std::uint64_t kMakeBlock = 1ull << 11;
inline constexpr std::uint64_t kMakeSym = 1ull << 12;
inline constexpr std::uint64_t kRefer = 1ull << 13;     // ABI 2
inline constexpr std::uint64_t kTruncate = 1ull << 14;  // ABI 3
inline constexpr std::uint64_t kIoctlDev = 1ull << 15;  // ABI 5

inline constexpr std::uint64_t kNetBindTcp = 1ull << 0;     // ABI 4
inline constexpr std::uint64_t kNetConnectTcp = 1ull << 1;  // ABI 4

inline constexpr std::uint64_t kScopeAbstractUnixSocket = 1ull << 0;  // ABI 6
inline constexpr std::uint64_t kScopeSignal = 1ull << 1;              // ABI 6

inline constexpr int kRulePathBeneath = 1;
inline constexpr int kRuleNetPort = 2;  // ABI 4

struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;  // ABI 4
  std::uint64_t scoped;              // ABI 6
};

struct PathBeneathAttr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
} __attribute__((packed));

struct NetPortAttr {
  std::uint64_t allowed_access;
  std::uint64_t port;
} __attribute__((packed));

/// Every filesystem right the given ABI knows (all of them are handled, i.e. denied unless
/// a rule grants them).
constexpr std::uint64_t handled_fs(int abi) {
  std::uint64_t all = (1ull << 13) - 1;
  if (abi >= 2) all |= kRefer;
  if (abi >= 3) all |= kTruncate;
  if (abi >= 5) all |= kIoctlDev;
  return all;
}

inline constexpr std::uint64_t kFileRights =
    kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;
inline constexpr std::uint64_t kReadExec = kExecute | kReadFile | kReadDir;
inline constexpr std::uint64_t kReadOnly = kReadFile | kReadDir;
inline constexpr std::uint64_t kReadWrite = kReadExec | kWriteFile | kRemoveDir | kRemoveFile |
                                            kMakeDir | kMakeReg | kMakeFifo | kMakeSym | kRefer |
                                            kTruncate;

}  // namespace toolwarden::sandbox::landlock
