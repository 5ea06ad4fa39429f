// The fault-injecting I/O engine (model in fault_engine.hpp): a volatile write cache in
// front of a real engine, and the simulated power loss that empties it.
//
// Invariants:
//  - Every method runs under mutex_, so the record of unsynced writes is the exact order in
//    which writes reached the inner engine, and nothing slips in after a crash.
//  - unsynced_ holds, in issue order, every write to a still-linked file that no completed
//    sync has covered, with the bytes it replaced (`before`, zeros past the old end of file)
//    and the bytes it wrote (`after`). A sync of a file removes all of that file's entries;
//    a failed (injected) sync removes none.
//  - Entries follow their file: rename re-paths them (and drops those of a file the rename
//    replaced), unlink drops them, truncate clips them to the new length.
//  - A power loss walks unsynced_ newest first. Bytes that the surviving part of a write
//    kept become "owned"; reverting an older write restores its `before` image everywhere
//    except owned bytes. So after the walk every byte holds the value of the newest
//    surviving write covering it, or its durable value if none. Afterwards the engine is
//    crashed: every call except close_file() throws io_error.
//  - Tears split a write at a 512-byte or 4 KiB file-offset boundary strictly inside it and
//    keep the bytes on one side; all choices come from one mt19937_64 seeded with
//    config.seed, so a run is reproducible.
#include "storage/fault_engine.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <unistd.h>

namespace tidemark::storage {
namespace {

constexpr std::uint64_t sector_size = 512;
constexpr std::uint64_t tear_page_size = 4096;

void exit_after_simulated_crash(const power_loss_report& report) {
  if (report.process_crash) {
    std::fprintf(stderr, "tidemark: simulated process crash: %llu unsynced writes left in place\n",
                 static_cast<unsigned long long>(report.unsynced_writes));
    std::fflush(stderr);
    _exit(3);
  }
  std::fprintf(stderr,
               "tidemark: simulated power loss: %llu unsynced writes, %llu survived, %llu lost, "
               "%llu torn\n",
               static_cast<unsigned long long>(report.unsynced_writes),
               static_cast<unsigned long long>(report.survived),
               static_cast<unsigned long long>(report.lost),
               static_cast<unsigned long long>(report.torn));
  std::fflush(stderr);
  _exit(3);
}

// Disjoint, non-adjacent byte intervals [begin, end) of one file, keyed by begin.
class interval_set {
public:
  struct interval {
    std::uint64_t begin;
    std::uint64_t end;
  };

  /// The parts of [begin, end) not in the set, in order.
  std::vector<interval> gaps(std::uint64_t begin, std::uint64_t end) const {
    std::vector<interval> result;
    std::uint64_t position = begin;
    for (auto it = first_reaching(begin); it != intervals_.end() && it->first < end; ++it) {
      if (it->first > position)
        result.push_back({position, it->first});
      position = std::max(position, it->second);
    }
    if (position < end)
      result.push_back({position, end});
    return result;
  }

  void add(std::uint64_t begin, std::uint64_t end) {
    if (begin >= end)
      return;
    auto it = first_reaching(begin);
    while (it != intervals_.end() && it->first <= end) { // overlapping or adjacent: merge
      begin = std::min(begin, it->first);
      end = std::max(end, it->second);
      it = intervals_.erase(it);
    }
    intervals_.emplace(begin, end);
  }

private:
  using interval_map = std::map<std::uint64_t, std::uint64_t>;

  // The first interval that ends at or after `position`.
  interval_map::const_iterator first_reaching(std::uint64_t position) const {
    auto it = intervals_.upper_bound(position);
    if (it != intervals_.begin() && std::prev(it)->second >= position)
      --it;
    return it;
  }

