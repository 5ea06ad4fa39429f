// What a paced background writer (a checkpoint's write steps, the bgwriter's rounds) may
// write under background_write_limit: the limit earns pages as the actor's clock moves,
// a step spends what it wrote. Plain arithmetic, no CAF.
//
// Invariants:
//  - Over any stretch of time, pages spent <= limit × elapsed / page_size + one second's
//    worth (at most a second is banked, so an idle writer does not burst past the limit).
//  - With no limit (0) every call allows without bound and nothing is banked.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>

namespace tidemark::actors {

class write_allowance {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// Pages that may be written at `now` under `bytes_per_second` (0: no limit).
  std::size_t available(std::uint64_t bytes_per_second, std::size_t page_size, time_point now) {
    if (bytes_per_second == 0) {
      last_.reset();
      banked_ = 0;
      return std::numeric_limits<std::size_t>::max();
    }
    const double per_second = double(bytes_per_second) / double(page_size);
    if (last_)
      banked_ += per_second * std::chrono::duration<double>(now - *last_).count();
    last_ = now;
    banked_ = std::min(banked_, per_second);
    return static_cast<std::size_t>(banked_);
  }

  /// `pages` were written (at most what available() allowed).
  void spend(std::size_t pages) { banked_ = std::max(0.0, banked_ - double(pages)); }

private:
  std::optional<time_point> last_; // of the last available() under a limit
  double banked_ = 0;              // pages earned and not yet written
};

} // namespace tidemark::actors
