#include "sandbox/canary.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "sandbox/unique_fd.hpp"

namespace toolwarden::sandbox {
namespace fs = std::filesystem;

namespace {

std::string random_hex(std::size_t bytes) {
  std::random_device rd;  // the kernel's CSPRNG on Linux
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < bytes; ++i) {
    auto b = static_cast<unsigned>(rd()) & 0xff;
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 0xf]);
  }
  return s;
}

}  // namespace

CanaryResult run_canary(Supervisor& supervisor, const fs::path& scratch_parent) {
  CanaryResult out;
  const fs::path dir = scratch_parent / ("canary-" + random_hex(8));
  std::error_code ec;
  fs::create_directories(dir / "worktree", ec);
  if (ec) {
    out.detail = "cannot create the canary directory: " + ec.message();
    return out;
  }
  const std::string secret = "toolwarden-canary-" + random_hex(16);
  const fs::path secret_file = dir / "secret.txt";
  {
    UniqueFd fd(::open(secret_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd ||
        ::write(fd.get(), secret.data(), secret.size()) != static_cast<ssize_t>(secret.size())) {
      out.detail = "cannot write the canary secret";
      fs::remove_all(dir, ec);
      return out;
    }
  }
  std::string worktree = fs::canonical(dir / "worktree", ec).string();
  // Readers by several routes: the path itself, the host root through /proc, a parent walk.
  const std::string script = "cat " + secret_file.string() + "; cat /proc/1/root" +
                             secret_file.string() + "; cat " + worktree +
                             "/../secret.txt; ls -R / 2>/dev/null | head -c 100000; true";
  Profile p;
  p.argv = {"/bin/sh", "-c", script};
  p.env = build_environment({});
  p.worktree = worktree;
  p.limits.wall = std::chrono::seconds(20);
  RunResult r = supervisor.run(std::move(p));
  fs::remove_all(dir, ec);
  if (r.state != State::completed) {
    out.detail = "the canary reader did not run (" + std::string(to_string(r.state)) +
                 (r.detail.empty() ? "" : ": " + r.detail) + ")";
    return out;
  }
  if (r.stdout_data.find(secret) != std::string::npos ||
      r.stderr_data.find(secret) != std::string::npos) {
    out.detail = "a sandboxed reader saw the canary secret";
    return out;
  }
  out.passed = true;
  out.detail = "a sandboxed reader could not see a secret outside its paths";
  return out;
}

}  // namespace toolwarden::sandbox
