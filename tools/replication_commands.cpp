// basebackup, standby, promote: see replication_commands.hpp.
#include "tools/replication_commands.hpp"

#include "tools/cli_args.hpp"
#include "tools/fault_flags.hpp"
#include "tools/reload_on_hangup.hpp"
#include "workload/json.hpp"

#include <tidemark/database.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace tidemark::tools {

namespace {

constexpr const char* promote_signal = "promote.signal";
constexpr const char* promote_refused = "promote.refused"; // a running standby's answer
constexpr const char* standby_conf = "standby.conf";

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The whole of a small file ("" when it cannot be read).
std::string read_text(const std::string& path) {
  std::string text;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buffer[256];
    for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, f)) > 0;)
      text.append(buffer, got);
    std::fclose(f);
  }
  return text;
}

// A running standby answers a promote request it refuses: the reason in promote.refused
// (for the waiting `tidemark promote` to print), the request withdrawn, its log told.
void refuse_promotion(const std::string& dir, const std::string& why) {
  const std::string path = dir + "/" + promote_refused;
  if (FILE* f = std::fopen((path + ".tmp").c_str(), "w")) {
    std::fputs(why.c_str(), f);
    std::fclose(f);
    std::rename((path + ".tmp").c_str(), path.c_str());
  }
  ::unlink((dir + "/" + promote_signal).c_str());
  std::fprintf(stderr, "standby: not promoted: %s\n", why.c_str());
}

std::string lsn_text(std::uint64_t lsn) {
  char text[32];
  std::snprintf(text, sizeof text, "%X/%08X", static_cast<unsigned>(lsn >> 32),
                static_cast<unsigned>(lsn & 0xffffffffu));
  return text;
}

workload::json_object status_json(const standby_status& s, double records_per_second) {
  workload::json_object r;
  workload::set_fields(r, s);
  r.set("consistent", s.flushed >= s.backup_end);
  r.set("bytes_behind.received",
        s.primary_flushed > s.received ? s.primary_flushed - s.received : 0);
  r.set("bytes_behind.flushed", s.primary_flushed > s.flushed ? s.primary_flushed - s.flushed : 0);
  r.set("bytes_behind.replayed",
        s.primary_flushed > s.replayed ? s.primary_flushed - s.replayed : 0);
  r.set("records_per_second", records_per_second);
  return r;
}

// Whether a process holds the data directory (its exclusive lock on tidemark.lock).
bool directory_locked(const std::string& dir) {
  int fd = ::open((dir + "/tidemark.lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
  ::close(fd);
  return held;
}

// SIGINT/SIGTERM end the standby's wait through this pipe.
int stop_pipe[2] = {-1, -1};
void on_stop_signal(int) {
  char byte = 1;
  (void)!::write(stop_pipe[1], &byte, 1);
}

// Blocks until a file named `name` is created in (or, with `deleted`, removed from) `dir`,
// a stop signal arrives, or `timeout` passes. True when the file event happened.
class directory_watch {
public:
  directory_watch(const std::string& dir, bool deleted) {
    fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd_ < 0 ||
        ::inotify_add_watch(fd_, dir.c_str(),
                            deleted ? IN_DELETE | IN_MOVED_FROM : IN_CREATE | IN_MOVED_TO) < 0)
      throw io_error("cannot watch " + dir + ": " + std::strerror(errno), errno);
  }
  ~directory_watch() { ::close(fd_); }
  // 1: an event for `name`; 0: timeout; -1: a stop signal.
  int wait(const char* name, std::chrono::milliseconds timeout) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_pipe[0], POLLIN, 0}};
    int ready = ::poll(fds, stop_pipe[0] >= 0 ? 2 : 1, static_cast<int>(timeout.count()));
    if (ready <= 0)
      return 0;
    if (stop_pipe[0] >= 0 && (fds[1].revents & POLLIN))
      return -1;
    alignas(inotify_event) char buffer[4096];
    bool seen = false;
    for (ssize_t got; (got = ::read(fd_, buffer, sizeof buffer)) > 0;)
      for (char* at = buffer; at < buffer + got;) {
        auto* event = reinterpret_cast<inotify_event*>(at);
        if (event->len > 0 && std::strcmp(event->name, name) == 0)
          seen = true;
        at += sizeof(inotify_event) + event->len;
      }
    return seen ? 1 : 0;
  }

private:
  int fd_ = -1;
};

} // namespace

