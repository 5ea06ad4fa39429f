// The acknowledgement log of `tidemark bench --ack-log FILE`: one line per acknowledged
// transaction, "ID GENERATION DIGEST" (decimal, decimal, 16 hex digits), appended with
// write(2) right after the commit was acknowledged, so a line is in the file (page cache)
// before the next transaction of that session starts. The generation is the acknowledging
// database's (database::generation()), the digest what the transaction did (its history
// row's, tpcb::history_digest), so `verify --ack-log` can tell a history that lost the
// transaction from one that ran another transaction under the same id. Logs of ids only
// (written before digests) are still read; their lines are checked by id.
#pragma once

#include <tidemark/types.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace tidemark::workload {

/// A line of an acknowledgement log.
struct acknowledged_transaction {
  transaction_id xid = 0;
  std::uint32_t generation = 0;
  std::uint64_t digest = 0;
  bool has_digest = false; // false: a line of an id only
};

class ack_log {
public:
  /// Lines appended by this log carry `generation`.
  ack_log(const std::string& path, std::uint32_t generation)
    : path_(path), generation_(generation) {
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
  void append(transaction_id xid, std::uint64_t digest) {
    char line[64];
    int length = std::snprintf(line, sizeof line, "%llu %" PRIu32 " %016" PRIx64 "\n",
                               static_cast<unsigned long long>(xid), generation_, digest);
    if (::write(fd_, line, static_cast<std::size_t>(length)) != length)
      throw std::runtime_error("cannot write ack log " + path_ + ": " + std::strerror(errno));
  }

  /// Reads every line of the file. Throws naming the file and line on malformed content.
  static std::vector<acknowledged_transaction> read_all(const std::string& path);

private:
  std::string path_;
  std::uint32_t generation_;
  int fd_ = -1;
};

} // namespace tidemark::workload
