#include "daemon/config.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <boost/json/parse.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "sandbox/unique_fd.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;

namespace {

[[noreturn]] void bad(const std::string& why) { throw std::runtime_error(why); }

const json::value& need(const json::object& o, std::string_view key, std::string_view where) {
  const auto* v = o.if_contains(key);
  if (v == nullptr) bad(std::string(where) + ": missing \"" + std::string(key) + "\"");
  return *v;
}

std::string as_string(const json::value& v, std::string_view what) {
  if (!v.is_string()) bad(std::string(what) + " must be a string");
  return std::string(v.get_string());
}

std::vector<std::string> as_strings(const json::value& v, std::string_view what) {
  if (!v.is_array()) bad(std::string(what) + " must be an array of strings");
  std::vector<std::string> out;
  for (const auto& e : v.get_array()) out.push_back(as_string(e, what));
  return out;
}

std::int64_t as_int(const json::value& v, std::string_view what, std::int64_t lo, std::int64_t hi) {
  if (!v.is_int64() && !v.is_uint64()) bad(std::string(what) + " must be an integer");
  std::int64_t n = v.is_int64() ? v.get_int64() : static_cast<std::int64_t>(v.get_uint64());
  if (n < lo || n > hi) {
    bad(std::string(what) + " must be between " + std::to_string(lo) + " and " +
        std::to_string(hi));
  }
  return n;
}

CommandSpec parse_command(const json::value& v) {
  if (!v.is_object()) bad("commands[] entries must be objects");
  const auto& o = v.get_object();
  CommandSpec c;
  for (const auto& kv : o) {
    const std::string key(kv.key());
    if (key == "id") {
      c.id = as_string(kv.value(), "commands[].id");
    } else if (key == "argv") {
      c.argv = as_strings(kv.value(), "commands[].argv");
    } else if (key == "cwd") {
      c.cwd = as_string(kv.value(), "commands[].cwd");
    } else if (key == "timeout_s") {
      c.timeout_s = static_cast<int>(as_int(kv.value(), "commands[].timeout_s", 1, 3600));
    } else if (key == "env") {
      if (!kv.value().is_object()) bad("commands[].env must be an object of strings");
      for (const auto& e : kv.value().get_object()) {
        c.env[std::string(e.key())] = as_string(e.value(), "commands[].env values");
      }
    } else if (key == "read_paths") {
      c.read_paths = as_strings(kv.value(), "commands[].read_paths");
    } else {
      bad("unknown key \"commands[]." + key + "\"");
    }
  }
  need(o, "id", "commands[]");
  need(o, "argv", "commands[]");
  if (c.id.empty()) bad("commands[].id must not be empty");
  if (c.argv.empty() || c.argv[0].empty() || c.argv[0][0] != '/') {
    bad("command '" + c.id + "': argv[0] must be an absolute path");
  }
  return c;
}

}  // namespace

std::vector<std::string> Config::command_ids() const {
  std::vector<std::string> ids;
  for (const auto& c : commands) ids.push_back(c.id);
  return ids;
}

Config parse_config(const std::string& text) {
  json::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) bad("not valid JSON: " + ec.message());
  if (!v.is_object()) bad("the top level must be a JSON object");
  Config c;
  for (const auto& kv : v.get_object()) {
    const std::string key(kv.key());
    const auto& val = kv.value();
    if (key == "listen") {
      c.listen = as_string(val, "listen");
    } else if (key == "log_level") {
      LogLevel l;
      if (!parse_log_level(as_string(val, "log_level"), &l)) {
        bad("log_level must be debug, info, warn or error");
      }
      c.log_level = l;
    } else if (key == "allowed_origins") {
      c.allowed_origins = as_strings(val, "allowed_origins");
    } else if (key == "max_body_bytes") {
      c.max_body_bytes = static_cast<std::size_t>(as_int(val, "max_body_bytes", 1024, 64 << 20));
    } else if (key == "max_concurrent_calls") {
      c.max_concurrent_calls = static_cast<int>(as_int(val, "max_concurrent_calls", 1, 1024));
    } else if (key == "max_file_bytes") {
      c.max_file_bytes = static_cast<std::size_t>(as_int(val, "max_file_bytes", 1, 64 << 20));
    } else if (key == "sensitive_names") {
      c.sensitive_names = as_strings(val, "sensitive_names");
    } else if (key == "commands") {
      if (!val.is_array()) bad("commands must be an array");
      for (const auto& e : val.get_array()) {
        c.commands.push_back(parse_command(e));
        for (std::size_t i = 0; i + 1 < c.commands.size(); ++i) {
          if (c.commands[i].id == c.commands.back().id)
            bad("command id '" + c.commands.back().id + "' is registered twice");
        }
      }
    } else if (key == "probe_policies") {
      if (!val.is_array()) bad("probe_policies must be an array");
      std::string why;
      auto policies = policy::parse_probe_policies(val.get_array(), &why);
      if (!policies) bad(why);
      c.probe_policies = std::move(*policies);
    } else {
      bad("unknown key \"" + key + "\"");
    }
  }
  return c;
}

Config load_config(const std::filesystem::path& file) {
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) {
    if (errno == ENOENT) return Config{};
    bad("config " + file.string() + ": cannot stat: " + std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) bad("config " + file.string() + ": is a symlink; refusing it");
  if (!S_ISREG(st.st_mode)) bad("config " + file.string() + ": is not a regular file");
  if ((st.st_mode & 022) != 0) bad("config " + file.string() + ": is writable by group or others");
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) bad("config " + file.string() + ": cannot open: " + std::strerror(errno));
  // The rules again on what was opened: a file swapped in after the look is not read.
  struct stat opened {};
  if (::fstat(fd.get(), &opened) != 0 || !S_ISREG(opened.st_mode) || opened.st_ino != st.st_ino ||
      opened.st_dev != st.st_dev || (opened.st_mode & 022) != 0) {
    bad("config " + file.string() + ": changed while being opened; refusing it");
  }
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) bad("config " + file.string() + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > (4 << 20)) bad("config " + file.string() + ": larger than 4 MiB");
  }
  try {
    return parse_config(text);
  } catch (const std::runtime_error& e) {
    bad("config " + file.string() + ": " + e.what());
  }
}

}  // namespace toolwarden::daemon
