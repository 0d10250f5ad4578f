// The sandbox mechanisms custom tools are built on (SPEC §11): a worktree overlay whose changes
// stay out of the worktree, a proxy listener inside the sandbox's network namespace as the one
// reachable TCP endpoint, and process_spawn:false. Real sandboxes, run by a real Supervisor.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/exec_closure.hpp"
#include "sandbox/features.hpp"
#include "sandbox/supervisor.hpp"

namespace toolwarden::sandbox {
namespace {
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "tw-cap-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

Profile shell(const std::string& worktree, const std::string& script) {
  Profile p;
  p.argv = {"/bin/sh", "-c", script};
  p.env = build_environment({});
  p.worktree = worktree;
  p.limits.wall = std::chrono::seconds(20);
  return p;
}

class SandboxCapabilities : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!probe_features().sandbox_available()) GTEST_SKIP() << "no sandbox on this machine";
  }
  Supervisor supervisor;
};

TEST_F(SandboxCapabilities, OverlayKeepsEveryChangeOutOfTheWorktree) {
  TempDir wt, ov;
  write(wt.path() / "kept.txt", "old\n");
  write(wt.path() / "gone.txt", "bye\n");
  fs::create_directory(ov.path() / "upper");
  fs::create_directory(ov.path() / "work");
  Profile p = shell(wt.path().string(),
                    "echo new > created.txt && echo more >> kept.txt && rm gone.txt && "
                    "mkdir sub && echo x > sub/f && cat kept.txt");
  p.worktree_overlay_dir = ov.path().string();
  RunResult r = supervisor.run(std::move(p));
  ASSERT_EQ(r.state, State::completed) << r.detail;
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "old\nmore\n");  // the run saw its own change
  // The worktree is untouched ...
  EXPECT_EQ(slurp(wt.path() / "kept.txt"), "old\n");
  EXPECT_TRUE(fs::exists(wt.path() / "gone.txt"));
  EXPECT_FALSE(fs::exists(wt.path() / "created.txt"));
  // ... and the changes are in the upper layer, a deletion as a whiteout (char device 0/0).
  const fs::path upper = ov.path() / "upper";
  EXPECT_EQ(slurp(upper / "created.txt"), "new\n");
  EXPECT_EQ(slurp(upper / "kept.txt"), "old\nmore\n");
  EXPECT_EQ(slurp(upper / "sub" / "f"), "x\n");
  struct stat st {};
  ASSERT_EQ(::lstat((upper / "gone.txt").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, 0u);
}

TEST_F(SandboxCapabilities, OverlayDirectoryNamesAreNotParsedAsOptions) {
  // The layers are named by descriptors, so commas and colons in paths cannot inject options.
  TempDir wt, ov;
  const fs::path odd = ov.path() / "a,lowerdir=:b";
  fs::create_directories(odd / "upper");
  fs::create_directories(odd / "work");
  Profile p = shell(wt.path().string(), "echo x > f");
  p.worktree_overlay_dir = odd.string();
  RunResult r = supervisor.run(std::move(p));
  ASSERT_EQ(r.state, State::completed) << r.detail;
  EXPECT_EQ(slurp(odd / "upper" / "f"), "x\n");
}

TEST_F(SandboxCapabilities, OverlayUpperThatIsASymlinkIsRefused) {
  TempDir wt, ov, elsewhere;
  fs::create_directory(elsewhere.path() / "upper");
  fs::create_directory_symlink(elsewhere.path() / "upper", ov.path() / "upper");
  fs::create_directory(ov.path() / "work");
  // Repeated: the child fails within a few hundred microseconds of the clone, and however the
  // race with the supervisor's own post-clone work (a root run's pids group) goes, the result
  // is a setup failure, never a signal to this process (which, unlike the daemon, does not
  // ignore SIGPIPE).
  for (int i = 0; i < 20; ++i) {
    Profile p = shell(wt.path().string(), "echo x > f");
    p.worktree_overlay_dir = ov.path().string();
    RunResult r = supervisor.run(std::move(p));
    EXPECT_EQ(r.state, State::setup_failed);
    EXPECT_FALSE(fs::exists(elsewhere.path() / "upper" / "f"));
  }
}

