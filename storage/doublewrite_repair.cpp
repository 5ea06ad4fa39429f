// Eager doublewrite repair: see doublewrite_repair.hpp for the decision table.
#include "storage/doublewrite_repair.hpp"

#include "storage/doublewrite_record.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

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

struct page_id_hash {
  std::size_t operator()(page_id id) const {
    return std::hash<std::uint64_t>{}(std::uint64_t{id.rel} << 32 | id.block);
  }
};

// A ring image's page identity and LSN, from its header alone; false if the header does
// not decode or names no relation page.
bool identify(const ring_image& image, page_id* id, lsn_t* lsn) {
  const unsigned char* head = image.prefix(page_header_size);
  if (head == nullptr)
    return false;
  const page_header* h = header_of(head);
  *id = page_id{h->rel, h->block};
  *lsn = h->lsn;
  return id->rel != 0 && id->rel < max_relations;
}

// The image's whole page if its checksum and identity verify, else nullptr.
const unsigned char* verified_page(const ring_image& image, page_id id, std::size_t page_size) {
  const unsigned char* page = image.page();
  return page != nullptr && verify_page(page, page_size, id, true) == page_verdict::ok ? page : nullptr;
}

// Calls `image` with each image of the intact records in the ring, reading the ring in
// windows (it may be large).
template <class Yield>
void for_each_image(io_engine& io, int fd, std::uint64_t size, std::size_t page_size,
                    Yield&& image) {
  std::size_t window = std::size_t{4} << 20;
  std::vector<unsigned char> buffer;
  std::uint64_t at = 0;
  while (at < size) {
    std::size_t length = static_cast<std::size_t>(std::min<std::uint64_t>(window, size - at));
    buffer.resize(length);
    io.read(fd, buffer.data(), length, at);
    std::size_t stopped = for_each_ring_image(buffer.data(), length, length, page_size, image);
    if (stopped == 0)
      window *= 2; // a record longer than the window starts here
    at += stopped;
  }
}

} // namespace

// Two passes over the ring, so that memory holds one LSN per page, not one image: the
// first finds each page's newest valid LSN (D5), the second repairs from the first valid
// image that has it. Both read page headers first and decompress and verify a whole page
// only when its LSN would matter: an image older than the newest valid one seen is never
// decoded.
ring_check_report check_ring(io_engine& io, const std::string& ring_path, std::size_t page_size) {
  ring_check_report report;
  struct stat st;
  if (::stat(ring_path.c_str(), &st) != 0)
    return report;
  report.present = true;
  int fd = io.open_file(ring_path, false);
  try {
    for_each_image(io, fd, static_cast<std::uint64_t>(st.st_size), page_size,
                   [&](const ring_image& image) {
                     ++report.images;
                     page_id id;
                     lsn_t lsn;
                     if (!identify(image, &id, &lsn) || verified_page(image, id, page_size) == nullptr)
                       ++report.unreadable;
                   });
  } catch (...) {
    io.close_file(fd);
    throw;
  }
  io.close_file(fd);
  return report;
}

repair_report repair_from_ring(io_engine& io, const std::string& ring_path, relation_files& files) {
  repair_report report;
  struct stat st;
  if (::stat(ring_path.c_str(), &st) != 0)
    return report;
  const std::size_t page_size = files.page_size();
  int fd = io.open_file(ring_path, false);
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  std::unordered_map<page_id, lsn_t, page_id_hash> newest;
  for_each_image(io, fd, size, page_size, [&](const ring_image& image) {
    ++report.images_read;
    page_id id;
    lsn_t lsn;
    if (!identify(image, &id, &lsn))
      return;
    auto it = newest.find(id);
    if ((it != newest.end() && it->second >= lsn) || verified_page(image, id, page_size) == nullptr)
      return;
    newest[id] = lsn;
  });
  report.pages_considered = newest.size();
  std::vector<unsigned char> disk(page_size);
  std::vector<segment_id> touched;
  for_each_image(io, fd, size, page_size, [&](const ring_image& image) {
    page_id id;
    lsn_t slot_lsn;
    if (!identify(image, &id, &slot_lsn))
      return;
    auto it = newest.find(id);
    if (it == newest.end() || slot_lsn != it->second)
      return;
    const unsigned char* slot = verified_page(image, id, page_size);
    if (slot == nullptr)
      return; // a broken image with the same LSN: the valid one is still to come
    newest.erase(it); // decided
    files.read_page(id, disk.data());
    repair_inputs in;
    in.disk = verify_page(disk.data(), page_size, id, true);
    in.disk_lsn = in.disk == page_verdict::ok ? page_lsn(disk.data()) : 0;
    in.slot_lsn = slot_lsn;
    in.same_bytes = std::memcmp(disk.data(), slot, page_size) == 0;
    if (decide_repair(in) == repair_action::keep)
      return;
    files.write_page(id, slot);
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
