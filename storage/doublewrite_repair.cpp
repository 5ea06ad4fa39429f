// Eager doublewrite repair: see doublewrite_repair.hpp for the decision table.
#include "storage/doublewrite_repair.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace tidemark::storage {

repair_action decide_repair(const repair_inputs& in) {
  if (in.disk == page_verdict::bad_checksum || in.disk == page_verdict::wrong_identity ||
      in.disk == page_verdict::all_zero)
    return repair_action::restore;
  if (in.disk_lsn < in.slot_lsn)
    return repair_action::restore;
  if (in.disk_lsn == in.slot_lsn && !in.same_bytes)
    return repair_action::restore;
  return repair_action::keep;
}

namespace {

// The newest valid image per page: ring slot index by page.
std::map<page_id, std::uint64_t> newest_slots(const std::vector<unsigned char>& ring,
                                              std::size_t page_size, repair_report& report) {
  std::map<page_id, std::uint64_t> newest;
  for (std::uint64_t slot = 0; slot * page_size < ring.size(); ++slot) {
    const unsigned char* image = ring.data() + slot * page_size;
    if (page_is_all_zero(image, page_size))
      continue;
    const page_header* h = header_of(image);
    page_id id{h->rel, h->block};
    if (id.rel == 0 || id.rel >= max_relations ||
        verify_page(image, page_size, id, true) != page_verdict::ok)
      continue; // torn or never completed: its in-place write never started (D1)
    ++report.slots_valid;
    auto [it, inserted] = newest.emplace(id, slot);
    if (!inserted && page_lsn(ring.data() + it->second * page_size) < h->lsn)
      it->second = slot;
  }
  return newest;
}

} // namespace

repair_report repair_from_ring(io_engine& io, const std::string& ring_path, relation_files& files) {
  repair_report report;
  struct stat st;
  if (::stat(ring_path.c_str(), &st) != 0)
    return report;
  const std::size_t page_size = files.page_size();
  std::vector<unsigned char> ring(static_cast<std::size_t>(st.st_size));
  int fd = io.open_file(ring_path, false);
  io.read(fd, ring.data(), ring.size(), 0);
  io.close_file(fd);
  std::vector<unsigned char> disk(page_size);
  std::vector<segment_id> touched;
  for (const auto& [id, slot] : newest_slots(ring, page_size, report)) {
    ++report.pages_considered;
    const unsigned char* image = ring.data() + slot * page_size;
    files.read_page(id, disk.data());
    repair_inputs in;
    in.disk = verify_page(disk.data(), page_size, id, true);
    in.disk_lsn = in.disk == page_verdict::ok ? page_lsn(disk.data()) : 0;
    in.slot_lsn = page_lsn(image);
    in.same_bytes = std::memcmp(disk.data(), image, page_size) == 0;
    if (decide_repair(in) == repair_action::keep)
      continue;
    files.write_page(id, image);
    ++report.pages_repaired;
    if (in.disk != page_verdict::ok)
      ++report.repaired_checksum;
    else if (in.disk_lsn < in.slot_lsn)
      ++report.repaired_lsn;
    else
      ++report.repaired_bytes;
    segment_id segment = files.segment_of(id);
    if (std::find(touched.begin(), touched.end(), segment) == touched.end())
      touched.push_back(segment);
  }
  for (segment_id segment : touched)
    files.sync_segment(segment);
  return report;
}

} // namespace tidemark::storage