// Accepts one connection on the listener the sandbox handed over, answers one line.
std::string serve_one(int listener) {
  int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (c < 0) return "accept failed";
  char buf[256] = {};
  ssize_t n = ::read(c, buf, sizeof buf - 1);
  const std::string got = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
  const std::string reply = "proxy saw: " + got;
  [[maybe_unused]] auto w = ::write(c, reply.data(), reply.size());
  ::close(c);
  return got;
}

TEST_F(SandboxCapabilities, ProxyListenerIsTheOnlyReachableTcpEndpoint) {
  if (!fs::exists("/bin/bash")) GTEST_SKIP() << "needs bash for /dev/tcp";
  TempDir wt;
  Profile p;
  p.argv = {
      "/bin/bash", "-c",
      "echo \"$HTTPS_PROXY\"; "
      "exec 3<>/dev/tcp/127.0.0.1/3128 && echo hello >&3 && head -c 100 <&3; echo; "
      "(exec 4<>/dev/tcp/127.0.0.1/80) 2>/dev/null && echo port80-open || echo port80-closed"};
  p.env = build_environment({});
  p.worktree = wt.path().string();
  p.network_proxy = true;
  p.limits.wall = std::chrono::seconds(20);
  std::promise<std::string> served;
  auto served_future = served.get_future();
  std::thread server;
  std::promise<RunResult> done;
  supervisor.start(
      std::move(p), {}, [&done](RunResult r) { done.set_value(std::move(r)); },
      [&](int fd) {
        server = std::thread([fd, &served] {
          served.set_value(serve_one(fd));
          ::close(fd);
        });
      });
  RunResult r = done.get_future().get();
  if (server.joinable()) server.join();
  ASSERT_EQ(r.state, State::completed) << r.detail;
  EXPECT_EQ(r.stdout_data, "http://127.0.0.1:3128\nproxy saw: hello\n\nport80-closed\n");
  ASSERT_EQ(served_future.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(served_future.get(), "hello\n");
}

TEST_F(SandboxCapabilities, WithoutTheProxyNoListenerIsMade) {
  TempDir wt;
  bool called = false;
  std::promise<RunResult> done;
  supervisor.start(
      shell(wt.path().string(), "echo $HTTP_PROXY"), {},
      [&done](RunResult r) { done.set_value(std::move(r)); }, [&called](int) { called = true; });
  RunResult r = done.get_future().get();
  EXPECT_EQ(r.state, State::completed);
  EXPECT_EQ(r.stdout_data, "\n");
  EXPECT_FALSE(called);
}

Profile python(const std::string& worktree, const std::string& code, std::string* error) {
  Profile p;
  p.argv = {"/usr/bin/python3", "-c", code};
  p.env = build_environment({});
  p.worktree = worktree;
  p.deny_spawn = true;
  p.executables = exec_closure("/usr/bin/python3", error);
  p.limits.wall = std::chrono::seconds(20);
  return p;
}

TEST_F(SandboxCapabilities, DenySpawnLetsTheInterpreterRunButNothingElseStart) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "needs /usr/bin/python3";
  TempDir wt;
  std::string error;
  RunResult ok = supervisor.run(python(wt.path().string(), "print('alive')", &error));
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(ok.state, State::completed) << ok.detail;
  EXPECT_EQ(ok.stdout_data, "alive\n") << ok.stderr_data;

  const char* spawn =
      "import subprocess\n"
      "try:\n"
      "    subprocess.run(['/bin/true'])\n"
      "    print('spawned')\n"
      "except OSError as e:\n"
      "    print('refused', e.errno)\n";
  RunResult r = supervisor.run(python(wt.path().string(), spawn, &error));
  ASSERT_EQ(r.state, State::completed) << r.detail;
  EXPECT_EQ(r.stdout_data.rfind("refused", 0), 0u) << r.stdout_data << r.stderr_data;

  const char* fork =
      "import os\ntry:\n    os.fork()\n    print('forked')\nexcept OSError:\n"
      "    print('no fork')\n";
  r = supervisor.run(python(wt.path().string(), fork, &error));
  EXPECT_EQ(r.stdout_data, "no fork\n") << r.stderr_data;

  // Replacing itself with another program is starting one, too.
  const char* exec =
      "import os\ntry:\n    os.execv('/bin/sh', ['sh', '-c', 'echo escaped'])\n"
      "except OSError as e:\n    print('exec refused', e.errno)\n";
  r = supervisor.run(python(wt.path().string(), exec, &error));
  EXPECT_EQ(r.stdout_data.rfind("exec refused", 0), 0u) << r.stdout_data << r.stderr_data;
}

