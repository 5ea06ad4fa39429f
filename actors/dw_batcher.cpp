// dw_batcher: see dw_batcher.hpp for its role and the invariants it keeps.
#include "actors/dw_batcher.hpp"

#include "actors/page_sinks.hpp"
#include "storage/check.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>

namespace tidemark::actors {

namespace {

using namespace messages;
using storage::dw_state;

struct dw_batcher_state {
  context* ctx = nullptr;
  settings config; // the engine's at the start; reloadable ones replaced by settings_reload
  sync_worker_actor sync_worker;
  // DATA_WRITTEN chunks (their staging, and with it their entries, given back) and the
  // files whose fsync retires each.
  std::map<std::uint32_t, std::vector<file_ref>> awaiting_fsync;
  std::set<std::uint32_t> hurried; // of those, the ones sync_now was asked for
  bool asked_synced = false;       // a synced_chunks_request is outstanding
  // Batches handed over and not yet written to the ring, in order: those that arrived
  // since the last drain, and those waiting for ring space.
  std::deque<std::pair<std::uint32_t, actor_role>> queued;
  bool waiting_for_ring_space = false; // the front of `queued` found the ring full
  bool drain_sent = false;             // a drain_atom to ourselves is in the mailbox
  bool gathering = false;              // a timed (gathered_atom, generation) will drain
  std::uint64_t gather_generation = 0; // of that timer; a drain before it makes it stale
  std::vector<caf::typed_response_promise<dw_flushed>> flush_waiters; // until queued is empty
  std::vector<std::pair<std::uint32_t, actor_role>> group; // written, awaiting the ring fsync
  std::vector<std::uint32_t> group_chunks;                 // reused
  std::vector<storage::page_copy> copies;                  // reused
  std::vector<storage::page_write> writes;                 // reused
  static inline const char* name = "dw_batcher";
};

using dw_batcher_pointer = dw_batcher_actor::stateful_pointer<dw_batcher_state>;

// What a batch's in-place writes do to each file it touches: bytes and range (for the
// sync worker's pacing), one element per segment, in the order the batch first touches it.
std::vector<storage::file_write> writes_of(context& ctx,
                                           const std::vector<storage::dw_entry>& entries) {
  std::vector<storage::file_write> written(entries.size() + 1);
  std::size_t count = 0;
  for (const storage::dw_entry& entry : entries)
    count =
      storage::note_write(written.data(), count,
                          {storage::file_kind::relation, ctx.store.files->segment_of(entry.id)},
                          ctx.store.files->offset_in_segment(entry.id),
                          ctx.store.files->page_size());
  written.resize(count);
  return written;
}

std::vector<file_ref> refs_of(const std::vector<storage::file_write>& written) {
  std::vector<file_ref> files;
  for (const storage::file_write& w : written)
    files.push_back(
      {static_cast<std::uint8_t>(w.tag.kind), w.tag.segment.rel, w.tag.segment.segno});
  return files;
}

void hurry_retirement(dw_batcher_pointer self, bool writer_waiting);
void write_queued(dw_batcher_pointer self);

void ask_synced(dw_batcher_pointer self);
void fail_queued_batches(dw_batcher_pointer self);

// D2: the sync worker saw every file of these chunks fsynced after their in-place writes.
// All of them are freed before the queue is written again: one fsync that covers the
// chunks of half a ring costs one message and one pass, not one of each per chunk.
void on_chunks_synced(dw_batcher_pointer self, const std::vector<std::uint32_t>& chunks) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  st.asked_synced = false;
  for (std::uint32_t chunk : chunks) {
    TIDEMARK_CHECK_DETAIL(st.awaiting_fsync.erase(chunk) == 1,
                          "a chunk reported synced was awaiting its fsync",
                          "chunk " + std::to_string(chunk));
    ctx.store.ring->advance(chunk, dw_state::data_fsynced);
    ctx.trace(actor_role::dw_batcher, actor_role::dw_batcher, trace_type::dw_data_fsynced, chunk);
    // Traced before the release: a writer may take the chunk the moment it is free.
    ctx.trace(actor_role::dw_batcher, actor_role::dw_batcher, trace_type::dw_free, chunk);
    ctx.store.ring->release(chunk);
    st.hurried.erase(chunk);
  }
  ask_synced(self);
  write_queued(self); // their ring space is free again; it hurries retirement if needed
}

// Keeps one synced_chunks_request outstanding while any chunk awaits its files' fsync.
void ask_synced(dw_batcher_pointer self) {
  auto& st = self->state;
  if (st.asked_synced || st.awaiting_fsync.empty())
    return;
  st.asked_synced = true;
  self->request(st.sync_worker, caf::infinite, synced_chunks_request{})
    .then([=](const chunks_synced& done) { on_chunks_synced(self, done.chunks); },
          [=](const caf::error&) {
            self->state.ctx->store.ring->fail();
            fail_queued_batches(self);
          });
}

// When the ring is half full — the span from the durable horizon to the write position,
// which writes may not reuse — (or a batch waits for ring space, or a writer for a FREE
// chunk), asks for the waiting batches' files to be fsynced now — one request at a time,
// so the batches that pile up while an fsync runs share the next one. Until then their
// in-place writes coalesce in the page cache, as they would without doublewrite. A writer
// that waits for staging memory hurries nothing: the next drain frees staging, and an
// fsync of the data files would not.
void hurry_retirement(dw_batcher_pointer self, bool writer_waiting) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  bool needed = st.waiting_for_ring_space ||
                ctx.store.ring->used_bytes() > ctx.store.ring->capacity_bytes() / 2 ||
                (writer_waiting && ctx.store.ring->free_chunks() == 0);
  if (!st.hurried.empty() || !needed)
    return;
  sync_now request;
  for (const auto& [chunk, files] : st.awaiting_fsync) {
    if (!st.hurried.insert(chunk).second)
      continue;
    for (const file_ref& f : files)
      if (std::none_of(request.files.begin(), request.files.end(),
                       [&](const file_ref& g) { return g.rel == f.rel && g.segno == f.segno; }))
        request.files.push_back(f); // one fsync per file covers every batch waiting on it
  }
  if (request.files.empty())
    return;
  ctx.trace(actor_role::dw_batcher, actor_role::sync_worker, trace_type::sync_now,
            request.files.size());
  self->send(st.sync_worker, std::move(request));
}

