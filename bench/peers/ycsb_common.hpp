// The shared part of the durable YCSB drivers for bench/ycsb.sh (not a test): records,
// keys and values, the request distributions, the workloads' operation mix, the timed run
// on T threads, latency histograms, the check that no acknowledged write is lost, and the
// JSON result. Header-only (the C++ library only), so each driver builds with one g++
// command; a driver supplies a `store` with one `worker` per thread (its session, handle
// or connection) and nothing else.
//
// Records, as YCSB's defaults: record i (0 <= i < N) has the key "user" followed by the
// FNV-1a 64-bit hash of i in decimal (YCSB's insertorder=hashed: inserted in i order, so
// the keys arrive in random order), and one value of 10 fields x 100 bytes = 1 000 bytes.
// A value starts with a 32-byte header, "i=<record> w=<writer> s=<sequence>" padded with
// spaces, and the rest is printable bytes from a generator seeded by the write (about as
// incompressible as YCSB's random strings); every read checks that the header names the
// record it asked for.
//
// Requests: zipfian with constant 0.99 over the N records, scrambled by hashing (YCSB's
// ScrambledZipfianGenerator, here with the zeta of N items computed at start instead of
// YCSB's fixed 10^10 items), or uniform. Workloads (YCSB's core workloads):
//   A 50 % read / 50 % update; B 95 / 5; C 100 % read; E 95 % scan (1..100 records from a
//   zipfian key) / 5 % insert; F 50 % read / 50 % read-modify-write. Each operation is one
//   transaction; a transaction the store refuses for a conflict is retried (counted).
//
// No acknowledged write lost (checked by `verify` after a run or after kill -9): every
// update and insert writes (writer, sequence) into its value's header, and each worker
// appends, when its write is acknowledged, a 32-byte record (record, sequence, start and
// acknowledgement times) to its own log file, ACKS/acks-<writer>. A write that started after
// another write of the same record was acknowledged commits after it; so the value found
// for a record must not belong to a write that was acknowledged before some other
// acknowledged write of that record started. The load's values count as acknowledged when
// the load ended. Sound for any store: it never blames a correct one; it catches every
// lost write that had a successor start after it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace ycsb {

using clock_type = std::chrono::steady_clock;

constexpr std::size_t value_bytes = 1000, header_bytes = 32;
constexpr std::uint32_t load_writer = 0xffffffffu; // the writer id of the load's values

[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(1); // also from a worker thread, with the others still running
}

inline std::uint64_t fnv1a(std::uint64_t v) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < 8; ++i, v >>= 8) {
    h ^= v & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}

inline std::string key_of(std::uint64_t record) { return "user" + std::to_string(fnv1a(record)); }

/// The value written by `writer`'s write number `sequence` of `record`.
inline std::string value_of(std::uint64_t record, std::uint32_t writer, std::uint64_t sequence) {
  char header[header_bytes + 1];
  int n = std::snprintf(header, sizeof header, "i=%llu w=%u s=%llu",
                        static_cast<unsigned long long>(record), writer,
                        static_cast<unsigned long long>(sequence));
  std::string v(header, static_cast<std::size_t>(std::min<int>(n, header_bytes)));
  v.resize(header_bytes, ' ');
  v.reserve(value_bytes);
  // The rest: printable bytes from a generator seeded by the write, as YCSB's values are
  // random strings: no store gains from compressing them (a repeating fill let RocksDB's
  // default Snappy shrink its data several times where the others store it whole).
  std::uint64_t state = fnv1a(record) ^ (std::uint64_t(writer) << 32) ^
                        (sequence * 0x9E3779B97F4A7C15ull);
  for (std::size_t i = header_bytes; i < value_bytes; ++i) {
    state ^= state << 13; // xorshift64
    state ^= state >> 7;
    state ^= state << 17;
    v.push_back(char(' ' + 1 + (state >> 33) % 94)); // '!' .. '~'
  }
  return v;
}

struct value_header {
  std::uint64_t record = 0, sequence = 0;
  std::uint32_t writer = 0;
};

