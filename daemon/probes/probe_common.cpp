#include "daemon/probes/probe_common.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <memory>

#include "protocol/mcp.hpp"
#include "protocol/tool_output.hpp"

namespace toolwarden::daemon {
namespace json = boost::json;

namespace {

struct DirCloser {
  void operator()(DIR* d) const noexcept { ::closedir(d); }
};

std::string realpath_or_self(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) != nullptr ? std::string(buf) : p;
}

}  // namespace

std::uint64_t free_disk_bytes(const std::filesystem::path& dir) {
  struct statvfs sv {};
  if (::statvfs(dir.c_str(), &sv) != 0) return 0;
  return static_cast<std::uint64_t>(sv.f_bavail) * static_cast<std::uint64_t>(sv.f_frsize);
}

bool visible_to(const ProbeCaller& caller, const std::optional<std::string>& owner) {
  return !caller.job_id || (owner && *owner == *caller.job_id);
}

std::vector<std::string> forbidden_roots(const std::string& worktree,
                                         const std::filesystem::path& state_dir) {
  return {realpath_or_self(worktree), realpath_or_self(state_dir.string())};
}

json::object run_view(const store::ProbeRunRecord& run, std::size_t output_chars) {
  json::error_code ec;
  json::value v = json::parse(run.run_json, ec);
  json::object o = !ec && v.is_object() ? std::move(v.get_object()) : json::object{};
  auto text = [output_chars](const std::string& data, bool* cut) {
    std::string t = protocol::valid_utf8(data);
    std::string shown = protocol::tail_chars(t, output_chars);
    *cut = shown.size() < t.size();
    return shown;
  };
  bool out_cut = false, err_cut = false;
  o["stdout"] = text(run.stdout_data, &out_cut);
  o["stderr"] = text(run.stderr_data, &err_cut);
  o["stdout_cut"] = out_cut;
  o["stderr_cut"] = err_cut;
  return o;
}

std::vector<std::string> list_entry_names(int dir_fd) {
  std::vector<std::string> names;
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return names;
  std::unique_ptr<DIR, DirCloser> dir(::fdopendir(fd));
  if (!dir) {
    ::close(fd);
    return names;
  }
  while (const dirent* e = ::readdir(dir.get())) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  return names;
}

}  // namespace toolwarden::daemon
