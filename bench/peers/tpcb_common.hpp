// Shared pieces of the peer TPC-B-like drivers (sqlite_tpcb.cpp, rocksdb_tpcb.cpp):
// command-line flags, pgbench's random choice of branch / teller / account / delta, the
// timed client loop, latency percentiles and the one-line JSON result. Header-only so each
// driver builds with a single `g++ -O2 -std=c++17 FILE.cpp -l...` command.
//
// The transaction is pgbench's tpcb-like script on pgbench's schema (ids 1-based):
//   UPDATE accounts SET abalance = abalance + delta WHERE aid = :aid;
//   SELECT abalance FROM accounts WHERE aid = :aid;
//   UPDATE tellers  SET tbalance = tbalance + delta WHERE tid = :tid;
//   UPDATE branches SET bbalance = bbalance + delta WHERE bid = :bid;
//   INSERT INTO history (tid, bid, aid, delta, mtime) VALUES (...);
// with bid, tid, aid uniform over scale, 10*scale, 100000*scale and delta in [-5000, 5000].
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tpcb {

using clock_type = std::chrono::steady_clock;

struct options {
  std::string command; // init | run | check
  std::string dir;     // data directory
  int scale = 1;
  int clients = 1;
  double seconds = 10;
  int cache_mb = 128;
  std::string json; // also write the JSON line here
};

[[noreturn]] inline void usage(const char* prog, const char* extra) {
  std::fprintf(stderr,
               "usage: %s init  -D DIR [-s SCALE]\n"
               "       %s run   -D DIR [-c CLIENTS] [-T SECONDS] [--cache-mb MB] [--json FILE]\n"
               "       %s check -D DIR [--json FILE]\n%s",
               prog, prog, prog, extra);
  std::exit(2);
}

inline options parse(int argc, char** argv, const char* extra_usage) {
  options o;
  if (argc < 2)
    usage(argv[0], extra_usage);
  o.command = argv[1];
  if (o.command != "init" && o.command != "run" && o.command != "check")
    usage(argv[0], extra_usage);
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(argv[0], extra_usage);
      return argv[++i];
    };
    if (a == "-D")
      o.dir = value();
    else if (a == "-s")
      o.scale = std::atoi(value().c_str());
    else if (a == "-c")
      o.clients = std::atoi(value().c_str());
    else if (a == "-T")
      o.seconds = std::atof(value().c_str());
    else if (a == "--cache-mb")
      o.cache_mb = std::atoi(value().c_str());
    else if (a == "--json")
      o.json = value();
    else
      usage(argv[0], extra_usage);
  }
  if (o.dir.empty() || o.scale < 1 || o.clients < 1 || o.seconds <= 0 || o.cache_mb < 1)
    usage(argv[0], extra_usage);
  return o;
}

constexpr std::int64_t accounts_per_branch = 100000;
constexpr std::int64_t tellers_per_branch = 10;

struct input {
  std::int64_t aid, tid, bid, delta;
};

/// pgbench's choice (1-based ids).
inline input random_input(std::mt19937_64& rng, int scale) {
  input in;
  in.bid = 1 + std::int64_t(rng() % std::uint64_t(scale));
  in.tid = 1 + std::int64_t(rng() % std::uint64_t(tellers_per_branch * scale));
  in.aid = 1 + std::int64_t(rng() % std::uint64_t(accounts_per_branch * scale));
  in.delta = std::int64_t(rng() % 10001) - 5000;
  return in;
}

inline std::int64_t now_epoch_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

struct run_result {
  std::uint64_t transactions = 0;
  std::uint64_t retries = 0;
  double duration_s = 0;
  double avg_ms = 0, p50_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;
};

