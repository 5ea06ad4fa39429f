// Settings parsing and validation, and the one table of settings they and
// tidemark::describe_settings() (tidemark/settings.hpp) are made from: see config.hpp.
#include "runtime/config.hpp"

#include <tidemark/settings.hpp>

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
std::uint64_t parse_bytes(const std::string& key, const std::string& text,
                          std::uint64_t default_unit) {
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
    throw config_error("invalid value for " + what + ": port \"" + port +
                       "\" is not a number from " + std::to_string(lowest) + " to 65535");
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

// "1 .. 16", "0 .. 1073741823", "0.5": whole numbers in full.
std::string show_number(double value) {
  std::ostringstream out;
  out.precision(15);
  out << value;
  return out.str();
}

void check_range(const std::string& key, double value, double low, double high,
                 const std::string& range) {
  if (value < low || value > high)
    throw config_error(key + " is out of range: valid values are " + range);
}

std::string bytes_range(std::uint64_t low, std::uint64_t high) {
  return format_bytes(low) + " .. " + format_bytes(high);
}

void check_bytes(const std::string& key, std::uint64_t value, std::uint64_t low,
                 std::uint64_t high) {
  check_range(key, static_cast<double>(value), static_cast<double>(low), static_cast<double>(high),
              bytes_range(low, high));
}

std::string number_range(double low, double high) {
  return show_number(low) + " .. " + show_number(high);
}

double parse_real(const std::string& key, const std::string& text, double low, double high) {
  number_with_unit v = split_number(key, text);
  if (!v.unit.empty())
    throw config_error("invalid value for " + key + ": \"" + text + "\" is not a number");
  check_range(key, v.number, low, high, number_range(low, high));
  return v.number;
}

std::uint32_t parse_count(const std::string& key, const std::string& text, double low,
                          double high) {
  double v = parse_real(key, text, low, high);
  if (v != std::floor(v))
    throw config_error("invalid value for " + key + ": \"" + text + "\" is not a whole number");
  return static_cast<std::uint32_t>(v);
}

constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB, TiB = 1024 * GiB;
using std::chrono::milliseconds;

// One setting: how it is parsed, checked and shown, and what describe_settings() says of
// it. The descriptive fields are made from the same constants the checks use (the
// builders below), so a listing cannot promise a range the parser does not keep.
struct setting_entry {
  const char* name;
  bool init_only;
  const char* type;    // setting_description::type
  std::string unit;    // what a plain number counts
  std::string allowed; // the range or the alternatives
  std::function<void(settings&, const std::string&)> set;
  std::function<std::string(const settings&)> show;
  const char* help; // one line of meaning
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

// A limit of a duration range in its largest whole unit: "100ms", "1s", "1h", "1d".
std::string show_limit(milliseconds ms) {
  const std::pair<std::int64_t, const char*> units[] = {{86'400'000, "d"},
                                                        {3'600'000, "h"},
                                                        {60'000, "min"},
                                                        {1000, "s"}};
  for (const auto& [size, name] : units)
    if (ms.count() != 0 && ms.count() % size == 0)
      return std::to_string(ms.count() / size) + name;
  return std::to_string(ms.count()) + "ms";
}

std::string show_real(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// What a plain number counts, for a size whose plain numbers count `plain` bytes.
std::string size_unit(std::uint64_t plain) {
  return plain == 1 ? "B" : format_bytes(plain).substr(1); // "kB", "MB"
}

// A size (B, kB, MB, GB, TB; a plain number counts `plain` bytes, or pages when `plain` is
// 0) from `low` to `high` and, when `multiple` is not 0, a multiple of it.
setting_entry size_setting(const char* name, bool init, std::uint64_t settings::*field,
                           std::uint64_t plain, std::uint64_t low, std::uint64_t high,
                           const char* help, std::uint64_t multiple = 0) {
  std::string allowed = bytes_range(low, high);
  if (multiple != 0)
    allowed += ", a multiple of " + format_bytes(multiple);
  return {name,
          init,
          "size",
          plain == 0 ? "pages" : size_unit(plain),
          allowed,
          [=](settings& s, const std::string& v) {
            std::uint64_t bytes = parse_bytes(name, v, plain == 0 ? s.page_size : plain);
            check_bytes(name, bytes, low, high);
            if (multiple != 0 && bytes % multiple != 0)
              throw config_error(std::string(name) + " must be a multiple of " +
                                 format_bytes(multiple));
            s.*field = bytes;
          },
          [=](const settings& s) { return format_bytes(s.*field); },
          help};
}

// A duration (ms, s, min, h, d; a plain number counts `plain`) from `low` to `high`, or 0
// (off) when `zero_is_off`.
setting_entry time_setting(const char* name, milliseconds settings::*field, milliseconds plain,
                           milliseconds low, milliseconds high, bool zero_is_off,
                           const char* help) {
  std::string range = show_limit(low) + " .. " + show_limit(high);
  std::string allowed = zero_is_off ? "0 (off) or " + range : range;
  return {name,
          false,
          "duration",
          plain.count() == 1 ? "ms" : "s",
          allowed,
          [=](settings& s, const std::string& v) {
            milliseconds t = parse_time(name, v, plain);
            if (!(zero_is_off && t.count() == 0) && (t < low || t > high))
              throw config_error(std::string(name) + " is out of range: valid values are " +
                                 allowed + (zero_is_off ? ", got " + v : ""));
            s.*field = t;
          },
          [=](const settings& s) { return show_ms(s.*field); },
          help};
}

// A whole number of `unit` from `low` to `high`.
setting_entry count_setting(const char* name, std::uint32_t settings::*field, const char* unit,
                            double low, double high, const char* help) {
  return {name,
          false,
          "integer",
          unit,
          number_range(low, high),
          [=](settings& s, const std::string& v) { s.*field = parse_count(name, v, low, high); },
          [=](const settings& s) { return std::to_string(s.*field); },
          help};
}

setting_entry real_setting(const char* name, double settings::*field, double low, double high,
                           const char* help) {
  return {name,
          false,
          "real",
          "",
          number_range(low, high),
          [=](settings& s, const std::string& v) { s.*field = parse_real(name, v, low, high); },
          [=](const settings& s) { return show_real(s.*field); },
          help};
}

setting_entry bool_setting(const char* name, bool init, bool settings::*field, const char* help) {
  return {name,
          init,
          "boolean",
          "",
          "on | off",
          [=](settings& s, const std::string& v) { s.*field = parse_bool(name, v); },
          [=](const settings& s) { return std::string(s.*field ? "on" : "off"); },
          help};
}

// One of `choices` (any case), each a name and the value it sets.
template <class T>
setting_entry choice_setting(const char* name, T settings::*field,
                             std::vector<std::pair<std::string, T>> choices, const char* help) {
  std::string listed, in_error;
  for (const auto& choice : choices) {
    listed += (listed.empty() ? "" : " | ") + choice.first;
    in_error += (in_error.empty() ? "" : ", ") + choice.first;
  }
  return {name,
          false,
          "enum",
          "",
          listed,
          [=](settings& s, const std::string& v) {
            std::string m = lower(v);
            for (const auto& choice : choices)
              if (m == choice.first) {
                s.*field = choice.second;
                return;
              }
            throw config_error("invalid value for " + std::string(name) + ": \"" + v +
                               "\" (valid values: " + in_error + ")");
          },
          [=](const settings& s) {
            for (const auto& choice : choices)
              if (s.*field == choice.second)
                return choice.first;
            return std::string("?");
          },
          help};
}

constexpr std::uint64_t page_sizes[] = {4 * KiB, 8 * KiB, 16 * KiB, 32 * KiB};
constexpr std::uint64_t min_shared_buffers = 16; // pages

std::string page_size_list(const char* separator) {
  std::string list;
  for (std::uint64_t size : page_sizes)
    list += (list.empty() ? "" : separator) + format_bytes(size);
  return list;
}

// The data directory's layout, memory and commit settings, in the listing's order.
std::vector<setting_entry> layout_and_commit_settings() {
  using mode = torn_page_protection;
  return {
    {"page_size", true, "size", "B", page_size_list(" | "),
     [](settings& s, const std::string& v) {
       std::uint64_t size = parse_bytes("page_size", v, 1);
       if (std::find(std::begin(page_sizes), std::end(page_sizes), size) == std::end(page_sizes))
         throw config_error("page_size is out of range: valid values are " + page_size_list(", "));
       s.page_size = size;
     },
     [](const settings& s) { return format_bytes(s.page_size); }, "size of every page and buffer"},
    bool_setting("data_checksums", true, &settings::data_checksums,
                 "a CRC32C checksum on every page, verified when it is read"),
    size_setting("segment_size", true, &settings::segment_size, MiB, 64 * KiB, TiB,
                 "relation segment file size"),
    size_setting("wal_segment_size", true, &settings::wal_segment_size, MiB, 64 * KiB, GiB,
                 "WAL segment file size", 64 * KiB),
    {"shared_buffers", false, "size", "pages",
     std::to_string(min_shared_buffers) + " pages .. " + format_bytes(256 * GiB),
     [](settings& s, const std::string& v) {
       std::uint64_t bytes = parse_bytes("shared_buffers", v, s.page_size);
       check_bytes("shared_buffers", bytes, min_shared_buffers * s.page_size, 256 * GiB);
       s.shared_buffers = bytes;
     },
     [](const settings& s) { return format_bytes(s.shared_buffers); },
     "buffer pool size (a bare number counts pages)"},
    {"wal_buffers", false, "size", "pages", "auto, or " + bytes_range(256 * KiB, 4 * GiB),
     [](settings& s, const std::string& v) {
       if (v == "auto") {
         s.wal_buffers = 0;
         return;
       }
       std::uint64_t bytes = parse_bytes("wal_buffers", v, s.page_size);
       check_bytes("wal_buffers", bytes, 256 * KiB, 4 * GiB);
       s.wal_buffers = bytes;
     },
     [](const settings& s) { return s.wal_buffers == 0 ? "auto" : format_bytes(s.wal_buffers); },
     "WAL insert buffer size (auto: a quarter of shared_buffers plus 1MB, at least 16MB, so "
     "that a table commit of a quarter of the pool fits one record)"},
    count_setting("wal_sync_concurrency", &settings::wal_sync_concurrency, "fsyncs", 1, 16,
                  "WAL fdatasyncs group commit keeps in flight at once"),
    bool_setting("idle_poll", false, &settings::idle_poll,
                 "spin on idle CPUs at the lowest priority while commits are in flight"),
    choice_setting<mode>("torn_page_protection", &settings::protection,
                         {{"full_page_writes", mode::full_page_writes},
                          {"doublewrite", mode::doublewrite},
                          {"off", mode::off}},
                         "how pages torn by a crash are repaired (WAL images, doublewrite ring, "
                         "or not)"),
  };
}

// Streaming replication: where the WAL sender listens, the WAL it keeps, and what a
// synchronous commit waits for.
std::vector<setting_entry> replication_settings() {
  using wait = settings::standby_wait;
  return {
    {"replication_listen", false, "address", "", "HOST:PORT (port 0: any free port), or '' (none)",
     [](settings& s, const std::string& v) {
       if (!v.empty())
         parse_endpoint("replication_listen", v, true);
       s.replication_listen = v;
     },
     [](const settings& s) { return s.replication_listen; },
     "where the WAL sender listens for standbys and base backups; a standby's, used once "
     "promoted, is told to its primary (a concrete host and port) so that an old primary "
     "restarting can find the new generation there"},
    size_setting("max_standby_wal_size", false, &settings::max_standby_wal_size, MiB, MiB, TiB,
                 "WAL kept for a standby behind the primary; further behind, it must be seeded "
                 "again"),
    choice_setting<wait>("synchronous_standby", &settings::synchronous_standby,
                         {{"off", wait::off},
                          {"remote_write", wait::remote_write},
                          {"remote_flush", wait::remote_flush},
                          {"remote_apply", wait::remote_apply}},
                         "whether a commit also waits for standbys to have written, flushed or "
                         "replayed it"),
    {"synchronous_standby_names", false, "list", "",
     "'' (any one standby), a, b, ... (FIRST 1), FIRST k (a, b, ...), ANY k (a, b, ...); '*': "
     "any name",
     [](settings& s, const std::string& v) {
       try {
         s.synchronous_standby_names = actors::standby_quorum::parse(v);
       } catch (const std::invalid_argument& error) {
         throw config_error(std::string("invalid value for synchronous_standby_names: ") +
                            error.what());
       }
     },
     [](const settings& s) { return s.synchronous_standby_names.to_string(); },
     "which standbys, and how many, a synchronous commit waits for"},
    time_setting("wal_sender_timeout", &settings::wal_sender_timeout, milliseconds(1000),
                 milliseconds(1000), milliseconds(3'600'000), false,
                 "a standby silent this long no longer counts for synchronous commits"),
  };
}

// Checkpoints, the background writers and recovery, in the listing's order.
std::vector<setting_entry> background_settings() {
  using io = storage::io_method;
  using sync = storage::directory_sync_method;
  return {
    time_setting("checkpoint_timeout", &settings::checkpoint_timeout, milliseconds(1000),
                 milliseconds(1000), milliseconds(86'400'000), false,
                 "time between automatic checkpoints"),
    size_setting("max_wal_size", false, &settings::max_wal_size, MiB, 128 * KiB, TiB,
                 "WAL volume that triggers a checkpoint; old segments are kept for reuse up "
                 "to this much past the redo point"),
    real_setting("checkpoint_completion_target", &settings::checkpoint_completion_target, 0, 1,
                 "fraction of the interval a checkpoint spreads its writes over"),
    time_setting("bgwriter_delay", &settings::bgwriter_delay, milliseconds(1), milliseconds(10),
                 milliseconds(10'000), false,
                 "background writer round (a tenth of it while the victim supply is low)"),
    time_setting("write_back_sweep", &settings::write_back_sweep, milliseconds(1000),
                 milliseconds(1000), milliseconds(3'600'000), true,
                 "one paced write-back pass over the data files written since their fsync (0: "
                 "off)"),
    count_setting("bgwriter_lru_maxpages", &settings::bgwriter_lru_maxpages, "buffers", 0,
                  1073741823, "most buffers the background writer writes per round"),
    real_setting("bgwriter_lru_multiplier", &settings::bgwriter_lru_multiplier, 0, 10,
                 "clean buffers kept ahead of demand, as a multiple of recent allocations"),
    size_setting("background_write_limit", false, &settings::background_write_limit, MiB, 0, TiB,
                 "most bytes a second a paced checkpoint's writes and the bgwriter's each take "
                 "(0: no limit; an immediate or hurried checkpoint is not limited)"),
    bool_setting("synchronous_commit", false, &settings::synchronous_commit,
                 "acknowledge commits only once their WAL is durable"),
    choice_setting<io>("io_method", &settings::io, {{"io_uring", io::io_uring}, {"sync", io::sync}},
                       "how batches of page writes are issued (one io_uring submission, or a "
                       "call each)"),
    choice_setting<sync>("recovery_init_sync_method", &settings::recovery_init_sync_method,
                         {{"fsync", sync::fsync}, {"syncfs", sync::syncfs}},
                         "after a crash, how the directory is made durable first (fsync each "
                         "file, or syncfs)"),
    bool_setting("recovery_prefetch", false, &settings::recovery_prefetch,
                 "redo reads the blocks of the WAL records ahead of it in the background"),
    size_setting("recovery_prefetch_distance", false, &settings::recovery_prefetch_distance, KiB,
                 8 * KiB, GiB, "how far ahead of redo prefetch reads, in bytes of WAL"),
    time_setting("recovery_progress_interval", &settings::recovery_progress_interval,
                 milliseconds(1000), milliseconds(100), milliseconds(3'600'000), true,
                 "how often a recovery logs where it is (0: never)"),
  };
}

// Torn-page protection, the actor scheduler and logging, in the listing's order.
std::vector<setting_entry> protection_and_logging_settings() {
  return {
    count_setting("doublewrite_batch_pages", &settings::doublewrite_batch_pages, "pages", 1, 1024,
                  "pages per doublewrite batch"),
    time_setting("doublewrite_flush_delay", &settings::doublewrite_flush_delay, milliseconds(1),
                 milliseconds(0), milliseconds(100), false,
                 "how long a small background batch may wait to share a doublewrite ring "
                 "fdatasync"),
    count_setting("doublewrite_ring_pages", &settings::doublewrite_ring_pages, "pages", 0, 1048576,
                  "doublewrite ring file size in pages (0: 512 MB worth); batches are stored "
                  "compressed"),
    choice_setting<bool>("actor_scheduler", &settings::scheduler_sharing,
                         {{"sharing", true}, {"stealing", false}},
                         "CAF scheduler policy for sessions"),
    count_setting("actor_threads", &settings::scheduler_threads, "threads", 0, 256,
                  "CAF scheduler threads for sessions (0: one per CPU core)"),
    bool_setting("log_checkpoints", false, &settings::log_checkpoints,
                 "print one line per checkpoint"),
  };
}

const std::vector<setting_entry>& setting_table() {
  static const std::vector<setting_entry> table = [] {
    std::vector<setting_entry> all = layout_and_commit_settings();
    for (auto part : {background_settings, replication_settings, protection_and_logging_settings})
      for (setting_entry& entry : part())
        all.push_back(std::move(entry));
    return all;
  }();
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

bool is_reloadable_setting(const std::string& key) {
  // What the checkpointer, bgwriter, sync worker and doublewrite batcher read at each
  // decision (actors/settings.hpp, reloadable_part): nothing sized at open.
  static const char* const reloadable[] = {"checkpoint_timeout",
                                           "checkpoint_completion_target",
                                           "max_wal_size",
                                           "log_checkpoints",
                                           "bgwriter_delay",
                                           "bgwriter_lru_maxpages",
                                           "bgwriter_lru_multiplier",
                                           "write_back_sweep",
                                           "doublewrite_flush_delay",
                                           "background_write_limit"};
  for (const char* name : reloadable)
    if (key == name)
      return true;
  return false;
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
  const bool quoted = v.size() >= 2 && (v.front() == '\'' || v.front() == '"') &&
                      v.back() == v.front();
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
    throw config_error("configuration file " + path +
                       " sets nothing (was it lost in a crash?); "
                       "restore it, or set at least torn_page_protection there");
}

void validate(const settings& s) {
  if (s.protection == torn_page_protection::doublewrite && !s.data_checksums)
    throw config_error("torn_page_protection=doublewrite requires data_checksums=on: repair "
                       "from the doublewrite ring must not depend on luck (rule D7)");
  if (s.doublewrite_ring_pages != 0 && (s.doublewrite_ring_pages % s.doublewrite_batch_pages != 0 ||
                                        s.doublewrite_ring_pages < 2 * s.doublewrite_batch_pages))
    throw config_error("doublewrite_ring_pages must be a multiple of doublewrite_batch_pages (" +
                       std::to_string(s.doublewrite_batch_pages) +
                       ") and hold at least two batches");
  if (s.segment_size % s.page_size != 0)
    throw config_error("segment_size must be a multiple of page_size (" +
                       format_bytes(s.page_size) + ")");
  if (s.max_wal_size < 2 * s.wal_segment_size)
    throw config_error("max_wal_size must be at least two WAL segments (" +
                       format_bytes(2 * s.wal_segment_size) + ")");
  if (s.wal_buffer_size() < 4 * s.page_size + (64 << 10))
    throw config_error("wal_buffers is too small for page_size " + format_bytes(s.page_size));
}

std::string render_config_file(const settings& s) {
  std::ostringstream out;
  out << "# Tidemark configuration. Edit and restart, or for settings marked (reload) edit and\n"
      << "# reload (database::reload(), SIGHUP to a running tidemark command); --set KEY=VALUE\n"
      << "# overrides one run. Settings marked (init) are fixed when the directory is created.\n\n";
  for (const setting_entry& e : setting_table()) {
    // Where the value is one of a list, or an address, the comment names what it takes.
    const bool listed =
      (e.allowed.find(" | ") != std::string::npos && std::string(e.type) != "boolean") ||
      std::string(e.type) == "address";
    out << e.name << " = " << (e.show(s).empty() ? "''" : e.show(s)) << "\t# " << e.help
        << (listed ? ": " + e.allowed : "") << (e.init_only ? " (init)" : "")
        << (is_reloadable_setting(e.name) ? " (reload)" : "") << "\n";
  }
  return out.str();
}

} // namespace tidemark::runtime

std::vector<tidemark::setting_description> tidemark::describe_settings() {
  const runtime::settings defaults;
  std::vector<setting_description> out;
  for (const runtime::setting_entry& e : runtime::setting_table())
    out.push_back({e.name, e.type, e.show(defaults), e.unit, e.allowed, e.init_only,
                   runtime::is_reloadable_setting(e.name), e.help});
  return out;
}
