// Eager doublewrite repair: see doublewrite_repair.hpp for the decision table and which
// records are read.
#include "storage/doublewrite_repair.hpp"

#include "storage/doublewrite_record.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <thread>
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
  return page != nullptr && verify_page(page, page_size, id, true) == page_verdict::ok ? page
                                                                                       : nullptr;
}

using image_callback = std::function<void(const ring_image& image)>;

constexpr std::size_t scan_window = std::size_t{4} << 20;

// Calls `image` with each image of the intact records in [from, to) of the ring file,
// trying every alignment boundary not inside one, reading in windows (the ring may be
// large). Counts the bytes read, and the records when `records` is given.
void for_each_image(io_engine& io, int fd, std::uint64_t from, std::uint64_t to,
                    std::size_t page_size, std::uint64_t* bytes_read, std::uint64_t* records,
                    const image_callback& image) {
  std::size_t window = scan_window;
  std::vector<unsigned char> buffer;
  std::uint64_t at = from;
  while (at < to) {
    std::size_t length = static_cast<std::size_t>(std::min<std::uint64_t>(window, to - at));
    buffer.resize(length);
    io.read(fd, buffer.data(), length, at);
    *bytes_read += length;
    std::size_t stopped =
      for_each_ring_image(buffer.data(), length, length, page_size, image, records);
    if (stopped == 0 && at + length == to)
      stopped = ring_record_alignment; // a record header whose record would end past `to`
    else if (stopped == 0)
      window *= 2; // a record longer than the window starts here
    at += stopped;
  }
}

// The newer intact header of the ring file, if any.
bool read_header(io_engine& io, int fd, std::uint64_t size, std::uint64_t* bytes_read,
                 ring_header* header) {
  std::vector<unsigned char> slots(ring_records_start);
  io.read(fd, slots.data(), slots.size(), 0); // zeros past the end of a short file
  *bytes_read += std::min<std::uint64_t>(size, slots.size());
  unsigned slot;
  return newest_ring_header(slots.data(), header, &slot);
}

// A window onto the ring file for following the chain.
class chain_reader {
public:
  chain_reader(io_engine& io, int fd, std::uint64_t size, std::uint64_t* bytes_read)
    : io_(io), fd_(fd), size_(size), bytes_read_(bytes_read) {}

  // The bytes from `at` up to `limit` (and the end of the file): at least `want` of them
  // where there are that many, from the window if it holds them, else read anew with
  // `ahead` bytes (or `want`, if more). *available says how many; nullptr if none.
  const unsigned char* bytes(std::uint64_t at, std::size_t want, std::size_t ahead,
                             std::uint64_t limit, std::size_t* available) {
    limit = std::min(limit, size_);
    if (at >= limit)
      return nullptr;
    std::uint64_t end = std::min<std::uint64_t>(at + want, limit);
    if (at < at_ || end > at_ + buffer_.size()) {
      std::size_t length =
        static_cast<std::size_t>(std::min<std::uint64_t>(std::max(want, ahead), limit - at));
      buffer_.resize(length);
      io_.read(fd_, buffer_.data(), length, at);
      *bytes_read_ += length;
      at_ = at;
    }
    *available = static_cast<std::size_t>(std::min(at_ + buffer_.size(), limit) - at);
    return buffer_.data() + (at - at_);
  }

private:
  io_engine& io_;
  int fd_;
  std::uint64_t size_;
  std::uint64_t* bytes_read_;
  std::vector<unsigned char> buffer_;
  std::uint64_t at_ = 0; // the window holds [at_, at_ + buffer_.size())
};

// The intact record at `at` whose sequence is `expected`, if there is one before `limit`.
bool chain_record(chain_reader& reader, std::uint64_t at, std::uint64_t expected, std::size_t ahead,
                  std::uint64_t limit, std::size_t page_size, const unsigned char** record,
                  std::size_t* length) {
  std::size_t available = 0;
  const unsigned char* bytes = reader.bytes(at, ring_record_alignment, ahead, limit, &available);
  if (bytes == nullptr)
    return false;
  ring_record_info info = inspect_ring_record(bytes, available, page_size);
  if (info.kind == ring_record_info::partial && info.sequence == expected) {
    bytes = reader.bytes(at, info.length, ahead, limit, &available);
    info = inspect_ring_record(bytes, available, page_size);
  }
  if (info.kind != ring_record_info::intact || info.sequence != expected)
    return false;
  *record = bytes;
  *length = info.length;
  return true;
}

