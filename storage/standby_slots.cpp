// standby_slots: see standby_slots.hpp.
#include "storage/standby_slots.hpp"

#include <cctype>
#include <fstream>
#include <sstream>

namespace tidemark::storage {

namespace {

std::string slots_path(const std::string& data_dir) { return data_dir + "/global/standby_slots"; }

} // namespace

bool valid_standby_name(const std::string& name) {
  if (name.empty() || name.size() > 64)
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  return true;
}

std::vector<standby_slot_record> read_standby_slots(const std::string& data_dir) {
  std::vector<standby_slot_record> slots;
  const std::string path = slots_path(data_dir);
  std::ifstream in(path);
  if (!in)
    return slots;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::istringstream words(line);
    standby_slot_record slot;
    std::string rest;
    if (line.empty())
      continue;
    bool fields = static_cast<bool>(words >> slot.name >> slot.flushed);
    if (fields && !(words >> std::hex >> slot.owner)) // a file from before owners
      fields = words.eof() && (slot.owner = 0, true);
    if (!fields || (words >> rest))
      throw data_error(path + " line " + std::to_string(number) +
                       ": expected a standby's name, its flushed WAL position and its owner");
    slots.push_back(slot);
  }
  return slots;
}

void write_standby_slots(io_engine& io, const std::string& data_dir,
                         const std::vector<standby_slot_record>& slots) {
  std::ostringstream text;
  for (const standby_slot_record& slot : slots)
    text << slot.name << " " << slot.flushed << " " << std::hex << slot.owner << std::dec << "\n";
  const std::string path = slots_path(data_dir);
  const std::string temporary = path + ".tmp";
  write_whole_file(io, temporary, text.str());
  int fd = io.open_file(temporary, false);
  try {
    io.sync(fd, sync_kind::full);
  } catch (...) {
    io.close_file(fd);
    throw;
  }
  io.close_file(fd);
  io.rename(temporary, path);
  io.sync_directory(data_dir + "/global");
}

} // namespace tidemark::storage