void fail_batch(context& ctx, std::uint32_t chunk, const std::string& why) {
  ctx.fail(why);
  ctx.store.ring->fail();
  for (const storage::dw_entry& entry : ctx.store.ring->entries(chunk))
    ctx.store.pool->finish_write(entry.buffer, false);
}

void answer_flush_waiters(dw_batcher_pointer self) {
  auto& st = self->state;
  for (auto& promise : st.flush_waiters)
    promise.deliver(dw_flushed{st.ctx->store.ring->counters().batches.load()});
  st.flush_waiters.clear();
}

void fail_queued_batches(dw_batcher_pointer self) {
  auto& st = self->state;
  for (const auto& [chunk, source] : st.queued)
    fail_batch(*st.ctx, chunk, st.ctx->failure());
  st.queued.clear();
  st.waiting_for_ring_space = false;
  answer_flush_waiters(self);
}

// Drains the queue behind what is already in the mailbox (a gathering timer is then stale).
void drain_soon(dw_batcher_pointer self) {
  auto& st = self->state;
  if (st.gathering) {
    st.gathering = false;
    ++st.gather_generation;
  }
  if (!st.drain_sent) {
    st.drain_sent = true;
    self->send(self, drain_atom::value);
  }
}

// Whether the queued batches may wait up to doublewrite_flush_delay for more to share
// their ring fdatasync: only while no one waits for them. Not a session's victims (the
// session needs a buffer), not during recovery (redo waits, and no commit shares the
// device), not once a full batch of pages is queued, not while a flush request waits, and
// not when the victim supply runs nearly dry (sessions would sweep for victims of their
// own). Each ring fdatasync sits between the WAL's on the same device: the bgwriter's
// rounds, sounded by the supply alarm, are small, and syncing each alone cost hundreds of
// ring fdatasyncs a second.
bool may_gather(const dw_batcher_state& st, actor_role source) {
  const context& ctx = *st.ctx;
  if (st.config.doublewrite_flush_delay.count() == 0 || source == actor_role::backend ||
      ctx.recovering.load(std::memory_order_relaxed) || !st.flush_waiters.empty() ||
      ctx.store.pool->supply_size() < ctx.store.pool->supply_low_water() / 4 ||
      st.queued.size() >= ctx.store.ring->batch_pages()) // each batch holds a page at least
    return false;
  std::size_t pages = 0;
  for (const auto& [chunk, queued_source] : st.queued)
    pages += ctx.store.ring->entries(chunk).size();
  return pages < ctx.store.ring->batch_pages();
}

