// The benchmark driver: see bench.hpp.
#include "runtime/bench.hpp"

#include "runtime/ack_log.hpp"

#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tidemark::runtime {

namespace {

using std::chrono::steady_clock;
using storage::latency_histogram;

// How often a client hands its latencies to the stats actor.
constexpr auto report_interval = std::chrono::milliseconds(100);

// Counters read at the start and end of the run; the report holds their differences.
struct counter_sample {
  std::uint64_t wal_bytes, wal_records, wal_fpi, wal_fsyncs, wal_fsync_micros;
  std::uint64_t allocated, written_backend, written_bgwriter, written_checkpoint;
  std::uint64_t timed, requested, write_ms, sync_ms;
  std::uint64_t sync_requests, sync_fsyncs, maxwritten_clean;
  std::uint64_t dw_batches, dw_pages, dw_bytes, dw_fsyncs, dw_slot_waits, dw_ring_full;
  std::vector<std::uint64_t> wal_fsync_buckets, dw_fsync_buckets;

  static counter_sample take(engine& e) {
    const auto& w = e.wal->counters();
    const auto& c = e.checkpoints;
    using storage::write_source;
    return {w.bytes.load(),
            w.records.load(),
            w.fpi.load(),
            w.fsyncs.load(),
            w.fsync_micros.load(),
            e.pool->counters().allocations.load(),
            e.writer->written(write_source::backend),
            e.writer->written(write_source::bgwriter),
            e.writer->written(write_source::checkpointer),
            c.timed.load(),
            c.requested.load(),
            c.write_ms.load(),
            c.sync_ms.load(),
            e.syncs.requests.load(),
            e.syncs.fsyncs.load(),
            e.bgwriter.maxwritten_clean.load(),
            e.ring ? e.ring->counters().batches.load() : 0,
            e.ring ? e.ring->counters().pages.load() : 0,
            e.ring ? e.ring->counters().bytes.load() : 0,
            e.ring ? e.ring->counters().fsyncs.load() : 0,
            e.ring ? e.ring->counters().slot_waits.load() : 0,
            e.ring ? e.ring->counters().ring_full.load() : 0,
            w.fsync_latency.snapshot(),
            e.ring ? e.ring->counters().fsync_latency.snapshot()
                   : std::vector<std::uint64_t>(storage::latency_buckets::count)};
  }
};

/// The fdatasyncs' latency between two samples of one of their histograms.
latency_histogram latency_between(const std::vector<std::uint64_t>& before,
                                  const std::vector<std::uint64_t>& after) {
  std::vector<std::uint64_t> counts = after;
  for (std::size_t i = 0; i < counts.size(); ++i)
    counts[i] -= before[i];
  return latency_histogram::of_buckets(std::move(counts));
}

// The machine's CPU time from /proc/stat, to show steal (time the hypervisor gave this
// VM's CPUs to someone else) beside the latencies it can explain.
struct cpu_times {
  std::uint64_t steal = 0, total = 0;
  bool known = false;

