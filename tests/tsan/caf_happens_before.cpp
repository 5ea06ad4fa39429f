// ThreadSanitizer build only (TIDEMARK_TSAN, make test-tsan): tells TSan about the
// synchronisation it cannot see, CAF's mailboxes.
//
// Debian's libcaf_core is not built with TSan, so a message goes from sender to receiver
// through a lock-free mailbox TSan knows nothing of: without this file, the content of
// every message, and everything a sender wrote before sending, is reported as a race with
// the receiver, and an actor's own state as a race between the scheduler threads that ran
// it one after the other. CAF guarantees that what a sender did before enqueueing a
// message happens before the receiver handles it, and that an actor runs on one thread at
// a time; this file states exactly that and nothing more:
//  - an event-based actor's enqueue releases the mailbox element, and its dispatch of that
//    element (activate / reactivate) acquires it, as does the bouncing of an element left in
//    the mailbox of an actor that terminated (sync_request_bouncer, which CAF calls for each
//    before destroying it);
//  - an event-based actor's launch releases the actor (its spawner constructed it), and
//    each run of it (its activation, which initialises it, and the handling of each
//    message) acquires the actor before and releases it after;
//  - a blocking actor's (scoped_actor's) enqueue releases its mailbox, and its mailbox's
//    fetch_more(), the one way messages leave the lock-free stack, acquires it.
// Each function below interposes the exported CAF 0.17 function of the same symbol (the
// executable's definition wins over the shared library's, calls from inside libcaf
// included) and calls the original, found with dlsym(RTLD_NEXT). A missing symbol (another
// CAF version) aborts at the first message rather than silently losing the edges.
#include <caf/blocking_actor.hpp>
#include <caf/detail/sync_request_bouncer.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/scheduled_actor.hpp>

#include <sanitizer/tsan_interface.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#define TM_SCHEDULED_ENQUEUE \
  "_ZN3caf15scheduled_actor7enqueueESt10unique_ptrINS_15mailbox_elementENS_6detail8disposerEE" \
  "PNS_14execution_unitE"
#define TM_SCHEDULED_LAUNCH "_ZN3caf15scheduled_actor6launchEPNS_14execution_unitEbb"
#define TM_SCHEDULED_ACTIVATE "_ZN3caf15scheduled_actor8activateEPNS_14execution_unitE"
#define TM_SCHEDULED_ACTIVATE_WITH \
  "_ZN3caf15scheduled_actor8activateEPNS_14execution_unitERNS_15mailbox_elementE"
#define TM_SCHEDULED_REACTIVATE "_ZN3caf15scheduled_actor10reactivateERNS_15mailbox_elementE"
#define TM_BOUNCE "_ZNK3caf6detail20sync_request_bouncerclERKNS_15mailbox_elementE"
#define TM_BLOCKING_ENQUEUE \
  "_ZN3caf14blocking_actor7enqueueESt10unique_ptrINS_15mailbox_elementENS_6detail8disposerEEP" \
  "NS_14execution_unitE"
#define TM_BLOCKING_FETCH_MORE \
  "_ZN3caf9intrusive10fifo_inboxINS_14blocking_actor14mailbox_policyEE10fetch_moreEv"

namespace {

using activation_result = caf::scheduled_actor::activation_result;
using blocking_inbox = caf::intrusive::fifo_inbox<caf::blocking_actor::mailbox_policy>;

template <class Function>
Function next_definition(const char* symbol) {
  void* found = dlsym(RTLD_NEXT, symbol);
  if (found == nullptr) {
    std::fprintf(stderr, "tests/tsan/caf_happens_before.cpp: %s not found in CAF\n", symbol);
    std::abort();
  }
  return reinterpret_cast<Function>(found);
}

} // namespace

void tm_scheduled_enqueue(caf::scheduled_actor* self, caf::mailbox_element_ptr element,
                          caf::execution_unit* unit) __asm__(TM_SCHEDULED_ENQUEUE);
void tm_scheduled_launch(caf::scheduled_actor* self, caf::execution_unit* unit, bool lazy,
                         bool hide) __asm__(TM_SCHEDULED_LAUNCH);
bool tm_scheduled_activate(caf::scheduled_actor* self,
                           caf::execution_unit* unit) __asm__(TM_SCHEDULED_ACTIVATE);
