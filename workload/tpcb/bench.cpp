// The benchmark driver: see bench.hpp.
#include "workload/tpcb/bench.hpp"

#include "workload/ack_log.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tidemark::workload {

namespace {

using std::chrono::steady_clock;

// How often a client hands its latencies to the tally.
constexpr auto report_interval = std::chrono::milliseconds(100);

// The committed transactions' latencies, merged from every client.
class commit_tally {
public:
  void add(const latency_distribution& part) {
    std::lock_guard<std::mutex> guard(mutex_);
    merged_.merge(part);
  }
  latency_distribution snapshot() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return merged_;
  }

private:
  mutable std::mutex mutex_;
  latency_distribution merged_;
};

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

void print_progress(std::FILE* out, const statistics& stats, double elapsed, double interval,
                    const latency_distribution& window) {
  double tps = double(window.count()) / interval;
  std::fprintf(out, "progress: %.1f s, %.1f tps, lat %.3f ms avg, p99 %.3f ms, checkpoint %s%s\n",
               elapsed, tps, window.average_ms(), window.quantile_ms(0.99),
               to_string(stats.checkpoints.phase), stats.failed ? ", ENGINE FAILED" : "");
  std::fflush(out);
}

// One CSV row per second: what the timeline plot shows (bench/plot_timeline.sh).
class timeline_writer {
public:
  timeline_writer(const std::string& path, database& db) : out_(path), db_(db) {
    if (!out_)
      throw std::runtime_error("cannot write timeline " + path);
    out_ << "time_s,tps,p99_ms,wal_bytes,checkpoint_phase,dirty_buffers,written_checkpoint,"
            "written_bgwriter,written_backend,max_ms,wal_fsync_max_ms,steal_pct\n";
    last_ = db.stats();
    last_cpu_ = cpu_times::read();
  }
  /// Called every ~100 ms: remembers which checkpoint phases this second saw.
  void observe(checkpoint_phase phase) { seen_ |= 1u << static_cast<unsigned>(phase); }

  void row(double elapsed, double interval, const latency_distribution& window) {
    statistics c = db_.stats();
    out_ << elapsed << ',' << double(window.count()) / interval << ',' << window.quantile_ms(0.99)
         << ',' << c.wal.bytes - last_.wal.bytes << ',' << phase_of_second(c) << ','
         << c.buffers.dirty << ','
         << c.buffers.written_by_checkpointer - last_.buffers.written_by_checkpointer << ','
         << c.buffers.written_by_bgwriter - last_.buffers.written_by_bgwriter << ','
         << c.buffers.written_by_sessions - last_.buffers.written_by_sessions << ','
         << window.quantile_ms(1.0) << ',' // the top bucket's bound: within 5 %
         << c.wal.fsync_latency.since(last_.wal.fsync_latency).quantile_ms(1.0) << ',';
    cpu_times cpu = cpu_times::read();
    if (cpu.known && last_cpu_.known && cpu.total > last_cpu_.total)
      out_ << 100.0 * double(cpu.steal - last_cpu_.steal) / double(cpu.total - last_cpu_.total);
    out_ << '\n'; // steal stays empty where /proc/stat does not show it
    out_.flush();
    last_ = std::move(c);
    last_cpu_ = cpu;
    seen_ = 0;
  }

private:
  // The phase the second is shown in: sync over write over finish; a checkpoint that began
  // and ended between two samples (an unpaced one) shows as finish.
  int phase_of_second(const statistics& c) const {
    for (checkpoint_phase p :
         {checkpoint_phase::sync, checkpoint_phase::write, checkpoint_phase::finish})
      if (seen_ & (1u << static_cast<unsigned>(p)))
        return static_cast<int>(p);
    bool completed = c.checkpoints.timed + c.checkpoints.requested !=
                     last_.checkpoints.timed + last_.checkpoints.requested;
    return completed ? static_cast<int>(checkpoint_phase::finish) : 0;
  }

  std::ofstream out_;
  database& db_;
  statistics last_;
  cpu_times last_cpu_;
  unsigned seen_ = 0;
};

// A periodic report: its own schedule and the tally its window starts from.
struct periodic {
  double interval_s;
  steady_clock::time_point next;
  latency_distribution before;
};

