// actor_watch: see supervision.hpp for what it watches and the invariants it keeps.
#include "runtime/supervision.hpp"

#include <caf/all.hpp>

#include <tidemark/errors.hpp>

namespace tidemark::runtime {

void actor_watch::watch_address(const caf::actor_addr& address, const std::string& name) {
  caf::strong_actor_ptr actor = caf::actor_cast<caf::strong_actor_ptr>(address);
  if (!actor)
    return; // never spawned (the handle was empty)
  engine* e = &engine_;
  actor->get()->attach_functor([e, name](const caf::error& reason) {
    if (reason == caf::exit_reason::user_shutdown)
      return; // the runtime's stop
    std::string why =
      "the " + name + " actor stopped unexpectedly (" + actors::error_text(reason) + ")";
    e->fail(why);
    if (e->failure() == why) // the first failure: later ones follow from it
      e->log("ERROR:  " + why + "; the engine stops, the next open runs crash recovery");
  });
  watched_.emplace_back(name, address);
}

void actor_watch::end_abnormally(const std::string& name) {
  for (const auto& [watched_name, address] : watched_) {
    if (watched_name != name)
      continue;
    caf::actor actor = caf::actor_cast<caf::actor>(address);
    if (!actor)
      throw tidemark::usage_error("the " + name + " actor has already ended");
    caf::anon_send_exit(actor, caf::exit_reason::kill);
    return;
  }
  throw tidemark::usage_error("no watched actor is called " + name);
}

std::vector<std::string> actor_watch::names() const {
  std::vector<std::string> names;
  for (const auto& watched : watched_)
    names.push_back(watched.first);
  return names;
}

} // namespace tidemark::runtime