// A stretch of the ring file holding consecutive records of the chain.
struct chain_part {
  std::uint64_t from, to;
};

// Follows the chain from the header's horizon (doublewrite_repair.hpp), calling `image`
// with each image of its records. A look at a place the chain may continue reads one
// alignment block; once a record was found there, reads go ahead in large windows. After
// it moved to the start of the record area, the chain cannot reach its own first record.
std::vector<chain_part> follow_chain(io_engine& io, int fd, std::uint64_t size,
                                     const ring_header& header, std::size_t page_size,
                                     repair_report& report, const image_callback& image) {
  chain_reader reader(io, fd, size, &report.ring_bytes_read);
  std::vector<unsigned char> scratch(page_size);
  std::vector<chain_part> parts;
  std::uint64_t at = header.horizon_at;
  std::uint64_t expected = header.horizon_sequence;
  std::uint64_t limit = size;
  std::size_t ahead = ring_record_alignment;
  bool moved_to_start = false;
  for (;;) {
    const unsigned char* record = nullptr;
    std::size_t length = 0;
    if (chain_record(reader, at, expected, ahead, limit, page_size, &record, &length)) {
      for_each_record_image(record, page_size, scratch.data(), image);
      ++report.records_read;
      if (parts.empty() || parts.back().to != at)
        parts.push_back({at, at});
      parts.back().to = at + length;
      at += length;
      ++expected;
      ahead = scan_window;
      continue;
    }
    if (moved_to_start || at == ring_records_start)
      break;
    moved_to_start = true;
    limit = parts.empty() ? size : parts.front().from;
    at = ring_records_start;
    ahead = ring_record_alignment;
  }
  return parts;
}

} // namespace

ring_check_report check_ring(io_engine& io, const std::string& ring_path, std::size_t page_size) {
  ring_check_report report;
  struct stat st;
  if (::stat(ring_path.c_str(), &st) != 0)
    return report;
  report.present = true;
  int fd = io.open_file(ring_path, false);
  try {
    const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
    std::uint64_t bytes_read = 0;
    ring_header header;
    // Records start past the header slots, or at 0 in a ring from before them.
    std::uint64_t from = read_header(io, fd, size, &bytes_read, &header) ? ring_records_start : 0;
    for_each_image(io, fd, from, size, page_size, &bytes_read, nullptr,
                   [&](const ring_image& image) {
                     ++report.images;
                     page_id id;
                     lsn_t lsn;
                     if (!identify(image, &id, &lsn) ||
                         verified_page(image, id, page_size) == nullptr)
                       ++report.unreadable;
                   });
  } catch (...) {
    io.close_file(fd);
    throw;
  }
  io.close_file(fd);
  return report;
}

