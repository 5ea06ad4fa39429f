// SIGHUP to a long-running tidemark command (bench, standby): the database reloads its
// settings (database::reload(), as PostgreSQL's pg_ctl reload), and the command prints
// what changed, what needs a restart, or why the file was refused (the run goes on).
//
// The signal handler only writes a byte to a pipe; a thread of this object's waits on
// the pipe and calls reload() there. The destructor ends the thread and puts SIGHUP back
// to its default. One at a time per process.
#pragma once

#include <tidemark/database.hpp>

#include <thread>

namespace tidemark::tools {

class reload_on_hangup {
public:
  explicit reload_on_hangup(database& db);
  ~reload_on_hangup();
  reload_on_hangup(const reload_on_hangup&) = delete;
  reload_on_hangup& operator=(const reload_on_hangup&) = delete;

private:
  void run();

  database& db_;
  int pipe_[2] = {-1, -1};
  std::thread thread_;
};

} // namespace tidemark::tools
