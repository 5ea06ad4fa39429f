// The exceptions the Tidemark API throws. All derive from tidemark::error; every one names
// what is wrong (the setting, the file and block, the system call) in what(), in Tidemark's
// own words.
//
//   usage_error             the API was used wrongly (a bad id, offset or length, a closed
//                           database, a session shared between threads); nothing changed
//   config_error            bad settings, arguments or data directory; nothing changed
//   conflict_error          what the transaction read changed before it could commit; it
//                           applied nothing and is rolled back: retry it
//   data_error              a problem with data on disk: corrupt WAL, control file or page
//   page_corrupt_error      a data_error for one page; where() names file and block
//   io_error                a system call failed; fsync_failed() marks a failed fsync
//   engine_stopped_error    the engine stopped after a failure (a failed fsync or WAL
//                           write, a background actor that ended) and accepts no more
//                           work; the next open recovers
//   replication_error       a base backup's primary cannot be reached or refused
//   commit_outcome_unknown  a commit's WAL record was written but the engine stopped
//                           before it was known to be durable: after the next open, it is
//                           either wholly present or wholly absent (status_of tells)
//
// The storage layer throws these types directly (with tidemark/types.hpp, the only public
// headers the lower layers include), so nothing is translated on the way out.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tidemark {

class error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class usage_error : public error {
public:
  using error::error;
};

class config_error : public error {
public:
  using error::error;
};

class conflict_error : public error {
public:
  using error::error;
};

class data_error : public error {
public:
  using error::error;
};

class page_corrupt_error : public data_error {
public:
  page_corrupt_error(const std::string& what, std::string where)
    : data_error(what), where_(std::move(where)) {}
  const std::string& where() const { return where_; }

private:
  std::string where_;
};

class io_error : public error {
public:
  io_error(const std::string& what, int error_number, bool fsync_failed = false)
    : error(what), error_number_(error_number), fsync_failed_(fsync_failed) {}
  int error_number() const { return error_number_; }
  bool fsync_failed() const { return fsync_failed_; }

private:
  int error_number_;
  bool fsync_failed_;
};

class engine_stopped_error : public error {
public:
  using error::error;
};

/// Streaming replication could not go on: the primary cannot be reached, or refused (a
/// copy of another system or generation, WAL it no longer keeps).
class replication_error : public error {
public:
  using error::error;
};

class commit_outcome_unknown : public error {
public:
  commit_outcome_unknown(const std::string& what, std::uint64_t transaction)
    : error(what), transaction_(transaction) {}
  /// The transaction whose outcome is unknown (ask status_of() after the next open).
  std::uint64_t transaction() const { return transaction_; }

private:
  std::uint64_t transaction_;
};

} // namespace tidemark