/// Parses a value's header; nothing if it has none.
inline std::optional<value_header> parse_value(const std::string& value) {
  if (value.size() != value_bytes)
    return std::nullopt;
  const char* at = value.data();
  const char* end = value.data() + header_bytes;
  // "i=<record> w=<writer> s=<sequence>" (from_chars: no locale, no copy, as cheap as a
  // read of the value should stay for the stores being measured)
  auto field = [&](const char* name, auto* out) {
    std::size_t length = std::strlen(name);
    if (std::size_t(end - at) < length || std::memcmp(at, name, length) != 0)
      return false;
    auto [next, error] = std::from_chars(at + length, end, *out);
    at = next;
    return error == std::errc();
  };
  value_header h;
  if (!field("i=", &h.record) || !field(" w=", &h.writer) || !field(" s=", &h.sequence))
    return std::nullopt;
  return h;
}

/// Checks a value read under `key`: its header must name a record whose key is `key`.
inline value_header check_value(const std::string& key, const std::string& value) {
  std::optional<value_header> h = parse_value(value);
  if (!h || key_of(h->record) != key)
    die("key " + key + ": wrong value, " + std::to_string(value.size()) + " bytes starting \"" +
        value.substr(0, header_bytes) + "\"");
  return *h;
}

/// YCSB's zipfian generator (Gray et al., "Quickly generating billion-record synthetic
/// databases"), over items 0..n-1 with item 0 the most popular.
class zipfian {
public:
  explicit zipfian(std::uint64_t n, double theta = 0.99) : n_(n), theta_(theta) {
    for (std::uint64_t i = 1; i <= n; ++i)
      zetan_ += 1.0 / std::pow(double(i), theta);
    double zeta2 = 1.0 + 1.0 / std::pow(2.0, theta);
    alpha_ = 1.0 / (1.0 - theta);
    eta_ = (1.0 - std::pow(2.0 / double(n), 1.0 - theta)) / (1.0 - zeta2 / zetan_);
  }
  std::uint64_t next(double u) const {
    double uz = u * zetan_;
    if (uz < 1.0)
      return 0;
    if (uz < 1.0 + std::pow(0.5, theta_))
      return 1;
    auto v = std::uint64_t(double(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_));
    return std::min(v, n_ - 1);
  }

private:
  std::uint64_t n_;
  double theta_, zetan_ = 0, alpha_ = 0, eta_ = 0;
};

enum class op { read, update, insert, scan, read_modify_write };

struct workload {
  char name = 'A';
  double read = 0, update = 0, insert = 0, scan = 0, rmw = 0; // proportions, summing to 1
};

inline workload workload_named(char name) {
  switch (name) {
    case 'A':
      return {'A', 0.5, 0.5, 0, 0, 0};
    case 'B':
      return {'B', 0.95, 0.05, 0, 0, 0};
    case 'C':
      return {'C', 1.0, 0, 0, 0, 0};
    case 'E':
      return {'E', 0, 0, 0.05, 0.95, 0};
    case 'F':
      return {'F', 0.5, 0, 0, 0, 0.5};
    default:
      die(std::string("no workload ") + name + " (A, B, C, E or F)");
  }
}

/// Latencies in microseconds: exact below 1 024 µs, then 128 buckets to each power of two
/// (within 0.8 %); a percentile is its bucket's upper end, never above the true maximum.
class histogram {
public:
  void add(std::uint64_t us) {
    ++counts_[bucket_of(us)];
    max_ = std::max(max_, us);
    ++total_;
  }
  void merge(const histogram& o) {
    for (std::size_t i = 0; i < counts_.size(); ++i)
      counts_[i] += o.counts_[i];
    max_ = std::max(max_, o.max_);
    total_ += o.total_;
  }
  std::uint64_t total() const { return total_; }
  std::uint64_t max() const { return max_; }
  std::uint64_t percentile(double p) const {
    if (total_ == 0)
      return 0;
    auto rank = std::uint64_t(std::ceil(p * double(total_)));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i)
      if ((seen += counts_[i]) >= rank)
        return std::min(upper_end(i), max_);
    return max_;
  }