TEST_F(SandboxCapabilities, DenySpawnAlsoCoversTheScratchAndAnonymousFiles) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "needs /usr/bin/python3";
  TempDir wt;
  std::string error;
  // A copy of a program in the writable scratch, and a memfd holding one.
  const char* code =
      "import os, shutil\n"
      "shutil.copy('/bin/true', '/tmp/t'); os.chmod('/tmp/t', 0o755)\n"
      "try:\n    os.execv('/tmp/t', ['t'])\nexcept OSError as e:\n    print('scratch', e.errno)\n"
      "try:\n    os.memfd_create('x')\n    print('memfd made')\n"
      "except OSError as e:\n    print('memfd', e.errno)\n";
  RunResult r = supervisor.run(python(wt.path().string(), code, &error));
  ASSERT_EQ(r.state, State::completed) << r.detail;
  EXPECT_EQ(r.stdout_data, "scratch 13\nmemfd 1\n") << r.stderr_data;  // EACCES, EPERM
}

TEST_F(SandboxCapabilities, EphemeralWritesStayInTheSandboxAndAreBounded) {
  TempDir wt, tool;
  write(tool.path() / "tool.sh", "original\n");
  Profile p = shell(wt.path().string(),
                    "echo changed > /toolwarden/tool/tool.sh && cat /toolwarden/tool/tool.sh && "
                    "(head -c 3000000 /dev/zero > /toolwarden/tool/big 2>/dev/null || echo full)");
  sandbox::Bind b{tool.path().string(), false, "/toolwarden/tool"};
  b.ephemeral_writes = true;
  p.extra_binds.push_back(b);
  p.limits.scratch_bytes = 1 << 20;
  RunResult r = supervisor.run(std::move(p));
  ASSERT_EQ(r.state, State::completed) << r.detail;
  EXPECT_EQ(r.stdout_data, "changed\nfull\n") << r.stderr_data;
  EXPECT_EQ(slurp(tool.path() / "tool.sh"), "original\n");  // the host folder is untouched
  EXPECT_FALSE(fs::exists(tool.path() / "big"));
}

TEST(ExecClosure, PythonNeedsItsLoaderAndAScriptItsInterpreter) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "needs /usr/bin/python3";
  std::string error;
  auto files = exec_closure("/usr/bin/python3", &error);
  ASSERT_EQ(files.size(), 2u) << error;
  EXPECT_EQ(files[0], fs::canonical("/usr/bin/python3").string());
  EXPECT_NE(files[1].find("ld-linux"), std::string::npos);

  TempDir d;
  write(d.path() / "tool.sh", "#!/bin/sh\necho hi\n");
  files = exec_closure((d.path() / "tool.sh").string(), &error);
  ASSERT_EQ(files.size(), 3u) << error;
  EXPECT_EQ(files[1], fs::canonical("/bin/sh").string());

  write(d.path() / "data.txt", "plain text, not a program\n");
  EXPECT_TRUE(exec_closure((d.path() / "data.txt").string(), &error).empty());
  EXPECT_FALSE(error.empty());
}

