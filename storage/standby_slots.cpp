// standby_slots: see standby_slots.hpp.
#include "storage/standby_slots.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tidemark::storage {

namespace {

std::string slots_path(const std::string& data_dir) { return data_dir + "/global/standby_slots"; }
std::string mark_path(const std::string& data_dir) { return data_dir + "/global/superseded"; }

// "NAME FLUSHED [OWNER [LISTEN]]": files from before owners have two words, from before
// listen addresses three.
bool parse_slot(const std::vector<std::string>& words, standby_slot_record& slot) {
  auto number = [](const std::string& text, int base, std::uint64_t& value) {
    if (text.empty() || !std::isxdigit(static_cast<unsigned char>(text[0])))
      return false;
    char* end = nullptr;
    errno = 0;
    value = std::strtoull(text.c_str(), &end, base);
    return errno == 0 && *end == '\0';
  };
  if (words.size() < 2 || !number(words[1], 10, slot.flushed))
    return false;
  slot.name = words[0];
  if (words.size() >= 3 && !number(words[2], 16, slot.owner))
    return false;
  if (words.size() == 4)
    slot.listen = words[3];
  return true;
}

// Replaces `path` with `text`, atomically and durably (its directory fsynced too).
void replace_file(io_engine& io, const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  write_whole_file(io, temporary, text);
  sync_file_at(io, temporary);
  io.rename(temporary, path);
  io.sync_directory(path.substr(0, path.rfind('/')));
}

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
    std::istringstream stream(line);
    std::vector<std::string> words;
    for (std::string word; stream >> word;)
      words.push_back(word);
    if (words.empty())
      continue;
    standby_slot_record slot;
    if (words.size() > 4 || !parse_slot(words, slot))
      throw data_error(path + " line " + std::to_string(number) +
                       ": expected a standby's name, its flushed WAL position, its owner and "
                       "where it serves once promoted");
    slots.push_back(slot);
  }
  return slots;
}

void write_standby_slots(io_engine& io, const std::string& data_dir,
                         const std::vector<standby_slot_record>& slots) {
  std::ostringstream text;
  for (const standby_slot_record& slot : slots) {
    text << slot.name << " " << slot.flushed << " " << std::hex << slot.owner << std::dec;
    if (!slot.listen.empty())
      text << " " << slot.listen;
    text << "\n";
  }
  replace_file(io, slots_path(data_dir), text.str());
}

std::optional<std::string> read_superseded_mark(const std::string& data_dir) {
  std::ifstream in(mark_path(data_dir));
  if (!in)
    return std::nullopt;
  std::string text;
  std::getline(in, text);
  return text;
}

void write_superseded_mark(io_engine& io, const std::string& data_dir, const std::string& why) {
  replace_file(io, mark_path(data_dir), why + "\n");
}

} // namespace tidemark::storage
