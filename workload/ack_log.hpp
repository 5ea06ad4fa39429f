// The acknowledgement log of `tidemark bench --ack-log FILE`: one line per transaction id,
// appended with write(2) right after the commit was acknowledged, so a line is in the file
// (page cache) before the next transaction of that session starts. `verify --ack-log`
// checks that every listed transaction survived.
#pragma once

#include <tidemark/types.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace tidemark::workload {

class ack_log {
public:
  explicit ack_log(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw std::runtime_error("cannot open ack log " + path + ": " + std::strerror(errno));
  }
  ~ack_log() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  ack_log(const ack_log&) = delete;
  ack_log& operator=(const ack_log&) = delete;

  /// O_APPEND makes each line's write atomic with respect to other sessions.
  void append(transaction_id xid) {
    char line[32];
    int length = std::snprintf(line, sizeof line, "%llu\n", static_cast<unsigned long long>(xid));
    if (::write(fd_, line, static_cast<std::size_t>(length)) != length)
      throw std::runtime_error("cannot write ack log " + path_ + ": " + std::strerror(errno));
  }

  /// Reads every id in the file. Throws naming the file and line on malformed content.
  static std::vector<transaction_id> read_all(const std::string& path);

private:
  std::string path_;
  int fd_ = -1;
};

} // namespace tidemark::workload