/// Runs `clients` threads for `seconds`; each calls `txn(client, rng)` in a loop, which runs
/// one transaction to its durable commit and returns the number of retries it needed.
/// Latency of each transaction is measured around the call (retries included).
inline run_result run_clients(int clients, double seconds,
                              const std::function<void(int)>& client_setup,
                              const std::function<unsigned(int, std::mt19937_64&)>& txn) {
  std::vector<std::vector<float>> lat(clients);
  std::vector<std::uint64_t> retries(clients, 0);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  clock_type::time_point start, deadline;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      client_setup(c);
      std::mt19937_64 rng(0x9e3779b97f4a7c15ull * std::uint64_t(c + 1) ^
                          std::uint64_t(now_epoch_us()));
      lat[c].reserve(1 << 16);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire))
        std::this_thread::yield();
      for (;;) {
        auto t0 = clock_type::now();
        if (t0 >= deadline)
          break;
        retries[c] += txn(c, rng);
        auto t1 = clock_type::now();
        lat[c].push_back(std::chrono::duration<float, std::milli>(t1 - t0).count());
      }
    });
  while (ready.load() < clients)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  start = clock_type::now();
  deadline = start + std::chrono::duration_cast<clock_type::duration>(
                       std::chrono::duration<double>(seconds));
  go.store(true, std::memory_order_release);
  for (auto& t : threads)
    t.join();
  auto end = clock_type::now();

  run_result r;
  std::vector<float> all;
  for (int c = 0; c < clients; ++c) {
    all.insert(all.end(), lat[c].begin(), lat[c].end());
    r.retries += retries[c];
  }
  r.transactions = all.size();
  r.duration_s = std::chrono::duration<double>(end - start).count();
  if (!all.empty()) {
    std::sort(all.begin(), all.end());
    double sum = 0;
    for (float v : all)
      sum += v;
    auto pct = [&](double p) { // nearest rank
      std::size_t k = std::size_t(std::ceil(p * double(all.size())));
      return double(all[std::min(all.size() - 1, k == 0 ? 0 : k - 1)]);
    };
    r.avg_ms = sum / double(all.size());
    r.p50_ms = pct(0.50);
    r.p99_ms = pct(0.99);
    r.p999_ms = pct(0.999);
    r.max_ms = all.back();
  }
  return r;
}

/// Tiny JSON object writer (numbers, strings, booleans, nested raw objects).
class json_line {
public:
  json_line& num(const char* k, double v) { return raw(k, fmt("%.6g", v)); }
  json_line& u64(const char* k, std::uint64_t v) { return raw(k, fmt("%" PRIu64, v)); }
  json_line& i64(const char* k, std::int64_t v) { return raw(k, fmt("%" PRId64, v)); }
  json_line& boolean(const char* k, bool v) { return raw(k, v ? "true" : "false"); }
  json_line& str(const char* k, const std::string& v) {
    std::string q = "\"";
    for (char ch : v) {
      if (ch == '"' || ch == '\\')
        q += '\\';
      q += ch;
    }
    return raw(k, q + "\"");
  }
  json_line& raw(const char* k, const std::string& v) {
    body_ += (body_.empty() ? "" : ", ") + std::string("\"") + k + "\": " + v;
    return *this;
  }
  std::string text() const { return "{" + body_ + "}"; }

private:
  __attribute__((format(printf, 1, 2))) static std::string fmt(const char* f, ...) {
    char buf[64];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
  }
  std::string body_;
};

inline std::string latency_json(const run_result& r) {
  return json_line()
    .num("avg", r.avg_ms)
    .num("p50", r.p50_ms)
    .num("p99", r.p99_ms)
    .num("p999", r.p999_ms)
    .num("max", r.max_ms)
    .text();
}

/// Prints the line on stdout and, when asked, writes it to `path`.
inline void emit(const std::string& line, const std::string& path) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (!path.empty()) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
      std::perror(path.c_str());
      std::exit(1);
    }
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
  }
}

[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  std::exit(1);
}

/// The invariant: the sums of account, teller and branch balances and of history deltas
/// must be equal after any run.
struct balance_sums {
  std::int64_t accounts = 0, tellers = 0, branches = 0, history = 0, history_rows = 0;
  bool equal() const { return accounts == tellers && tellers == branches && branches == history; }
  std::string json() const {
    return json_line()
      .i64("accounts", accounts)
      .i64("tellers", tellers)
      .i64("branches", branches)
      .i64("history", history)
      .i64("history_rows", history_rows)
      .text();
  }
};

} // namespace tpcb
