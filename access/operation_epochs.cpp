// operation_epochs: see operation_epochs.hpp.
#include "access/operation_epochs.hpp"

#include "storage/check.hpp"

#include <algorithm>
#include <vector>

namespace tidemark::access {

// A thread's slot in one registry: the epoch its outermost section entered with (0: none
// in progress). A cache line each: every read writes its thread's slot twice, and two
// threads' slots on one line made two readers 40 % slower than one line each.
struct alignas(64) epoch_slot {
  std::atomic<std::uint64_t> entered{0};
  std::atomic<bool> taken{false};
  unsigned depth = 0; // the owning thread's nesting, touched by that thread only
};

struct operation_epochs::registry {
  std::uint64_t id; // unique among registries: a thread's cached slot is matched by it
  std::atomic<std::uint64_t> epoch{1};
  std::mutex mutex;             // guards slots' growth, and the wait below
  std::deque<epoch_slot> slots; // addresses stay put as it grows
  std::condition_variable ended;
  std::atomic<unsigned> waiters{0};
};

namespace {

std::atomic<std::uint64_t> next_registry_id{1};

// The calling thread's slots, one per registry it used; given back when the thread ends.
// Matched by the registry's id, without touching the shared pointer's count (a reader's
// section costs no shared write).
struct held_slot {
  std::weak_ptr<operation_epochs::registry> registry;
  std::uint64_t id;
  epoch_slot* slot;
};
struct thread_slots {
  std::vector<held_slot> held;
  ~thread_slots() {
    for (held_slot& h : held)
      if (auto alive = h.registry.lock())
        h.slot->taken.store(false);
  }
};
thread_local thread_slots this_thread;

epoch_slot& slot_of(const std::shared_ptr<operation_epochs::registry>& registry) {
  for (held_slot& h : this_thread.held)
    if (h.id == registry->id)
      return *h.slot;
  std::vector<held_slot>& held = this_thread.held;
  held.erase(std::remove_if(held.begin(), held.end(),
                            [](const held_slot& h) { return h.registry.expired(); }),
             held.end()); // databases closed since
  std::lock_guard<std::mutex> lock(registry->mutex);
  epoch_slot* found = nullptr;
  for (epoch_slot& s : registry->slots)
    if (!s.taken.load()) {
      found = &s;
      break;
    }
  if (found == nullptr)
    found = &registry->slots.emplace_back();
  found->taken.store(true);
  found->depth = 0;
  held.push_back({registry, registry->id, found});
  return *found;
}

} // namespace

operation_epochs::operation_epochs() : registry_(std::make_shared<registry>()) {
  registry_->id = next_registry_id.fetch_add(1);
}

operation_epochs::~operation_epochs() = default;

operation_epochs::section::section(operation_epochs& epochs)
  : registry_(epochs.registry_.get()), slot_(&slot_of(epochs.registry_)) {
  if (slot_->depth++ == 0)
    slot_->entered.store(registry_->epoch.load());
}

// The registry outlives its sections: the store that owns it outlives every operation.
operation_epochs::section::~section() {
  TIDEMARK_CHECK(slot_->depth > 0, "sections end in the order they began");
  if (--slot_->depth > 0)
    return;
  slot_->entered.store(0);
  if (registry_->waiters.load() > 0) {
    std::lock_guard<std::mutex> lock(registry_->mutex);
    registry_->ended.notify_all();
  }
}

std::uint64_t operation_epochs::retire() { return registry_->epoch.fetch_add(1); }

// True when every section in progress entered after `epoch` (the registry's mutex held).
bool operation_epochs::passed_locked(std::uint64_t epoch) const {
  for (const epoch_slot& s : registry_->slots) {
    std::uint64_t entered = s.entered.load();
    if (entered != 0 && entered <= epoch)
      return false;
  }
  return true;
}

bool operation_epochs::passed(std::uint64_t epoch) const {
  std::lock_guard<std::mutex> lock(registry_->mutex);
  return passed_locked(epoch);
}

void operation_epochs::wait_for_sections() {
  std::uint64_t now = retire();
  std::unique_lock<std::mutex> lock(registry_->mutex);
  registry_->waiters.fetch_add(1);
  registry_->ended.wait(lock, [&] { return passed_locked(now); });
  registry_->waiters.fetch_sub(1);
}

} // namespace tidemark::access
