// Shared pieces of the point-read drivers for bench/point_reads.sh (not a test):
// tidemark_point_reads.cpp and lmdb_point_reads.cpp. The keys and values, the command
// line, the timed loop of gets on T threads and the one-line JSON result. Header-only (the
// C++ library only) so each driver builds with a single g++ command.
//
// Key i (0 <= i < N): i as 16 zero-padded decimal digits ("0000000000000042"), so keys in
// ascending i are in byte order. Its value: the key, then 84 bytes 'v' (100 bytes). Every
// get checks the value's size and its first 16 bytes; a missing or wrong value stops the
// driver (exit 1).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace point_reads {

constexpr std::size_t key_bytes = 16, value_bytes = 100;
/// Keys per load transaction (a driver may commit fewer when its limits say so).
constexpr std::uint64_t keys_per_commit = 10000;

using clock_type = std::chrono::steady_clock;

[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(1); // also from a reader thread, with the others still running
}

inline void format_key(std::uint64_t i, char* out) {
  for (int d = key_bytes - 1; d >= 0; --d, i /= 10)
    out[d] = char('0' + i % 10);
}

inline std::string value_of(const char* key) {
  std::string v(key, key_bytes);
  v.resize(value_bytes, 'v');
  return v;
}

inline void check_value(const char* key, const void* value, std::size_t size) {
  if (size != value_bytes || std::memcmp(value, key, key_bytes) != 0)
    die("key " + std::string(key, key_bytes) + ": wrong value (" + std::to_string(size) +
        " bytes)");
}

struct options {
  std::string command; // load | run
  std::string dir;
  std::uint64_t keys = 1000000;  // load
  std::vector<std::string> sets; // load: --set KEY=VALUE (drivers that take settings)
  int threads = 1;               // run
  double seconds = 10;           // run
  std::string json;              // run: also write the JSON line here
};

[[noreturn]] inline void usage(const char* prog, const char* load_extra) {
  std::fprintf(stderr,
               "usage: %s load -D DIR [-n KEYS]%s\n"
               "       %s run  -D DIR [-t THREADS] [-T SECONDS] [--json FILE]\n",
               prog, load_extra, prog);
  std::exit(2);
}

/// `takes_sets`: whether the driver accepts `load --set KEY=VALUE`.
inline options parse(int argc, char** argv, bool takes_sets) {
  const char* load_extra = takes_sets ? " [--set KEY=VALUE]..." : "";
  options o;
  if (argc < 2)
    usage(argv[0], load_extra);
  o.command = argv[1];
  if (o.command != "load" && o.command != "run")
    usage(argv[0], load_extra);
  bool load = o.command == "load";
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(argv[0], load_extra);
      return argv[++i];
    };
    if (a == "-D")
      o.dir = value();
    else if (a == "-n" && load)
      o.keys = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--set" && load && takes_sets)
      o.sets.push_back(value());
    else if (a == "-t" && !load)
      o.threads = std::atoi(value().c_str());
    else if (a == "-T" && !load)
      o.seconds = std::atof(value().c_str());
    else if (a == "--json" && !load)
      o.json = value();
    else
      usage(argv[0], load_extra);
  }
  if (o.dir.empty() || o.keys < 1 || o.threads < 1 || o.seconds <= 0)
    usage(argv[0], load_extra);
  return o;
}

/// Loads keys 0..keys-1 in order: `put(key, value)` for each, `commit()` after every
/// `per_commit` of them and after the last; then prints the load's JSON line.
template <class Put, class Commit>
void load_in_order(const char* system, std::uint64_t keys, std::uint64_t per_commit, Put put,
                   Commit commit) {
  auto start = clock_type::now();
  char key[key_bytes];
  std::uint64_t commits = 0;
  for (std::uint64_t i = 0; i < keys; ++i) {
    format_key(i, key);
    put(key, value_of(key));
    if ((i + 1) % per_commit == 0 || i + 1 == keys) {
      commit();
      ++commits;
    }
  }
  double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  std::printf("{\"system\": \"%s\", \"keys\": %llu, \"commits\": %llu, \"load_seconds\": %.3f}\n",
              system, static_cast<unsigned long long>(keys),
              static_cast<unsigned long long>(commits), seconds);
}

/// Checks, in a scan that also brings every page in, that the keys are 0..N-1 in order
/// with their values: `seen(key, value, size)` for each entry, in key order.
class scan_check {
public:
  void seen(const char* key, std::size_t key_size, const void* value, std::size_t size) {
    char expected[key_bytes];
    format_key(count_, expected);
    if (key_size != key_bytes || std::memcmp(key, expected, key_bytes) != 0)
      die("the scan found key " + std::string(key, key_size) + " where " +
          std::string(expected, key_bytes) + " belongs");
    check_value(expected, value, size);
    ++count_;
  }
  std::uint64_t count() const { return count_; }

private:
  std::uint64_t count_ = 0;
};

struct run_result {
  std::uint64_t gets = 0;
  double seconds = 0;
  std::vector<std::uint64_t> per_thread;
};

/// Runs `threads` threads for `seconds`. Thread t calls `make_reader(t)` once (its session
/// or read transaction), waits for the others, then calls `reader(key)` for uniformly
/// random keys 0..keys-1 until the time is up.
template <class MakeReader>
run_result timed_gets(int threads, double seconds, std::uint64_t keys, MakeReader make_reader) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, stop{false};
  run_result r;
  r.per_thread.assign(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto reader = make_reader(t);
      std::mt19937_64 random(0x9e3779b97f4a7c15ull * std::uint64_t(t + 1));
      char key[key_bytes];
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire))
        std::this_thread::yield();
      std::uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        format_key(random() % keys, key);
        reader(key);
        ++n;
      }
      r.per_thread[t] = n;
    });
  while (ready.load() < threads)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto start = clock_type::now();
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop.store(true);
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  for (auto& t : pool)
    t.join();
  for (std::uint64_t n : r.per_thread)
    r.gets += n;
  return r;
}

/// Prints the run's JSON line (and writes it to `path` when given). `details` is a JSON
/// object of the driver's own (its settings, its version).
inline void emit(const char* system, std::uint64_t keys, const run_result& r,
                 const std::string& details, const std::string& path) {
  std::string per_thread;
  for (std::uint64_t n : r.per_thread)
    per_thread += (per_thread.empty() ? "" : ", ") + std::to_string(n);
  char head[512];
  std::snprintf(head, sizeof head,
                "{\"system\": \"%s\", \"keys\": %llu, \"key_bytes\": %zu, \"value_bytes\": %zu, "
                "\"threads\": %zu, \"seconds\": %.3f, \"gets\": %llu, \"gets_per_second\": %.1f, ",
                system, static_cast<unsigned long long>(keys), key_bytes, value_bytes,
                r.per_thread.size(), r.seconds, static_cast<unsigned long long>(r.gets),
                double(r.gets) / r.seconds);
  std::string line =
    head + std::string("\"gets_per_thread\": [") + per_thread + "], \"details\": " + details + "}";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (!path.empty()) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f || std::fprintf(f, "%s\n", line.c_str()) < 0 || std::fclose(f) != 0)
      die("cannot write " + path);
  }
}

} // namespace point_reads
