// The pending-sync table: see sync_table.hpp.
#include "storage/sync_table.hpp"

#include <algorithm>

namespace tidemark::storage {

std::size_t note_write(file_write* writes, std::size_t count, const file_tag& tag,
                       std::uint64_t offset, std::uint64_t length) {
  for (std::size_t i = 0; i < count; ++i) {
    if (writes[i].tag == tag) {
      writes[i].bytes += length;
      writes[i].begin = std::min(writes[i].begin, offset);
      writes[i].end = std::max(writes[i].end, offset + length);
      return count;
    }
  }
  writes[count] = file_write{tag, length, offset, offset + length};
  return count + 1;
}

bool sync_table::remember(const file_write& write) {
  auto [it, added] = entries_.try_emplace(write.tag, entry{cycle_, 0, write.begin, write.end});
  entry& e = it->second;
  e.bytes += write.bytes;
  e.begin = std::min(e.begin, write.begin);
  e.end = std::max(e.end, write.end);
  return added;
}

void sync_table::forget(const file_tag& tag) { entries_.erase(tag); }

std::uint64_t sync_table::begin_cycle() { return ++cycle_; }

file_write sync_table::written(const file_tag& tag, const entry& e) {
  return file_write{tag, std::min(e.bytes, e.end - e.begin), e.begin, e.end};
}

std::vector<file_write> sync_table::due(std::uint64_t cycle) const {
  std::vector<file_write> result;
  for (const auto& [tag, e] : entries_)
    if (e.cycle < cycle)
      result.push_back(written(tag, e));
  return result;
}

void sync_table::synced(const file_tag& tag, std::uint64_t cycle) {
  auto it = entries_.find(tag);
  if (it != entries_.end() && it->second.cycle < cycle)
    entries_.erase(it);
}

std::vector<file_write> sync_table::pending() const {
  std::vector<file_write> result;
  result.reserve(entries_.size());
  for (const auto& [tag, e] : entries_)
    result.push_back(written(tag, e));
  return result;
}

} // namespace tidemark::storage
