// Page sinks per torn-page protection mode: see page_sinks.hpp.
#include "actors/page_sinks.hpp"

#include <caf/all.hpp>

#include <cstdlib>
#include <cstring>

namespace tidemark::actors {

namespace {

constexpr std::size_t direct_batch_pages = 32;
constexpr auto shared_chunk_delay = std::chrono::milliseconds(1);

// full_page_writes and off: batches written at once through the page writer.
class direct_sink final : public buffer_sink {
public:
  direct_sink(context& ctx, storage::write_source source) : context_(ctx), source_(source) {
    void* memory = nullptr;
    if (posix_memalign(&memory, 4096, direct_batch_pages * ctx.store.pool->page_size()) != 0)
      throw std::bad_alloc();
    memory_ = static_cast<unsigned char*>(memory);
  }
  ~direct_sink() override { std::free(memory_); }

  bool add(storage::buffer_id buffer, bool only_reusable) override {
    storage::page_copy& copy = copies_[count_];
    copy.data = memory_ + count_ * context_.store.pool->page_size();
    if (!context_.store.pool->start_write(buffer, copy.data, &copy.id, &copy.lsn, only_reusable))
      return false;
    buffers_[count_++] = buffer;
    if (count_ == direct_batch_pages)
      flush();
    return true;
  }

  void flush() override {
    if (count_ == 0)
      return;
    std::size_t count = count_;
    count_ = 0;
    try {
      context_.store.writer->write(copies_, count, source_);
    } catch (...) {
      for (std::size_t i = 0; i < count; ++i)
        context_.store.pool->finish_write(buffers_[i], false);
      throw;
    }
    bool offer = source_ == storage::write_source::bgwriter; // it cleaned them for sessions
    for (std::size_t i = 0; i < count; ++i)
      context_.store.pool->finish_write(buffers_[i], true, offer);
  }

private:
  context& context_;
  storage::write_source source_;
  unsigned char* memory_ = nullptr;
  storage::page_copy copies_[direct_batch_pages];
  storage::buffer_id buffers_[direct_batch_pages];
  std::size_t count_ = 0;
};

// A writer found no free chunk (D4): tell the trace and hurry the batcher's retirement.
void hurry_batcher(context& ctx, messages::actor_role writer) {
  if (ctx.store.trace)
    ctx.store.trace->record(writer, messages::actor_role::dw_batcher,
                            messages::trace_type::dw_slot_wait);
  caf::anon_send(ctx.store.batcher, messages::dw_flush_request{});
}

void give_back_chunk(context& ctx, messages::actor_role writer, std::uint32_t chunk) {
  if (ctx.store.trace) // before: another writer may take the chunk the moment it is free
    ctx.store.trace->record(writer, messages::actor_role::dw_batcher,
                            messages::trace_type::dw_give_back, chunk);
  ctx.store.ring->give_back(chunk);
}

std::uint32_t acquire_chunk(context& ctx, messages::actor_role writer) {
  std::uint32_t chunk = ctx.store.ring->acquire([&ctx, writer] { hurry_batcher(ctx, writer); });
  if (ctx.store.trace)
    ctx.store.trace->record(writer, messages::actor_role::dw_batcher,
                            messages::trace_type::dw_acquire, chunk);
  return chunk;
}

// doublewrite: pages copied straight into a ring chunk, handed over when it is full.
class doublewrite_sink final : public buffer_sink {
public:
  doublewrite_sink(context& ctx, storage::write_source source) : context_(ctx), source_(source) {}
  ~doublewrite_sink() override { give_back_empty(); }

  bool add(storage::buffer_id buffer, bool only_reusable) override {
    storage::doublewrite_ring& ring = *context_.store.ring;
    if (!has_chunk_) {
      chunk_ = acquire_chunk(context_, role_of(source_));
      has_chunk_ = true;
    }
    auto& entries = ring.entries(chunk_);
    storage::dw_entry entry;
    entry.buffer = buffer;
    unsigned char* slot = ring.slot_memory(chunk_, static_cast<std::uint32_t>(entries.size()));
    if (!context_.store.pool->start_write(buffer, slot, &entry.id, &entry.lsn, only_reusable))
      return false;
    entries.push_back(entry);
    if (entries.size() == ring.batch_pages())
      flush();
    return true;
  }

