// backend: see backend.hpp for its role.
#include "actors/backend.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <optional>

namespace tidemark::actors {

namespace {

using namespace messages;
using std::chrono::steady_clock;

constexpr auto report_interval = std::chrono::milliseconds(100);

struct backend_state {
  backend_params params;
  std::unique_ptr<storage::page_transaction> txn;
  std::mt19937_64 random;
  progress_report unreported;
  steady_clock::time_point last_report = steady_clock::now();
  std::uint64_t transactions = 0;
  bool waiting_for_flush = false;
  bool stop_requested = false;
  std::string error;
  std::optional<caf::typed_response_promise<backend_summary>> stop_promise;
  static inline const char* name = "backend";
};

using backend_pointer = backend_actor::stateful_pointer<backend_state>;

void report_progress(backend_pointer self) {
  auto& st = self->state;
  if (st.unreported.transactions == 0)
    return;
  self->send(st.params.stats, std::move(st.unreported));
  st.unreported = progress_report{};
  st.last_report = steady_clock::now();
}

bool finished(const backend_state& st) {
  if (!st.error.empty() || st.params.engine->failed())
    return true;
  if (st.params.transaction_quota > 0)
    return st.transactions >= st.params.transaction_quota;
  return st.stop_requested;
}

void answer_stop_if_done(backend_pointer self) {
  auto& st = self->state;
  if (!st.stop_promise || st.waiting_for_flush || !finished(st))
    return;
  report_progress(self);
  if (st.error.empty() && st.params.engine->failed())
    st.error = st.params.engine->failure();
  st.stop_promise->deliver(backend_summary{st.transactions, st.error});
  st.stop_promise.reset();
}

void acknowledge(backend_pointer self, storage::xid_t xid, steady_clock::time_point started) {
  auto& st = self->state;
  st.waiting_for_flush = false;
  auto now = steady_clock::now();
  st.unreported.latency.record(static_cast<std::uint64_t>(
    std::chrono::duration_cast<std::chrono::microseconds>(now - started).count()));
  ++st.unreported.transactions;
  ++st.transactions;
  if (st.params.acks != nullptr)
    st.params.acks->append(xid);
  if (now - st.last_report >= report_interval)
    report_progress(self);
  if (finished(st))
    answer_stop_if_done(self);
  else
    self->send(self, run_atom::value);
}

void run_one(backend_pointer self) {
  auto& st = self->state;
  if (finished(st)) {
    answer_stop_if_done(self);
    return;
  }
  auto started = steady_clock::now();
  storage::xid_t xid = st.params.engine->next_xid.fetch_add(1);
  storage::lsn_range position;
  try {
    st.txn->begin(xid);
    position = runtime::tpcb::run_transaction(*st.txn, *st.params.shape,
                                              runtime::tpcb::random_input(*st.params.shape, st.random));
  } catch (const std::exception& e) {
    st.error = e.what();
    answer_stop_if_done(self);
    return;
  }
  if (!st.params.engine->config.synchronous_commit) {
    acknowledge(self, xid, started);
    return;
  }
  st.waiting_for_flush = true;
  self->request(st.params.wal_writer, caf::infinite, flush_request{position.end})
    .then([=](const flush_done&) { acknowledge(self, xid, started); },
          [=](const caf::error& e) {
            self->state.waiting_for_flush = false;
            self->state.error = "commit not durable: " + self->system().render(e);
            answer_stop_if_done(self);
          });
}

backend_actor::behavior_type backend(backend_pointer self, backend_params params) {
  runtime::engine& e = *params.engine;
  self->state.txn = std::make_unique<storage::page_transaction>(
    *e.pool, *e.wal, *e.tails, e.full_page_writes(), e.commit_log.get());
  self->state.random.seed(params.seed);
  self->state.params = std::move(params);
  return {
    [=](run_atom) { run_one(self); },
    [=](stop_atom) -> caf::result<backend_summary> {
      auto& st = self->state;
      st.stop_requested = true;
      st.stop_promise = self->make_response_promise<backend_summary>();
      auto promise = *st.stop_promise;
      answer_stop_if_done(self);
      return promise;
    },
  };
}

} // namespace

backend_actor spawn_backend(caf::actor_system& system, backend_params params) {
  return system.spawn(backend, std::move(params));
}

} // namespace tidemark::actors