  interval_map intervals_;
};

// Which new bytes of a write a power loss keeps: [keep_begin, keep_end) relative to the
// write; the rest reverts.
struct write_fate {
  std::size_t keep_begin = 0;
  std::size_t keep_end = 0;
};

std::uint64_t pick(std::mt19937_64& random, std::uint64_t choices) { return random() % choices; }

// A boundary (relative to the write) at a multiple of `granularity` in the file, strictly
// inside [offset, offset + length); 0 if the write does not cross one.
std::size_t pick_boundary(std::mt19937_64& random, std::uint64_t offset, std::size_t length,
                          std::uint64_t granularity) {
  if (length == 0)
    return 0;
  const std::uint64_t first = (offset / granularity + 1) * granularity;
  const std::uint64_t last = (offset + length - 1) / granularity * granularity;
  if (first > last)
    return 0;
  const std::uint64_t boundaries = (last - first) / granularity + 1;
  return static_cast<std::size_t>(first + pick(random, boundaries) * granularity - offset);
}

// A 4 KiB boundary (half the time, when the write crosses one) or else a 512-byte one.
std::size_t pick_tear(std::mt19937_64& random, std::uint64_t offset, std::size_t length) {
  const std::size_t page_boundary = pick_boundary(random, offset, length, tear_page_size);
  if (page_boundary != 0 && pick(random, 2) == 0)
    return page_boundary;
  return pick_boundary(random, offset, length, sector_size);
}

// lose_unsynced: survive or lost, 1/2 each. torn: survive, lost or torn, 1/3 each, for
// writes that cross a sector boundary (others as lose_unsynced); a tear keeps the head or
// the tail, 1/2 each.
write_fate choose_fate(std::mt19937_64& random, crash_mode mode, bool tear_every_write,
                       std::uint64_t offset, std::size_t length, power_loss_report& report) {
  const std::size_t tear = mode == crash_mode::torn ? pick_tear(random, offset, length) : 0;
  const std::uint64_t outcome = tear != 0 && tear_every_write ? 2 : pick(random, tear != 0 ? 3 : 2);
  if (outcome == 0) {
    ++report.survived;
    return {0, length};
  }
  if (outcome == 1) {
    ++report.lost;
    return {0, 0};
  }
  ++report.torn;
  return pick(random, 2) == 0 ? write_fate{0, tear} : write_fate{tear, length};
}

// The journal: "TMFJ" and a version, then per write its path length, path, offset, length,
// before image and after image (little-endian, as the machine writes them).
constexpr char journal_magic[8] = {'T', 'M', 'F', 'J', '0', '0', '0', '1'};

template <typename T>
void put(std::FILE* out, const T& value) {
  std::fwrite(&value, sizeof value, 1, out);
}

template <typename T>
bool get(std::FILE* in, T& value) {
  return std::fread(&value, sizeof value, 1, in) == 1;
}

bool get_bytes(std::FILE* in, void* data, std::size_t length) {
  return length == 0 || std::fread(data, 1, length, in) == length;
}

} // namespace

fault_engine::fault_engine(std::unique_ptr<io_engine> inner, fault_config config)
  : inner_(std::move(inner)), config_(config), random_(config.seed), bad_reads_(config.bad_reads),
    crash_handler_(exit_after_simulated_crash) {
  if (!config_.journal_path.empty())
    load_journal();
}

fault_engine::~fault_engine() {
  std::lock_guard lock(mutex_);
  if (!config_.journal_path.empty() && !crashed_) {
    try {
      save_journal();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "tidemark: %s\n", error.what());
    }
  }
}

void fault_engine::load_journal() {
  std::FILE* in = std::fopen(config_.journal_path.c_str(), "rb");
  if (in == nullptr) {
    if (errno == ENOENT)
      return;
    throw io_error("cannot open fault journal '" + config_.journal_path + "'", errno);
  }
  char magic[sizeof journal_magic];
  bool ok = get_bytes(in, magic, sizeof magic) &&
            std::equal(magic, magic + sizeof magic, journal_magic);
  std::uint64_t count = 0;
  ok = ok && get(in, count);
  for (std::uint64_t i = 0; ok && i < count; ++i) {
    unsynced_write w;
    std::uint32_t path_length = 0;
    std::uint64_t length = 0;
    ok = get(in, path_length) && path_length < 4096;
    if (ok) {
      w.path.resize(path_length);
      ok = get_bytes(in, w.path.data(), path_length) && get(in, w.offset) && get(in, length) &&
           length <= (1ull << 32);
    }
    if (ok) {
      w.before.resize(length);
      w.after.resize(length);
      ok = get_bytes(in, w.before.data(), length) && get_bytes(in, w.after.data(), length);
    }
    if (ok)
      unsynced_.push_back(std::move(w));
  }
  std::fclose(in);
  if (!ok)
    throw io_error("fault journal '" + config_.journal_path + "' is malformed", EINVAL);
}