private:
  static constexpr std::uint64_t exact = 1024, steps = 128; // steps per power of two
  static int log2_of(std::uint64_t v) { return 63 - __builtin_clzll(v); }
  static std::size_t bucket_of(std::uint64_t us) {
    if (us < exact)
      return std::size_t(us);
    int e = log2_of(us);
    return std::size_t(exact + std::uint64_t(e - 10) * steps + ((us >> (e - 7)) & (steps - 1)));
  }
  static std::uint64_t upper_end(std::size_t bucket) {
    if (bucket < exact)
      return bucket;
    std::uint64_t k = bucket - exact, e = 10 + k / steps, step = k % steps;
    return ((steps + step + 1) << (e - 7)) - 1;
  }
  std::vector<std::uint64_t> counts_ = std::vector<std::uint64_t>(exact + 54 * steps);
  std::uint64_t max_ = 0, total_ = 0;
};

/// One acknowledged write, as its worker logs it.
struct ack_record {
  std::uint64_t record, sequence, started_ns, acked_ns; // writer: the log file's
};

/// A writer id: the workload's letter and the thread, so that the workloads run on one
/// store keep apart logs (a workload runs once per store and log directory).
inline std::uint32_t writer_of(char workload, int thread) {
  return std::uint32_t(workload) * 1000 + std::uint32_t(thread);
}

/// Appends a worker's acknowledged writes to DIR/acks-<writer> with write(2), so a
/// kill -9 of the driver keeps every record logged before it (no fsync: the check is for
/// process crashes; the store's own files are what a power loss would test).
class ack_log {
public:
  ack_log(const std::string& dir, std::uint32_t writer) {
    std::string path = dir + "/acks-" + std::to_string(writer);
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0644);
    if (fd_ < 0)
      die("cannot create " + path +
          (errno == EEXIST ? ": this workload ran with these logs before" : ""));
  }
  ~ack_log() { ::close(fd_); }
  ack_log(const ack_log&) = delete;
  ack_log& operator=(const ack_log&) = delete;
  void add(const ack_record& r) {
    if (::write(fd_, &r, sizeof r) != ssize_t(sizeof r))
      die("cannot append to the acknowledgement log");
  }

private:
  int fd_ = -1;
};

inline std::uint64_t now_ns() {
  return std::uint64_t(
    std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
      .count());
}

/// A transaction the store refused because of a concurrent one; the runner retries it.
struct conflict {};

/// One thread's handle on the store (a session, a connection). Each call is one
/// transaction, durable when it returns; a refusal for a conflict throws ycsb::conflict,
/// any other failure dies.
class worker {
public:
  virtual ~worker() = default;
  virtual std::optional<std::string> read(const std::string& key) = 0;
  virtual void update(const std::string& key, const std::string& value) = 0;
  virtual void insert(const std::string& key, const std::string& value) = 0;
  /// Visits up to `count` entries from `start` on, in key order; returns how many.
  virtual std::size_t
  scan(const std::string& start, std::size_t count,
       const std::function<void(const std::string&, const std::string&)>& visit) = 0;
  /// Reads `key` and writes change(old value) in one transaction.
  virtual void read_modify_write(const std::string& key,
                                 const std::function<std::string(const std::string&)>& change) = 0;
  /// Inserts every pair in one transaction (the load).
  virtual void insert_batch(const std::vector<std::pair<std::string, std::string>>& batch) = 0;
};

struct options {
  std::string command; // load | run | verify
  std::string dir;     // the store's directory
  std::string acks;    // the directory of the acknowledgement logs (load, run, verify)
  std::uint64_t records = 1000000;
  char workload = 'A';
  bool uniform = false; // uniform requests instead of zipfian
  int threads = 8;
  double seconds = 30;
  double warmup = 0; // run: seconds of unmeasured reads first (warm_up)
  std::uint64_t batch = 1000;           // records per load transaction
  std::size_t cache_bytes = 128u << 20; // the store's page or block cache
  std::vector<std::string> sets;        // load: --set KEY=VALUE, the store's own settings
  std::string json;                     // also write the JSON result here
};

[[noreturn]] inline void usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s load   -D DIR --acks DIR [-n RECORDS] [-t THREADS] [--batch 1000] "
               "[--cache BYTES] [--set KEY=VALUE]... [--json FILE]\n"
               "       %s run    -D DIR --acks DIR -w A|B|C|E|F [-n RECORDS] [-t THREADS] "
               "[-T SECONDS] [--warmup SECONDS] [--uniform] [--cache BYTES] [--json FILE]\n"
               "       %s verify -D DIR --acks DIR [-n RECORDS] [-t THREADS] [--cache BYTES]\n",
               prog, prog, prog);
  std::exit(2);
}

