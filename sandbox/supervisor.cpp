#include "sandbox/supervisor.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "sandbox/child.hpp"
#include "sandbox/fd_passing.hpp"
#include "sandbox/features.hpp"
#include "sandbox/landlock_abi.hpp"
#include "sandbox/seccomp_baked.hpp"
#include "sandbox/unique_fd.hpp"
#include "store/digest.hpp"

namespace toolwarden::sandbox {

namespace {

// Writes to a pipe whose reader may be gone without raising SIGPIPE in the process that hosts
// the supervisor (the daemon ignores it; another program may not): SIGPIPE is blocked on this
// thread for the write and, when the write raised it, taken back before the mask is restored.
ssize_t write_without_sigpipe(int fd, const char* data, std::size_t len) {
  sigset_t pipe_only, old, pending;
  ::sigemptyset(&pipe_only);
  ::sigaddset(&pipe_only, SIGPIPE);
  ::sigpending(&pending);
  const bool was_pending = ::sigismember(&pending, SIGPIPE) == 1;
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  const ssize_t n = ::write(fd, data, len);
  const int saved = errno;
  if (n < 0 && saved == EPIPE && !was_pending) {
    const timespec now{};
    while (::sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return n;
}

using Clock = std::chrono::steady_clock;
constexpr const char* kNewRoot = "/tmp";
constexpr auto kSampleEvery = std::chrono::milliseconds(20);

// epoll tags: the low 3 bits say which fd of a run, the rest is the run id.
enum Tag : std::uint64_t {
  kPidfd = 1,
  kStdout = 2,
  kStderr = 3,
  kReport = 4,
  kTimer = 5,
  kStdin = 6,
  kProxy = 7  // the child sends the proxy's listening socket
};
constexpr std::uint64_t kWake = 0;     // the command eventfd
constexpr std::uint64_t kSampler = 7;  // the accounting timerfd

std::string read_link(const char* path) {
  char buf[4096];
  ssize_t n = ::readlink(path, buf, sizeof buf - 1);
  return n < 0 ? std::string() : std::string(buf, static_cast<std::size_t>(n));
}

bool write_file(const std::string& path, std::string_view text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  return fd && ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

// Everything the cloned child reads, owned here so its pointers stay valid.
struct Prepared {
  std::deque<std::string> strings;
  std::vector<MountStep> steps;
  std::vector<LandlockPath> landlock;
  std::vector<const char*> argv;
  std::vector<const char*> envp;
  sock_fprog fprog{};
  ChildPlan plan{};

  const char* keep(std::string s) { return strings.emplace_back(std::move(s)).c_str(); }
  const char* under_root(const std::string& path) { return keep(std::string(kNewRoot) + path); }
};

struct Run {
  std::uint64_t id = 0;
  Profile profile;
  Supervisor::OutputFn on_output;
  Supervisor::DoneFn on_done;
  Supervisor::ListenerFn on_listener;
  UniqueFd proxy_channel;  // our end; closed once the listener arrived (or the run ended)
  UniqueFd pidfd, out, err, report, timer, stdin_w;
  pid_t pid = -1;
  Clock::time_point started;
  // Set up once the child is cloned, while it builds its mounts: OpenSSL's first digest costs
  // a noticeable part of a short run's start-up, and nothing needs it earlier.
  std::optional<store::Sha256> out_hash, err_hash;
  std::uint64_t output_seen = 0;  // bytes of both streams, stored or not
  std::size_t stdin_off = 0;
  bool exited = false;         // init reaped (its pidfd said so)
  bool exit_reported = false;  // init's 'X' report read: every other process of it is gone
  std::vector<Report> reports;
  std::string report_partial;
  std::optional<State> forced;  // set when we killed it: timeout, limits, cancellation
  std::string limit;
  bool cancelled = false;
  std::uint64_t peak_memory = 0;
  std::string pids_cgroup;  // removed when the run is reaped
  RunResult result;
};

// The init of a finished run, still exiting: the kernel tears its namespaces down after its
// last report, which nothing need wait for. Reaped when its pidfd says so.
struct Exiting {
  UniqueFd pidfd;
  std::string pids_cgroup;  // when it could not be removed on the report (init still in it)
};

struct Command {
  enum Kind { start, cancel, stop } kind;
  std::unique_ptr<Run> run;
  std::uint64_t id = 0;
};

}  // namespace

struct Supervisor::Impl {
  explicit Impl(Loop where)
      : where(where),
        epoll(::epoll_create1(EPOLL_CLOEXEC)),
        wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        sampler(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)) {
    self_pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
    if (!epoll || !wake || !sampler || !self_pidfd)
      throw std::runtime_error("sandbox supervisor: cannot create epoll/eventfd/timerfd/pidfd");
    add(wake.get(), kWake);
    add(sampler.get(), kSampler);
    if (::geteuid() == 0) pids_base = features().pids_v1_cgroup;
    if (!pids_base.empty()) {
      pids_base_dir.reset(::open(pids_base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
      pids_base_tasks.reset(::open((pids_base + "/tasks").c_str(), O_WRONLY | O_CLOEXEC));
    }
    if (where == Loop::own_thread) thread = std::thread([this] { loop(); });
  }

  ~Impl() {
    post(Command{Command::stop, nullptr, 0});
    if (where == Loop::own_thread) {
      thread.join();
    } else {
      loop();
      // Caller mode does not wait for the inits of finished runs to finish exiting: reap those
      // that have; the rest die with this thread (PDEATHSIG) and are reaped by whoever this
      // process's children go to when it exits.
      for (auto& [id, e] : exiting) reap_exiting(e);
    }
  }

  void post(Command c) {
    {
      std::lock_guard lock(mu);
      commands.push_back(std::move(c));
    }
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake.get(), &one, sizeof one);
  }

  // cancel() records its id here as well as queueing the command. A start always precedes
  // its cancel in the queue, so a start that finds its id here was cancelled before it was
  // spawned; the cancel command erases the id again, so nothing accumulates.
  void request_cancel(std::uint64_t id) {
    {
      std::lock_guard lock(mu);
      cancel_requests.insert(id);
    }
    post(Command{Command::cancel, nullptr, id});
  }
  bool take_cancel_request(std::uint64_t id) {
    std::lock_guard lock(mu);
    return cancel_requests.erase(id) > 0;
  }
  // Kills every started run whose cancel is posted but not reached in the queue yet (its
  // command kills it again, harmlessly, and erases the id).
  void kill_cancelled_runs() {
    std::vector<std::uint64_t> ids;
    {
      std::lock_guard lock(mu);
      ids.assign(cancel_requests.begin(), cancel_requests.end());
    }
    for (const auto id : ids)
      if (auto it = runs.find(id); it != runs.end()) kill_run(*it->second, std::nullopt, "", true);
  }

  void add(int fd, std::uint64_t tag, std::uint32_t events = EPOLLIN) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev);
  }
  void remove(int fd) { ::epoll_ctl(epoll.get(), EPOLL_CTL_DEL, fd, nullptr); }

  // ------------------------------------------------------------------------------------------
  // Until stopped with no run left, or (caller mode) until `*until` is set.
  void loop(const bool* until = nullptr) {
    std::vector<epoll_event> events(64);
    while ((until == nullptr || !*until) &&
           (!stopping || !runs.empty() || (where == Loop::own_thread && !exiting.empty()))) {
      int n = ::epoll_wait(epoll.get(), events.data(), static_cast<int>(events.size()), -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      for (int i = 0; i < n; ++i) {
        const std::uint64_t tag = events[i].data.u64;
        if (tag == kWake) {
          drain_commands();
        } else if (tag == kSampler) {
          std::uint64_t ticks;
          [[maybe_unused]] auto r = ::read(sampler.get(), &ticks, sizeof ticks);
          sample_all();
        } else {
          auto it = runs.find(tag >> 3);
          if (it != runs.end()) {
            on_event(*it->second, static_cast<Tag>(tag & 7));
          } else if (auto ex = exiting.find(tag >> 3); ex != exiting.end()) {
            if (reap_exiting(ex->second)) exiting.erase(ex);
          }
        }
      }
      reap_finished();
      arm_sampler();
      // After the first batch, which holds the first start when there is one: the sweep is a
      // directory scan that need not delay it.
      if (!swept_stale_cgroups) {
        swept_stale_cgroups = true;
        remove_stale_cgroups();
      }
    }
  }

  void drain_commands() {
    std::uint64_t count;
    [[maybe_unused]] auto r = ::read(wake.get(), &count, sizeof count);
    std::deque<Command> batch;
    {
      std::lock_guard lock(mu);
      batch.swap(commands);
    }
    for (auto& c : batch) {
      switch (c.kind) {
        case Command::start:
          // Kills first, before every spawn: a batch can hold many starts, each spawn takes a
          // few milliseconds (far more under a sanitizer), and a cancel posted meanwhile must
          // not wait for all of them while its run sets up and starts its payload.
          kill_cancelled_runs();
          // A cancel posted before this start was reached (in this batch, or while the
          // spawns ahead of it ran) wins: the run never starts.
          if (take_cancel_request(c.run->id)) {
            finish_without_start(std::move(c.run), State::setup_failed,
                                 "cancelled before it started", true);
          } else {
            spawn(std::move(c.run));
          }
          break;
        case Command::cancel:
          take_cancel_request(c.id);
          if (auto it = runs.find(c.id); it != runs.end())
            kill_run(*it->second, std::nullopt, "", true);
          break;
        case Command::stop:
          stopping = true;
          for (auto& [id, run] : runs) kill_run(*run, std::nullopt, "", true);
          break;
      }
    }
  }

  // ------------------------------------------------------------------------------------------
  void finish_without_start(std::unique_ptr<Run> run, State state, std::string detail,
                            bool cancelled = false) {
    RunResult r;
    r.state = state;
    r.cancelled = cancelled;
    r.detail = std::move(detail);
    r.stdout_sha256 = store::sha256_hex("");
    r.stderr_sha256 = r.stdout_sha256;
    r.limit_mode = features().cgroup_v2_delegated ? "cgroup" : "rlimit+proc";
    run->on_done(std::move(r));
  }

  static const Features& features() { return probe_run_features(); }

  static MountStep symlink_step(Prepared& pp, const std::string& path, const std::string& target) {
    MountStep s{StepKind::symlink, pp.under_root(path)};
    s.link = pp.keep(target);
    return s;
  }
  static MountStep tmpfs_step(Prepared& pp, const std::string& path, const std::string& options) {
    MountStep s{StepKind::tmpfs, pp.under_root(path)};
    s.data = pp.keep(options);
    return s;
  }

  bool prepare(Run& run, Prepared& pp, std::string* why) {
    const Profile& prof = run.profile;
    const auto& f = features();
    auto exec_or_not = [&prof](std::uint64_t access) {
      return prof.deny_spawn ? access & ~landlock::kExecute : access;
    };
    // Listing "/" shows only what this root holds; no file right is granted by it.
    pp.landlock.push_back({pp.keep("/"), landlock::kReadDir});
    // Read-only system directories; symlinked ones (usrmerge) are recreated as symlinks.
    for (const char* dir : {"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}) {
      struct stat st {};
      if (::lstat(dir, &st) != 0) continue;
      if (S_ISLNK(st.st_mode)) {
        pp.steps.push_back(symlink_step(pp, dir, read_link(dir)));
      } else if (S_ISDIR(st.st_mode)) {
        if (!bind_source(pp, dir, true, false, why, nullptr, &st)) return false;
        pp.landlock.push_back({pp.keep(dir), exec_or_not(landlock::kReadExec)});
      }
    }
    // /etc essentials only: enough for the dynamic loader, users and name lookups.
    pp.steps.push_back(MountStep{StepKind::mkdir, pp.under_root("/etc")});
    for (const char* file :
         {"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/ld.so.cache",
          "/etc/ld.so.conf", "/etc/localtime", "/etc/ld.so.conf.d", "/etc/alternatives"}) {
      struct stat st {};
      if (::lstat(file, &st) != 0) continue;
      if (S_ISLNK(st.st_mode)) {
        pp.steps.push_back(symlink_step(pp, file, read_link(file)));
      } else if (!bind_source(pp, file, S_ISDIR(st.st_mode), false, why, nullptr, &st)) {
        return false;
      }
    }
    pp.landlock.push_back({pp.keep("/etc"), landlock::kReadOnly});
    pp.steps.push_back(MountStep{StepKind::proc, pp.under_root("/proc")});
    pp.landlock.push_back({pp.keep("/proc"), landlock::kReadOnly});
    // A minimal /dev: the harmless devices bound from the host, no tty.
    pp.steps.push_back(tmpfs_step(pp, "/dev", "mode=0755,size=64k"));
    for (const char* dev : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}) {
      if (!bind_source(pp, dev, false, true, why)) return false;
      pp.steps.back().device = true;
    }
    for (auto [name, target] :
         {std::pair{"/dev/fd", "/proc/self/fd"}, std::pair{"/dev/stdin", "/proc/self/fd/0"},
          std::pair{"/dev/stdout", "/proc/self/fd/1"},
          std::pair{"/dev/stderr", "/proc/self/fd/2"}}) {
      pp.steps.push_back(symlink_step(pp, name, target));
    }
    pp.landlock.push_back(
        {pp.keep("/dev"), landlock::kReadOnly | landlock::kWriteFile | landlock::kIoctlDev});
    // Private writable scratch, $HOME and $TMPDIR, bounded in size.
    pp.steps.push_back(
        tmpfs_step(pp, "/tmp", "mode=1777,size=" + std::to_string(prof.limits.scratch_bytes)));
    pp.landlock.push_back({pp.keep("/tmp"), exec_or_not(landlock::kReadWrite)});
    // The worktree at its own path: read-only unless asked, or an overlay whose changes the
    // caller applies afterwards.
    if (!prof.worktree.empty() && !prof.worktree_overlay_dir.empty()) {
      if (!overlay_source(pp, prof.worktree, prof.worktree_overlay_dir, why)) return false;
      pp.landlock.push_back({pp.keep(prof.worktree), exec_or_not(landlock::kReadWrite)});
    } else if (!prof.worktree.empty()) {
      if (!bind_source(pp, prof.worktree.c_str(), true, prof.worktree_writable, why)) return false;
      pp.landlock.push_back(
          {pp.keep(prof.worktree),
           exec_or_not(prof.worktree_writable ? landlock::kReadWrite : landlock::kReadExec)});
    }
    for (const auto& b : prof.extra_binds) {
      struct stat st {};
      if (::stat(b.path.c_str(), &st) != 0) {
        *why = "bind source missing";
        return false;
      }
      const std::string& target = b.target.empty() ? b.path : b.target;
      if (!bind_source(pp, b.path.c_str(), S_ISDIR(st.st_mode), b.writable, why, &target))
        return false;
      const bool writable = b.writable || b.ephemeral_writes;
      if (b.ephemeral_writes) {
        if (!S_ISDIR(st.st_mode)) {
          *why = "only a directory can take ephemeral writes";
          return false;
        }
        pp.steps.back().kind = StepKind::scratch_overlay;
        pp.steps.back().data =
            pp.keep("mode=0755,size=" + std::to_string(prof.limits.scratch_bytes));
      }
      pp.landlock.push_back(
          {pp.keep(target), exec_or_not(writable ? landlock::kReadWrite : landlock::kReadExec)});
    }
    // process_spawn:false: nothing above carries the right to execute; these files alone do.
    if (prof.deny_spawn) {
      for (const auto& exe : prof.executables)
        pp.landlock.push_back({pp.keep(exe), landlock::kExecute | landlock::kReadFile});
    }

    for (const auto& a : prof.argv) pp.argv.push_back(pp.keep(a));
    pp.argv.push_back(nullptr);
    for (const auto& e : prof.env) pp.envp.push_back(pp.keep(e));
    if (prof.network_proxy) {
      const std::string url = "http://127.0.0.1:" + std::to_string(kProxyPort);
      for (const char* name :
           {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"})
        pp.envp.push_back(pp.keep(std::string(name) + "=" + url));
    }
    pp.envp.push_back(nullptr);

    auto& plan = pp.plan;
    plan.new_root = kNewRoot;
    plan.steps = pp.steps.data();
    plan.step_count = static_cast<int>(pp.steps.size());
    plan.landlock_paths = pp.landlock.data();
    plan.landlock_count = static_cast<int>(pp.landlock.size());
    plan.landlock_abi = f.landlock_abi;
    plan.landlock_handled_fs = landlock::handled_fs(f.landlock_abi);
    plan.argv = pp.argv.data();
    plan.envp = pp.envp.data();
    plan.cwd =
        pp.keep(prof.cwd.empty() ? (prof.worktree.empty() ? std::string("/tmp") : prof.worktree)
                                 : prof.cwd);
    plan.max_processes = static_cast<std::uint64_t>(prof.limits.max_processes);
    plan.max_open_files = static_cast<std::uint64_t>(prof.limits.max_open_files);
    plan.file_size_bytes = prof.limits.file_size_bytes;
    plan.cpu_seconds = static_cast<std::uint64_t>(prof.limits.cpu_seconds);
    plan.cap_last_cap = f.cap_last_cap;
    return true;
  }

  // Records a bind with the identity of its source now; the child opens the path without
  // following symlinks and refuses anything else (a swap in between).
  // `known` is the lstat the caller made of `path` already, if it did.
  bool bind_source(Prepared& pp, const char* path, bool is_dir, bool writable, std::string* why,
                   const std::string* target = nullptr, const struct stat* known = nullptr) {
    struct stat st {};
    if (known != nullptr) {
      st = *known;
    } else if (::lstat(path, &st) != 0) {
      st.st_mode = 0;
    }
    if (st.st_mode == 0 || S_ISLNK(st.st_mode) || (is_dir != S_ISDIR(st.st_mode))) {
      *why = std::string("bind source is missing or not a ") + (is_dir ? "directory" : "file");
      return false;
    }
    MountStep step{StepKind::bind, pp.under_root(target != nullptr ? *target : path)};
    step.src = pp.keep(path);
    step.src_dev = st.st_dev;
    step.src_ino = st.st_ino;
    step.src_is_dir = is_dir;
    step.writable = writable;
    pp.steps.push_back(step);
    return true;
  }

  // The worktree as an overlay: its identity is checked like a bind's; the upper and work
  // directories are the caller's (under the daemon's state dir).
  bool overlay_source(Prepared& pp, const std::string& worktree, const std::string& dir,
                      std::string* why) {
    if (!bind_source(pp, worktree.c_str(), true, false, why)) return false;
    MountStep& step = pp.steps.back();
    step.kind = StepKind::overlay;
    step.upper = pp.keep(dir + "/upper");
    step.work = pp.keep(dir + "/work");
    return true;
  }

  void spawn(std::unique_ptr<Run> run) {
    run->id = next_id_for_spawn(run.get());
    const auto& f = features();
    if (!f.sandbox_available()) {
      return finish_without_start(std::move(run), State::unsupported,
                                  "the sandbox is unavailable: missing " + f.missing_required());
    }
    if (stopping)
      return finish_without_start(std::move(run), State::setup_failed, "the daemon is stopping");
    std::string why;
    const auto prog = baked_seccomp_filter(
        SeccompOptions{.deny_unix_sockets = true, .deny_spawn = run->profile.deny_spawn});
    Prepared pp;
    if (!prepare(*run, pp, &why))
      return finish_without_start(std::move(run), State::setup_failed, why);
    pp.fprog.len = static_cast<unsigned short>(prog.size());
    pp.fprog.filter = const_cast<sock_filter*>(prog.data());
    pp.plan.seccomp = &pp.fprog;

    int out[2], err[2], rep[2], in[2] = {-1, -1};
    if (::pipe2(out, O_CLOEXEC) != 0)
      return finish_without_start(std::move(run), State::setup_failed, "pipe");
    UniqueFd out_r(out[0]), out_w(out[1]);
    if (::pipe2(err, O_CLOEXEC) != 0)
      return finish_without_start(std::move(run), State::setup_failed, "pipe");
    UniqueFd err_r(err[0]), err_w(err[1]);
    if (::pipe2(rep, O_CLOEXEC) != 0)
      return finish_without_start(std::move(run), State::setup_failed, "pipe");
    UniqueFd rep_r(rep[0]), rep_w(rep[1]);
    UniqueFd in_r, in_w;
    if (run->profile.stdin_data.empty()) {
      in_r.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    } else if (::pipe2(in, O_CLOEXEC) == 0) {
      in_r.reset(in[0]);
      in_w.reset(in[1]);
    }
    if (!in_r) return finish_without_start(std::move(run), State::setup_failed, "stdin");

    auto& plan = pp.plan;
    // The child maps our own uid/gid into its user namespace itself — the one mapping an
    // unprivileged user may write, and the one under which worktree files stay theirs — so it
    // never waits for us.
    const uid_t uid = ::geteuid();
    const gid_t gid = ::getegid();
    plan.parent_pidfd = self_pidfd.get();
    plan.uid_map = pp.keep(std::to_string(uid) + " " + std::to_string(uid) + " 1\n");
    plan.gid_map = pp.keep(std::to_string(gid) + " " + std::to_string(gid) + " 1\n");
    plan.report_fd = rep_w.get();
    plan.stdin_fd = in_r.get();
    plan.stdout_fd = out_w.get();
    plan.stderr_fd = err_w.get();
    // Root's own processes are exempt from RLIMIT_NPROC, so a root daemon's sandbox counts
    // processes in a pids cgroup instead. We make it after the clone, while the child builds its
    // mounts, and tell the child on a pipe; it joins before it forks anything.
    UniqueFd cgroup_sync_r, cgroup_sync_w;
    plan.cgroup_sync_fd = plan.cgroup_dir_fd = plan.cgroup_leave_fd = -1;
    plan.cgroup_tasks_path = nullptr;
    if (pids_base_dir && pids_base_tasks) {
      int sync[2];
      if (::pipe2(sync, O_CLOEXEC) != 0)
        return finish_without_start(std::move(run), State::setup_failed, "pipe");
      cgroup_sync_r.reset(sync[0]);
      cgroup_sync_w.reset(sync[1]);
      plan.cgroup_sync_fd = cgroup_sync_r.get();
      plan.cgroup_dir_fd = pids_base_dir.get();
      plan.cgroup_tasks_path = pp.keep(pids_group_name(run->id) + "/tasks");
      plan.cgroup_leave_fd = pids_base_tasks.get();
    }
    UniqueFd proxy_child;
    plan.proxy_channel_fd = -1;
    plan.proxy_port = kProxyPort;
    if (run->profile.network_proxy) {
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
        return finish_without_start(std::move(run), State::setup_failed, "socketpair");
      run->proxy_channel.reset(pair[0]);
      proxy_child.reset(pair[1]);
      plan.proxy_channel_fd = proxy_child.get();
    }

    int pidfd = -1;
    clone_args args{};
    args.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                 CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_PIDFD;
    args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    run->started = Clock::now();
    long pid = ::syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) child_main(plan);
    proxy_child.reset();
    if (pid > 0 && cgroup_sync_w) {
      run->pids_cgroup = make_pids_cgroup(run->id, run->profile.limits.max_processes);
      const char made = run->pids_cgroup.empty() ? 'N' : 'Y';
      // Our read end is still open, so a child that already died (a failed setup) cannot make
      // this write fail with EPIPE.
      [[maybe_unused]] auto n = ::write(cgroup_sync_w.get(), &made, 1);
    }
    cgroup_sync_w.reset();
    cgroup_sync_r.reset();
    if (pid < 0) {
      // EPERM/ENOSPC/EINVAL: namespaces refused by this kernel or its sysctls — no sandbox.
      const bool refused = errno == EPERM || errno == ENOSPC || errno == EINVAL || errno == ENOSYS;
      return finish_without_start(
          std::move(run), refused ? State::unsupported : State::setup_failed,
          std::string("cannot create the sandbox's namespaces: ") + std::strerror(errno));
    }
    run->pid = static_cast<pid_t>(pid);
    run->pidfd.reset(pidfd);
    run->out_hash.emplace();
    run->err_hash.emplace();
    run->out = std::move(out_r);
    run->err = std::move(err_r);
    run->report = std::move(rep_r);
    run->stdin_w = std::move(in_w);
    for (int fd : {run->out.get(), run->err.get(), run->report.get()})
      ::fcntl(fd, F_SETFL, O_NONBLOCK);
    const std::uint64_t base = run->id << 3;
    add(run->pidfd.get(), base | kPidfd);
    add(run->out.get(), base | kStdout);
    add(run->err.get(), base | kStderr);
    add(run->report.get(), base | kReport);
    if (run->stdin_w) {
      ::fcntl(run->stdin_w.get(), F_SETFL, O_NONBLOCK);
      add(run->stdin_w.get(), base | kStdin, EPOLLOUT);
    }
    run->timer.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    itimerspec its{};
    const auto wall = run->profile.limits.wall;
    its.it_value.tv_sec = static_cast<time_t>(wall.count() / 1000);
    its.it_value.tv_nsec = static_cast<long>((wall.count() % 1000) * 1'000'000);
    ::timerfd_settime(run->timer.get(), 0, &its, nullptr);
    add(run->timer.get(), base | kTimer);
    if (run->proxy_channel) add(run->proxy_channel.get(), base | kProxy);
    runs.emplace(run->id, std::move(run));
  }

  std::uint64_t next_id_for_spawn(Run* run) { return run->id; }

  // pids groups left by a daemon that was killed (kill -9) are empty once its sandboxes died
  // with it; remove those whose owner pid is gone.
  void remove_stale_cgroups() const {
    const std::string& base = pids_base;
    if (base.empty()) return;
    DIR* d = ::opendir(base.c_str());
    if (d == nullptr) return;
    std::unique_ptr<DIR, int (*)(DIR*)> guard(d, &::closedir);
    while (dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (name.rfind("toolwarden-", 0) != 0) continue;
      auto dash = name.find('-', 11);
      if (dash == std::string_view::npos) continue;
      const std::string owner(name.substr(11, dash - 11));
      if (owner.find_first_not_of("0123456789") != std::string::npos) continue;
      if (::kill(static_cast<pid_t>(std::stol(owner)), 0) == 0 || errno == EPERM) continue;
      ::rmdir((base + "/" + std::string(name)).c_str());
    }
  }

  // A cgroup v1 pids group for one sandbox (this machine's kind of hierarchy when cgroup v2
  // has no pids controller); empty when unavailable.
  static std::string pids_group_name(std::uint64_t id) {
    return "toolwarden-" + std::to_string(::getpid()) + "-" + std::to_string(id);
  }

  std::string make_pids_cgroup(std::uint64_t id, int max_processes) const {
    const std::string& base = pids_base;
    if (base.empty()) return {};
    std::string dir = base + "/" + pids_group_name(id);
    if (::mkdir(dir.c_str(), 0700) != 0) return {};
    // The same count RLIMIT_NPROC keeps for an unprivileged user: init and its descendants.
    if (!write_file(dir + "/pids.max", std::to_string(max_processes))) {
      ::rmdir(dir.c_str());
      return {};
    }
    return dir;
  }

  // ------------------------------------------------------------------------------------------
  void on_event(Run& run, Tag tag) {
    switch (tag) {
      case kPidfd: {
        siginfo_t info{};
        if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(run.pidfd.get()), &info,
                     WEXITED | WNOHANG) == 0 &&
            info.si_pid != 0) {
          run.exited = true;
          remove(run.pidfd.get());
          remove(run.timer.get());
        }
        break;
      }
      case kStdout:
        read_stream(run, 1);
        break;
      case kStderr:
        read_stream(run, 2);
        break;
      case kReport:
        read_reports(run);
        break;
      case kTimer:
        kill_run(run, State::timeout, "wall", false);
        break;
      case kStdin:
        write_stdin(run);
        break;
      case kProxy:
        receive_listener(run);
        break;
    }
  }

  void receive_listener(Run& run) {
    const int fd = receive_fd(run.proxy_channel.get());
    if (fd == -2) return;  // not yet
    remove(run.proxy_channel.get());
    run.proxy_channel.reset();
    if (fd < 0) return;  // EOF: the child failed before (its report says why)
    if (run.on_listener) {
      run.on_listener(fd);
    } else {
      ::close(fd);
    }
  }

  void write_stdin(Run& run) {
    const auto& data = run.profile.stdin_data;
    while (run.stdin_off < data.size()) {
      ssize_t n = write_without_sigpipe(run.stdin_w.get(), data.data() + run.stdin_off,
                                        data.size() - run.stdin_off);
      if (n < 0) {
        if (errno == EAGAIN) return;
        break;  // EPIPE: the payload closed its stdin
      }
      run.stdin_off += static_cast<std::size_t>(n);
    }
    remove(run.stdin_w.get());
    run.stdin_w.reset();
  }

  void read_stream(Run& run, int stream) {
    UniqueFd& fd = stream == 1 ? run.out : run.err;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return;  // EAGAIN
      if (n == 0) {
        remove(fd.get());
        fd.reset();
        return;
      }
      std::string_view chunk(buf, static_cast<std::size_t>(n));
      (stream == 1 ? run.out_hash : run.err_hash)->update(chunk);
      const std::uint64_t budget = run.profile.limits.output_bytes;
      const std::uint64_t before = run.output_seen;
      run.output_seen += chunk.size();
      if (before < budget) {
        auto keep = chunk.substr(
            0, static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), budget - before)));
        (stream == 1 ? run.result.stdout_data : run.result.stderr_data).append(keep);
        if (run.on_output) run.on_output(stream, keep);
      }
      if (run.output_seen > budget) {
        run.result.truncated = true;
        kill_run(run, State::output_limit, "output", false);
      }
    }
  }

  void read_reports(Run& run) {
    char buf[512];
    for (;;) {
      ssize_t n = ::read(run.report.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return;
      if (n == 0) {
        remove(run.report.get());
        run.report.reset();
        return;
      }
      run.report_partial.append(buf, static_cast<std::size_t>(n));
      while (run.report_partial.size() >= sizeof(Report)) {
        Report r;
        std::memcpy(&r, run.report_partial.data(), sizeof r);
        run.report_partial.erase(0, sizeof r);
        run.reports.push_back(r);
        if (r.kind == 'X') {
          // Init's last word: nothing follows it but init's exit.
          run.exit_reported = true;
          remove(run.report.get());
          run.report.reset();
          return;
        }
      }
    }
  }

  void kill_run(Run& run, std::optional<State> state, const std::string& limit, bool cancelled) {
    if (!run.forced && !run.cancelled) {
      if (state) run.forced = state;
      run.limit = limit;
      run.cancelled = cancelled;
    }
    // Killing init (PID 1) makes the kernel kill every process of its PID namespace.
    if (run.pidfd && !run.exited)
      ::syscall(SYS_pidfd_send_signal, run.pidfd.get(), SIGKILL, nullptr, 0);
  }

  // ------------------------------------------------------------------------------------------
  // Accounting of the whole tree: every process of the sandbox descends from its init.
  struct Usage {
    std::uint64_t rss = 0;
    std::uint64_t cpu_ticks = 0;
    int processes = 0;
  };

  static void add_usage(pid_t pid, Usage& u, int depth) {
    if (depth > 64) return;
    std::string base = "/proc/" + std::to_string(pid);
    char buf[1024];
    // Anonymous resident memory (resident minus file-backed pages) from the kernel's counters:
    // cheap to read, unlike smaps, which walks page tables under the process's mmap lock and
    // slows the payload's own page faults. Copy-on-write pages after fork count once per
    // process, which errs on the side of stopping early.
    // Init (depth 0) is a copy-on-write clone of the daemon: its pages are the daemon's, not
    // the payload's, so only its descendants' memory counts.
    UniqueFd statm(depth == 0 ? -1 : ::open((base + "/statm").c_str(), O_RDONLY | O_CLOEXEC));
    if (statm) {
      ssize_t n = ::read(statm.get(), buf, sizeof buf - 1);
      if (n > 0) {
        buf[n] = '\0';
        unsigned long size = 0, resident = 0, shared = 0;
        if (std::sscanf(buf, "%lu %lu %lu", &size, &resident, &shared) == 3 && resident >= shared) {
          u.rss += (resident - shared) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
        }
      }
    }
    UniqueFd stat(::open((base + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
    if (stat) {
      ssize_t n = ::read(stat.get(), buf, sizeof buf - 1);
      if (n > 0) {
        buf[n] = '\0';
        // Fields after the command name: utime(14) stime(15) cutime(16) cstime(17).
        const char* p = std::strrchr(buf, ')');
        unsigned long long ut = 0, st = 0;
        long long cut = 0, cst = 0;
        if (p != nullptr &&
            std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
                        &ut, &st, &cut, &cst) == 4) {
          u.cpu_ticks += ut + st + static_cast<std::uint64_t>(std::max(0LL, cut + cst));
        }
      }
    }
    DIR* tasks = ::opendir((base + "/task").c_str());
    if (tasks == nullptr) return;
    std::unique_ptr<DIR, int (*)(DIR*)> guard(tasks, &::closedir);
    while (dirent* t = ::readdir(tasks)) {
      if (t->d_name[0] == '.') continue;
      UniqueFd children(
          ::open((base + "/task/" + t->d_name + "/children").c_str(), O_RDONLY | O_CLOEXEC));
      if (!children) continue;
      std::string list;
      ssize_t n;
      while ((n = ::read(children.get(), buf, sizeof buf)) > 0)
        list.append(buf, static_cast<std::size_t>(n));
      std::size_t pos = 0;
      while (pos < list.size()) {
        std::size_t end = list.find(' ', pos);
        if (end == std::string::npos) end = list.size();
        if (end > pos) {
          ++u.processes;
          add_usage(static_cast<pid_t>(std::stol(list.substr(pos, end - pos))), u, depth + 1);
        }
        pos = end + 1;
      }
    }
  }

  void sample_all() {
    static const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
    for (auto& [id, run] : runs) {
      if (run->exited || run->forced) continue;
      Usage u;
      add_usage(run->pid, u, 0);
      run->peak_memory = std::max(run->peak_memory, u.rss);
      const auto& lim = run->profile.limits;
      if (u.rss > lim.memory_bytes) {
        kill_run(*run, State::resource_limit, "memory", false);
      } else if (u.processes + 1 + (run->pids_cgroup.empty() ? 2 : 0) >= lim.max_processes ||
                 pids_limit_hit(*run)) {
        // The kernel refuses the fork that would pass the limit (RLIMIT_NPROC counts init and
        // the tree; so does the pids group). A pids group also counts its refusals, so the
        // state is exact; without one, a tree sampled within two of the limit is taken to be
        // pressing against it, and refusals between samples go unseen (doctor: degraded).
        kill_run(*run, State::resource_limit, "processes", false);
      } else if (u.cpu_ticks > static_cast<std::uint64_t>(lim.cpu_seconds) *
                                   static_cast<std::uint64_t>(ticks_per_second)) {
        kill_run(*run, State::resource_limit, "cpu", false);
      }
    }
  }

  // A fork was refused by the run's pids group ("max" in pids.events).
  static bool pids_limit_hit(const Run& run) {
    if (run.pids_cgroup.empty()) return false;
    UniqueFd fd(::open((run.pids_cgroup + "/pids.events").c_str(), O_RDONLY | O_CLOEXEC));
    char buf[128];
    ssize_t n = fd ? ::read(fd.get(), buf, sizeof buf - 1) : -1;
    if (n <= 0) return false;
    buf[n] = '\0';
    unsigned long hits = 0;
    return std::sscanf(buf, "max %lu", &hits) == 1 && hits > 0;
  }

  void arm_sampler() {
    const bool want = !runs.empty();
    if (want == sampler_armed) return;
    itimerspec its{};
    if (want) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(kSampleEvery).count();
      its.it_value.tv_nsec = ns;
      its.it_interval.tv_nsec = ns;
    }
    ::timerfd_settime(sampler.get(), 0, &its, nullptr);
    sampler_armed = want;
  }

  // ------------------------------------------------------------------------------------------
  void reap_finished() {
    for (auto it = runs.begin(); it != runs.end();) {
      Run& run = *it->second;
      // Finished once init has exited, or has reported that every other process of its PID
      // namespace is gone, and both output streams are at EOF.
      if (!(run.exited || run.exit_reported) || run.out || run.err || run.report) {
        ++it;
        continue;
      }
      complete(run);
      // Empty once init has left it (just before its report) or has been reaped.
      if (!run.pids_cgroup.empty() && ::rmdir(run.pids_cgroup.c_str()) == 0)
        run.pids_cgroup.clear();
      if (!run.exited) {
        // Init is exiting by itself; the kill makes "nothing of this sandbox runs on" hold
        // without taking its word for it (killing a PID namespace's init kills all of it).
        ::syscall(SYS_pidfd_send_signal, run.pidfd.get(), SIGKILL, nullptr, 0);
        remove(run.timer.get());
        exiting.emplace(run.id, Exiting{std::move(run.pidfd), std::move(run.pids_cgroup)});
      }
      auto done = std::move(run.on_done);
      RunResult result = std::move(run.result);
      it = runs.erase(it);
      done(std::move(result));
    }
  }

  // Reaps an exiting init if it is gone, and removes its pids group if that was left over.
  bool reap_exiting(Exiting& e) {
    siginfo_t info{};
    if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(e.pidfd.get()), &info,
                 WEXITED | WNOHANG) != 0 ||
        info.si_pid == 0)
      return false;
    remove(e.pidfd.get());
    if (!e.pids_cgroup.empty()) ::rmdir(e.pids_cgroup.c_str());
    return true;
  }

  void complete(Run& run) {
    RunResult& r = run.result;
    r.elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - run.started).count();
    r.stdout_sha256 = run.out_hash ? run.out_hash->finish_hex() : store::sha256_hex("");
    r.stderr_sha256 = run.err_hash ? run.err_hash->finish_hex() : store::sha256_hex("");
    r.peak_memory_bytes = run.peak_memory;
    r.limit_mode = features().cgroup_v2_delegated ? "cgroup"
                   : run.pids_cgroup.empty()      ? "rlimit+proc"
                                                  : "rlimit+proc+pids_cgroup";
    r.cancelled = run.cancelled;
    const Report* exit_report = nullptr;
    const Report* error_report = nullptr;
    for (const auto& rep : run.reports) {
      if (rep.kind == 'X') exit_report = &rep;
      if (rep.kind == 'E' && error_report == nullptr) error_report = &rep;
    }
    if (exit_report != nullptr) {
      const int ws = exit_report->wait_status;
      if (WIFEXITED(ws)) {
        r.exit_code = WEXITSTATUS(ws);
      } else if (WIFSIGNALED(ws)) {
        r.signal = WTERMSIG(ws);
        r.exit_code = 128 + r.signal;
      }
    }
    if (run.forced) {
      r.state = *run.forced;
      r.limit = run.limit;
      if (r.exit_code < 0) r.exit_code = 137;
      if (r.state == State::setup_failed) r.detail = "user namespace id mapping failed";
      return;
    }
    if (run.cancelled) {
      r.state = State::completed;
      r.exit_code = r.exit_code < 0 ? 137 : r.exit_code;
      return;
    }
    if (error_report != nullptr) {
      r.state = State::setup_failed;
      r.detail = std::string(to_string(static_cast<SetupStep>(error_report->step))) +
                 " failed: " + std::strerror(error_report->err);
      if (error_report->index >= 0)
        r.detail += " (item " + std::to_string(error_report->index) + ")";
      r.exit_code = 125;
      return;
    }
    if (exit_report == nullptr) {
      r.state = State::setup_failed;
      r.detail = "the sandbox init exited without a report";
      r.exit_code = 125;
      return;
    }
    r.state = State::completed;
    if (r.signal == SIGXCPU) {
      r.state = State::resource_limit;
      r.limit = "cpu";
    } else if (r.signal == SIGXFSZ) {
      r.state = State::resource_limit;
      r.limit = "file_size";
    } else if (exit_report->scratch_full) {
      r.state = State::resource_limit;
      r.limit = "scratch";
    }
  }

  const Loop where;
  UniqueFd epoll, wake, sampler;
  UniqueFd self_pidfd;  // our own process: a child checks it did not outlive us before PDEATHSIG
  bool sampler_armed = false;
  bool stopping = false;
  bool swept_stale_cgroups = false;          // supervisor thread only
  std::map<std::uint64_t, Exiting> exiting;  // supervisor thread only
  // Our own cgroup v1 pids directory, under which a root daemon makes one group per sandbox;
  // empty when not root or there is none. Set before the thread starts, read-only after.
  std::string pids_base;
  UniqueFd pids_base_dir;    // the directory, below which each run's child joins its group
  UniqueFd pids_base_tasks;  // its `tasks`, which each run's init moves itself back into
  std::map<std::uint64_t, std::unique_ptr<Run>> runs;
  mutable std::mutex mu;
  std::deque<Command> commands;             // guarded by mu
  std::set<std::uint64_t> cancel_requests;  // guarded by mu
  std::atomic<std::uint64_t> next_id{1};
  std::atomic<std::size_t> active_count{0};
  std::thread thread;
};

