// WAL-driven prefetch for redo: see wal_prefetcher.hpp for what it skips and the rules.
#include "storage/wal_prefetcher.hpp"

#include "storage/wal_reader.hpp"

#include <functional>

#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

namespace tidemark::storage {

namespace {
constexpr std::size_t recent_slots = 1024;
// After this many pool look-ups in a row found their page cached, only one block in
// `sampling_stride` is looked up until one is not: with every page cached, the look-ups
// (their partition latches, shared with redo's pins on the other core) made a cached redo
// about 1.5 x slower than without prefetch (bench/NOTEBOOK.md, "Prefetch look-ups in a cached
// redo"), while a stretch of uncached pages is noticed within a few blocks.
constexpr std::uint32_t cached_streak_to_sample = 1024;
constexpr std::uint32_t sampling_stride = 8;
} // namespace

bool lookup_sampler::look() {
  if (cached_streak_ < streak_)
    return true;
  if (++passed_ < stride_)
    return false;
  passed_ = 0;
  return true;
}

void lookup_sampler::found(bool cached) {
  cached_streak_ = cached ? cached_streak_ + 1 : 0;
  passed_ = 0;
}

std::size_t wal_prefetcher::batch_pages(std::size_t buffers) {
  return std::clamp<std::size_t>(buffers / 4, 1, 32);
}

// Measured (bench/NOTEBOOK.md, "WAL prefetch into a pool too small to hold it"): reading into a
// 16-buffer pool made redo 1.4 x slower than not prefetching (the pages read ahead were
// evicted before redo reached them, and took victims redo would have used); from 128
// buffers up, reading into the pool was as fast as or faster than advising the kernel.
bool wal_prefetcher::reads_into_pool(std::size_t buffers) { return buffers >= 128; }

std::size_t wal_prefetcher::ahead_pages(std::size_t buffers) {
  return std::max<std::size_t>(buffers / 2, batch_pages(buffers));
}

wal_prefetcher::wal_prefetcher(io_engine& io, std::string wal_dir, std::uint64_t segment_size,
                               std::size_t page_size, lsn_t start, lsn_t end, buffer_pool& pool,
                               relation_files& files, std::uint64_t distance_bytes,
                               wal_arrival* arrival, target where,
                               std::atomic<std::uint64_t>* rereads)
  : io_(io), wal_dir_(std::move(wal_dir)), segment_size_(segment_size), page_size_(page_size),
    start_(start), end_(end), arrival_(arrival), rereads_(rereads), pool_(pool), files_(files),
    distance_(distance_bytes), into_pool_(where == target::pool || reads_into_pool(pool.size())),
    redo_lsn_(start) {
  thread_ = std::thread([this] { run(); });
}

wal_prefetcher::~wal_prefetcher() { stop(); }

void wal_prefetcher::stop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_.store(true, std::memory_order_seq_cst);
  }
  redo_moved_.notify_one();
  if (thread_.joinable())
    thread_.join();
}

void wal_prefetcher::wake() {
  { std::lock_guard<std::mutex> guard(mutex_); }
  redo_moved_.notify_one();
}

void wal_prefetcher::wait_until_ahead() {
  std::unique_lock<std::mutex> lock(mutex_);
  went_idle_.wait(lock, [&] { return idle_; });
}

void wal_prefetcher::went_idle() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    idle_ = true;
  }
  went_idle_.notify_all();
}

bool wal_prefetcher::wait_for_redo(lsn_t lsn) {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_at_.store(lsn, std::memory_order_seq_cst);
  idle_ = true;
  went_idle_.notify_all();
  redo_moved_.wait(lock, [&] {
    return stopping_.load(std::memory_order_seq_cst) ||
           redo_lsn_.load(std::memory_order_seq_cst) >= lsn;
  });
  wake_at_.store(never, std::memory_order_seq_cst);
  idle_ = false;
  return !stopping_.load(std::memory_order_seq_cst);
}

// What the thread keeps while it runs.
struct wal_prefetcher::run_state {
  run_state(std::size_t pool_buffers, bool into_pool)
    : batch(batch_pages(pool_buffers)), ahead_limit(ahead_pages(pool_buffers)),
      recent_window(into_pool ? ahead_limit : recent_slots) {}

  // Blocks looked at lately (direct-mapped by page). A hot page (a branch, a teller, the
  // history tail) is not looked up in the pool again on every record that touches it,
  // which would contend with redo's own pins for nothing: an entry counts for
  // `recent_window` block references (a page evicted meanwhile is just not prefetched).
  // A block with a full-page image in a record redo has not reached yet is never read:
  // redo will restore it from the image, and its zero-filling pin must not wait for a
  // read it does not need.
  struct seen_block {
    page_id id{0, 0};
    std::uint64_t at = 0; // reference count when last looked at (0: empty)
    lsn_t image_end = 0;  // end of the latest record restoring it from an image
  };

  const std::size_t batch;       // pages read by one read_pages call
  const std::size_t ahead_limit; // pages read ahead that redo has not reached, at most
  const std::uint64_t recent_window;
  std::vector<buffer_id> claimed; // the batch being gathered, with its reads
  std::vector<page_read> reads;
  // Pages read ahead, per record end, that redo has not reached yet.
  std::deque<std::pair<lsn_t, std::size_t>> ahead;
  std::size_t ahead_count = 0;
  std::vector<seen_block> recent = std::vector<seen_block>(recent_slots);
  std::uint64_t references = 0;
  lookup_sampler sampler{cached_streak_to_sample, sampling_stride};
};

