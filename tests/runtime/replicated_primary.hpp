// A primary for the standby tests: a new data directory with `settings`, opened with its
// WAL sender listening on a loopback port the system chooses
// (database::replication_address() names it), its log lines to `log` when given.
// Public-API tests only.
#pragma once

#include <tidemark/database.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tidemark::test {

inline std::unique_ptr<database>
create_replicated_primary(const std::string& dir, const std::vector<std::string>& settings,
                          std::function<void(const std::string&)> log = {}) {
  create_options create;
  create.settings = settings;
  database::create(dir, create);
  open_options options;
  options.settings = settings;
  options.settings.push_back("replication_listen=127.0.0.1:0");
  options.log = std::move(log);
  return database::open(dir, options);
}

} // namespace tidemark::test
