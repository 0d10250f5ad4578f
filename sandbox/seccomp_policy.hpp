// The seccomp-bpf filter of SPEC §8, compiled with libseccomp in the parent and handed to the
// child as raw BPF, so that the child only has to make one system call to load it.
#pragma once

#include <linux/filter.h>

#include <string>
#include <vector>

namespace toolwarden::sandbox {

struct SeccompOptions {
  /// Refuse socket(AF_UNIX, ...) so no pathname socket visible inside can be connected to
  /// (socketpair keeps working). On unless Landlock scopes pathname sockets itself.
  bool deny_unix_sockets = true;
  /// process_spawn:false for custom tools: no execve after the first and no fork.
  bool deny_spawn = false;
};

/// Compiles the filter; empty with `*error` set when libseccomp fails.
std::vector<sock_filter> compile_seccomp_filter(const SeccompOptions& options, std::string* error);

}  // namespace toolwarden::sandbox
