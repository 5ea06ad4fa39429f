// Reading the acknowledgement log back: see ack_log.hpp.
#include "workload/ack_log.hpp"

#include <fstream>
#include <stdexcept>

namespace tidemark::workload {

std::vector<transaction_id> ack_log::read_all(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot read ack log " + path);
  std::vector<transaction_id> ids;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.empty())
      continue;
    std::size_t used = 0;
    unsigned long long id = 0;
    try {
      id = std::stoull(line, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != line.size())
      throw std::runtime_error("ack log " + path + " line " + std::to_string(number) +
                               ": not a transaction id");
    ids.push_back(id);
  }
  return ids;
}

} // namespace tidemark::workload