void wait_and_report(database& db, const commit_tally& tally,
                     const std::atomic<std::uint32_t>& clients_running,
                     const bench_options& options, std::FILE* progress,
                     steady_clock::time_point started) {
  auto at = [&](double s) {
    return started +
           std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double>(s));
  };
  auto deadline = at(options.duration_s);
  latency_distribution initial = tally.snapshot();
  std::optional<periodic> lines, rows;
  if (progress != nullptr && options.progress_interval_s > 0)
    lines = periodic{options.progress_interval_s, at(options.progress_interval_s), initial};
  std::unique_ptr<timeline_writer> timeline;
  if (!options.timeline_path.empty()) {
    timeline = std::make_unique<timeline_writer>(options.timeline_path, db);
    rows = periodic{1.0, at(1.0), initial};
  }
  while (steady_clock::now() < deadline && clients_running.load() > 0) {
    auto wake = deadline;
    for (auto* p : {&lines, &rows})
      if (*p)
        wake = std::min(wake, (*p)->next);
    // Waking every 100 ms: the timeline samples the checkpoint phase, and a run whose
    // clients all stopped (a failed engine) ends early. The engine's statistics are read
    // only when something uses them.
    std::this_thread::sleep_until(
      std::min(wake, steady_clock::now() + std::chrono::milliseconds(100)));
    auto now_time = steady_clock::now();
    double elapsed = std::chrono::duration<double>(now_time - started).count();
    if (timeline)
      timeline->observe(db.stats().checkpoints.phase);
    for (auto* p : {&lines, &rows}) {
      if (!*p || now_time < (*p)->next)
        continue;
      latency_distribution now = tally.snapshot();
      latency_distribution window = now.since((*p)->before);
      if (p == &lines)
        print_progress(progress, db.stats(), elapsed, (*p)->interval_s, window);
      else
        timeline->row(elapsed, (*p)->interval_s, window);
      (*p)->before = std::move(now);
      (*p)->next += std::chrono::duration_cast<steady_clock::duration>(
        std::chrono::duration<double>((*p)->interval_s));
    }
  }
}

// PREFIX_p50_us, PREFIX_p99_us and PREFIX_max_us (the top bucket's bound: within 5 %).
void set_spread(json_object& r, const std::string& prefix, const latency_distribution& h) {
  r.set(prefix + "_p50_us", h.quantile_ms(0.50) * 1000.0);
  r.set(prefix + "_p99_us", h.quantile_ms(0.99) * 1000.0);
  r.set(prefix + "_max_us", h.quantile_ms(1.0) * 1000.0);
}

void fill_report(json_object& r, database& db, const bench_options& options, double seconds,
                 const latency_distribution& latency, const statistics& a, const statistics& b) {
  std::uint64_t transactions = latency.count();
  r.set("tps", seconds > 0 ? double(transactions) / seconds : 0.0);
  r.set("transactions", transactions);
  r.set("conflicts", b.conflicts - a.conflicts); // retried: each counts once in transactions
  r.set("duration_s", seconds);
  r.set("clients", std::uint64_t(options.clients));
  r.set("torn_page_protection", db.setting("torn_page_protection"));
  r.set("io_method", db.setting("io_method"));
  r.set("latency_ms.avg", latency.average_ms());
  r.set("latency_ms.p50", latency.quantile_ms(0.50));
  r.set("latency_ms.p99", latency.quantile_ms(0.99));
  r.set("latency_ms.p999", latency.quantile_ms(0.999));
  r.set("latency_ms.max", latency.max_ms());
  r.set("wal.bytes", b.wal.bytes - a.wal.bytes);
  r.set("wal.records", b.wal.records - a.wal.records);
  r.set("wal.fpi", b.wal.full_page_images - a.wal.full_page_images);
  std::uint64_t fsyncs = b.wal.fsyncs - a.wal.fsyncs;
  r.set("wal.fsyncs", fsyncs);
  double txns = transactions ? double(transactions) : 1.0;
  r.set("wal.bytes_per_transaction", double(b.wal.bytes - a.wal.bytes) / txns);
  r.set("wal.fsyncs_per_commit", double(fsyncs) / txns);
  r.set("wal.fsync_avg_us",
        fsyncs ? double(b.wal.fsync_micros - a.wal.fsync_micros) / double(fsyncs) : 0.0);
  set_spread(r, "wal.fsync", b.wal.fsync_latency.since(a.wal.fsync_latency));
  const auto& ab = a.buffers;
  const auto& bb = b.buffers;
  r.set("buffers.allocated", bb.allocated - ab.allocated);
  r.set("buffers.from_supply", bb.from_supply - ab.from_supply);
  r.set("buffers.supply_alarms", bb.supply_alarms - ab.supply_alarms);
  r.set("buffers.written_checkpoint", bb.written_by_checkpointer - ab.written_by_checkpointer);
  r.set("buffers.written_bgwriter", bb.written_by_bgwriter - ab.written_by_bgwriter);
  r.set("buffers.written_backend", bb.written_by_sessions - ab.written_by_sessions);
  std::uint64_t all = (bb.written_by_checkpointer - ab.written_by_checkpointer) +
                      (bb.written_by_bgwriter - ab.written_by_bgwriter) +
                      (bb.written_by_sessions - ab.written_by_sessions);
  r.set("buffers.backend_share",
        all ? double(bb.written_by_sessions - ab.written_by_sessions) / double(all) : 0.0);
  r.set("buffers.maxwritten_clean", bb.bgwriter_maxwritten_clean - ab.bgwriter_maxwritten_clean);
  r.set("checkpoints.timed", b.checkpoints.timed - a.checkpoints.timed);
  r.set("checkpoints.requested", b.checkpoints.requested - a.checkpoints.requested);
  r.set("checkpoints.write_ms", b.checkpoints.write_ms - a.checkpoints.write_ms);
  r.set("checkpoints.sync_ms", b.checkpoints.sync_ms - a.checkpoints.sync_ms);
  r.set("sync.requests", b.syncs.requests - a.syncs.requests);
  r.set("sync.fsyncs", b.syncs.fsyncs - a.syncs.fsyncs);
  const auto& ad = a.doublewrite;
  const auto& bd = b.doublewrite;
  r.set("doublewrite.batches", bd.batches - ad.batches);
  r.set("doublewrite.pages", bd.pages - ad.pages);
  r.set("doublewrite.bytes_per_page",
        bd.pages > ad.pages ? double(bd.bytes - ad.bytes) / double(bd.pages - ad.pages) : 0.0);
  r.set("doublewrite.fsyncs", bd.fsyncs - ad.fsyncs);
  set_spread(r, "doublewrite.fsync", bd.fsync_latency.since(ad.fsync_latency));
  r.set("doublewrite.slot_waits", bd.slot_waits - ad.slot_waits);
  r.set("doublewrite.ring_full_waits", bd.ring_full_waits - ad.ring_full_waits);
  r.set("doublewrite.ring_pages", bd.ring_pages);
}