void fault_engine::save_journal() const {
  if (unsynced_.empty()) {
    if (std::remove(config_.journal_path.c_str()) != 0 && errno != ENOENT)
      throw io_error("cannot remove fault journal '" + config_.journal_path + "'", errno);
    return;
  }
  std::string temporary = config_.journal_path + ".tmp";
  std::FILE* out = std::fopen(temporary.c_str(), "wb");
  if (out == nullptr)
    throw io_error("cannot write fault journal '" + temporary + "'", errno);
  std::fwrite(journal_magic, 1, sizeof journal_magic, out);
  put(out, static_cast<std::uint64_t>(unsynced_.size()));
  for (const unsynced_write& w : unsynced_) {
    put(out, static_cast<std::uint32_t>(w.path.size()));
    std::fwrite(w.path.data(), 1, w.path.size(), out);
    put(out, w.offset);
    put(out, static_cast<std::uint64_t>(w.after.size()));
    std::fwrite(w.before.data(), 1, w.before.size(), out);
    std::fwrite(w.after.data(), 1, w.after.size(), out);
  }
  bool ok = std::fflush(out) == 0 && !std::ferror(out);
  ok = std::fclose(out) == 0 && ok;
  if (!ok || std::rename(temporary.c_str(), config_.journal_path.c_str()) != 0)
    throw io_error("cannot write fault journal '" + config_.journal_path + "'", errno);
}

std::string fault_engine::name() const {
  std::lock_guard lock(mutex_);
  return "fault(" + inner_->name() + ")";
}

int fault_engine::open_file(const std::string& path, bool create) {
  std::lock_guard lock(mutex_);
  throw_if_crashed("open");
  const int fd = inner_->open_file(path, create);
  paths_[fd] = path;
  return fd;
}

void fault_engine::close_file(int fd) {
  std::lock_guard lock(mutex_);
  paths_.erase(fd);
  inner_->close_file(fd);
}

std::size_t fault_engine::read(int fd, void* data, std::size_t length, std::uint64_t offset) {
  std::lock_guard lock(mutex_);
  throw_if_crashed("read");
  std::size_t done = inner_->read(fd, data, length, offset);
  sync_failure_.check_readable([&] { return inner_->path_of(fd); });
  const std::optional<bad_read> bad = bad_reads_.on_read(tracked_path(fd), offset, length);
  if (!bad)
    return done;
  auto* bytes = static_cast<unsigned char*>(data);
  switch (bad->kind) {
    case read_fault::zeros: // a stale cached page: the caller cannot tell
      std::fill(bytes + (bad->begin - offset), bytes + (bad->end - offset), 0);
      return done;
    case read_fault::short_read:
      std::fill(bytes + (bad->begin - offset), bytes + length, 0);
      return std::min<std::size_t>(done, bad->begin - offset);
    case read_fault::error:
      throw io_error("pread of " + std::to_string(length) + " bytes at offset " +
                       std::to_string(offset) + " in '" + inner_->path_of(fd) +
                       "' failed: injected EIO (bad read " + std::to_string(bad_reads_.faulted()) +
                       ")",
                     EIO);
    case read_fault::none:
      break;
  }
  return done;
}

void fault_engine::write(int fd, const void* data, std::size_t length, std::uint64_t offset) {
  std::lock_guard lock(mutex_);
  write_locked(fd, data, length, offset);
}

void fault_engine::write_batch(const io_write* writes, std::size_t count) {
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < count; ++i)
    write_locked(writes[i].fd, writes[i].data, writes[i].length, writes[i].offset);
}

void fault_engine::write_locked(int fd, const void* data, std::size_t length,
                                std::uint64_t offset) {
  throw_if_crashed("write");
  const std::string& path = tracked_path(fd);
  if (path.empty()) {
    inner_->write(fd, data, length, offset); // unlinked file: its bytes cannot matter
  } else {
    unsynced_write record{path, offset, std::vector<unsigned char>(length), {}};
    inner_->read(fd, record.before.data(), length, offset);
    inner_->write(fd, data, length, offset);
    const auto* bytes = static_cast<const unsigned char*>(data);
    record.after.assign(bytes, bytes + length);
    unsynced_.push_back(std::move(record));
  }
  ++writes_issued_;
  if (config_.crash_after_writes != 0 && writes_issued_ == config_.crash_after_writes)
    crash_handler_(crash_locked());
}

