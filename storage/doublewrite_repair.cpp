// Eager doublewrite repair: see doublewrite_repair.hpp for the decision table.
#include "storage/doublewrite_repair.hpp"

#include "storage/doublewrite_record.hpp"

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

// Calls `image` with each ring image whose page checksum and identity verify, reading the
// ring in windows (it may be large and mostly never written).
template <class Yield>
void for_each_valid_image(io_engine& io, int fd, std::uint64_t size, std::size_t page_size,
                          Yield&& image) {
  std::size_t window = std::size_t{4} << 20;
  std::vector<unsigned char> buffer;
  std::uint64_t at = 0;
  while (at < size) {
    std::size_t length = static_cast<std::size_t>(std::min<std::uint64_t>(window, size - at));
    buffer.resize(length);
    io.read(fd, buffer.data(), length, at);
    std::size_t stopped =
      for_each_ring_page(buffer.data(), length, length, page_size, [&](const unsigned char* candidate) {
        const page_header* h = header_of(candidate);
        page_id id{h->rel, h->block};
        if (id.rel != 0 && id.rel < max_relations &&
            verify_page(candidate, page_size, id, true) == page_verdict::ok)
          image(id, candidate);
      });
    if (stopped == 0)
      window *= 2; // a record longer than the window starts here
    at += stopped;
  }
}

} // namespace

// Two passes over the ring, so that memory holds one LSN per page, not one image: the
// first finds each page's newest LSN (D5), the second repairs from the first image that
// has it.
repair_report repair_from_ring(io_engine& io, const std::string& ring_path, relation_files& files) {
  repair_report report;
  struct stat st;
  if (::stat(ring_path.c_str(), &st) != 0)
    return report;
  const std::size_t page_size = files.page_size();
  int fd = io.open_file(ring_path, false);
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  std::map<page_id, lsn_t> newest;
  for_each_valid_image(io, fd, size, page_size, [&](page_id id, const unsigned char* image) {
    ++report.slots_valid;
    auto [it, inserted] = newest.try_emplace(id, page_lsn(image));
    it->second = std::max(it->second, page_lsn(image));
  });
  report.pages_considered = newest.size();
  std::vector<unsigned char> disk(page_size);
  std::vector<segment_id> touched;
  for_each_valid_image(io, fd, size, page_size, [&](page_id id, const unsigned char* image) {
    auto it = newest.find(id);
    if (it == newest.end() || page_lsn(image) != it->second)
      return;
    newest.erase(it); // decided
    files.read_page(id, disk.data());
    repair_inputs in;
    in.disk = verify_page(disk.data(), page_size, id, true);
    in.disk_lsn = in.disk == page_verdict::ok ? page_lsn(disk.data()) : 0;
    in.slot_lsn = page_lsn(image);
    in.same_bytes = std::memcmp(disk.data(), image, page_size) == 0;
    if (decide_repair(in) == repair_action::keep)
      return;
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
  });
  io.close_file(fd);
  for (segment_id segment : touched)
    files.sync_segment(segment);
  return report;
}

} // namespace tidemark::storage
