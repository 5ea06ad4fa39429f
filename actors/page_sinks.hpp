// How dirty buffers reach disk, per torn-page protection mode. The bgwriter and the
// checkpointer stage buffers into a buffer_sink and flush it; sessions evicting a dirty
// victim go through a victim_writer. In full_page_writes and off modes the writes happen
// at once through the page writer (W1, W2). In doublewrite mode pages are staged straight
// into a chunk of the doublewrite ring and handed to the dw_batcher, which finishes the
// buffers' writes later (their I/O-in-progress flag keeps them dirty and untouchable
// until then).
#pragma once

#include "actors/context.hpp"

#include <mutex>

namespace tidemark::actors {

class buffer_sink {
public:
  virtual ~buffer_sink() = default;
  /// Starts writing `buffer` into the sink. False if it was not dirty, is being written,
  /// or (only_reusable) is pinned or recently used.
  virtual bool add(storage::buffer_id buffer, bool only_reusable) = 0;
  /// Writes (or hands over) everything staged, and then holds nothing for later pages: a
  /// ring chunk with nothing staged goes back with its staging memory, which other writers
  /// may need (the ring can have as few as two staging areas). So an idle owner holds none,
  /// and an owner about to wait for another thread's write flushes first. Throws io_error;
  /// buffers of a failed write stay dirty.
  virtual void flush() = 0;
};

std::unique_ptr<buffer_sink> make_buffer_sink(context& ctx, storage::write_source source);

/// Sessions' dirty victims in full_page_writes and off modes: written by the session that
/// needs the buffer, straight to the data file through the page writer.
class direct_victim_writer final : public storage::victim_writer {
public:
  explicit direct_victim_writer(storage::page_writer& writer) : writer_(writer) {}
  storage::victim_write write_victim(storage::buffer_id, storage::page_id id, storage::lsn_t lsn,
                                     void* copy, bool) override {
    storage::page_copy page{id, lsn, copy};
    writer_.write(&page, 1, storage::write_source::backend);
    return storage::victim_write::completed;
  }

private:
  storage::page_writer& writer_;
};

/// Sessions' dirty victims in doublewrite mode: staged into one shared chunk that the
/// batcher takes when it is full or 1 ms after its first page. A session never waits for a
/// free chunk while the pool may still hold a clean victim (it declines instead).
class doublewrite_victim_writer final : public storage::victim_writer {
public:
  explicit doublewrite_victim_writer(context& ctx) : context_(ctx) {}
  storage::victim_write write_victim(storage::buffer_id buffer, storage::page_id id,
                                     storage::lsn_t lsn, void* copy, bool may_wait) override;
  /// During recovery a batch's worth, sent when redo waits for them; otherwise one, which
  /// other sessions' victims join for a moment (shared_chunk_delay).
  std::size_t handover_limit() const override;
  void before_handover_wait() override;
  /// The batcher's timer: hands over the shared chunk if it is still generation `generation`.
  /// Returns the chunk and its page count, or count 0 when there is nothing to take.
  std::pair<std::uint32_t, std::uint32_t> take(std::uint32_t generation);

private:
  context& context_;
  std::mutex mutex_;
  bool has_chunk_ = false;
  std::uint32_t chunk_ = 0;
  std::uint32_t generation_ = 0;
};

} // namespace tidemark::actors