inline options parse(int argc, char** argv) {
  options o;
  if (argc < 2)
    usage(argv[0]);
  o.command = argv[1];
  if (o.command != "load" && o.command != "run" && o.command != "verify")
    usage(argv[0]);
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(argv[0]);
      return argv[++i];
    };
    if (a == "-D")
      o.dir = value();
    else if (a == "--acks")
      o.acks = value();
    else if (a == "-n")
      o.records = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "-w")
      o.workload = value().c_str()[0];
    else if (a == "--uniform")
      o.uniform = true;
    else if (a == "-t")
      o.threads = std::atoi(value().c_str());
    else if (a == "-T")
      o.seconds = std::atof(value().c_str());
    else if (a == "--warmup")
      o.warmup = std::atof(value().c_str());
    else if (a == "--batch")
      o.batch = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--cache")
      o.cache_bytes = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--json")
      o.json = value();
    else if (a == "--set")
      o.sets.push_back(value());
    else
      usage(argv[0]);
  }
  if (o.dir.empty() || o.acks.empty() || o.records < 1 || o.threads < 1 || o.seconds <= 0 ||
      !(o.warmup >= 0) || o.batch < 1)
    usage(argv[0]);
  workload_named(o.workload); // dies on a bad name
  return o;
}

/// What one thread measured.
struct thread_result {
  std::uint64_t ops = 0, retries = 0, scanned = 0;
  histogram reads, writes;
};

struct run_result {
  std::uint64_t ops = 0, retries = 0, scanned = 0;
  double seconds = 0;
  histogram reads, writes;
  void add(const thread_result& t) {
    ops += t.ops;
    retries += t.retries;
    scanned += t.scanned;
    reads.merge(t.reads);
    writes.merge(t.writes);
  }
};

/// Calls `body` until it does not throw ycsb::conflict; counts the retries.
template <class Body>
void retrying(std::uint64_t* retries, Body body) {
  for (;;) {
    try {
      body();
      return;
    } catch (const conflict&) {
      ++*retries;
    }
  }
}

/// Starts `threads` threads, each with its worker, and runs `body(t, worker, stop)` in
/// each once all are ready; stops them after `seconds` (0: runs until every body returns).
/// Returns the measured seconds.
template <class MakeWorker, class Body>
double on_threads(int threads, double seconds, MakeWorker make_worker, Body body) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::unique_ptr<worker> w = make_worker();
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire))
        std::this_thread::yield();
      body(t, *w, stop);
    });
  while (ready.load() < threads)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto start = clock_type::now();
  go.store(true, std::memory_order_release);
  if (seconds > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop.store(true);
  }
  for (auto& t : pool)
    t.join();
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

inline std::string load_end_path(const options& o) { return o.acks + "/load-end"; }

/// Loads records 0..N-1 in record order (keys in hashed order), `batch` a transaction;
/// thread t loads batches t, t + T, ... Each value is the load's (writer load_writer,
/// sequence 0); the load's end time goes to ACKS/load-end.
template <class MakeWorker>
run_result load(const options& o, MakeWorker make_worker) {
  std::vector<thread_result> results(o.threads);
  std::uint64_t batches = (o.records + o.batch - 1) / o.batch;
  run_result r;
  r.seconds = on_threads(o.threads, 0, make_worker, [&](int t, worker& w, std::atomic<bool>&) {
    std::vector<std::pair<std::string, std::string>> batch;
    for (std::uint64_t b = std::uint64_t(t); b < batches; b += std::uint64_t(o.threads)) {
      batch.clear();
      for (std::uint64_t i = b * o.batch; i < std::min(o.records, (b + 1) * o.batch); ++i)
        batch.emplace_back(key_of(i), value_of(i, load_writer, 0));
      auto started = clock_type::now();
      retrying(&results[t].retries, [&] { w.insert_batch(batch); });
      results[t].writes.add(std::uint64_t(
        std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - started)
          .count()));
      results[t].ops += batch.size();
    }
  });
  for (const thread_result& t : results)
    r.add(t);
  std::FILE* f = std::fopen(load_end_path(o).c_str(), "w");
  if (f == nullptr || std::fprintf(f, "%llu\n", static_cast<unsigned long long>(now_ns())) < 0 ||
      std::fclose(f) != 0)
    die("cannot write " + load_end_path(o));
  return r;
}

