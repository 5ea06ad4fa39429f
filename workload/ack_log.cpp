// Reading the acknowledgement log back: see ack_log.hpp.
#include "workload/ack_log.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tidemark::workload {

namespace {

// One line: "ID" or "ID GENERATION DIGEST"; false when it is neither.
bool parse_line(const std::string& line, acknowledged_transaction& out) {
  std::istringstream in(line);
  std::string id, generation, digest, extra;
  in >> id >> generation >> digest >> extra;
  auto whole = [](const std::string& text, int base, unsigned long long& value) {
    if (text.empty() || text[0] == '-' || text[0] == '+')
      return false;
    try {
      std::size_t used = 0;
      value = std::stoull(text, &used, base);
      return used == text.size();
    } catch (const std::exception&) {
      return false;
    }
  };
  unsigned long long value = 0;
  if (!extra.empty() || !whole(id, 10, value))
    return false;
  out.xid = value;
  if (generation.empty() && digest.empty())
    return true; // a line of an id only
  if (!whole(generation, 10, value) || value > UINT32_MAX)
    return false;
  out.generation = static_cast<std::uint32_t>(value);
  if (digest.size() != 16 || !whole(digest, 16, value))
    return false;
  out.digest = value;
  out.has_digest = true;
  return true;
}

} // namespace

std::vector<acknowledged_transaction> ack_log::read_all(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("cannot read ack log " + path);
  std::vector<acknowledged_transaction> acks;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.empty())
      continue;
    acknowledged_transaction ack;
    if (!parse_line(line, ack))
      throw std::runtime_error("ack log " + path + " line " + std::to_string(number) +
                               ": not \"ID\" or \"ID GENERATION DIGEST\"");
    acks.push_back(ack);
  }
  return acks;
}

} // namespace tidemark::workload
