// wal_writer: group commit. See wal_writer.hpp for its role.
#include "actors/wal_writer.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <utility>
#include <vector>

namespace tidemark::actors {

namespace {

using namespace messages;

constexpr auto async_flush_interval = std::chrono::milliseconds(10);

struct wal_writer_state {
  runtime::engine* engine = nullptr;
  std::vector<std::pair<std::uint64_t, caf::typed_response_promise<flush_done>>> waiters;
  bool flush_queued = false;
  static inline const char* name = "wal_writer";
};

using wal_writer_pointer = wal_writer_actor::stateful_pointer<wal_writer_state>;

caf::error failure_error(runtime::engine& engine) {
  return caf::make_error(caf::sec::runtime_error, "WAL flush failed: " + engine.failure());
}

void answer_waiters(wal_writer_pointer self, std::uint64_t flushed) {
  auto& waiters = self->state.waiters;
  std::size_t kept = 0;
  for (auto& waiter : waiters) {
    if (waiter.first <= flushed)
      waiter.second.deliver(flush_done{flushed});
    else
      waiters[kept++] = std::move(waiter);
  }
  waiters.resize(kept);
}

void fail_waiters(wal_writer_pointer self) {
  for (auto& waiter : self->state.waiters)
    waiter.second.deliver(failure_error(*self->state.engine));
  self->state.waiters.clear();
}

// One flush of everything inserted so far: covers every waiter queued before it.
void flush_now(wal_writer_pointer self) {
  runtime::engine& engine = *self->state.engine;
  try {
    std::uint64_t flushed = engine.wal->flush(engine.wal->inserted_lsn());
    answer_waiters(self, flushed);
  } catch (const storage::io_error& e) {
    engine.fail(e.what());
    fail_waiters(self);
  }
}

wal_writer_actor::behavior_type wal_writer(wal_writer_pointer self, runtime::engine* engine) {
  self->state.engine = engine;
  if (!engine->config.synchronous_commit)
    self->delayed_send(self, async_flush_interval, tick_atom::value);
  return {
    [=](flush_request request) -> caf::result<flush_done> {
      runtime::engine& e = *self->state.engine;
      if (e.failed())
        return failure_error(e);
      std::uint64_t flushed = e.wal->flushed_lsn();
      if (request.lsn <= flushed)
        return flush_done{flushed};
      auto promise = self->make_response_promise<flush_done>();
      self->state.waiters.emplace_back(request.lsn, promise);
      if (!self->state.flush_queued) {
        // Queued behind the requests already in the mailbox, so they share this flush.
        self->state.flush_queued = true;
        self->send(self, flush_atom::value);
      }
      return promise;
    },
    [=](flush_atom) {
      self->state.flush_queued = false;
      if (!self->state.engine->failed())
        flush_now(self);
    },
    [=](tick_atom) {
      runtime::engine& e = *self->state.engine;
      if (!e.failed() && e.wal->inserted_lsn() > e.wal->flushed_lsn())
        flush_now(self);
      self->delayed_send(self, async_flush_interval, tick_atom::value);
    },
  };
}

} // namespace

wal_writer_actor spawn_wal_writer(caf::actor_system& system, runtime::engine& engine, bool detached) {
  if (detached)
    return system.spawn<caf::detached>(wal_writer, &engine);
  return system.spawn(wal_writer, &engine);
}

} // namespace tidemark::actors