// A batch handed over: queued, and written at the next drain together with every batch
// that arrives before it (the drain message is behind them in the mailbox), so batches
// that pile up share one ring fsync. A small background batch may wait for company.
void hand_over(dw_batcher_pointer self, std::uint32_t chunk, actor_role source) {
  auto& st = self->state;
  st.ctx->trace(source, actor_role::dw_batcher, trace_type::dw_batch_ready, chunk,
                st.ctx->store.ring->entries(chunk).size());
  st.queued.emplace_back(chunk, source);
  if (!may_gather(st, source)) {
    drain_soon(self);
  } else if (!st.gathering && !st.drain_sent) {
    st.gathering = true;
    self->delayed_send(self, st.config.doublewrite_flush_delay, gathered_atom::value,
                       ++st.gather_generation);
  }
}

// ALLOCATED → WRITTEN for the queued batch at the front. False, the chunk still ALLOCATED,
// when the ring has no room for its record; true when written or failed.
bool write_record(dw_batcher_pointer self, std::uint32_t chunk, actor_role source) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  storage::doublewrite_ring& ring = *ctx.store.ring;
  const auto& entries = ring.entries(chunk);
  st.copies.clear();
  for (std::size_t i = 0; i < entries.size(); ++i)
    st.copies.push_back(
      {entries[i].id, entries[i].lsn, ring.slot_memory(chunk, static_cast<std::uint32_t>(i))});
  try {
    ctx.store.writer->prepare(st.copies.data(), st.copies.size()); // W1, identity and checksum
    if (!ring.write(chunk))
      return false;
  } catch (const std::exception& error) {
    fail_batch(ctx, chunk, std::string("doublewrite batch failed: ") + error.what());
    return true;
  }
  ctx.trace(actor_role::dw_batcher, actor_role::dw_batcher, trace_type::dw_written, chunk,
            entries.size());
  st.group.emplace_back(chunk, source);
  return true;
}

// DWB_FSYNCED → DATA_WRITTEN for one batch of the group, then waits for DATA_FSYNCED.
void write_in_place(dw_batcher_pointer self, std::uint32_t chunk, actor_role source) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  storage::doublewrite_ring& ring = *ctx.store.ring;
  const auto& entries = ring.entries(chunk);
  st.writes.clear();
  for (std::size_t i = 0; i < entries.size(); ++i)
    st.writes.push_back({entries[i].id, ring.slot_memory(chunk, static_cast<std::uint32_t>(i))});
  std::vector<storage::file_write> written = writes_of(ctx, entries);
  std::vector<file_ref> files = refs_of(written);
  ctx.trace(actor_role::dw_batcher, actor_role::dw_batcher, trace_type::dw_inplace_write, chunk,
            st.writes.size());
  try {
    // D1: only after DWB_FSYNCED. No writeback is started here: the pages wait in the page
    // cache, coalescing, for the sync worker's paced write-back and the fsync that retires
    // the chunk.
    ctx.store.files->write_pages(st.writes.data(), st.writes.size());
  } catch (const std::exception& error) {
    fail_batch(ctx, chunk, std::string("doublewrite batch failed: ") + error.what());
    return;
  }
  ctx.store.registry.register_files(written.data(), written.size(), source_of(source));
  ctx.store.writer->count_written(entries.size(), source_of(source));
  // Buffers the bgwriter cleaned, and victims a session handed over and left for another,
  // are reusable now: offered to the sessions' next allocations.
  bool offer = source == actor_role::bgwriter || source == actor_role::backend;
  for (const storage::dw_entry& entry : entries)
    ctx.store.pool->finish_write(entry.buffer, true, offer); // W2: registered before reported clean
  ring.advance(chunk, dw_state::data_written);
  ctx.trace(actor_role::dw_batcher, actor_role::dw_batcher, trace_type::dw_data_written, chunk);
  st.awaiting_fsync.emplace(chunk, files);
  self->send(st.sync_worker, sync_notify{std::move(files), chunk});
  ask_synced(self); // behind the notify: the sync worker knows the chunk when it answers
}

// Fails the batches written to the ring but not yet in place, and everything queued.
void fail_group_and_queue(dw_batcher_pointer self) {
  auto& st = self->state;
  for (const auto& [chunk, source] : st.group)
    fail_batch(*st.ctx, chunk, st.ctx->failure());
  st.group.clear();
  fail_queued_batches(self);
}

