// Supervision of the core actors: the wal_writer (its syncers are linked to it and take it
// down with them), the checkpointer, the bgwriter, the sync worker, the doublewrite batcher,
// and the WAL sender and receiver. An actor that ends for any reason but the runtime's own
// stop (exit_reason::user_shutdown) fails the engine at once, naming the actor and the
// reason: the failure is logged (ERROR), shown in stats(), and thrown by every blocked or
// later call as engine_stopped_error (context::fail wakes every wait: WAL, doublewrite
// ring, the pool's in-place writes, synchronous standbys). Nothing waits for an actor that
// is gone, and the next open runs crash recovery, as after any failure (W3).
//
// Invariants:
//  - Only weak addresses are kept: the watch never keeps an actor (or a detached actor's
//    thread) alive past its end.
//  - The watch callback runs on the ending actor's thread, before the actor system can
//    finish; the engine outlives the actor system.
#pragma once

#include "runtime/engine.hpp"

#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>

#include <string>
#include <utility>
#include <vector>

namespace tidemark::runtime {

class actor_watch {
public:
  explicit actor_watch(engine& e) : engine_(e) {}

  /// Watches `actor` under `name` from now until it ends.
  template <class Handle>
  void watch(const Handle& actor, const std::string& name) {
    watch_address(caf::actor_cast<caf::actor_addr>(actor), name);
  }

  /// Test hook: ends the named watched actor with exit_reason::kill, as a crash would.
  /// Throws usage_error for a name not watched or an actor already gone.
  void end_abnormally(const std::string& name);

  /// The names watched so far (an actor that ended keeps its name here).
  std::vector<std::string> names() const;

  /// Forgets every watched actor (the runtime stopped them).
  void clear() { watched_.clear(); }

private:
  void watch_address(const caf::actor_addr& address, const std::string& name);

  engine& engine_;
  std::vector<std::pair<std::string, caf::actor_addr>> watched_;
};

} // namespace tidemark::runtime