inline op choose(const workload& w, double u) {
  if ((u -= w.read) < 0)
    return op::read;
  if ((u -= w.update) < 0)
    return op::update;
  if ((u -= w.insert) < 0)
    return op::insert;
  if ((u -= w.scan) < 0)
    return op::scan;
  return op::read_modify_write;
}

inline std::uint64_t micros_since(clock_type::time_point start) {
  return std::uint64_t(
    std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - start).count());
}

/// Picks existing records by the request distribution: zipfian over popularity ranks,
/// scrambled by hashing, or uniform.
struct record_picker {
  const options& o;
  const zipfian& popularity;
  std::mt19937_64 random;
  std::uniform_real_distribution<double> unit{0.0, 1.0};

  record_picker(const options& opts, const zipfian& z, std::uint64_t seed)
    : o(opts), popularity(z), random(seed) {}
  std::uint64_t next() {
    return o.uniform ? random() % o.records : fnv1a(popularity.next(unit(random))) % o.records;
  }
};

/// Before the measured phase, `warmup` seconds of reads of records picked as the workload
/// picks them, measured by no one: each store's cache (a buffer pool, a block cache, the
/// pages LMDB maps) starts the measured phase holding what the workload reads most, the
/// same for every store. Reads only, so the device bytes and syncs of the phase are the
/// measured operations' (and the store's opening and closing) alone.
template <class MakeWorker>
void warm_up(const options& o, const zipfian& popularity, MakeWorker make_worker) {
  if (o.warmup <= 0)
    return;
  on_threads(o.threads, o.warmup, make_worker, [&](int t, worker& w, std::atomic<bool>& stop) {
    record_picker picker(o, popularity, 0x2545f4914f6cdd1dull * std::uint64_t(t + 1));
    std::uint64_t retries = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const std::string key = key_of(picker.next());
      std::optional<std::string> v;
      retrying(&retries, [&] { v = w.read(key); });
      if (!v)
        die("warm-up: key " + key + " is missing");
    }
  });
}

/// The measured phase (after warm_up): each thread runs operations of the workload's mix on
/// records chosen by the request distribution (inserts take new records N, N+1, ...) until
/// the time is up, and logs each acknowledged write to ACKS/acks-<thread>.
template <class MakeWorker>
run_result run(const options& o, MakeWorker make_worker) {
  const workload mix = workload_named(o.workload);
  const zipfian popularity(o.records);
  warm_up(o, popularity, make_worker);
  std::atomic<std::uint64_t> next_insert{o.records};
  std::vector<thread_result> results(o.threads);
  auto body = [&](int t, worker& w, std::atomic<bool>& stop) {
    thread_result& res = results[t];
    const std::uint32_t writer = writer_of(o.workload, t);
    ack_log acks(o.acks, writer);
    record_picker picker(o, popularity, 0x9e3779b97f4a7c15ull * std::uint64_t(t + 1));
    std::mt19937_64& random = picker.random;
    std::uint64_t sequence = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const op kind = choose(mix, picker.unit(random));
      const std::uint64_t record = kind == op::insert ? next_insert.fetch_add(1) : picker.next();
      const std::string key = key_of(record);
      const auto started = clock_type::now();
      const std::uint64_t started_ns = now_ns();
      bool wrote = true;
      if (kind == op::read) {
        wrote = false;
        std::optional<std::string> v;
        retrying(&res.retries, [&] { v = w.read(key); });
        if (!v)
          die("key " + key + " (record " + std::to_string(record) + ") is missing");
        check_value(key, *v);
      } else if (kind == op::update) {
        std::string v = value_of(record, writer, sequence);
        retrying(&res.retries, [&] { w.update(key, v); });
      } else if (kind == op::insert) {
        std::string v = value_of(record, writer, sequence);
        retrying(&res.retries, [&] { w.insert(key, v); });
      } else if (kind == op::scan) {
        wrote = false;
        std::size_t count = 1 + random() % 100;
        retrying(&res.retries, [&] {
          res.scanned += w.scan(key, count, [](const std::string& k, const std::string& v) {
            check_value(k, v);
          });
        });
      } else {
        retrying(&res.retries, [&] {
          w.read_modify_write(key, [&](const std::string& old) {
            check_value(key, old);
            return value_of(record, writer, sequence);
          });
        });
      }
      (wrote ? res.writes : res.reads).add(micros_since(started));
      if (wrote)
        acks.add({record, sequence++, started_ns, now_ns()});
      ++res.ops;
    }
  };
  run_result r;
  r.seconds = on_threads(o.threads, o.seconds, make_worker, body);
  for (const thread_result& t : results)
    r.add(t);
  return r;
}