int cmd_basebackup(const cli_args& args) {
  std::string dir = args.required("-D");
  std::string primary = args.required("--primary");
  if (args.has("--name") && args.text("--name").empty())
    throw config_error("--name is empty: a standby name is 1 to 64 letters, digits, '.', '_' "
                       "or '-' (without --name, basebackup picks one)");
  base_backup_options options;
  options.name = args.text("--name");
  options.take_over = args.has("--take-over");
  options.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  base_backup_report report = database::base_backup(dir, primary, options);
  workload::json_object r;
  workload::set_fields(r, report);
  std::printf("%s\n", r.render().c_str());
  if (args.has("--json"))
    r.write_file(args.text("--json"));
  std::fprintf(stderr,
               "basebackup: %llu files, %.1f MB and %.1f MB of WAL in %.2f s; standby "
               "\"%s\" is consistent once it has replayed to %s\n",
               static_cast<unsigned long long>(report.files), double(report.bytes) / 1e6,
               double(report.wal_bytes) / 1e6, report.seconds, report.standby_name.c_str(),
               lsn_text(report.end_lsn).c_str());
  return exit_ok;
}

int cmd_standby(const cli_args& args) {
  std::string dir = args.required("-D");
  auto interval = std::chrono::milliseconds(
    static_cast<std::int64_t>(args.real("--status-interval", 1.0, 0.05, 3600) * 1000));
  open_options options = options_with_faults(args);
  options.standby = true;
  options.primary = args.text("--primary");
  if (::pipe(stop_pipe) != 0)
    throw io_error(std::string("pipe: ") + std::strerror(errno), errno);
  // Until open() returns (crash recovery may take a while), SIGINT and SIGTERM end the
  // process at once, as a crash would, which a standby survives; from then on they stop
  // the standby cleanly. open() names a directory that is missing or not a standby's.
  auto db = database::open(dir, options);
  reload_on_hangup reloads(*db);
  ::signal(SIGINT, on_stop_signal);
  ::signal(SIGTERM, on_stop_signal);
  ::unlink((dir + "/" + promote_signal).c_str()); // a request from before this start
  directory_watch watch(dir, false);              // a request made from here on; the loop looks too
  {
    standby_status s = db->standby();
    std::fprintf(stderr,
                 "standby: replaying from %s (its last restart point); consistent from %s\n",
                 lsn_text(s.restart_redo).c_str(), lsn_text(s.backup_end).c_str());
  }
  auto last = std::chrono::steady_clock::now();
  std::uint64_t last_records = 0;
  // Complete from the first moment: a promotion before the first status interval still
  // reports where the standby was.
  workload::json_object r = status_json(db->standby(), 0);
  if (args.has("--json"))
    r.write_file(args.text("--json"));
  bool promote = false, failed = false, refused = false;
  for (;;) {
    int event = watch.wait(promote_signal, interval);
    if (event < 0)
      break;
    if (event > 0 || exists(dir + "/" + promote_signal)) {
      try {
        promote_options how;
        how.force = read_text(dir + "/" + promote_signal) == "force";
        db->promote(how);
        promote = true;
        break;
      } catch (const usage_error& e) { // not consistent yet, or behind a peer: stay a standby
        refuse_promotion(dir, e.what());
      } catch (const data_error& e) { // redo did not replay all it fsynced: it stopped
        refuse_promotion(dir, e.what());
      }
    }
    auto now = std::chrono::steady_clock::now();
    standby_status s = db->standby();
    double seconds = std::chrono::duration<double>(now - last).count();
    double rate = seconds > 0 ? double(s.records - last_records) / seconds : 0;
    last = now;
    last_records = s.records;
    r = status_json(s, rate);
    auto behind = [&](std::uint64_t at) {
      return static_cast<unsigned long long>(
        (s.primary_flushed > at ? s.primary_flushed - at : 0) >> 10);
    };
    std::fprintf(stderr,
                 "standby: %s %s; received %s, flushed %s, replayed %s (behind the primary: "
                 "%llu, %llu and %llu kB; replay delay %.1f s); %.0f records/s; pages read "
                 "%llu, prefetch hits %llu%s%s\n",
                 s.connected ? "streaming from" : "not connected to", s.primary.c_str(),
                 lsn_text(s.received).c_str(), lsn_text(s.flushed).c_str(),
                 lsn_text(s.replayed).c_str(), behind(s.received), behind(s.flushed),
                 behind(s.replayed), s.seconds_behind, rate,
                 static_cast<unsigned long long>(s.pages_read),
                 static_cast<unsigned long long>(s.prefetch_hits), s.error.empty() ? "" : "; ",
                 s.error.c_str());
    if (args.has("--json"))
      r.write_file(args.text("--json"));
    if (s.failed) { // redo stopped: nothing more is replayed or confirmed; say so and stop
      std::fprintf(stderr, "standby: stopped: %s\n", s.error.c_str());
      failed = true;
      break;
    }
    if (s.refused) { // for good: waiting would change nothing
      std::fprintf(stderr, "standby: stopped: the primary refused this standby: %s\n",
                   s.error.c_str());
      refused = true;
      break;
    }
  }
  if (failed) {
    try {
      db->close();
    } catch (const std::exception&) { // the same failure, already reported
    }
    std::printf("%s\n", r.render().c_str());
    return exit_failure;
  }
  if (refused) {
    db->close();
    std::printf("%s\n", r.render().c_str());
    return exit_usage; // seed it again: not a failure of this directory
  }
  if (promote) {
    ::unlink((dir + "/" + promote_signal).c_str());
    std::fprintf(stderr, "standby: promoted: redo replayed %llu records to %s\n",
                 static_cast<unsigned long long>(db->recovery().records),
                 lsn_text(db->recovery().end_lsn).c_str());
  }
  r.set("promoted", promote);
  db->close();
  std::printf("%s\n", r.render().c_str());
  if (args.has("--json"))
    r.write_file(args.text("--json"));
  return exit_ok;
}

