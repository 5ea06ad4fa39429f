// SIGHUP reloads: see reload_on_hangup.hpp.
#include "tools/reload_on_hangup.hpp"

#include <tidemark/errors.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace tidemark::tools {

namespace {

constexpr char hangup_byte = 'H', quit_byte = 'Q';
int hangup_pipe = -1; // the write end, for the handler

void on_hangup(int) {
  const int saved = errno;
  (void)!::write(hangup_pipe, &hangup_byte, 1);
  errno = saved;
}

} // namespace

reload_on_hangup::reload_on_hangup(database& db) : db_(db) {
  if (::pipe2(pipe_, O_CLOEXEC) != 0)
    throw io_error(std::string("pipe: ") + std::strerror(errno), errno);
  hangup_pipe = pipe_[1];
  thread_ = std::thread([this] { run(); });
  struct sigaction action {};
  action.sa_handler = on_hangup;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGHUP, &action, nullptr);
}

reload_on_hangup::~reload_on_hangup() {
  ::signal(SIGHUP, SIG_DFL);
  (void)!::write(pipe_[1], &quit_byte, 1);
  thread_.join();
  hangup_pipe = -1;
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void reload_on_hangup::run() {
  for (char byte = 0;;) {
    ssize_t got = ::read(pipe_[0], &byte, 1);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0 || byte == quit_byte)
      return;
    try {
      reload_report report = db_.reload();
      for (const std::string& line : report.changed)
        std::fprintf(stderr, "reload: %s\n", line.c_str());
      for (const std::string& line : report.need_restart)
        std::fprintf(stderr, "reload: not applied until a restart: %s\n", line.c_str());
      if (report.changed.empty() && report.need_restart.empty())
        std::fprintf(stderr, "reload: no setting changed\n");
    } catch (const std::exception& error) { // a broken file: the run goes on as it was
      std::fprintf(stderr, "reload: refused: %s\n", error.what());
    }
  }
}

} // namespace tidemark::tools