Supervisor::Supervisor(Loop loop) : impl_(std::make_unique<Impl>(loop)) {}
Supervisor::~Supervisor() = default;

std::uint64_t Supervisor::start(Profile profile, OutputFn on_output, DoneFn on_done,
                                ListenerFn on_listener) {
  auto run = std::make_unique<Run>();
  run->id = impl_->next_id++;
  run->profile = std::move(profile);
  run->on_output = std::move(on_output);
  run->on_listener = std::move(on_listener);
  auto* counter = &impl_->active_count;
  ++*counter;
  run->on_done = [counter, done = std::move(on_done)](RunResult r) {
    --*counter;
    done(std::move(r));
  };
  const auto id = run->id;
  impl_->post(Command{Command::start, std::move(run), id});
  return id;
}

void Supervisor::cancel(std::uint64_t id) { impl_->request_cancel(id); }

RunResult Supervisor::run(Profile profile, OutputFn on_output) {
  if (impl_->where == Loop::caller) {
    // Caller mode: this thread is the supervisor until the run is done.
    RunResult result;
    bool done = false;
    start(std::move(profile), std::move(on_output), [&](RunResult r) {
      result = std::move(r);
      done = true;
    });
    impl_->loop(&done);
    return result;
  }
  std::promise<RunResult> promise;
  auto future = promise.get_future();
  start(std::move(profile), std::move(on_output),
        [&promise](RunResult r) { promise.set_value(std::move(r)); });
  return future.get();
}

std::size_t Supervisor::active() const { return impl_->active_count.load(); }

}  // namespace toolwarden::sandbox