void fault_engine::sync(int fd, sync_kind) {
  std::lock_guard lock(mutex_);
  throw_if_crashed("sync", true);
  const std::string& path = tracked_path(fd);
  const std::string& shown_path = path.empty() ? inner_->path_of(fd) : path;
  bool counts = config_.fail_sync_match.empty() ||
                shown_path.find(config_.fail_sync_match) != std::string::npos;
  if (counts)
    ++syncs_issued_;
  if (counts && config_.fail_sync_after != 0 && syncs_issued_ >= config_.fail_sync_after) {
    const std::string shown = path.empty() ? inner_->path_of(fd) : path;
    if (!path.empty())
      drop_unsynced_locked(path);
    io_error error("fsync of '" + shown + "' failed: injected EIO (sync " +
                     std::to_string(syncs_issued_) + ", fail_sync_after " +
                     std::to_string(config_.fail_sync_after) + ")",
                   EIO, true);
    sync_failure_.record(error.what());
    throw error;
  }
  if (!path.empty()) {
    for (const unsynced_write& w : unsynced_)
      if (w.path == path)
        bad_reads_.synced(path, w.offset, w.offset + w.after.size());
    forget_path(path);
  }
}

void fault_engine::write_back(int, std::uint64_t, std::uint64_t, bool) {
  std::lock_guard lock(mutex_);
  throw_if_crashed("write_back"); // the data stays unsynced: it may still be lost
}

void fault_engine::will_need(int fd, std::uint64_t offset, std::uint64_t length) {
  {
    std::lock_guard lock(mutex_);
    if (crashed_)
      return;
  }
  // Reads come from the inner files: warm their cache. Outside the lock: the kernel may
  // block while it submits the read-ahead, and every other call here would wait for it.
  // A hint for an fd closed meanwhile changes nothing that matters.
  inner_->will_need(fd, offset, length);
}

void fault_engine::forget_cached(int fd, std::uint64_t offset, std::uint64_t length) {
  {
    std::lock_guard lock(mutex_);
    if (crashed_)
      return;
  }
  inner_->forget_cached(fd, offset, length); // a hint, like will_need: outside the lock
}

std::uint64_t fault_engine::file_size(int fd) {
  std::lock_guard lock(mutex_);
  throw_if_crashed("file_size");
  return inner_->file_size(fd);
}

void fault_engine::truncate(int fd, std::uint64_t length) {
  std::lock_guard lock(mutex_);
  throw_if_crashed("truncate");
  inner_->truncate(fd, length);
  const std::string& path = tracked_path(fd);
  auto beyond = [&](const unsynced_write& w) { return w.path == path && w.offset >= length; };
  unsynced_.erase(std::remove_if(unsynced_.begin(), unsynced_.end(), beyond), unsynced_.end());
  for (unsynced_write& w : unsynced_)
    if (w.path == path && w.offset + w.after.size() > length) {
      w.before.resize(length - w.offset);
      w.after.resize(length - w.offset);
    }
}

void fault_engine::rename(const std::string& from, const std::string& to) {
  std::lock_guard lock(mutex_);
  throw_if_crashed("rename");
  inner_->rename(from, to);
  if (from == to)
    return;
  bad_reads_.forget(from);
  bad_reads_.forget(to);
  forget_path(to); // the file `to` named is gone
  for (auto& [fd, path] : paths_)
    if (path == to)
      path.clear();
  for (unsynced_write& w : unsynced_)
    if (w.path == from)
      w.path = to;
  for (auto& [fd, path] : paths_)
    if (path == from)
      path = to;
}

void fault_engine::unlink(const std::string& path) {
  std::lock_guard lock(mutex_);
  throw_if_crashed("unlink");
  inner_->unlink(path);
  forget_path(path);
  bad_reads_.forget(path);
  for (auto& [fd, fd_path] : paths_)
    if (fd_path == path)
      fd_path.clear();
}

void fault_engine::sync_directory(const std::string&) {
  std::lock_guard lock(mutex_);
  throw_if_crashed("sync_directory", true); // directory operations are already durable
}

void fault_engine::sync_file_system(const std::string&) {
  std::lock_guard lock(mutex_);
  throw_if_crashed("sync_file_system", true);
  unsynced_.clear();
}