/// Every acknowledged write logged in ACKS, by writer and sequence, and per record the
/// latest start of an acknowledged write.
struct acknowledged {
  std::uint64_t load_end_ns = 0;
  std::map<std::uint32_t, std::vector<std::uint64_t>> acked_ns;  // writer -> [sequence]
  std::unordered_map<std::uint64_t, std::uint64_t> latest_start; // record -> ns
  std::uint64_t writes = 0, max_record = 0;

  /// When the write that stored `h` was acknowledged (never, for one still in flight).
  std::uint64_t acked_at(const value_header& h) const {
    if (h.writer == load_writer)
      return load_end_ns;
    auto it = acked_ns.find(h.writer);
    return it != acked_ns.end() && h.sequence < it->second.size() ? it->second[h.sequence]
                                                                  : UINT64_MAX;
  }
  std::uint64_t latest_start_of(std::uint64_t record) const {
    auto it = latest_start.find(record);
    return it != latest_start.end() ? it->second : 0;
  }
};

inline acknowledged read_acks(const options& o) {
  acknowledged a;
  std::FILE* f = std::fopen(load_end_path(o).c_str(), "r");
  unsigned long long end = 0;
  if (f == nullptr || std::fscanf(f, "%llu", &end) != 1)
    die("no load end in " + load_end_path(o) + " (was the load run with this --acks?)");
  std::fclose(f);
  a.load_end_ns = end;
  a.max_record = o.records - 1;
  DIR* logs = ::opendir(o.acks.c_str());
  if (logs == nullptr)
    die("cannot read " + o.acks);
  while (dirent* entry = ::readdir(logs)) {
    unsigned writer = 0;
    if (std::sscanf(entry->d_name, "acks-%u", &writer) != 1)
      continue;
    std::FILE* log = std::fopen((o.acks + "/" + entry->d_name).c_str(), "rb");
    if (log == nullptr)
      die(std::string("cannot read ") + entry->d_name);
    std::vector<std::uint64_t>& acked = a.acked_ns[writer];
    ack_record r;
    while (std::fread(&r, sizeof r, 1, log) == 1) {
      if (r.sequence != acked.size())
        die(std::string(entry->d_name) + " skips a sequence number");
      acked.push_back(r.acked_ns);
      std::uint64_t& latest = a.latest_start[r.record];
      latest = std::max(latest, r.started_ns);
      a.max_record = std::max(a.max_record, r.record);
      ++a.writes;
    }
    std::fclose(log); // a torn last record (killed mid-write) is left out, as never acked
  }
  ::closedir(logs);
  return a;
}

