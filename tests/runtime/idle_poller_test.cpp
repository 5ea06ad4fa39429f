// runtime::idle_poller (commit c91b9ef): start() runs the pollers at SCHED_IDLE (or nice 19),
// they park after the linger and note_activity() wakes them, note_activity() from many
// threads while they park and wake loses nothing and stop() joins them, start() after
// stop() works again, and when the kernel refuses both priorities no poller keeps running.
// The pollers' threads are observed in /proc/self/task (policy, nice value, state).
#include "runtime/idle_poller.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tidemark::runtime {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

constexpr int sched_idle_policy = 5; // SCHED_IDLE

struct task_info {
  int tid = 0;
  char state = '?';
  int nice = 0;
  int policy = 0;
};

// The threads of this process, from /proc/self/task/<tid>/stat.
std::vector<task_info> tasks() {
  std::vector<task_info> result;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr)
    return result;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.')
      continue;
    std::ifstream in(std::string("/proc/self/task/") + entry->d_name + "/stat");
    std::string line;
    if (!std::getline(in, line))
      continue; // the thread just ended
    std::size_t close = line.rfind(')');
    if (close == std::string::npos)
      continue;
    std::istringstream fields(line.substr(close + 2)); // field 3 (state) on
    std::vector<std::string> f;
    for (std::string field; fields >> field;)
      f.push_back(field);
    if (f.size() < 39)
      continue;
    task_info t;
    t.tid = std::stoi(entry->d_name);
    t.state = f[0][0];           // field 3
    t.nice = std::stoi(f[16]);   // field 19
    t.policy = std::stoi(f[38]); // field 41
    result.push_back(t);
  }
  ::closedir(dir);
  return result;
}

// The threads of this process. A thread is started and joined before the first look, so
// that a helper thread a runtime starts with a process's first thread (ThreadSanitizer's
// background thread, make test-tsan) is already there and not taken for a poller.
std::set<int> tids() {
  static const bool first_thread_started = [] {
    std::thread([] {}).join();
    return true;
  }();
  (void)first_thread_started;
  std::set<int> ids;
  for (const task_info& t : tasks())
    ids.insert(t.tid);
  return ids;
}

// The threads that are not in `before`.
std::vector<task_info> new_tasks(const std::set<int>& before) {
  std::vector<task_info> result;
  for (const task_info& t : tasks())
    if (!before.count(t.tid))
      result.push_back(t);
  return result;
}

bool lowered(const task_info& t) { return t.policy == sched_idle_policy || t.nice == 19; }