  void flush() override {
    if (!has_chunk_)
      return;
    std::uint32_t count = static_cast<std::uint32_t>(context_.store.ring->entries(chunk_).size());
    if (count == 0) {
      // Given back, not kept for the next round: the ring may have only two staging
      // areas, and an idle bgwriter and checkpointer each keeping an empty one left redo
      // waiting for a chunk forever (seen in a standby's promotion with a 16-page ring).
      give_back_empty();
      return;
    }
    has_chunk_ = false;
    caf::anon_send(context_.store.batcher,
                   messages::dw_batch_ready{chunk_, count,
                                            static_cast<std::uint8_t>(role_of(source_))});
  }

private:
  void give_back_empty() {
    if (!has_chunk_ || !context_.store.ring->entries(chunk_).empty())
      return; // none held, or (a failed flush) its pages are still staged in it
    has_chunk_ = false;
    give_back_chunk(context_, role_of(source_), chunk_);
  }

  context& context_;
  storage::write_source source_;
  bool has_chunk_ = false;
  std::uint32_t chunk_ = 0;
};

} // namespace

std::unique_ptr<buffer_sink> make_buffer_sink(context& ctx, storage::write_source source) {
  if (ctx.doublewrite())
    return std::make_unique<doublewrite_sink>(ctx, source);
  return std::make_unique<direct_sink>(ctx, source);
}

storage::victim_write doublewrite_victim_writer::write_victim(storage::buffer_id buffer,
                                                              storage::page_id id,
                                                              storage::lsn_t lsn, void* copy,
                                                              bool may_wait) {
  storage::doublewrite_ring& ring = *context_.store.ring;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!has_chunk_) {
    lock.unlock();
    std::uint32_t chunk;
    if (may_wait) {
      chunk = acquire_chunk(context_, messages::actor_role::backend);
    } else if (ring.try_acquire(&chunk)) {
      if (context_.store.trace)
        context_.store.trace->record(messages::actor_role::backend,
                                     messages::actor_role::dw_batcher,
                                     messages::trace_type::dw_acquire, chunk);
    } else {
      return storage::victim_write::declined; // the session looks for a clean victim first
    }
    lock.lock();
    if (has_chunk_) { // another session installed one meanwhile: use that, return ours
      give_back_chunk(context_, messages::actor_role::backend, chunk);
      continue;
    }
    chunk_ = chunk;
    has_chunk_ = true;
    ++generation_;
    // Sessions share the chunk for a moment. Redo (alone during recovery, its prefetch
    // aside) fills it with up to a batch of victims and sends it before it waits.
    caf::delayed_anon_send(context_.store.batcher, shared_chunk_delay, messages::flush_atom::value,
                           generation_);
  }
  auto& entries = ring.entries(chunk_);
  std::memcpy(ring.slot_memory(chunk_, static_cast<std::uint32_t>(entries.size())), copy,
              ring.page_size());
  entries.push_back(storage::dw_entry{id, lsn, buffer});
  if (entries.size() == ring.batch_pages()) {
    has_chunk_ = false;
    caf::anon_send(context_.store.batcher,
                   messages::dw_batch_ready{chunk_, static_cast<std::uint32_t>(entries.size()),
                                            static_cast<std::uint8_t>(
                                              messages::actor_role::backend)});
  }
  return storage::victim_write::handed_over; // the batcher finishes this buffer's write
}

std::size_t doublewrite_victim_writer::handover_limit() const {
  return context_.recovering.load(std::memory_order_relaxed) ? context_.store.ring->batch_pages()
                                                             : 1;
}

void doublewrite_victim_writer::before_handover_wait() {
  if (!context_.recovering.load(std::memory_order_relaxed))
    return; // the shared chunk's moment is for other sessions' victims to join
  std::lock_guard<std::mutex> guard(mutex_);
  if (has_chunk_)
    caf::anon_send(context_.store.batcher, messages::flush_atom::value, generation_);
}

std::pair<std::uint32_t, std::uint32_t> doublewrite_victim_writer::take(std::uint32_t generation) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!has_chunk_ || generation != generation_)
    return {0, 0};
  has_chunk_ = false;
  return {chunk_, static_cast<std::uint32_t>(context_.store.ring->entries(chunk_).size())};
}

} // namespace tidemark::actors
