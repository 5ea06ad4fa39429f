// read_fault_plan: which reads of freshly synced bytes go bad. See read_fault_plan.hpp.
#include "storage/read_fault_plan.hpp"

#include <algorithm>

namespace tidemark::storage {

void read_fault_plan::synced(const std::string& path, std::uint64_t begin, std::uint64_t end) {
  if (!active() || begin >= end)
    return;
  auto [entry, fresh] = fresh_.try_emplace(path, begin, end);
  if (!fresh) {
    entry->second.first = std::min(entry->second.first, begin);
    entry->second.second = std::max(entry->second.second, end);
  }
}

std::optional<bad_read> read_fault_plan::on_read(const std::string& path, std::uint64_t offset,
                                                 std::uint64_t length) {
  if (!active() || length == 0)
    return std::nullopt;
  const std::uint64_t end = offset + length;
  if (bad_path_.empty()) {
    if (path.find(config_.match) == std::string::npos)
      return std::nullopt;
    auto found = fresh_.find(path);
    if (found == fresh_.end())
      return std::nullopt;
    const auto [fresh_begin, fresh_end] = found->second;
    if (end <= fresh_begin || offset >= fresh_end || ++counted_ < config_.after)
      return std::nullopt;
    bad_path_ = path;
    bad_begin_ = std::max(offset, fresh_begin);
    bad_end_ = std::min(end, fresh_end);
  }
  const bool spent = config_.repeats != 0 && faulted_ >= config_.repeats;
  if (spent || path != bad_path_ || end <= bad_begin_ || offset >= bad_end_)
    return std::nullopt;
  ++faulted_;
  return bad_read{config_.kind, std::max(offset, bad_begin_), std::min(end, bad_end_)};
}

} // namespace tidemark::storage
