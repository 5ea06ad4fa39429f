// The pending-sync table: see sync_table.hpp.
#include "storage/sync_table.hpp"

namespace tidemark::storage {

bool sync_table::remember(const file_tag& tag) {
  return entries_.emplace(tag, cycle_).second;
}

void sync_table::forget(const file_tag& tag) { entries_.erase(tag); }

std::uint64_t sync_table::begin_cycle() { return ++cycle_; }

std::vector<file_tag> sync_table::due(std::uint64_t cycle) const {
  std::vector<file_tag> result;
  for (const auto& [tag, registered] : entries_)
    if (registered < cycle)
      result.push_back(tag);
  return result;
}

void sync_table::synced(const file_tag& tag, std::uint64_t cycle) {
  auto it = entries_.find(tag);
  if (it != entries_.end() && it->second < cycle)
    entries_.erase(it);
}

std::vector<file_tag> sync_table::pending() const {
  std::vector<file_tag> tags;
  tags.reserve(entries_.size());
  for (const auto& [tag, cycle] : entries_)
    tags.push_back(tag);
  return tags;
}

} // namespace tidemark::storage