  static cpu_times read() {
    cpu_times t;
    std::ifstream stat("/proc/stat");
    std::string label;
    if (!(stat >> label) || label != "cpu")
      return t;
    std::uint64_t field = 0;
    for (int i = 0; i < 8 && stat >> field; ++i) { // user nice system idle iowait irq softirq steal
      t.total += field;
      if (i == 7) {
        t.steal = field;
        t.known = true;
      }
    }
    return t;
  }
};

messages::stats_snapshot query_stats(caf::actor_system& system, const messages::stats_actor& stats) {
  caf::scoped_actor self{system};
  messages::stats_snapshot snapshot;
  self->request(stats, caf::infinite, messages::get_atom::value)
    .receive([&](messages::stats_snapshot& s) { snapshot = std::move(s); },
             [](const caf::error&) {});
  return snapshot;
}

latency_histogram window_latency(const messages::stats_snapshot& now,
                                 const messages::stats_snapshot& before) {
  latency_histogram window = now.latency;
  for (std::size_t i = 0; i < window.buckets.size(); ++i)
    window.buckets[i] -= before.latency.buckets[i];
  window.count -= before.latency.count;
  window.sum_us -= before.latency.sum_us;
  return window;
}

void print_progress(std::FILE* out, engine& e, double elapsed, double interval,
                    const messages::stats_snapshot& now, const messages::stats_snapshot& before) {
  latency_histogram window = window_latency(now, before);
  double tps = double(now.transactions - before.transactions) / interval;
  std::fprintf(out,
               "progress: %.1f s, %.1f tps, lat %.3f ms avg, p99 %.3f ms, checkpoint %s%s\n",
               elapsed, tps, window.average_ms(), window.quantile_ms(0.99),
               to_string(e.checkpoints.phase.load()), e.failed() ? ", ENGINE FAILED" : "");
  std::fflush(out);
}

std::size_t dirty_buffers(engine& e) {
  std::size_t dirty = 0;
  for (storage::buffer_id b = 0; b < e.pool->size(); ++b)
    dirty += e.pool->is_dirty(b);
  return dirty;
}

// One CSV row per second: what the timeline plot shows (bench/plot_timeline.sh).
class timeline_writer {
public:
  timeline_writer(const std::string& path, engine& e) : out_(path), engine_(e) {
    if (!out_)
      throw std::runtime_error("cannot write timeline " + path);
    out_ << "time_s,tps,p99_ms,wal_bytes,checkpoint_phase,dirty_buffers,written_checkpoint,"
            "written_bgwriter,written_backend,max_ms,wal_fsync_max_ms,steal_pct\n";
    last_ = counter_sample::take(e);
    last_cpu_ = cpu_times::read();
  }
  /// Called every ~100 ms: remembers which checkpoint phases this second saw.
  void observe() { seen_ |= 1u << static_cast<unsigned>(engine_.checkpoints.phase.load()); }

  void row(double elapsed, double interval, const messages::stats_snapshot& now,
           const messages::stats_snapshot& before) {
    counter_sample c = counter_sample::take(engine_);
    latency_histogram window = window_latency(now, before);
    out_ << elapsed << ',' << double(now.transactions - before.transactions) / interval << ','
         << window.quantile_ms(0.99) << ',' << c.wal_bytes - last_.wal_bytes
         << ',' << phase_of_second(c) << ',' << dirty_buffers(engine_)
         << ',' << c.written_checkpoint - last_.written_checkpoint << ','
         << c.written_bgwriter - last_.written_bgwriter << ','
         << c.written_backend - last_.written_backend << ','
         << window.quantile_ms(1.0) << ',' // the top bucket's bound: within 5 %
         << latency_between(last_.wal_fsync_buckets, c.wal_fsync_buckets).quantile_ms(1.0) << ',';
    cpu_times cpu = cpu_times::read();
    if (cpu.known && last_cpu_.known && cpu.total > last_cpu_.total)
      out_ << 100.0 * double(cpu.steal - last_cpu_.steal) / double(cpu.total - last_cpu_.total);
    out_ << '\n'; // steal stays empty where /proc/stat does not show it
    out_.flush();
    last_ = c;
    last_cpu_ = cpu;
    seen_ = 0;
  }

private:
  // The phase the second is shown in: sync over write over finish; a checkpoint that began
  // and ended between two samples (an unpaced one) shows as finish.
  int phase_of_second(const counter_sample& c) const {
    using runtime::checkpoint_phase;
    for (checkpoint_phase p : {checkpoint_phase::sync, checkpoint_phase::write, checkpoint_phase::finish})
      if (seen_ & (1u << static_cast<unsigned>(p)))
        return static_cast<int>(p);
    bool completed = c.timed + c.requested != last_.timed + last_.requested;
    return completed ? static_cast<int>(checkpoint_phase::finish) : 0;
  }