namespace {

// Reads the on-disk copies of the pages the ring holds images of, in file order and
// `batch` at a time through one read_batch each (io_uring: in parallel on the device), so
// that the repair pass, which compares each with its image, finds them in the page cache
// instead of making one random read at a time. After a power loss that cache is cold: one
// read at a time took 1.7 of a 2.1 s repair (73 771 images). Tried and slower on this
// machine kind (cold, 59 721 images): the reads on a thread of their own while the pass
// runs, in the pass's order or in file order, split between the pass's threads, and
// posix_fadvise(WILLNEED) instead of reads (0.51 s here, 0.56–0.72 s those).
void warm_disk_pages(relation_files& files,
                     const std::unordered_map<page_id, lsn_t, page_id_hash>& pages) {
  constexpr std::size_t batch = 64;
  std::vector<page_id> ids;
  ids.reserve(pages.size());
  for (const auto& entry : pages)
    ids.push_back(entry.first);
  std::sort(ids.begin(), ids.end(), [](page_id a, page_id b) {
    return a.rel != b.rel ? a.rel < b.rel : a.block < b.block;
  });
  std::vector<unsigned char> scratch(batch * files.page_size());
  std::vector<page_read> reads;
  for (page_id id : ids) {
    reads.push_back({id, scratch.data() + reads.size() * files.page_size()});
    if (reads.size() == batch) {
      files.read_pages(reads.data(), reads.size());
      reads.clear();
    }
  }
  if (!reads.empty())
    files.read_pages(reads.data(), reads.size());
}

using lsn_map = std::unordered_map<page_id, lsn_t, page_id_hash>;

// The chain's parts hold its records back to back, so a scan of them finds exactly those
// records again.
void for_each_chain_image(io_engine& io, int fd, const std::vector<chain_part>& parts,
                          std::size_t page_size, std::uint64_t* bytes_read,
                          const image_callback& image) {
  for (const chain_part& part : parts)
    for_each_image(io, fd, part.from, part.to, page_size, bytes_read, nullptr, image);
}

// One share of the repair pass: the pages it decides (each with the LSN to repair from,
// erased once decided, so what is left has no image with that LSN that verifies), what it
// counted, and the segments it wrote. Shares hold disjoint pages, so threads can each
// work one without sharing anything but the files.
struct repair_share {
  lsn_map pending;
  repair_report counts; // pages_considered, pages_repaired, repaired_*, ring_bytes_read
  std::vector<segment_id> touched;
};

// Scans the chain and decides each of the share's pages at the first image with its LSN
// that verifies (the decision table in doublewrite_repair.hpp).
void repair_pages(io_engine& io, int fd, const std::vector<chain_part>& parts,
                  relation_files& files, repair_share& share) {
  const std::size_t page_size = files.page_size();
  std::vector<unsigned char> disk(page_size);
  for_each_chain_image(io, fd, parts, page_size, &share.counts.ring_bytes_read,
                       [&](const ring_image& image) {
                         page_id id;
                         lsn_t slot_lsn;
                         if (!identify(image, &id, &slot_lsn))
                           return;
                         auto it = share.pending.find(id);
                         if (it == share.pending.end() || slot_lsn != it->second)
                           return;
                         const unsigned char* slot = verified_page(image, id, page_size);
                         if (slot == nullptr)
                           return; // a broken image with that LSN: a valid one may still come
                         share.pending.erase(it); // decided
                         ++share.counts.pages_considered;
                         files.read_page(id, disk.data());
                         repair_inputs in;
                         in.disk = verify_page(disk.data(), page_size, id, true);
                         in.disk_lsn = in.disk == page_verdict::ok ? page_lsn(disk.data()) : 0;
                         in.slot_lsn = slot_lsn;
                         in.same_bytes = std::memcmp(disk.data(), slot, page_size) == 0;
                         if (decide_repair(in) == repair_action::keep)
                           return;
                         files.write_page(id, slot);
                         ++share.counts.pages_repaired;
                         if (in.disk != page_verdict::ok)
                           ++share.counts.repaired_checksum;
                         else if (in.disk_lsn < in.slot_lsn)
                           ++share.counts.repaired_lsn;
                         else
                           ++share.counts.repaired_bytes;
                         segment_id segment = files.segment_of(id);
                         if (std::find(share.touched.begin(), share.touched.end(), segment) ==
                             share.touched.end())
                           share.touched.push_back(segment);
                       });
}

// Runs repair_pages on every share at once, one thread each (the caller's thread takes
// the first), so that decoding, verifying and comparing use every core; rethrows the
// first failure once all have finished.
void repair_shares(io_engine& io, int fd, const std::vector<chain_part>& parts,
                   relation_files& files, std::vector<repair_share>& shares) {
  std::vector<std::exception_ptr> failures(shares.size());
  auto work = [&](std::size_t i) {
    try {
      repair_pages(io, fd, parts, files, shares[i]);
    } catch (...) {
      failures[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < shares.size(); ++i)
    threads.emplace_back(work, i);
  work(0);
  for (std::thread& thread : threads)
    thread.join();
  for (const std::exception_ptr& failure : failures)
    if (failure)
      std::rethrow_exception(failure);
}

// Splits the pages into `count` disjoint shares of about equal size.
std::vector<repair_share> split_pages(lsn_map pages, std::size_t count) {
  std::vector<repair_share> shares(count);
  for (const auto& [id, lsn] : pages)
    shares[page_id_hash{}(id) % count].pending.emplace(id, lsn);
  return shares;
}

// Adds a share's counts and segments to the report's.
void merge_share(const repair_share& share, repair_report& report,
                 std::vector<segment_id>& touched) {
  report.pages_considered += share.counts.pages_considered;
  report.pages_repaired += share.counts.pages_repaired;
  report.repaired_checksum += share.counts.repaired_checksum;
  report.repaired_lsn += share.counts.repaired_lsn;
  report.repaired_bytes += share.counts.repaired_bytes;
  report.ring_bytes_read += share.counts.ring_bytes_read;
  for (segment_id segment : share.touched)
    if (std::find(touched.begin(), touched.end(), segment) == touched.end())
      touched.push_back(segment);
}

} // namespace

std::size_t repair_threads() {
  return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 4);
}

// Two passes over the records, so that memory holds one LSN per page, not one image. The
// first reads page headers only and notes each page's highest LSN (D5); the second reads
// the same records again (from the page cache, usually), decompresses and verifies an
// image only when it has that LSN, and repairs from the first that verifies. So a page's
// image is decoded whole about once, however often the chain holds it. A page none of
// whose images with that LSN verifies takes two more passes, for it alone: the first finds
// its highest LSN whose image verifies (verifying every image newer than the best so far),
// the second repairs from it. The second pass runs on every core at once, each thread
// deciding its own share of the pages (it still reads every record's page headers).
repair_report repair_from_ring(io_engine& io, const std::string& ring_path, relation_files& files) {
  auto started = std::chrono::steady_clock::now();
  repair_report report;
  struct stat st;
  if (::stat(ring_path.c_str(), &st) != 0)
    return report;
  const std::size_t page_size = files.page_size();
  int fd = io.open_file(ring_path, false);
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  lsn_map newest;
  std::vector<segment_id> touched;
  try {
    auto highest_lsn = [&](const ring_image& image) {
      ++report.images_read;
      page_id id;
      lsn_t lsn;
      if (!identify(image, &id, &lsn))
        return;
      auto [it, added] = newest.emplace(id, lsn);
      if (!added && it->second < lsn)
        it->second = lsn;
    };
    ring_header header;
    std::vector<chain_part> parts;
    report.bounded = read_header(io, fd, size, &report.ring_bytes_read, &header);
    if (report.bounded) {
      parts = follow_chain(io, fd, size, header, page_size, report, highest_lsn);
    } else {
      for_each_image(io, fd, 0, size, page_size, &report.ring_bytes_read, &report.records_read,
                     highest_lsn);
      parts.push_back({0, size});
    }
    warm_disk_pages(files, newest);
    std::vector<repair_share> shares = split_pages(std::move(newest), repair_threads());
    repair_shares(io, fd, parts, files, shares);
    lsn_map broken; // pages whose newest images are all broken
    for (repair_share& share : shares) {
      merge_share(share, report, touched);
      broken.merge(share.pending);
    }
    if (!broken.empty()) {
      lsn_map valid;
      for_each_chain_image(io, fd, parts, page_size, &report.ring_bytes_read,
                           [&](const ring_image& image) {
                             page_id id;
                             lsn_t lsn;
                             if (!identify(image, &id, &lsn))
                               return;
                             auto it = broken.find(id);
                             if (it == broken.end() || lsn >= it->second)
                               return;
                             auto best = valid.find(id);
                             if ((best != valid.end() && best->second >= lsn) ||
                                 verified_page(image, id, page_size) == nullptr)
                               return;
                             valid[id] = lsn;
                           });
      std::vector<repair_share> last = split_pages(std::move(valid), 1);
      repair_pages(io, fd, parts, files, last[0]);
      merge_share(last[0], report, touched);
    }
  } catch (...) {
    io.close_file(fd);
    throw;
  }
  io.close_file(fd);
  for (segment_id segment : touched)
    files.sync_segment(segment);
  report.seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

} // namespace tidemark::storage
