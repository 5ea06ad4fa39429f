// The settings the public-API tests run a database with when the test is not about
// settings (`quiet`: no checkpoint log lines, a 1 MB pool), and database::open with them.
// Public headers only.
#pragma once

#include <tidemark/database.hpp>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tidemark::test {

inline const std::vector<std::string> quiet = {"log_checkpoints=off", "shared_buffers=1MB"};

/// Opens `dir` with `quiet`, on the fault-injecting engine when `faults` is given.
inline std::unique_ptr<database> open_quiet(const std::string& dir,
                                            std::optional<fault_injection> faults = std::nullopt) {
  open_options options;
  options.settings = quiet;
  options.faults = std::move(faults);
  return database::open(dir, options);
}

} // namespace tidemark::test
