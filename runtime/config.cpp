// Settings parsing and validation: see config.hpp.
#include "runtime/config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

namespace tidemark::runtime {

namespace {

std::string trim(const std::string& text) {
  auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos)
    return {};
  auto end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

struct number_with_unit {
  double number = 0;
  std::string unit;
};

number_with_unit split_number(const std::string& key, const std::string& text) {
  std::size_t used = 0;
  number_with_unit result;
  try {
    result.number = std::stod(text, &used);
  } catch (const std::exception&) {
    throw config_error("invalid value for " + key + ": \"" + text + "\" is not a number");
  }
  result.unit = trim(text.substr(used));
  if (!std::isfinite(result.number))
    throw config_error("invalid value for " + key + ": \"" + text + "\"");
  return result;
}

// Memory sizes: B, kB, MB, GB, TB; a bare number is in `default_unit` bytes.
std::uint64_t parse_bytes(const std::string& key, const std::string& text, std::uint64_t default_unit) {
  number_with_unit v = split_number(key, text);
  std::string unit = lower(v.unit);
  double factor;
  if (unit.empty())
    factor = static_cast<double>(default_unit);
  else if (unit == "b")
    factor = 1;
  else if (unit == "kb")
    factor = 1024.0;
  else if (unit == "mb")
    factor = 1024.0 * 1024;
  else if (unit == "gb")
    factor = 1024.0 * 1024 * 1024;
  else if (unit == "tb")
    factor = 1024.0 * 1024 * 1024 * 1024;
  else
    throw config_error("invalid unit for " + key + ": \"" + v.unit +
                       "\" (valid units: B, kB, MB, GB, TB)");
  if (v.number < 0)
    throw config_error("invalid value for " + key + ": must not be negative");
  return static_cast<std::uint64_t>(v.number * factor);
}

// Durations: ms, s, min, h, d; a bare number is in `default_unit`.
std::chrono::milliseconds parse_time(const std::string& key, const std::string& text,
                                     std::chrono::milliseconds default_unit) {
  number_with_unit v = split_number(key, text);
  double ms;
  if (v.unit.empty())
    ms = v.number * static_cast<double>(default_unit.count());
  else if (v.unit == "ms")
    ms = v.number;
  else if (v.unit == "s")
    ms = v.number * 1000;
  else if (v.unit == "min")
    ms = v.number * 60'000;
  else if (v.unit == "h")
    ms = v.number * 3'600'000;
  else if (v.unit == "d")
    ms = v.number * 86'400'000;
  else
    throw config_error("invalid unit for " + key + ": \"" + v.unit +
                       "\" (valid units: ms, s, min, h, d)");
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

} // namespace

endpoint parse_endpoint(const std::string& what, const std::string& text, bool any_port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw config_error("invalid value for " + what + ": \"" + text + "\" (expected HOST:PORT)");
  endpoint result;
  result.host = text.substr(0, colon);
  std::string port = text.substr(colon + 1);
  char* end = nullptr;
  unsigned long number = std::strtoul(port.c_str(), &end, 10);
  const unsigned long lowest = any_port ? 0 : 1;
  if (*end != '\0' || port.empty() || number < lowest || number > 65535)
    throw config_error("invalid value for " + what + ": port \"" + port + "\" is not a number from " +
                       std::to_string(lowest) + " to 65535");
  result.port = static_cast<std::uint16_t>(number);
  return result;
}

namespace {

bool parse_bool(const std::string& key, const std::string& text) {
  std::string v = lower(text);
  if (v == "on" || v == "true" || v == "yes" || v == "1")
    return true;
  if (v == "off" || v == "false" || v == "no" || v == "0")
    return false;
  throw config_error("invalid value for " + key + ": \"" + text + "\" (expected on or off)");
}

void check_range(const std::string& key, double value, double low, double high,
                 const std::string& shown_low, const std::string& shown_high) {
  if (value < low || value > high)
    throw config_error(key + " is out of range: valid values are " + shown_low + " .. " +
                       shown_high);
}

void check_bytes(const std::string& key, std::uint64_t value, std::uint64_t low, std::uint64_t high) {
  check_range(key, static_cast<double>(value), static_cast<double>(low), static_cast<double>(high),
              format_bytes(low), format_bytes(high));
}

void check_time(const std::string& key, std::chrono::milliseconds value,
                std::chrono::milliseconds low, std::chrono::milliseconds high) {
  check_range(key, static_cast<double>(value.count()), static_cast<double>(low.count()),
              static_cast<double>(high.count()), std::to_string(low.count()) + "ms",
              std::to_string(high.count()) + "ms");
}

double parse_real(const std::string& key, const std::string& text, double low, double high) {
  number_with_unit v = split_number(key, text);
  if (!v.unit.empty())
    throw config_error("invalid value for " + key + ": \"" + text + "\" is not a number");
  std::ostringstream lo, hi;
  lo << low;
  hi << high;
  check_range(key, v.number, low, high, lo.str(), hi.str());
  return v.number;
}

std::uint32_t parse_count(const std::string& key, const std::string& text, double low, double high) {
  double v = parse_real(key, text, low, high);
  if (v != std::floor(v))
    throw config_error("invalid value for " + key + ": \"" + text + "\" is not a whole number");
  return static_cast<std::uint32_t>(v);
}

constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB, TiB = 1024 * GiB;
using std::chrono::milliseconds;

struct setting_entry {
  const char* name;
  bool init_only;
  std::function<void(settings&, const std::string&)> set;
  std::function<std::string(const settings&)> show;
  const char* help;
};

std::string show_ms(milliseconds ms) {
  if (ms.count() == 0)
    return "0ms";
  if (ms.count() % 60'000 == 0)
    return std::to_string(ms.count() / 60'000) + "min";
  if (ms.count() % 1000 == 0)
    return std::to_string(ms.count() / 1000) + "s";
  return std::to_string(ms.count()) + "ms";
}

std::string show_real(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

const std::vector<setting_entry>& setting_table() {
  static const std::vector<setting_entry> table = {
    {"page_size", true,
     [](settings& s, const std::string& v) {
       std::uint64_t size = parse_bytes("page_size", v, 1);
       if (size != 4096 && size != 8192 && size != 16384 && size != 32768)
         throw config_error("page_size is out of range: valid values are 4kB, 8kB, 16kB, 32kB");
       s.page_size = size;
     },
     [](const settings& s) { return format_bytes(s.page_size); }, "page size, fixed at init"},
    {"data_checksums", true,
     [](settings& s, const std::string& v) { s.data_checksums = parse_bool("data_checksums", v); },
     [](const settings& s) { return std::string(s.data_checksums ? "on" : "off"); },
     "CRC32C page checksums, fixed at init"},
    {"segment_size", true,
     [](settings& s, const std::string& v) {
       s.segment_size = parse_bytes("segment_size", v, MiB);
       check_bytes("segment_size", s.segment_size, 64 * KiB, TiB);
     },
     [](const settings& s) { return format_bytes(s.segment_size); },
     "relation segment file size, fixed at init"},
    {"wal_segment_size", true,
     [](settings& s, const std::string& v) {
       s.wal_segment_size = parse_bytes("wal_segment_size", v, MiB);
       check_bytes("wal_segment_size", s.wal_segment_size, 64 * KiB, GiB);
       if (s.wal_segment_size % (64 * KiB) != 0)
         throw config_error("wal_segment_size must be a multiple of 64kB");
     },
     [](const settings& s) { return format_bytes(s.wal_segment_size); },
     "WAL segment file size, fixed at init"},
    {"shared_buffers", false,
     [](settings& s, const std::string& v) {
       s.shared_buffers = parse_bytes("shared_buffers", v, s.page_size);
       check_bytes("shared_buffers", s.shared_buffers, 16 * s.page_size, 256 * GiB);
     },
     [](const settings& s) { return format_bytes(s.shared_buffers); },
     "buffer pool size (a bare number counts pages)"},
    {"wal_buffers", false,
     [](settings& s, const std::string& v) {
       s.wal_buffers = parse_bytes("wal_buffers", v, s.page_size);
       check_bytes("wal_buffers", s.wal_buffers, 256 * KiB, 4 * GiB);
     },
     [](const settings& s) { return format_bytes(s.wal_buffers); }, "WAL insert buffer size"},
    {"wal_sync_concurrency", false,
     [](settings& s, const std::string& v) {
       s.wal_sync_concurrency = parse_count("wal_sync_concurrency", v, 1, 16);
     },
     [](const settings& s) { return std::to_string(s.wal_sync_concurrency); },
     "WAL fdatasyncs group commit keeps in flight at once"},
    {"idle_poll", false,
     [](settings& s, const std::string& v) { s.idle_poll = parse_bool("idle_poll", v); },
     [](const settings& s) { return std::string(s.idle_poll ? "on" : "off"); },
     "spin on idle CPUs at the lowest priority while commits are in flight"},
    {"torn_page_protection", false,
     [](settings& s, const std::string& v) {
       std::string m = lower(v);
       if (m == "full_page_writes")
         s.protection = torn_page_protection::full_page_writes;
       else if (m == "doublewrite")
         s.protection = torn_page_protection::doublewrite;
       else if (m == "off")
         s.protection = torn_page_protection::off;
       else
         throw config_error("invalid value for torn_page_protection: \"" + v +
                            "\" (valid values: full_page_writes, doublewrite, off)");
     },
     [](const settings& s) { return std::string(to_string(s.protection)); },
     "full_page_writes | doublewrite | off"},
    {"checkpoint_timeout", false,
     [](settings& s, const std::string& v) {
       s.checkpoint_timeout = parse_time("checkpoint_timeout", v, milliseconds(1000));
       check_time("checkpoint_timeout", s.checkpoint_timeout, milliseconds(1000),
                  milliseconds(86'400'000));
     },
     [](const settings& s) { return show_ms(s.checkpoint_timeout); },
     "time between automatic checkpoints"},
    {"max_wal_size", false,
     [](settings& s, const std::string& v) {
       s.max_wal_size = parse_bytes("max_wal_size", v, MiB);
       check_bytes("max_wal_size", s.max_wal_size, 128 * KiB, TiB);
     },
     [](const settings& s) { return format_bytes(s.max_wal_size); },
     "WAL volume that triggers a checkpoint"},
    {"checkpoint_completion_target", false,
     [](settings& s, const std::string& v) {
       s.checkpoint_completion_target = parse_real("checkpoint_completion_target", v, 0, 1);
     },
     [](const settings& s) { return show_real(s.checkpoint_completion_target); },
     "fraction of the interval a checkpoint spreads its writes over"},
    {"bgwriter_delay", false,
     [](settings& s, const std::string& v) {
       s.bgwriter_delay = parse_time("bgwriter_delay", v, milliseconds(1));
       check_time("bgwriter_delay", s.bgwriter_delay, milliseconds(10), milliseconds(10'000));
     },
     [](const settings& s) { return show_ms(s.bgwriter_delay); }, "background writer round"},
    {"write_back_sweep", false,
     [](settings& s, const std::string& v) {
       s.write_back_sweep = parse_time("write_back_sweep", v, milliseconds(1000));
       auto ms = s.write_back_sweep.count();
       if (ms != 0 && (ms < 1'000 || ms > 3'600'000))
         throw config_error("write_back_sweep is out of range: valid values are 0 (off) or "
                            "1s .. 1h, got " + v);
     },
     [](const settings& s) { return show_ms(s.write_back_sweep); },
     "one paced write-back pass over the data files written since their fsync (0: off)"},
    {"bgwriter_lru_maxpages", false,
     [](settings& s, const std::string& v) {
       s.bgwriter_lru_maxpages = parse_count("bgwriter_lru_maxpages", v, 0, 1073741823);
     },
     [](const settings& s) { return std::to_string(s.bgwriter_lru_maxpages); },
     "most buffers the background writer writes per round"},
    {"bgwriter_lru_multiplier", false,
     [](settings& s, const std::string& v) {
       s.bgwriter_lru_multiplier = parse_real("bgwriter_lru_multiplier", v, 0, 10);
     },
     [](const settings& s) { return show_real(s.bgwriter_lru_multiplier); },
     "clean buffers kept ahead of demand, as a multiple of recent allocations"},
    {"synchronous_commit", false,
     [](settings& s, const std::string& v) {
       s.synchronous_commit = parse_bool("synchronous_commit", v);
     },
     [](const settings& s) { return std::string(s.synchronous_commit ? "on" : "off"); },
     "acknowledge commits only once their WAL is durable"},
    {"io_method", false,
     [](settings& s, const std::string& v) {
       std::string m = lower(v);
       if (m == "io_uring")
         s.io = storage::io_method::io_uring;
       else if (m == "sync")
         s.io = storage::io_method::sync;
       else
         throw config_error("invalid value for io_method: \"" + v +
                            "\" (valid values: io_uring, sync)");
     },
     [](const settings& s) {
       return std::string(s.io == storage::io_method::io_uring ? "io_uring" : "sync");
     },
     "io_uring | sync"},
    {"recovery_init_sync_method", false,
     [](settings& s, const std::string& v) {
       std::string m = lower(v);
       if (m == "fsync")
         s.recovery_init_sync_method = storage::directory_sync_method::fsync;
       else if (m == "syncfs")
         s.recovery_init_sync_method = storage::directory_sync_method::syncfs;
       else
         throw config_error("invalid value for recovery_init_sync_method: \"" + v +
                            "\" (valid values: fsync, syncfs)");
     },
     [](const settings& s) {
       return std::string(s.recovery_init_sync_method == storage::directory_sync_method::fsync
                            ? "fsync" : "syncfs");
     },
     "after a crash, make the data directory durable first: fsync every file | syncfs"},
    {"recovery_prefetch", false,
     [](settings& s, const std::string& v) {
       s.recovery_prefetch = parse_bool("recovery_prefetch", v);
     },
     [](const settings& s) { return std::string(s.recovery_prefetch ? "on" : "off"); },
     "redo reads the blocks of the WAL records ahead of it in the background"},
    {"recovery_prefetch_distance", false,
     [](settings& s, const std::string& v) {
       s.recovery_prefetch_distance = parse_bytes("recovery_prefetch_distance", v, KiB);
       check_bytes("recovery_prefetch_distance", s.recovery_prefetch_distance, 8 * KiB, GiB);
     },
     [](const settings& s) { return format_bytes(s.recovery_prefetch_distance); },
     "how far ahead of redo prefetch reads, in bytes of WAL"},
    {"recovery_progress_interval", false,
     [](settings& s, const std::string& v) {
       s.recovery_progress_interval = parse_time("recovery_progress_interval", v, milliseconds(1000));
       auto ms = s.recovery_progress_interval.count();
       if (ms != 0 && (ms < 100 || ms > 3'600'000))
         throw config_error("recovery_progress_interval is out of range: valid values are 0 "
                            "(off) or 100ms .. 1h, got " + v);
     },
     [](const settings& s) { return show_ms(s.recovery_progress_interval); },
     "how often a recovery logs where it is (0: never)"},
    {"replication_listen", false,
     [](settings& s, const std::string& v) {
       if (!v.empty())
         parse_endpoint("replication_listen", v, true);
       s.replication_listen = v;
     },
     [](const settings& s) { return s.replication_listen; },
     "HOST:PORT the WAL sender listens on for standbys and base backups (empty: none; port 0: any free port)"},
    {"max_standby_wal_size", false,
     [](settings& s, const std::string& v) {
       s.max_standby_wal_size = parse_bytes("max_standby_wal_size", v, MiB);
       check_bytes("max_standby_wal_size", s.max_standby_wal_size, MiB, std::uint64_t(1) << 40);
     },
     [](const settings& s) { return format_bytes(s.max_standby_wal_size); },
     "WAL kept for a standby behind the primary; further behind, it must be seeded again"},
    {"synchronous_standby", false,
     [](settings& s, const std::string& v) {
       using w = settings::standby_wait;
       std::string m = lower(v);
       if (m == "off")
         s.synchronous_standby = w::off;
       else if (m == "remote_write")
         s.synchronous_standby = w::remote_write;
       else if (m == "remote_flush")
         s.synchronous_standby = w::remote_flush;
       else if (m == "remote_apply")
         s.synchronous_standby = w::remote_apply;
       else
         throw config_error("invalid value for synchronous_standby: \"" + v +
                            "\" (valid values: off, remote_write, remote_flush, remote_apply)");
     },
     [](const settings& s) { return std::string(to_string(s.synchronous_standby)); },
     "a commit also waits for a standby to have written | flushed | replayed it"},
    {"doublewrite_batch_pages", false,
     [](settings& s, const std::string& v) {
       s.doublewrite_batch_pages = parse_count("doublewrite_batch_pages", v, 1, 1024);
     },
     [](const settings& s) { return std::to_string(s.doublewrite_batch_pages); },
     "pages per doublewrite batch"},
    {"doublewrite_flush_delay", false,
     [](settings& s, const std::string& v) {
       s.doublewrite_flush_delay = parse_time("doublewrite_flush_delay", v, milliseconds(1));
       check_time("doublewrite_flush_delay", s.doublewrite_flush_delay, milliseconds(0),
                  milliseconds(100));
     },
     [](const settings& s) { return show_ms(s.doublewrite_flush_delay); },
     "how long a small background batch may wait to share a doublewrite ring fdatasync"},
    {"doublewrite_ring_pages", false,
     [](settings& s, const std::string& v) {
       s.doublewrite_ring_pages = parse_count("doublewrite_ring_pages", v, 0, 1048576);
     },
     [](const settings& s) { return std::to_string(s.doublewrite_ring_pages); },
     "doublewrite ring file size in pages (0: 512 MB worth); batches are stored compressed"},
    {"actor_scheduler", false,
     [](settings& s, const std::string& v) {
       std::string m = lower(v);
       if (m == "sharing")
         s.scheduler_sharing = true;
       else if (m == "stealing")
         s.scheduler_sharing = false;
       else
         throw config_error("invalid value for actor_scheduler: \"" + v +
                            "\" (valid values: sharing, stealing)");
     },
     [](const settings& s) { return std::string(s.scheduler_sharing ? "sharing" : "stealing"); },
     "CAF scheduler policy for sessions: sharing | stealing"},
    {"actor_threads", false,
     [](settings& s, const std::string& v) {
       s.scheduler_threads = parse_count("actor_threads", v, 0, 256);
     },
     [](const settings& s) { return std::to_string(s.scheduler_threads); },
     "CAF scheduler threads for sessions (0: one per CPU core)"},
    {"log_checkpoints", false,
     [](settings& s, const std::string& v) { s.log_checkpoints = parse_bool("log_checkpoints", v); },
     [](const settings& s) { return std::string(s.log_checkpoints ? "on" : "off"); },
     "print one line per checkpoint"},
  };
  return table;
}

const setting_entry* find_setting(const std::string& key) {
  for (const setting_entry& e : setting_table())
    if (key == e.name)
      return &e;
  return nullptr;
}

} // namespace

std::string show_setting(const settings& s, const std::string& key) {
  const setting_entry* entry = find_setting(key);
  if (entry == nullptr)
    throw config_error("unknown setting \"" + key + "\"");
  return entry->show(s);
}

std::string format_bytes(std::uint64_t bytes) {
  if (bytes >= TiB && bytes % TiB == 0)
    return std::to_string(bytes / TiB) + "TB";
  if (bytes >= GiB && bytes % GiB == 0)
    return std::to_string(bytes / GiB) + "GB";
  if (bytes >= MiB && bytes % MiB == 0)
    return std::to_string(bytes / MiB) + "MB";
  if (bytes >= KiB && bytes % KiB == 0)
    return std::to_string(bytes / KiB) + "kB";
  return std::to_string(bytes) + "B";
}

bool is_init_setting(const std::string& key) {
  const setting_entry* e = find_setting(key);
  return e != nullptr && e->init_only;
}

void apply_setting(settings& s, const std::string& key, const std::string& value) {
  const setting_entry* e = find_setting(trim(key));
  if (e == nullptr)
    throw config_error("unrecognized configuration parameter \"" + trim(key) + "\"");
  std::string v = trim(value);
  const bool quoted = v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front();
  if (quoted) // '' is an empty value (replication_listen = '': none)
    v = v.substr(1, v.size() - 2);
  if (v.empty() && !quoted)
    throw config_error("missing value for " + trim(key));
  e->set(s, v);
}

void apply_assignment(settings& s, const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos)
    throw config_error("expected KEY=VALUE, got \"" + assignment + "\"");
  apply_setting(s, assignment.substr(0, eq), assignment.substr(eq + 1));
}

void apply_config_file(settings& s, const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw config_error("cannot read configuration file " + path);
  std::string line;
  int assignments = 0;
  for (int number = 1; std::getline(in, line); ++number) {
    auto hash = line.find('#');
    if (hash != std::string::npos)
      line = line.substr(0, hash);
    if (trim(line).empty())
      continue;
    try {
      apply_assignment(s, line);
      ++assignments;
    } catch (const config_error& e) {
      throw config_error(path + " line " + std::to_string(number) + ": " + e.what());
    }
  }
  if (in.bad())
    throw config_error("cannot read configuration file " + path);
  if (assignments == 0)
    throw config_error("configuration file " + path + " sets nothing (was it lost in a crash?); "
                       "restore it, or set at least torn_page_protection there");
}

void validate(const settings& s) {
  if (s.protection == torn_page_protection::doublewrite && !s.data_checksums)
    throw config_error("torn_page_protection=doublewrite requires data_checksums=on: repair "
                       "from the doublewrite ring must not depend on luck (rule D7)");
  if (s.doublewrite_ring_pages != 0 &&
      (s.doublewrite_ring_pages % s.doublewrite_batch_pages != 0 ||
       s.doublewrite_ring_pages < 2 * s.doublewrite_batch_pages))
    throw config_error("doublewrite_ring_pages must be a multiple of doublewrite_batch_pages (" +
                       std::to_string(s.doublewrite_batch_pages) + ") and hold at least two batches");
  if (s.segment_size % s.page_size != 0)
    throw config_error("segment_size must be a multiple of page_size (" +
                       format_bytes(s.page_size) + ")");
  if (s.max_wal_size < 2 * s.wal_segment_size)
    throw config_error("max_wal_size must be at least two WAL segments (" +
                       format_bytes(2 * s.wal_segment_size) + ")");
  if (s.wal_buffers < 4 * s.page_size + (64 << 10))
    throw config_error("wal_buffers is too small for page_size " + format_bytes(s.page_size));
}

std::string render_config_file(const settings& s) {
  std::ostringstream out;
  out << "# Tidemark configuration. Edit and restart; --set KEY=VALUE overrides one run.\n"
      << "# Settings marked (init) are fixed when the data directory is created.\n\n";
  for (const setting_entry& e : setting_table())
    out << e.name << " = " << (e.show(s).empty() ? "''" : e.show(s)) << "\t# " << e.help << (e.init_only ? " (init)" : "")
        << "\n";
  return out.str();
}

} // namespace tidemark::runtime