int cmd_promote(const cli_args& args) {
  std::string dir = args.required("-D");
  auto timeout = std::chrono::milliseconds(
    static_cast<std::int64_t>(args.real("--timeout", 60, 1, 86400) * 1000));
  if (!exists(dir))
    throw config_error("data directory \"" + dir + "\" does not exist");
  if (!exists(dir + "/" + standby_conf))
    throw config_error("\"" + dir + "\" is not a standby (no standby.conf)");
  open_options options = options_with_faults(args); // used when it promotes the directory itself
  options.standby = true;
  options.stream = false;
  std::unique_ptr<database> db;
  try {
    db = database::open(dir, options);
  } catch (const config_error& e) {
    if (std::strstr(e.what(), "in use by another process") == nullptr)
      throw;
  }
  promote_options how;
  how.force = args.has("--force");
  if (db) { // no standby runs here: replay what it received, then promote
    db->promote(how);
    std::uint64_t records = db->recovery().records;
    db->close();
    std::fprintf(stderr, "promote: promoted %s (replayed %llu records)\n", dir.c_str(),
                 static_cast<unsigned long long>(records));
    return exit_ok;
  }
  directory_watch watch(dir, true);
  const std::string signal_path = dir + "/" + promote_signal;
  const std::string refused_path = dir + "/" + promote_refused;
  ::unlink(refused_path.c_str()); // an answer to an earlier request
  // Written whole, then renamed: the standby never reads the request half written.
  FILE* f = std::fopen((signal_path + ".tmp").c_str(), "w");
  if (f == nullptr)
    throw io_error("cannot create " + signal_path + ": " + std::strerror(errno), errno);
  if (how.force)
    std::fputs("force", f);
  std::fclose(f);
  if (std::rename((signal_path + ".tmp").c_str(), signal_path.c_str()) != 0)
    throw io_error("cannot create " + signal_path + ": " + std::strerror(errno), errno);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const bool running = directory_locked(dir); // first: a promotion removes standby.conf
    if (!exists(dir + "/" + standby_conf))      // before its process lets the lock go
      break;
    if (!exists(signal_path) && exists(refused_path)) { // the standby said no, and why
      std::fprintf(stderr, "promote: the standby running in %s refused: %s\n", dir.c_str(),
                   read_text(refused_path).c_str());
      ::unlink(refused_path.c_str());
      return exit_failure;
    }
    if (!running) {
      ::unlink(signal_path.c_str());
      std::fprintf(stderr,
                   "promote: the standby running in %s stopped without promoting (its "
                   "log says why); with no standby running, promote -D %s promotes the "
                   "directory itself, reading its WAL afresh\n",
                   dir.c_str(), dir.c_str());
      return exit_failure;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      std::fprintf(stderr,
                   "promote: the standby running in %s did not promote within %.0f s "
                   "(is it still catching up to its base backup's end?)\n",
                   dir.c_str(), double(timeout.count()) / 1000);
      return exit_failure;
    }
    watch.wait(standby_conf, std::min(left, std::chrono::milliseconds(1000)));
  }
  std::fprintf(stderr, "promote: the standby running in %s promoted\n", dir.c_str());
  return exit_ok;
}

} // namespace tidemark::tools
