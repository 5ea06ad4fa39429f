// bgwriter: see bgwriter.hpp for its role; the arithmetic is in bgwriter_estimator.
#include "actors/bgwriter.hpp"

#include "actors/bgwriter_estimator.hpp"
#include "actors/page_sinks.hpp"
#include "actors/write_allowance.hpp"

#include <caf/all.hpp>

#include <algorithm>

namespace tidemark::actors {

namespace {

using namespace messages;

constexpr int hibernate_factor = 50;
constexpr std::size_t fault_in_bytes = std::size_t(2) << 20; // at least a huge page ahead
constexpr int idle_rounds_before_hibernating = 2;

struct bgwriter_state {
  context* ctx = nullptr;
  settings config; // the engine's at the start; reloadable ones replaced by settings_reload
  std::unique_ptr<bgwriter_estimator> estimator;
  std::unique_ptr<buffer_sink> sink;
  std::uint64_t generation = 0; // of the tick chain; a wake-up starts a new one
  int idle_rounds = 0;
  storage::lsn_t wal_seen = 0; // the WAL's inserted end at the last round
  write_allowance allowance;   // background_write_limit
  static inline const char* name = "bgwriter";
};

using bgwriter_pointer = bgwriter_actor::stateful_pointer<bgwriter_state>;

// Wakes the bgwriter from hibernation at the next buffer allocation, and whenever sessions
// find the victim supply below its low-water mark.
class wake_on_allocation final : public storage::allocation_listener {
public:
  explicit wake_on_allocation(bgwriter_actor bgwriter) : bgwriter_(std::move(bgwriter)) {}
  void on_allocation() override { caf::anon_send(bgwriter_, wake_atom::value); }
  void on_supply_low() override { caf::anon_send(bgwriter_, wake_atom::value); }

private:
  bgwriter_actor bgwriter_;
};

// Fresh memory the sessions are about to touch first, faulted in here rather than by them
// (often holding latches, or the WAL insert mutex): while the clock hand's first pass hands
// out never-used buffers, as many ahead of it as buffers are kept clean ahead; while the WAL
// insert buffer's first pass goes on, twice the last round's WAL ahead of the inserts.
void fault_in_ahead(bgwriter_state& st, const cleaning_plan& plan) {
  context& ctx = *st.ctx;
  ctx.store.pool->fault_in_ahead(std::max<std::size_t>(static_cast<std::size_t>(plan.target),
                                                       fault_in_bytes / ctx.config.page_size));
  if (!ctx.store.wal)
    return;
  storage::lsn_t inserted = ctx.store.wal->inserted_lsn();
  std::size_t last_round = st.wal_seen == 0 ? 0 : inserted - st.wal_seen;
  st.wal_seen = inserted;
  ctx.store.wal->fault_in_ahead(std::max(fault_in_bytes, 2 * last_round));
}

// One cleaning round at `now` (the actor's clock). Returns true if the round found nothing
// to do. It writes at most bgwriter_lru_maxpages, and no more than background_write_limit
// earned since the last round. The supply's alarm stays sounded after it unless the page
// limit cut it short: the supply rearms it once refilled to its low-water mark, and until
// then the rounds come at a tenth of bgwriter_delay (round_and_reschedule). Rearmed after
// every round, the alarm woke the bgwriter at nearly every allocation while the supply sat
// just below its mark, for rounds of a few buffers or none (a load filling never-used
// buffers, which are nobody's to offer): thousands of wake-ups a second, each round's few
// writes a doublewrite batch of its own.
bool clean_round(bgwriter_state& st, std::chrono::steady_clock::time_point now) {
  context& ctx = *st.ctx;
  storage::buffer_pool& pool = *ctx.store.pool;
  clock_reading reading;
  pool.clock_position(&reading.hand, &reading.passes);
  reading.allocations = pool.counters().allocations.load(std::memory_order_relaxed);
  cleaning_plan plan = st.estimator->plan(reading);
  std::uint32_t maxpages = static_cast<std::uint32_t>(
    std::min<std::size_t>(st.config.bgwriter_lru_maxpages,
                          st.allowance.available(st.config.background_write_limit,
                                                 ctx.config.page_size, now)));
  std::uint32_t next = plan.start;
  std::uint64_t passes = st.estimator->next_passes();
  std::uint32_t scanned = 0, written = 0;
  double reusable = plan.reusable_estimate;
  while (scanned < plan.to_scan && reusable < plan.target && written < maxpages) {
    storage::buffer_id b = next;
    if (++next == pool.size()) {
      next = 0;
      ++passes;
    }
    ++scanned;
    if (!pool.is_reusable(b))
      continue;
    if (st.sink->add(b, true)) // joins the supply once written (finish_write's offer)
      ++written;
    else
      pool.offer_victim(b); // clean already (or being written by someone else)
    reusable += 1;
  }
  st.sink->flush();
  fault_in_ahead(st, plan);
  st.allowance.spend(written);
  if (written >= maxpages && maxpages > 0)
    pool.rearm_supply_alarm();
  if (written > 0 && ctx.store.trace)
    ctx.store.trace->record(actor_role::bgwriter, actor_role::bgwriter, trace_type::bgwriter_write,
                            written);
  if (written >= maxpages && maxpages > 0)
    ctx.counters.bgwriter.maxwritten_clean.fetch_add(1, std::memory_order_relaxed);
  st.estimator->finished(plan, scanned, next, passes, reusable);
  return st.estimator->idle();
}

void schedule_tick(bgwriter_pointer self, std::chrono::milliseconds after) {
  self->delayed_send(self, after, tick_atom::value, self->state.generation);
}

void round_and_reschedule(bgwriter_pointer self) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  bool idle = false;
  bool cleaning = !ctx.failed() && st.config.bgwriter_lru_maxpages > 0;
  if (cleaning) {
    try {
      idle = clean_round(st, self->clock().now());
    } catch (const std::exception& error) {
      ctx.fail(std::string("bgwriter write failed: ") + error.what());
    }
  }
  st.idle_rounds = idle ? st.idle_rounds + 1 : 0;
  if (st.idle_rounds >= idle_rounds_before_hibernating) {
    ctx.store.pool->notify_on_next_allocation();
    schedule_tick(self, st.config.bgwriter_delay * hibernate_factor);
  } else if (cleaning && ctx.store.pool->supply_alarm_sounded()) {
    schedule_tick(self, std::max(std::chrono::milliseconds(1), st.config.bgwriter_delay / 10));
  } else {
    schedule_tick(self, st.config.bgwriter_delay);
  }
}

bgwriter_actor::behavior_type bgwriter(bgwriter_pointer self, context* ctx) {
  auto& st = self->state;
  st.ctx = ctx;
  st.config = ctx->config;
  st.estimator =
    std::make_unique<bgwriter_estimator>(static_cast<std::uint32_t>(ctx->store.pool->size()),
                                         st.config.bgwriter_lru_multiplier,
                                         double(st.config.bgwriter_delay.count()));
  st.sink = make_buffer_sink(*ctx, storage::write_source::bgwriter);
  ctx->counters.bgwriter.listener =
    std::make_unique<wake_on_allocation>(caf::actor_cast<bgwriter_actor>(self));
  ctx->store.pool->set_allocation_listener(ctx->counters.bgwriter.listener.get());
  schedule_tick(self, st.config.bgwriter_delay);
  return {
    [=](tick_atom, std::uint64_t generation) {
      if (generation == self->state.generation)
        round_and_reschedule(self);
    },
    [=](wake_atom) {
      self->state.idle_rounds = 0;
      ++self->state.generation; // the hibernation tick still pending is now stale
      round_and_reschedule(self);
    },
    [=](const settings_reload& reload) {
      auto& st = self->state;
      apply_reload(st.config, reload);
      st.estimator->retune(st.config.bgwriter_lru_multiplier,
                           double(st.config.bgwriter_delay.count()));
      st.idle_rounds = 0;
      ++st.generation; // a new delay (or cleaning turned on) from now: a new tick chain
      round_and_reschedule(self);
    },
  };
}

} // namespace

bgwriter_actor spawn_bgwriter(caf::actor_system& system, context& ctx, bool detached) {
  if (detached)
    return system.spawn<caf::detached>([&ctx](bgwriter_pointer self) {
      name_this_thread("tm-bgwriter");
      return bgwriter(self, &ctx);
    });
  return system.spawn(bgwriter, &ctx);
}

} // namespace tidemark::actors
