#include "sandbox/exec_closure.hpp"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>

#include "sandbox/unique_fd.hpp"

namespace toolwarden::sandbox {
namespace {

constexpr int kMaxChain = 4;

bool read_at(int fd, void* buf, std::size_t n, off_t off) {
  return ::pread(fd, buf, n, off) == static_cast<ssize_t>(n);
}

// The next file the kernel would open for execution after `path`: a script's interpreter or
// an ELF's loader; empty when there is none (a static ELF).
bool next_in_chain(const std::string& path, std::string* next, std::string* error) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    *error = "cannot open " + path;
    return false;
  }
  std::array<char, 256> head{};
  const ssize_t n = ::pread(fd.get(), head.data(), head.size() - 1, 0);
  if (n < 4) {
    *error = path + " is not an executable file";
    return false;
  }
  if (head[0] == '#' && head[1] == '!') {
    // "#!interp [arg]": the interpreter is the first word after optional blanks.
    const char* p = head.data() + 2;
    while (*p == ' ' || *p == '\t') ++p;
    const char* end = p;
    while (*end != '\0' && *end != ' ' && *end != '\t' && *end != '\n') ++end;
    *next = std::string(p, end);
    if (next->empty() || (*next)[0] != '/') {
      *error = path + ": the #! line does not name an absolute interpreter";
      return false;
    }
    return true;
  }
  if (std::memcmp(head.data(), ELFMAG, SELFMAG) != 0 || head[EI_CLASS] != ELFCLASS64) {
    *error = path + " is neither a script nor a 64-bit ELF file";
    return false;
  }
  Elf64_Ehdr eh{};
  if (!read_at(fd.get(), &eh, sizeof eh, 0) || eh.e_phentsize != sizeof(Elf64_Phdr)) {
    *error = path + ": unreadable ELF header";
    return false;
  }
  next->clear();
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    if (!read_at(fd.get(), &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph))) {
      *error = path + ": unreadable program header";
      return false;
    }
    if (ph.p_type != PT_INTERP) continue;
    if (ph.p_filesz < 2 || ph.p_filesz > 4096) {
      *error = path + ": implausible PT_INTERP";
      return false;
    }
    std::string interp(ph.p_filesz, '\0');
    if (!read_at(fd.get(), interp.data(), interp.size(), static_cast<off_t>(ph.p_offset))) {
      *error = path + ": unreadable PT_INTERP";
      return false;
    }
    interp.resize(std::strlen(interp.c_str()));
    *next = interp;
    return true;
  }
  return true;  // static: nothing else is executed
}

}  // namespace

std::vector<std::string> exec_closure(const std::string& program, std::string* error) {
  std::vector<std::string> out;
  std::string current = program;
  for (int step = 0; step < kMaxChain; ++step) {
    std::error_code ec;
    const std::string real = std::filesystem::canonical(current, ec).string();
    if (ec) {
      *error = "cannot resolve " + current;
      return {};
    }
    if (std::find(out.begin(), out.end(), real) != out.end()) return out;
    out.push_back(real);
    std::string next;
    if (!next_in_chain(real, &next, error)) return {};
    if (next.empty()) return out;
    current = next;
  }
  *error = "the chain of interpreters of " + program + " is too long";
  return {};
}

}  // namespace toolwarden::sandbox
