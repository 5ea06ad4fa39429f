// Which standbys a synchronous commit waits for (the setting synchronous_standby_names,
// with PostgreSQL's syntax and meaning), and the WAL position that enough of them have
// reached. No CAF here: the WAL sender feeds it the standbys it hears from.
//
//   ''                   any one standby (the default)
//   'a, b, c'            FIRST 1 (a, b, c)
//   'FIRST k (a, b, c)'  the k live standbys listed first (a before b before c) must all
//                        have it; when one stops answering the next in the list takes its
//                        place
//   'ANY k (a, b, c)'    any k of the live standbys listed
//   '*' in a list stands for every name; names are matched exactly.
//
// Invariants:
//  - A standby counts only while it is live: connected, streaming (not a base backup) and
//    heard from within wal_sender_timeout (the WAL sender decides; a standby frozen by
//    SIGSTOP stays connected but falls silent).
//  - With fewer live standbys than the count, nothing is acknowledged: commits wait, as
//    PostgreSQL's do, until enough come back.
#pragma once

#include "storage/types.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tidemark::actors {

struct standby_quorum {
  enum class method { first, any };
  method how = method::any;
  std::uint32_t count = 1;
  std::vector<std::string> names{"*"}; // in priority order (FIRST)

  /// Parses the setting's text; std::invalid_argument naming what is wrong.
  static standby_quorum parse(const std::string& text);
  /// The text parse() reads back to this quorum ('' for the default).
  std::string to_string() const;

  /// A live standby and its position (written, flushed or replayed, as the level says).
  struct member {
    std::string name;
    storage::lsn_t position = 0;
  };
  /// The highest position the quorum has reached among `live` (0: not enough of them).
  storage::lsn_t acknowledged(const std::vector<member>& live) const;
  /// Whether a standby of this name is one the quorum may count.
  bool counts(const std::string& name) const;

  friend bool operator==(const standby_quorum& a, const standby_quorum& b) {
    return a.how == b.how && a.count == b.count && a.names == b.names;
  }
};

} // namespace tidemark::actors