std::string fault_engine::path_of(int fd) const {
  std::lock_guard lock(mutex_);
  const std::string& path = tracked_path(fd);
  return path.empty() ? inner_->path_of(fd) : path;
}

power_loss_report fault_engine::simulate_power_loss() {
  std::lock_guard lock(mutex_);
  return power_loss_locked();
}

void fault_engine::on_crash(std::function<void(const power_loss_report&)> handler) {
  std::lock_guard lock(mutex_);
  crash_handler_ = std::move(handler);
}

std::uint64_t fault_engine::writes_issued() const {
  std::lock_guard lock(mutex_);
  return writes_issued_;
}

std::uint64_t fault_engine::syncs_issued() const {
  std::lock_guard lock(mutex_);
  return syncs_issued_;
}

power_loss_report fault_engine::crash_locked() {
  if (config_.mode != crash_mode::process)
    return power_loss_locked();
  power_loss_report report;
  report.process_crash = true;
  report.unsynced_writes = report.survived = unsynced_.size();
  if (!config_.journal_path.empty())
    save_journal();
  crashed_ = true;
  return report;
}

power_loss_report fault_engine::power_loss_locked() {
  power_loss_report report;
  report.unsynced_writes = unsynced_.size();
  std::map<std::string, interval_set> owned; // per path: bytes a later surviving write kept
  std::map<std::string, int> fds;            // per path: where reverted bytes are written
  auto revert = [&](const unsynced_write& w, std::size_t begin, std::size_t end) {
    for (const auto& gap : owned[w.path].gaps(w.offset + begin, w.offset + end)) {
      auto [it, opened] = fds.try_emplace(w.path, -1);
      if (opened)
        it->second = inner_->open_file(w.path, false);
      inner_->write(it->second, w.before.data() + (gap.begin - w.offset), gap.end - gap.begin,
                    gap.begin);
    }
  };
  for (auto w = unsynced_.rbegin(); w != unsynced_.rend(); ++w) {
    const std::size_t length = w->after.size();
    const write_fate fate =
      choose_fate(random_, config_.mode, config_.tear_every_write, w->offset, length, report);
    revert(*w, 0, fate.keep_begin);
    revert(*w, fate.keep_end, length);
    owned[w->path].add(w->offset + fate.keep_begin, w->offset + fate.keep_end);
  }
  for (const auto& [path, fd] : fds)
    inner_->close_file(fd);
  unsynced_.clear();
  crashed_ = true;
  if (!config_.journal_path.empty())
    save_journal(); // empty now: removes it
  return report;
}

void fault_engine::throw_if_crashed(const char* operation, bool is_sync) const {
  if (crashed_)
    throw io_error(std::string(operation) + " after a simulated power loss: the fault engine "
                                            "accepts no I/O once it has crashed",
                   EIO, is_sync);
}

const std::string& fault_engine::tracked_path(int fd) const {
  static const std::string untracked;
  const auto found = paths_.find(fd);
  return found != paths_.end() ? found->second : untracked;
}

void fault_engine::forget_path(const std::string& path) {
  auto of_path = [&](const unsynced_write& w) { return w.path == path; };
  unsynced_.erase(std::remove_if(unsynced_.begin(), unsynced_.end(), of_path), unsynced_.end());
}

// fsyncgate: after a failed fsync the kernel may have dropped the dirty pages it could not
// write back, and a later fsync would report success. Model the worst case: every unsynced
// write of the file is lost (newest first, so the oldest write's before-image wins).
void fault_engine::drop_unsynced_locked(const std::string& path) {
  int fd = -1;
  for (auto w = unsynced_.rbegin(); w != unsynced_.rend(); ++w) {
    if (w->path != path)
      continue;
    if (fd < 0)
      fd = inner_->open_file(path, false);
    inner_->write(fd, w->before.data(), w->before.size(), w->offset);
  }
  if (fd >= 0)
    inner_->close_file(fd);
  forget_path(path);
}

std::uint64_t fault_engine::reads_faulted() const {
  std::lock_guard lock(mutex_);
  return bad_reads_.faulted();
}

void fault_engine::fail_syncs_from_now() {
  std::lock_guard<std::mutex> guard(mutex_);
  config_.fail_sync_after = syncs_issued_ + 1;
}

} // namespace tidemark::storage