/// Reads every loaded record and every record an acknowledged write inserted, and checks
/// that no acknowledged write is lost (see the file's comment). Prints one JSON line and
/// returns the number of records found wrong.
template <class MakeWorker>
std::uint64_t verify(const options& o, MakeWorker make_worker) {
  const acknowledged acks = read_acks(o);
  std::atomic<std::uint64_t> wrong{0}, checked{0};
  const std::uint64_t records = acks.max_record + 1;
  on_threads(o.threads, 0, make_worker, [&](int t, worker& w, std::atomic<bool>&) {
    for (std::uint64_t record = std::uint64_t(t); record < records; record += o.threads) {
      bool loaded = record < o.records;
      std::uint64_t latest = acks.latest_start_of(record);
      if (!loaded && latest == 0)
        continue; // an insert never acknowledged (or never made)
      std::string key = key_of(record);
      std::optional<std::string> v;
      std::uint64_t retries = 0;
      retrying(&retries, [&] { v = w.read(key); });
      std::string problem;
      if (!v) {
        problem = "missing";
      } else {
        value_header h = check_value(key, *v);
        if (latest > acks.acked_at(h))
          problem = "holds write w=" + std::to_string(h.writer) +
                    " s=" + std::to_string(h.sequence) + ", older than an acknowledged write";
      }
      if (!problem.empty() && wrong.fetch_add(1) < 10)
        std::fprintf(stderr, "lost: record %llu (%s) %s\n", static_cast<unsigned long long>(record),
                     key.c_str(), problem.c_str());
      checked.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::printf("{\"verified_records\": %llu, \"acknowledged_writes\": %llu, \"lost\": %llu}\n",
              static_cast<unsigned long long>(checked.load()),
              static_cast<unsigned long long>(acks.writes),
              static_cast<unsigned long long>(wrong.load()));
  return wrong.load();
}

inline std::string latency_json(const histogram& h) {
  char out[200];
  std::snprintf(out, sizeof out,
                "{\"count\": %llu, \"p50_us\": %llu, \"p99_us\": %llu, \"p999_us\": %llu, "
                "\"max_us\": %llu}",
                static_cast<unsigned long long>(h.total()),
                static_cast<unsigned long long>(h.percentile(0.50)),
                static_cast<unsigned long long>(h.percentile(0.99)),
                static_cast<unsigned long long>(h.percentile(0.999)),
                static_cast<unsigned long long>(h.max()));
  return out;
}

/// Prints the phase's JSON line (and writes it to o.json when given). `config` is the
/// store's configuration string, as the report states it.
inline void emit(const char* system, const options& o, const run_result& r,
                 const std::string& config) {
  char head[400];
  std::snprintf(head, sizeof head,
                "{\"system\": \"%s\", \"phase\": \"%s\", \"records\": %llu, \"threads\": %d, "
                "\"seconds\": %.3f, \"warmup_seconds\": %.3f, \"ops\": %llu, "
                "\"ops_per_s\": %.1f, \"retries\": %llu, \"scanned\": %llu, ",
                system, o.command == "load" ? "load" : std::string(1, o.workload).c_str(),
                static_cast<unsigned long long>(o.records), o.threads, r.seconds,
                o.command == "run" ? o.warmup : 0.0,
                static_cast<unsigned long long>(r.ops), double(r.ops) / r.seconds,
                static_cast<unsigned long long>(r.retries),
                static_cast<unsigned long long>(r.scanned));
  std::string config_json;
  for (char c : config)
    config_json += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  std::string line = head + std::string("\"reads\": ") + latency_json(r.reads) +
                     ", \"writes\": " + latency_json(r.writes) + ", \"config\": \"" + config_json +
                     "\"}";
  std::printf("%s\n", line.c_str());
  if (!o.json.empty()) {
    std::FILE* f = std::fopen(o.json.c_str(), "w");
    if (f == nullptr || std::fprintf(f, "%s\n", line.c_str()) < 0 || std::fclose(f) != 0)
      die("cannot write " + o.json);
  }
}

/// What a driver's open_store returns: a function that makes a `Worker` on the store for
/// each thread (and keeps the store alive), and the store's configuration as stated.
using opened_store = std::pair<std::function<std::unique_ptr<worker>()>, std::string>;

template <class Worker, class Store>
opened_store workers_of(std::shared_ptr<Store> store, std::string config) {
  return {[store]() -> std::unique_ptr<worker> { return std::make_unique<Worker>(*store); },
          std::move(config)};
}

/// The whole of a driver's main: parses the command line, opens the store through
/// `open_store(options)` (which returns a function making one worker per thread, with the
/// store kept alive by it), and runs the command.
template <class OpenStore>
int main_of(const char* system, int argc, char** argv, OpenStore open_store) {
  options o = parse(argc, argv);
  auto [make_worker, config] = open_store(o);
  if (o.command == "verify")
    return verify(o, make_worker) == 0 ? 0 : 1;
  run_result r = o.command == "load" ? load(o, make_worker) : run(o, make_worker);
  emit(system, o, r, config);
  return 0;
}

} // namespace ycsb