// Writes the queued batches' records, in order, while the ring has room; makes them all
// durable with one fdatasync (D3); then writes them in place. A batch that found no room
// is tried again once a header past the space that retired batches freed is durable: after
// the group's fdatasync (whose header moved the horizon), or, with no group to ride on,
// after an fdatasync of the header alone — ring space is reusable only behind a durable
// horizon. Answers the flush requests once nothing is queued; hurries retirement when needed.
void write_queued(dw_batcher_pointer self) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  for (;;) {
    st.group.clear();
    st.waiting_for_ring_space = false;
    while (!st.queued.empty() && !ctx.failed()) {
      auto [chunk, source] = st.queued.front();
      if (!write_record(self, chunk, source)) {
        st.waiting_for_ring_space = true;
        break;
      }
      st.queued.pop_front();
    }
    if (ctx.failed()) {
      fail_group_and_queue(self);
      return;
    }
    bool retry = st.waiting_for_ring_space;
    if (!st.group.empty()) {
      st.group_chunks.clear();
      for (const auto& [chunk, source] : st.group)
        st.group_chunks.push_back(chunk);
      try {
        ctx.store.ring->sync(st.group_chunks.data(), st.group_chunks.size());
      } catch (const std::exception& error) {
        ctx.fail(std::string("doublewrite ring fsync failed: ") + error.what());
        ctx.store.ring->fail();
        fail_group_and_queue(self);
        return;
      }
      for (const auto& [chunk, source] : st.group) {
        ctx.trace(actor_role::dw_batcher, actor_role::dw_batcher, trace_type::dw_fsynced, chunk);
        if (ctx.failed())
          fail_batch(ctx, chunk, ctx.failure()); // an in-place write before it failed
        else
          write_in_place(self, chunk, source);
      }
      st.group.clear();
    } else if (retry) {
      try {
        retry = ctx.store.ring->sync_horizon();
      } catch (const std::exception& error) {
        ctx.fail(std::string("doublewrite ring fsync failed: ") + error.what());
        ctx.store.ring->fail();
        fail_queued_batches(self);
        return;
      }
      if (retry)
        ctx.trace(actor_role::dw_batcher, actor_role::dw_batcher, trace_type::dw_horizon_synced, 0);
    }
    if (ctx.failed()) {
      fail_queued_batches(self);
      return;
    }
    if (!retry)
      break;
  }
  if (st.queued.empty())
    answer_flush_waiters(self);
  hurry_retirement(self, false);
}

dw_batcher_actor::behavior_type dw_batcher(dw_batcher_pointer self, context* ctx,
                                           sync_worker_actor sync_worker) {
  self->state.ctx = ctx;
  self->state.config = ctx->config;
  self->state.sync_worker = std::move(sync_worker);
  return {
    [=](const settings_reload& reload) { apply_reload(self->state.config, reload); },
    [=](const dw_batch_ready& ready) {
      if (self->state.ctx->failed()) {
        fail_batch(*self->state.ctx, ready.chunk, self->state.ctx->failure());
        return;
      }
      hand_over(self, ready.chunk, static_cast<actor_role>(ready.source));
    },
    [=](drain_atom) {
      self->state.drain_sent = false;
      write_queued(self);
    },
    [=](gathered_atom, std::uint64_t generation) { // the gathering delay is over
      auto& st = self->state;
      if (!st.gathering || generation != st.gather_generation)
        return; // drained meanwhile
      st.gathering = false;
      write_queued(self);
    },
    [=](const dw_flush_request&) -> caf::result<dw_flushed> {
      // Every batch handed over before this request is queued here (mailbox order); it
      // is answered once they are all written. Also the hook of a writer that found no free
      // chunk: hurry retirement.
      auto& st = self->state;
      hurry_retirement(self, true);
      if (!st.queued.empty())
        drain_soon(self); // not after a gathering delay: someone waits
      if (st.queued.empty())
        return dw_flushed{st.ctx->store.ring->counters().batches.load()};
      st.flush_waiters.push_back(self->make_response_promise<dw_flushed>());
      return st.flush_waiters.back();
    },
    [=](flush_atom, std::uint32_t generation) {
      context& ctx = *self->state.ctx;
      auto& victims = storage::checked_downcast<doublewrite_victim_writer>(
        ctx.store.victims.get(),
        "doublewrite mode hands sessions' victims to the doublewrite victim writer");
      auto [chunk, count] = victims.take(generation);
      if (count > 0 && !ctx.failed())
        hand_over(self, chunk, actor_role::backend);
      else if (count > 0)
        fail_batch(ctx, chunk, ctx.failure());
    },
  };
}

} // namespace

dw_batcher_actor spawn_dw_batcher(caf::actor_system& system, context& ctx,
                                  sync_worker_actor sync_worker, bool detached) {
  if (detached)
    return system.spawn<caf::detached>([&ctx, sync_worker](dw_batcher_pointer self) {
      name_this_thread("tm-dw-batcher");
      return dw_batcher(self, &ctx, sync_worker);
    });
  return system.spawn(dw_batcher, &ctx, std::move(sync_worker));
}

} // namespace tidemark::actors
