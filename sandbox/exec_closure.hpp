// The files a process must be allowed to execute to start `program` and nothing more: the
// program itself, a script's `#!` interpreter, and each ELF's loader (PT_INTERP), which the
// kernel opens for execution too. Used with Profile::deny_spawn, where Landlock grants the
// execute right on exactly these files.
#pragma once

#include <string>
#include <vector>

namespace toolwarden::sandbox {

/// Real paths (symlinks resolved), deduplicated, in the order found; empty with `*error` set
/// when a file cannot be read or a chain is longer than four steps.
std::vector<std::string> exec_closure(const std::string& program, std::string* error);

}  // namespace toolwarden::sandbox