// Polls `condition` every millisecond until it holds or `limit` passed.
template <class Condition>
bool eventually(Condition condition, std::chrono::milliseconds limit) {
  auto deadline = steady_clock::now() + limit;
  while (!condition()) {
    if (steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// No thread beyond `before` is left. A joined thread's /proc/self/task entry may outlive
// the join by a moment (the kernel reaps it after it wakes the joiner), so the check
// waits for the entries to go, up to a bound.
bool only_tasks_of(const std::set<int>& before) {
  return eventually([&] { return new_tasks(before).empty(); }, 5000ms);
}

// stop() must return. A hang cannot be recovered from (the poller's destructor would
// stop() again), so it ends the test program with a message instead of hanging it.
bool stops_within(idle_poller& poller, std::chrono::seconds limit) {
  std::promise<void> stopped;
  std::future<void> done = stopped.get_future();
  std::thread stopper([&] {
    poller.stop();
    stopped.set_value();
  });
  if (done.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: idle_poller::stop() did not return within %lld s\n",
                 static_cast<long long>(limit.count()));
    std::fflush(stderr);
    std::_Exit(3);
  }
  stopper.join();
  return true;
}

} // namespace

TEST_CASE("idle_poller: start(2) runs two pollers at the lowest priority and stop() joins them") {
  idle_poller poller;
  CHECK(poller.running() == 0);
  std::set<int> before = tids();
  poller.start(2, 1ms);
  CHECK(poller.running() == 2);
  // Both threads exist and have lowered themselves (SCHED_IDLE, or nice 19 as fallback):
  // they never keep running at normal priority.
  bool two_lowered = eventually(
    [&] {
      std::vector<task_info> added = new_tasks(before);
      return added.size() == 2 && std::all_of(added.begin(), added.end(), lowered);
    },
    5000ms);
  CHECK(two_lowered);
  poller.note_activity();
  REQUIRE(stops_within(poller, 10s));
  CHECK(poller.running() == 0);
  CHECK(only_tasks_of(before)); // joined: the threads are gone
}

TEST_CASE("idle_poller: start(0) starts one poller per CPU and start while running is a no-op") {
  idle_poller poller;
  poller.start(0, 1ms);
  CHECK(poller.running() == std::max(1u, std::thread::hardware_concurrency()));
  unsigned first = poller.running();
  poller.start(3, 1ms);
  CHECK(poller.running() == first);
  REQUIRE(stops_within(poller, 10s));
  CHECK(poller.running() == 0);
  poller.stop(); // a second stop is harmless
  CHECK(poller.running() == 0);
}

TEST_CASE("idle_poller: pollers park after the linger and note_activity() wakes them") {
  idle_poller poller;
  std::set<int> before = tids();
  poller.start(2, 150ms);
  auto pollers = [&] { return new_tasks(before); };
  auto all_parked = [&] {
    std::vector<task_info> added = pollers();
    return added.size() == 2 && std::all_of(added.begin(), added.end(),
                                            [](const task_info& t) { return t.state == 'S'; });
  };
  for (int cycle = 0; cycle < 3; ++cycle) {
    CAPTURE(cycle);
    // No activity for longer than the linger: both park (sleep on the condition variable)
    // instead of spinning on.
    CHECK(eventually(all_parked, 5000ms));
    poller.note_activity();
    // Woken: a poller spins (runnable) for the linger.
    bool woke = eventually(
      [&] {
        std::vector<task_info> added = pollers();
        return std::any_of(added.begin(), added.end(),
                           [](const task_info& t) { return t.state == 'R'; });
      },
      100ms);
    CHECK(woke);
  }
  CHECK(eventually(all_parked, 5000ms));
  REQUIRE(stops_within(poller, 10s));
  CHECK(pollers().empty());
}

TEST_CASE("idle_poller: note_activity() from many threads while pollers park and wake, then stop() "
          "joins") {
  for (auto linger : {0us, 20us, 500us}) {
    CAPTURE(linger.count());
    idle_poller poller;
    std::set<int> before = tids();
    poller.start(2, linger);
    CHECK(poller.running() == 2);
    std::atomic<bool> go{false};
    std::vector<std::thread> committers;
    for (int t = 0; t < 8; ++t)
      committers.emplace_back([&, t] {
        while (!go.load())
          std::this_thread::yield();
        for (int i = 0; i < 50000; ++i) {
          poller.note_activity();
          if ((i + t) % 1000 == 0)
            std::this_thread::sleep_for(50us); // let pollers reach the park
        }
      });
    go.store(true);
    for (std::thread& t : committers)
      t.join();
    REQUIRE(stops_within(poller, 10s));
    CHECK(poller.running() == 0);
    CHECK(only_tasks_of(before));
  }
}

TEST_CASE("idle_poller: start after stop starts pollers again") {
  idle_poller poller;
  std::set<int> before = tids();
  poller.start(2, 1ms);
  CHECK(poller.running() == 2);
  REQUIRE(stops_within(poller, 10s));
  CHECK(poller.running() == 0);
  poller.start(1, 1ms);
  CHECK(poller.running() == 1);
  CHECK(eventually(
    [&] {
      std::vector<task_info> added = new_tasks(before);
      return added.size() == 1 && lowered(added[0]);
    },
    5000ms));
  poller.note_activity();
  REQUIRE(stops_within(poller, 10s));
  poller.start(2, 1ms); // and once more
  CHECK(poller.running() == 2);
  REQUIRE(stops_within(poller, 10s));
  CHECK(only_tasks_of(before));
}

namespace {

#if defined(__x86_64__)
constexpr unsigned this_audit_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr unsigned this_audit_arch = AUDIT_ARCH_AARCH64;
#else
constexpr unsigned this_audit_arch = 0;
#endif

// Makes sched_setscheduler, sched_setattr and setpriority fail with EPERM for this thread
// and the threads it starts: the kernel "refuses" both SCHED_IDLE and nice 19.
bool refuse_priority_changes() {
  if (this_audit_arch == 0)
    return false;
  sock_filter filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, this_audit_arch, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sched_setscheduler, 3, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sched_setattr, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setpriority, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

// Exit codes of the child below.
constexpr int child_ok = 0;
constexpr int child_unsupported = 10;
constexpr int child_filter_ineffective = 11;
constexpr int child_poller_kept_running = 12;
constexpr int child_stop_hung = 13; // by SIGALRM, seen as a signal

} // namespace

TEST_CASE("idle_poller: when the kernel refuses SCHED_IDLE and nice 19, no poller keeps running") {
  // In a child process: the seccomp filter cannot be removed again.
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(20);
    if (!refuse_priority_changes())
      ::_exit(child_unsupported);
    if (::setpriority(PRIO_PROCESS, 0, 19) == 0 || errno != EPERM)
      ::_exit(child_filter_ineffective);
    std::set<int> before = tids();
    {
      idle_poller poller;
      poller.start(2, 1ms);
      poller.note_activity();
      // The pollers give up at once instead of spinning at normal priority.
      if (!only_tasks_of(before))
        ::_exit(child_poller_kept_running);
      poller.note_activity();
      poller.stop();
      poller.start(2, 1ms); // start after stop, still refused: still nothing runs
      if (!only_tasks_of(before))
        ::_exit(child_poller_kept_running);
    } // the destructor stops (joins) them
    ::_exit(child_ok);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE_MESSAGE(WIFEXITED(status),
                  "child ended by signal " << WTERMSIG(status) << " (SIGALRM: stop() hung)");
  int code = WEXITSTATUS(status);
  if (code == child_unsupported) {
    MESSAGE("seccomp filters are not available here: refusal not tested");
    return;
  }
  CHECK(code != child_filter_ineffective);
  CHECK(code != child_poller_kept_running);
  CHECK(code == child_ok);
  (void)child_stop_hung;
}

} // namespace tidemark::runtime