// One client: a thread of its own running transactions through a public session, as an
// embedding application does; latencies go to the tally in batches.
struct client {
  std::uint64_t transactions = 0;
  std::string error;
};

void run_client(database& db, const tpcb::layout& shape, const bench_options& options,
                std::uint32_t index, ack_log* acks, commit_tally& tally,
                const std::atomic<bool>& stop, std::atomic<std::uint32_t>& clients_running,
                client& out) {
  std::mt19937_64 random(options.seed * 1000003 + index);
  latency_distribution unreported;
  auto last_report = steady_clock::now();
  auto report = [&] {
    if (unreported.count() == 0)
      return;
    tally.add(unreported);
    unreported = latency_distribution{};
    last_report = steady_clock::now();
  };
  try {
    session s = db.open_session();
    std::uint64_t quota = options.transactions_per_client;
    while (!stop.load(std::memory_order_relaxed) && (quota == 0 || out.transactions < quota)) {
      auto started = steady_clock::now();
      tpcb::transaction_input input = tpcb::random_input(shape, random);
      tpcb::committed_transaction done;
      for (;;) { // a conflict applied nothing: run the same transaction again
        try {
          done = tpcb::run_transaction(s, shape, input);
          break;
        } catch (const conflict_error&) {
        }
      }
      auto now = steady_clock::now();
      unreported.record(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(now - started).count()));
      ++out.transactions;
      if (acks != nullptr)
        acks->append(done.xid, done.digest); // only after the commit was acknowledged
      if (now - last_report >= report_interval)
        report();
    }
  } catch (const std::exception& error) {
    out.error = error.what();
  }
  report();
  --clients_running;
}

} // namespace

bench_result run_bench(database& db, const tpcb::layout& shape, const bench_options& options,
                       std::FILE* progress) {
  std::unique_ptr<ack_log> acks;
  if (!options.ack_log_path.empty())
    acks = std::make_unique<ack_log>(options.ack_log_path, db.generation());
  statistics before = db.stats();
  commit_tally tally;
  std::vector<client> clients(options.clients);
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  std::atomic<std::uint32_t> clients_running{options.clients};
  auto started = steady_clock::now();
  for (std::uint32_t i = 0; i < options.clients; ++i)
    threads.emplace_back(run_client, std::ref(db), std::cref(shape), std::cref(options), i,
                         acks.get(), std::ref(tally), std::cref(stop), std::ref(clients_running),
                         std::ref(clients[i]));
  if (options.transactions_per_client == 0) {
    wait_and_report(db, tally, clients_running, options, progress, started);
    stop.store(true);
  }
  for (std::thread& thread : threads)
    thread.join();
  bench_result result;
  for (const client& c : clients)
    if (!c.error.empty())
      result.errors.push_back(c.error);
  double seconds = std::chrono::duration<double>(steady_clock::now() - started).count();
  latency_distribution latency = tally.snapshot();
  fill_report(result.report, db, options, seconds, latency, before, db.stats());
  result.transactions = latency.count();
  return result;
}

} // namespace tidemark::workload