// Revocation cancels a call whose start is still queued behind other spawns (SPEC §3: "in-flight
// calls of the job are cancelled"). The cancel must win over the queued start: the payload never
// runs, instead of being spawned and killed a moment later.
TEST_F(SandboxCapabilities, CancelOfAQueuedStartMeansItNeverStarts) {
  TempDir wt;
  std::vector<std::future<RunResult>> ahead;
  std::vector<std::promise<RunResult>> promises(24);
  for (auto& pr : promises) {
    ahead.push_back(pr.get_future());
    supervisor.start(shell(wt.path().string(), "true"), nullptr,
                     [&pr](RunResult r) { pr.set_value(std::move(r)); });
  }
  Profile p = shell(wt.path().string(), "echo ran > marker");
  p.worktree_writable = true;
  std::promise<RunResult> done;
  auto target = done.get_future();
  const auto id = supervisor.start(std::move(p), nullptr,
                                   [&done](RunResult r) { done.set_value(std::move(r)); });
  supervisor.cancel(id);
  RunResult r = target.get();
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.detail, "cancelled before it started");
  EXPECT_FALSE(fs::exists(wt.path() / "marker"));
  for (auto& f : ahead) EXPECT_EQ(f.get().state, State::completed);
}

// Our children, zombies included (field 4 of /proc/PID/stat is the parent's pid).
std::vector<int> children_of_this_process() {
  std::vector<int> kids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = slurp(e.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == ::getpid()) kids.push_back(std::stoi(name));
  }
  return kids;
}