activation_result
tm_scheduled_activate_with(caf::scheduled_actor* self, caf::execution_unit* unit,
                           caf::mailbox_element& element) __asm__(TM_SCHEDULED_ACTIVATE_WITH);
activation_result
tm_scheduled_reactivate(caf::scheduled_actor* self,
                        caf::mailbox_element& element) __asm__(TM_SCHEDULED_REACTIVATE);
void tm_bounce(const caf::detail::sync_request_bouncer* self,
               const caf::mailbox_element& element) __asm__(TM_BOUNCE);
void tm_blocking_enqueue(caf::blocking_actor* self, caf::mailbox_element_ptr element,
                         caf::execution_unit* unit) __asm__(TM_BLOCKING_ENQUEUE);
bool tm_blocking_fetch_more(blocking_inbox* inbox) __asm__(TM_BLOCKING_FETCH_MORE);

void tm_scheduled_enqueue(caf::scheduled_actor* self, caf::mailbox_element_ptr element,
                          caf::execution_unit* unit) {
  using function = void (*)(caf::scheduled_actor*, caf::mailbox_element_ptr, caf::execution_unit*);
  static const function next = next_definition<function>(TM_SCHEDULED_ENQUEUE);
  __tsan_release(element.get());
  next(self, std::move(element), unit);
}

void tm_scheduled_launch(caf::scheduled_actor* self, caf::execution_unit* unit, bool lazy,
                         bool hide) {
  using function = void (*)(caf::scheduled_actor*, caf::execution_unit*, bool, bool);
  static const function next = next_definition<function>(TM_SCHEDULED_LAUNCH);
  __tsan_release(self);
  next(self, unit, lazy, hide);
}

bool tm_scheduled_activate(caf::scheduled_actor* self, caf::execution_unit* unit) {
  using function = bool (*)(caf::scheduled_actor*, caf::execution_unit*);
  static const function next = next_definition<function>(TM_SCHEDULED_ACTIVATE);
  __tsan_acquire(self);
  bool alive = next(self, unit);
  __tsan_release(self);
  return alive;
}

activation_result tm_scheduled_activate_with(caf::scheduled_actor* self, caf::execution_unit* unit,
                                             caf::mailbox_element& element) {
  using function =
    activation_result (*)(caf::scheduled_actor*, caf::execution_unit*, caf::mailbox_element&);
  static const function next = next_definition<function>(TM_SCHEDULED_ACTIVATE_WITH);
  __tsan_acquire(&element);
  __tsan_acquire(self);
  activation_result result = next(self, unit, element);
  __tsan_release(self);
  return result;
}

activation_result tm_scheduled_reactivate(caf::scheduled_actor* self,
                                          caf::mailbox_element& element) {
  using function = activation_result (*)(caf::scheduled_actor*, caf::mailbox_element&);
  static const function next = next_definition<function>(TM_SCHEDULED_REACTIVATE);
  __tsan_acquire(&element);
  __tsan_acquire(self);
  activation_result result = next(self, element);
  __tsan_release(self);
  return result;
}

void tm_bounce(const caf::detail::sync_request_bouncer* self, const caf::mailbox_element& element) {
  using function = void (*)(const caf::detail::sync_request_bouncer*, const caf::mailbox_element&);
  static const function next = next_definition<function>(TM_BOUNCE);
  __tsan_acquire(const_cast<caf::mailbox_element*>(&element));
  next(self, element);
}

void tm_blocking_enqueue(caf::blocking_actor* self, caf::mailbox_element_ptr element,
                         caf::execution_unit* unit) {
  using function = void (*)(caf::blocking_actor*, caf::mailbox_element_ptr, caf::execution_unit*);
  static const function next = next_definition<function>(TM_BLOCKING_ENQUEUE);
  __tsan_release(&self->mailbox());
  next(self, std::move(element), unit);
}

bool tm_blocking_fetch_more(blocking_inbox* inbox) {
  using function = bool (*)(blocking_inbox*);
  static const function next = next_definition<function>(TM_BLOCKING_FETCH_MORE);
  bool fetched = next(inbox);
  __tsan_acquire(inbox);
  return fetched;
}