  std::ofstream out_;
  engine& engine_;
  counter_sample last_;
  cpu_times last_cpu_;
  unsigned seen_ = 0;
};

// A periodic report: its own schedule and the stats snapshot its window starts from.
struct periodic {
  double interval_s;
  steady_clock::time_point next;
  messages::stats_snapshot before;
};

void wait_and_report(database& db, const bench_options& options, std::FILE* progress,
                     steady_clock::time_point started) {
  engine& e = db.internals();
  auto at = [&](double s) {
    return started + std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double>(s));
  };
  auto deadline = at(options.duration_s);
  messages::stats_snapshot initial = query_stats(db.system(), db.stats());
  std::optional<periodic> lines, rows;
  if (progress != nullptr && options.progress_interval_s > 0)
    lines = periodic{options.progress_interval_s, at(options.progress_interval_s), initial};
  std::unique_ptr<timeline_writer> timeline;
  if (!options.timeline_path.empty()) {
    timeline = std::make_unique<timeline_writer>(options.timeline_path, e);
    rows = periodic{1.0, at(1.0), initial};
  }
  while (steady_clock::now() < deadline && !e.failed()) {
    auto wake = deadline;
    for (auto* p : {&lines, &rows})
      if (*p)
        wake = std::min(wake, (*p)->next);
    std::this_thread::sleep_until(std::min(wake, steady_clock::now() + std::chrono::milliseconds(100)));
    auto now_time = steady_clock::now();
    double elapsed = std::chrono::duration<double>(now_time - started).count();
    if (timeline)
      timeline->observe();
    for (auto* p : {&lines, &rows}) {
      if (!*p || now_time < (*p)->next)
        continue;
      messages::stats_snapshot now = query_stats(db.system(), db.stats());
      if (p == &lines)
        print_progress(progress, e, elapsed, (*p)->interval_s, now, (*p)->before);
      else
        timeline->row(elapsed, (*p)->interval_s, now, (*p)->before);
      (*p)->before = std::move(now);
      (*p)->next += std::chrono::duration_cast<steady_clock::duration>(
        std::chrono::duration<double>((*p)->interval_s));
    }
  }
}

// PREFIX_p50_us, PREFIX_p99_us and PREFIX_max_us (the top bucket's bound: within 5 %).
void set_spread(json_object& r, const std::string& prefix, const latency_histogram& h) {
  r.set(prefix + "_p50_us", h.quantile_ms(0.50) * 1000.0);
  r.set(prefix + "_p99_us", h.quantile_ms(0.99) * 1000.0);
  r.set(prefix + "_max_us", h.quantile_ms(1.0) * 1000.0);
}

void fill_report(json_object& r, engine& e, const bench_options& options, double seconds,
                 const messages::stats_snapshot& stats, const counter_sample& a,
                 const counter_sample& b) {
  r.set("tps", seconds > 0 ? double(stats.transactions) / seconds : 0.0);
  r.set("transactions", stats.transactions);
  r.set("duration_s", seconds);
  r.set("clients", std::uint64_t(options.clients));
  r.set("torn_page_protection", to_string(e.config.protection));
  r.set("io_method", e.config.io == storage::io_method::io_uring ? "io_uring" : "sync");
  r.set("latency_ms.avg", stats.latency.average_ms());
  r.set("latency_ms.p50", stats.latency.quantile_ms(0.50));
  r.set("latency_ms.p99", stats.latency.quantile_ms(0.99));
  r.set("latency_ms.p999", stats.latency.quantile_ms(0.999));
  r.set("latency_ms.max", double(stats.latency.max_us) / 1000.0);
  r.set("wal.bytes", b.wal_bytes - a.wal_bytes);
  r.set("wal.records", b.wal_records - a.wal_records);
  r.set("wal.fpi", b.wal_fpi - a.wal_fpi);
  r.set("wal.fsyncs", b.wal_fsyncs - a.wal_fsyncs);
  double txns = stats.transactions ? double(stats.transactions) : 1.0;
  r.set("wal.bytes_per_transaction", double(b.wal_bytes - a.wal_bytes) / txns);
  r.set("wal.fsyncs_per_commit", double(b.wal_fsyncs - a.wal_fsyncs) / txns);
  std::uint64_t fsyncs = b.wal_fsyncs - a.wal_fsyncs;
  r.set("wal.fsync_avg_us", fsyncs ? double(b.wal_fsync_micros - a.wal_fsync_micros) / double(fsyncs) : 0.0);
  set_spread(r, "wal.fsync", latency_between(a.wal_fsync_buckets, b.wal_fsync_buckets));
  r.set("buffers.allocated", b.allocated - a.allocated);
  r.set("buffers.written_checkpoint", b.written_checkpoint - a.written_checkpoint);
  r.set("buffers.written_bgwriter", b.written_bgwriter - a.written_bgwriter);
  r.set("buffers.written_backend", b.written_backend - a.written_backend);
  std::uint64_t all = (b.written_checkpoint - a.written_checkpoint) +
                      (b.written_bgwriter - a.written_bgwriter) + (b.written_backend - a.written_backend);
  r.set("buffers.backend_share", all ? double(b.written_backend - a.written_backend) / double(all) : 0.0);
  r.set("buffers.maxwritten_clean", b.maxwritten_clean - a.maxwritten_clean);
  r.set("checkpoints.timed", b.timed - a.timed);
  r.set("checkpoints.requested", b.requested - a.requested);
  r.set("checkpoints.write_ms", b.write_ms - a.write_ms);
  r.set("checkpoints.sync_ms", b.sync_ms - a.sync_ms);
  r.set("sync.requests", b.sync_requests - a.sync_requests);
  r.set("sync.fsyncs", b.sync_fsyncs - a.sync_fsyncs);
  r.set("doublewrite.batches", b.dw_batches - a.dw_batches);
  r.set("doublewrite.pages", b.dw_pages - a.dw_pages);
  r.set("doublewrite.bytes_per_page", b.dw_pages > a.dw_pages ? double(b.dw_bytes - a.dw_bytes) /
                                                                  double(b.dw_pages - a.dw_pages)
                                                              : 0.0);
  r.set("doublewrite.fsyncs", b.dw_fsyncs - a.dw_fsyncs);
  set_spread(r, "doublewrite.fsync", latency_between(a.dw_fsync_buckets, b.dw_fsync_buckets));
  r.set("doublewrite.slot_waits", b.dw_slot_waits - a.dw_slot_waits);
  r.set("doublewrite.ring_full_waits", b.dw_ring_full - a.dw_ring_full);
  r.set("doublewrite.ring_pages", std::uint64_t(e.ring ? e.ring->ring_pages() : 0));
}