// True when `block` needs no look in the pool; remembers it either way.
bool wal_prefetcher::skip_block(run_state& st, const block_ref_view& block, lsn_t record_end,
                                lsn_t redo) {
  const page_id id = block.id;
  run_state::seen_block& slot =
    st.recent[(std::uint64_t{id.rel} * 0x9E3779B97F4A7C15ull ^ id.block) % recent_slots];
  ++st.references;
  bool same = slot.at != 0 && slot.id.rel == id.rel && slot.id.block == id.block;
  bool skip = same && (st.references - slot.at <= st.recent_window || slot.image_end > redo);
  if (!same)
    slot.image_end = 0;
  slot.id = id;
  slot.at = st.references;
  if (block.image != nullptr)
    slot.image_end = record_end;
  return skip;
}

// Reads the claimed pages and makes them readable; on failure leaves them invalid (their
// pins read for themselves) and rethrows.
void wal_prefetcher::read_claimed(run_state& st) {
  if (st.claimed.empty())
    return;
  try {
    files_.read_pages(st.reads.data(), st.reads.size());
  } catch (...) {
    for (buffer_id b : st.claimed)
      pool_.finish_prefetch(b, false);
    st.claimed.clear();
    st.reads.clear();
    throw;
  }
  for (buffer_id b : st.claimed)
    pool_.finish_prefetch(b, true);
  report_.reads += st.claimed.size();
  ++report_.batches;
  st.claimed.clear();
  st.reads.clear();
}

// Claims (or advises) the blocks of the record ending at `record_end` that redo will need
// to read; returns how many pages it claimed for reading into the pool.
std::size_t wal_prefetcher::prefetch_blocks(run_state& st, const record_view& record,
                                            lsn_t record_end, lsn_t redo) {
  std::size_t issued = 0;
  for (std::size_t i = 0; i < record.block_count; ++i) {
    const block_ref_view& block = record.blocks[i];
    bool skip = skip_block(st, block, record_end, redo);
    if (block.image != nullptr) {
      ++report_.images;
      continue;
    }
    if (skip) {
      ++report_.blocks_cached;
      continue;
    }
    if (!st.sampler.look())
      continue;        // every page looked up lately was cached
    if (!into_pool_) { // the kernel reads it; redo's own read then finds it cached
      bool cached = pool_.holds(block.id);
      st.sampler.found(cached);
      if (cached)
        ++report_.blocks_cached;
      else if (files_.will_need(block.id))
        ++report_.advised;
      continue;
    }
    buffer_id buffer;
    bool cached = !pool_.start_prefetch(block.id, &buffer);
    st.sampler.found(cached);
    if (cached) {
      ++report_.blocks_cached;
      continue;
    }
    st.claimed.push_back(buffer);
    st.reads.push_back({block.id, pool_.page(buffer)});
    ++issued;
    if (st.claimed.size() == st.batch)
      read_claimed(st);
  }
  return issued;
}

// Decodes WAL ahead of redo and prefetches what its records need, within the limits,
// until the end, a stop, or an error (thrown).
void wal_prefetcher::follow_wal(run_state& st) {
  wal_reader reader(io_, wal_dir_, segment_size_, page_size_, start_);
  // Following arriving WAL: what was claimed is read before waiting for more, since
  // redo may need it next.
  struct read_then_wait final : wal_arrival {
    wal_arrival* inner;
    std::function<void()> before;
    lsn_t wait_beyond(lsn_t lsn) override {
      before();
      return inner->wait_beyond(lsn);
    }
  } follower;
  if (arrival_ != nullptr) {
    follower.inner = arrival_;
    follower.before = [this, &st] { read_claimed(st); };
    reader.follow(&follower, rereads_);
  }
  lsn_t position = start_;
  while (!stopping_.load(std::memory_order_relaxed) && position < end_) {
    lsn_t redo = redo_lsn_.load(std::memory_order_seq_cst);
    while (!st.ahead.empty() && st.ahead.front().first <= redo) {
      st.ahead_count -= st.ahead.front().second;
      st.ahead.pop_front();
    }
    if (st.ahead_count >= st.ahead_limit || position >= redo + distance_) {
      read_claimed(st); // before sleeping: redo may need these next
      lsn_t until = st.ahead_count >= st.ahead_limit ? st.ahead.front().first
                                                     : position - distance_ / 2;
      if (!wait_for_redo(std::max(until, redo + 1)))
        break;
      continue;
    }
    const record_view* record = reader.next();
    if (record == nullptr)
      break;
    position = record->end_lsn();
    ++report_.records;
    if (position <= redo)
      continue; // redo is past it already
    if (std::size_t issued = prefetch_blocks(st, *record, position, redo); issued > 0) {
      st.ahead.emplace_back(position, issued);
      st.ahead_count += issued;
    }
  }
  read_claimed(st);
}

void wal_prefetcher::run() {
  run_state st(pool_.size(), into_pool_);
  if (into_pool_)
    pool_.reserve_pins(static_cast<std::uint32_t>(st.batch));
  try {
    follow_wal(st);
  } catch (const std::exception& error) {
    report_.error = error.what();
    for (buffer_id b : st.claimed) // claimed, not read yet (read_claimed finished its own)
      pool_.finish_prefetch(b, false);
  }
  if (into_pool_)
    pool_.release_pins(static_cast<std::uint32_t>(st.batch));
  went_idle();
}

} // namespace tidemark::storage
