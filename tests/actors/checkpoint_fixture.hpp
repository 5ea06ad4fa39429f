// checkpointer and sync_worker spawned together on the deterministic scheduler over an
// engine_fixture: requests as a client sends them, files registered for sync as a
// session's writes register them, and the clock advanced by hand.
#pragma once

#include "actors/checkpointer.hpp"
#include "actors/sync_worker.hpp"

#include "deterministic_fixture.hpp"
#include "engine_fixture.hpp"

#include <caf/all.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tidemark::test {

struct checkpoint_fixture : deterministic_fixture, engine_fixture {
  messages::sync_worker_actor worker;
  messages::checkpointer_actor checkpointer;

  explicit checkpoint_fixture(std::vector<std::string> settings = {}, const io_wrapper& wrap = {},
                              storage::fault_config fault_settings = {})
    : engine_fixture(std::move(settings), wrap, std::move(fault_settings)) {
    worker = actors::spawn_sync_worker(system, engine, false);
    engine.store.registry.attach(worker, engine.store.trace.get());
    checkpointer = actors::spawn_checkpointer(system, engine, worker, false);
    run();
  }
  ~checkpoint_fixture() {
    caf::anon_send_exit(checkpointer, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    run();
  }

  /// Creates each relation's first segment and registers a write of `bytes` from its start
  /// for sync, as a session's write of it would. The default, 64 MiB a file, paces a sync
  /// phase over 8 s a file at the slowest rate.
  void dirty_files(std::initializer_list<storage::rel_id> rels, std::uint64_t bytes = 64u << 20) {
    for (storage::rel_id rel : rels) {
      create_file(rel);
      storage::file_write written{{storage::file_kind::relation, {rel, 0}}, bytes, 0, bytes};
      engine.store.registry.register_files(&written, 1, storage::write_source::backend);
    }
  }

  /// Moves the clock on by `step` and runs what came due (one step of each timer: a timer
  /// set while these run waits for the next advance).
  void advance(std::chrono::milliseconds step) {
    scheduler.advance_time(step);
    run();
  }

  struct answer {
    std::optional<messages::checkpoint_done> done;
    bool error = false;
  };

  void request(answer& out,
               messages::checkpoint_reason reason = messages::checkpoint_reason::requested,
               bool immediate = true) {
    messages::checkpoint_request request{static_cast<std::uint8_t>(reason), immediate};
    system.spawn([=, &out](caf::event_based_actor* self) {
      self->request(checkpointer, caf::infinite, request)
        .then([&out](const messages::checkpoint_done& d) { out.done = d; },
              [&out](const caf::error&) { out.error = true; });
    });
  }

  /// Whether the file `all[registered]` names (a sync_register event) had an fsync traced
  /// after it and before `before`.
  static bool fsynced_between(const std::vector<messages::trace_event>& all, std::size_t registered,
                              std::size_t before) {
    const messages::trace_event& r = all[registered];
    for (std::size_t j = registered + 1; j < before; ++j)
      if (all[j].type == messages::trace_type::fsync && all[j].a == r.a && all[j].b == r.b &&
          all[j].c == r.c)
        return true;
    return false;
  }

  std::size_t index_of(const std::vector<messages::trace_event>& all, messages::trace_type type,
                       std::size_t from = 0) {
    for (std::size_t i = from; i < all.size(); ++i)
      if (all[i].type == type)
        return i;
    FAIL("no " << messages::to_string(type) << " event"); // a missing event fails the test
    return all.size();
  }
};

} // namespace tidemark::test
