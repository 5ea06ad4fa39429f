// Bad reads of freshly synced bytes, for the fault engine: the model of a file system whose
// cache can hand back old bytes, fewer bytes or an error for data that was just written
// and fsynced through another descriptor (a FUSE mount with its kernel page cache on), as
// a standby's redo reading the WAL its receiver fsynced a moment before.
//
// Model:
//  - Only bytes written through the engine and then covered by a completed sync are
//    "fresh": each path's fresh extent runs from the lowest to the highest such byte.
//  - Reads of paths containing `match` (every path when empty) that overlap their file's
//    fresh extent are counted. The `after`-th of them goes bad, and its overlap with the
//    fresh extent becomes the bad range.
//  - That read and the next `repeats - 1` reads overlapping the bad range (every later one
//    when `repeats` is 0) go bad: `zeros` — the bad bytes read as zeros and the read looks
//    complete (a stale cached page); `short_read` — the read ends where the bad range
//    begins, the rest zero-filled (as at end of file); `error` — the read fails with EIO.
//    Afterwards reads return the file's bytes again: a re-read heals a transient fault.
//  - A rename or unlink forgets the fresh extents of the paths involved.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace tidemark::storage {

enum class read_fault { none, zeros, short_read, error };

struct read_fault_config {
  read_fault kind = read_fault::none;
  std::uint64_t after = 0;   // the after-th counted read goes bad (0: none does)
  std::string match;         // count only paths containing this (empty: every path)
  std::uint32_t repeats = 1; // reads of the bad range that go bad (0: every one)
};

/// What one read suffers: its bytes [begin, end) (file offsets, inside the read) are bad.
struct bad_read {
  read_fault kind = read_fault::none;
  std::uint64_t begin = 0, end = 0;
};

class read_fault_plan {
public:
  explicit read_fault_plan(read_fault_config config) : config_(std::move(config)) {}

  bool active() const { return config_.kind != read_fault::none && config_.after != 0; }
  /// A completed sync covered a write of [begin, end) to `path`.
  void synced(const std::string& path, std::uint64_t begin, std::uint64_t end);
  /// `path` was renamed or unlinked: its bytes are no longer the fresh ones.
  void forget(const std::string& path) { fresh_.erase(path); }
  /// The fault a read of [offset, offset + length) of `path` suffers, if any.
  std::optional<bad_read> on_read(const std::string& path, std::uint64_t offset,
                                  std::uint64_t length);
  /// Reads that went bad so far.
  std::uint64_t faulted() const { return faulted_; }

private:
  read_fault_config config_;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> fresh_; // [begin, end)
  std::uint64_t counted_ = 0;
  std::uint64_t faulted_ = 0;
  std::string bad_path_; // empty until the after-th counted read
  std::uint64_t bad_begin_ = 0, bad_end_ = 0;
};

} // namespace tidemark::storage