// One client: a thread of its own running transactions through a public session, as an
// embedding application does; latencies go to the stats actor in batches.
struct client {
  std::uint64_t transactions = 0;
  std::string error;
};

void run_client(database& db, const tpcb::layout& shape, const bench_options& options,
                std::uint32_t index, ack_log* acks, const std::atomic<bool>& stop, client& out) {
  engine& e = db.internals();
  std::mt19937_64 random(options.seed * 1000003 + index);
  messages::progress_report unreported;
  auto last_report = steady_clock::now();
  auto report = [&] {
    if (unreported.transactions == 0)
      return;
    caf::anon_send(db.stats(), std::move(unreported));
    unreported = messages::progress_report{};
    last_report = steady_clock::now();
  };
  try {
    session s = db.open_session();
    std::uint64_t quota = options.transactions_per_client;
    while (!stop.load(std::memory_order_relaxed) && !e.failed() &&
           (quota == 0 || out.transactions < quota)) {
      auto started = steady_clock::now();
      storage::xid_t xid = tpcb::run_transaction(s, shape, tpcb::random_input(shape, random));
      auto now = steady_clock::now();
      unreported.latency.record(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(now - started).count()));
      ++unreported.transactions;
      ++out.transactions;
      if (acks != nullptr)
        acks->append(xid); // only after the commit was acknowledged
      if (now - last_report >= report_interval)
        report();
    }
    if (e.failed())
      out.error = e.failure();
  } catch (const std::exception& error) {
    out.error = error.what();
  }
  report();
}

} // namespace

bench_result run_bench(database& db, const tpcb::layout& shape, const bench_options& options,
                       std::FILE* progress) {
  engine& e = db.internals();
  std::unique_ptr<ack_log> acks;
  if (!options.ack_log_path.empty())
    acks = std::make_unique<ack_log>(options.ack_log_path);
  counter_sample before = counter_sample::take(e);
  messages::stats_snapshot stats_before = query_stats(db.system(), db.stats());
  std::vector<client> clients(options.clients);
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  auto started = steady_clock::now();
  for (std::uint32_t i = 0; i < options.clients; ++i)
    threads.emplace_back(run_client, std::ref(db), std::cref(shape), std::cref(options), i,
                         acks.get(), std::cref(stop), std::ref(clients[i]));
  if (options.transactions_per_client == 0) {
    wait_and_report(db, options, progress, started);
    stop.store(true);
  }
  for (std::thread& thread : threads)
    thread.join();
  bench_result result;
  for (const client& c : clients)
    if (!c.error.empty())
      result.errors.push_back(c.error);
  double seconds = std::chrono::duration<double>(steady_clock::now() - started).count();
  messages::stats_snapshot stats = query_stats(db.system(), db.stats());
  stats.transactions -= stats_before.transactions;
  counter_sample after = counter_sample::take(e);
  fill_report(result.report, e, options, seconds, stats, before, after);
  result.transactions = stats.transactions;
  return result;
}

} // namespace tidemark::runtime
