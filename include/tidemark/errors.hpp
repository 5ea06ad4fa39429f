// The exceptions the Tidemark API throws. Every one names what is wrong (the setting, the
// file and block, the system call) in what().
//
//   config_error        bad settings, arguments or data directory; nothing was changed
//   usage_error         the API was used wrongly (for example a session used after its
//                       database was closed); nothing was changed
//   data_error          a problem with data on disk: corrupt WAL or control file, a failed
//                       checksum; or the engine stopped after a failure (see failed())
//   page_corrupt_error  a data_error for one page, with where() naming file and block
//   io_error            a system call failed; fsync_failed() marks a failed fsync, after
//                       which the engine stops and the next start runs crash recovery
//
// This header is the one public header the library's own lower layers include: the
// storage layer throws these types directly, so nothing is translated on the way out.
#pragma once

#include <stdexcept>
#include <string>

namespace tidemark {

class config_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class usage_error : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

class data_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class page_corrupt_error : public data_error {
public:
  page_corrupt_error(const std::string& what, std::string where)
    : data_error(what), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

private:
  std::string where_;
};

class io_error : public std::runtime_error {
public:
  io_error(const std::string& what, int error_number, bool fsync_failed = false)
    : std::runtime_error(what), error_number_(error_number), fsync_failed_(fsync_failed) {}
  int error_number() const { return error_number_; }
  bool fsync_failed() const { return fsync_failed_; }

private:
  int error_number_;
  bool fsync_failed_;
};

} // namespace tidemark
