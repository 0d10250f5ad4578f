// The seccomp filters of seccomp_policy.hpp, compiled at build time (seccomp_gen.cpp) so that
// starting a sandbox costs no BPF compilation. Built for the architecture the build ran on,
// which is the one the binary runs on: the filter kills any other ABI.
#pragma once

#include <linux/filter.h>

#include <span>

#include "sandbox/seccomp_policy.hpp"

namespace toolwarden::sandbox {

/// The finished BPF program for these options; static storage, never empty.
std::span<const sock_filter> baked_seccomp_filter(const SeccompOptions& options);

}  // namespace toolwarden::sandbox
