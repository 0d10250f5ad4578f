#include "sandbox/profile.hpp"

#include <array>

namespace toolwarden::sandbox {

std::string_view to_string(State s) {
  switch (s) {
    case State::completed:
      return "completed";
    case State::timeout:
      return "timeout";
    case State::output_limit:
      return "output_limit";
    case State::resource_limit:
      return "resource_limit";
    case State::setup_failed:
      return "setup_failed";
    case State::unsupported:
      return "unsupported";
  }
  return "setup_failed";
}

bool is_injection_variable(std::string_view name) {
  static constexpr std::array<std::string_view, 5> kPrefixes = {"LD_", "BASH_FUNC_", "DYLD_",
                                                                "GCONV_", "MALLOC_"};
  static constexpr std::array<std::string_view, 22> kNames = {
      "PYTHONPATH",        "PYTHONSTARTUP", "PYTHONHOME",     "PYTHONINSPECT", "PYTHONUSERBASE",
      "NODE_OPTIONS",      "NODE_PATH",     "PERL5LIB",       "PERL5OPT",      "PERLLIB",
      "RUBYLIB",           "RUBYOPT",       "BASH_ENV",       "ENV",           "SHELLOPTS",
      "BASHOPTS",          "PS4",           "PROMPT_COMMAND", "IFS",           "CDPATH",
      "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS"};
  for (auto p : kPrefixes) {
    if (name.substr(0, p.size()) == p) return true;
  }
  for (auto n : kNames) {
    if (name == n) return true;
  }
  return false;
}

std::vector<std::string> build_environment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/bin:/usr/bin:/bin"},
      {"HOME", "/tmp"},
      {"TMPDIR", "/tmp"},
      {"LANG", "C.UTF-8"},
      {"TERM", "dumb"},
  };
  for (const auto& [k, v] : extra) {
    if (k.empty() || k.find('=') != std::string::npos || is_injection_variable(k)) continue;
    env[k] = v;
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace toolwarden::sandbox