// A run is over once init reports that every other process of the sandbox is gone; init's
// own exit (the kernel tearing its namespaces down) goes on without holding up the result.
// The daemon's supervisor still reaps each of those inits: none is left behind, not even as a
// zombie.
TEST_F(SandboxCapabilities, FinishedRunsLeaveNoProcessBehind) {
  TempDir wt;
  for (int i = 0; i < 8; ++i) {
    RunResult r = supervisor.run(shell(wt.path().string(), "sleep 0.01 & echo $$"));
    ASSERT_EQ(r.state, State::completed) << r.detail;
    EXPECT_EQ(r.stdout_data, "2\n");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto kids = children_of_this_process();
  while (!kids.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    kids = children_of_this_process();
  }
  EXPECT_TRUE(kids.empty()) << kids.size() << " sandbox init(s) not reaped";
}

// The supervisor is a library: when a payload closes its stdin unread, the supervisor's write
// finds no reader, and that must not kill a host process that keeps SIGPIPE's default action.
TEST_F(SandboxCapabilities, StdinThePayloadNeverReadsRaisesNoSigpipeInTheHost) {
  struct sigaction dfl {};
  struct sigaction old {};
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(::sigaction(SIGPIPE, &dfl, &old), 0);
  TempDir wt;
  for (int i = 0; i < 3; ++i) {
    Profile p = shell(wt.path().string(), "exec 0<&-; sleep 0.05; exit 3");
    p.stdin_data.assign(std::size_t{1} << 20, 'x');  // more than a pipe holds
    RunResult r = supervisor.run(std::move(p));
    EXPECT_EQ(r.state, State::completed) << r.detail;
    EXPECT_EQ(r.exit_code, 3);
  }
  ::sigaction(SIGPIPE, &old, nullptr);
}

// A root supervisor counts each sandbox's processes in a cgroup v1 pids group of its own,
// "toolwarden-<owner pid>-<run id>" under its own pids cgroup. It removes each at the end of its
// run, and once, after its first start, sweeps away those a dead owner left behind (a daemon
// killed with kill -9) while keeping those of a live one.
TEST_F(SandboxCapabilities, PidsGroupsAreRemovedAndDeadOwnersGroupsSwept) {
  if (::geteuid() != 0) GTEST_SKIP() << "pids groups are made for a root supervisor only";
  std::string own;
  {
    std::ifstream f("/proc/self/cgroup");
    for (std::string line; std::getline(f, line);) {
      const auto a = line.find(':');
      const auto b = a == std::string::npos ? a : line.find(':', a + 1);
      if (b != std::string::npos && line.substr(a + 1, b - a - 1) == "pids")
        own = line.substr(b + 1);
    }
  }
  const fs::path base = fs::path("/sys/fs/cgroup/pids") / (own == "/" ? "" : own.substr(1));
  if (own.empty() || !fs::is_directory(base)) GTEST_SKIP() << "no cgroup v1 pids hierarchy";
  // A pid that is certainly dead: a child we reaped (not reused this soon).
  const pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const fs::path stale = base / ("toolwarden-" + std::to_string(dead) + "-7");
  const fs::path alive = base / ("toolwarden-" + std::to_string(::getppid()) + "-7");
  ASSERT_EQ(::mkdir(stale.c_str(), 0700), 0) << std::strerror(errno);
  ASSERT_EQ(::mkdir(alive.c_str(), 0700), 0) << std::strerror(errno);
  TempDir wt;
  RunResult r = supervisor.run(shell(wt.path().string(), "cat /proc/self/cgroup"));
  ASSERT_EQ(r.state, State::completed) << r.detail;
  EXPECT_EQ(r.limit_mode, "rlimit+proc+pids_cgroup");
  // The payload runs in the run's group (seen from the sandbox's cgroup namespace, whose root
  // is the supervisor's group).
  EXPECT_NE(r.stdout_data.find(":pids:/toolwarden-" + std::to_string(::getpid()) + "-"),
            std::string::npos)
      << r.stdout_data;
  EXPECT_FALSE(fs::exists(stale)) << "a dead owner's group was left";
  EXPECT_TRUE(fs::exists(alive)) << "a live owner's group was removed";
  ::rmdir(alive.c_str());
  for (const auto& e : fs::directory_iterator(base)) {
    EXPECT_NE(
        e.path().filename().string().rfind("toolwarden-" + std::to_string(::getpid()) + "-", 0), 0u)
        << "the run's own group is left: " << e.path();
  }
}

// A caller-mode supervisor (`toolwarden run`, doctor) supervises on the thread that calls
// run(): output arrives there, limits still fire, and one run follows another.
TEST(SupervisorCallerLoop, SupervisesOnTheCallingThread) {
  if (!probe_features().sandbox_available()) GTEST_SKIP() << "no sandbox on this machine";
  TempDir wt;
  Supervisor supervisor(Supervisor::Loop::caller);
  const auto me = std::this_thread::get_id();
  bool other_thread = false;
  std::string out;
  RunResult r = supervisor.run(shell(wt.path().string(), "echo one; echo two >&2; exit 3"),
                               [&](int stream, std::string_view data) {
                                 other_thread |= std::this_thread::get_id() != me;
                                 if (stream == 1) out.append(data);
                               });
  ASSERT_EQ(r.state, State::completed) << r.detail;
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(out, "one\n");
  EXPECT_EQ(r.stderr_data, "two\n");
  EXPECT_FALSE(other_thread) << "output was delivered on another thread";
  Profile slow = shell(wt.path().string(), "sleep 30");
  slow.limits.wall = std::chrono::milliseconds(300);
  const auto t0 = std::chrono::steady_clock::now();
  r = supervisor.run(std::move(slow));
  EXPECT_EQ(r.state, State::timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  r = supervisor.run(shell(wt.path().string(), "true"));
  EXPECT_EQ(r.state, State::completed) << r.detail;
  EXPECT_EQ(supervisor.active(), 0u);
}

}  // namespace
}  // namespace toolwarden::sandbox
