// Configuration: PostgreSQL-style units, range errors that name key and range, unknown keys,
// the cross-setting rule D7, and the configuration file round trip.
#include "runtime/config.hpp"
#include "runtime/standby_file.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <unistd.h>
#include <utility>

namespace tidemark::runtime {
namespace {

std::string error_of(const std::string& assignment) {
  settings s;
  try {
    apply_assignment(s, assignment);
    validate(s);
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("config: values take PostgreSQL's units and defaults") {
  settings s;
  apply_assignment(s, "shared_buffers=128MB");
  CHECK(s.shared_buffers == 128u << 20);
  apply_assignment(s, "shared_buffers = 16");
  CHECK(s.buffer_count() == 16);
  apply_assignment(s, "checkpoint_timeout=30s");
  CHECK(s.checkpoint_timeout.count() == 30'000);
  apply_assignment(s, "checkpoint_timeout=2min");
  CHECK(s.checkpoint_timeout.count() == 120'000);
  apply_assignment(s, "checkpoint_timeout=5");
  CHECK(s.checkpoint_timeout.count() == 5'000);
  apply_assignment(s, "bgwriter_delay=50");
  CHECK(s.bgwriter_delay.count() == 50);
  apply_assignment(s, "write_back_sweep=20");
  CHECK(s.write_back_sweep.count() == 20'000);
  apply_assignment(s, "write_back_sweep=0");
  CHECK(s.write_back_sweep.count() == 0);
  apply_assignment(s, "torn_page_protection=off");
  CHECK(s.protection == torn_page_protection::off);
  apply_assignment(s, "io_method=sync");
  CHECK(s.io == storage::io_method::sync);
  apply_assignment(s, "synchronous_commit=off");
  CHECK_FALSE(s.synchronous_commit);
  CHECK(s.recovery_prefetch);
  apply_assignment(s, "recovery_prefetch=off");
  CHECK_FALSE(s.recovery_prefetch);
  CHECK(s.recovery_prefetch_distance == 512u << 10);
  apply_assignment(s, "recovery_prefetch_distance=64"); // kB, like wal_buffers
  CHECK(s.recovery_prefetch_distance == 64u << 10);
  apply_assignment(s, "recovery_progress_interval=500ms");
  CHECK(s.recovery_progress_interval.count() == 500);
  apply_assignment(s, "recovery_progress_interval=0");
  CHECK(s.recovery_progress_interval.count() == 0);
}

TEST_CASE("config: errors name the key and the valid range") {
  CHECK(error_of("no_such_key=1").find("no_such_key") != std::string::npos);
  std::string range = error_of("checkpoint_completion_target=1.5");
  CHECK(range.find("checkpoint_completion_target") != std::string::npos);
  CHECK(range.find("0 .. 1") != std::string::npos);
  CHECK(error_of("shared_buffers=8").find("shared_buffers") != std::string::npos);
  CHECK(error_of("checkpoint_timeout=500ms").find("checkpoint_timeout") != std::string::npos);
  CHECK(error_of("write_back_sweep=500ms").find("0 (off) or 1s .. 1h") != std::string::npos);
  CHECK(error_of("bgwriter_lru_maxpages=-1").find("bgwriter_lru_maxpages") != std::string::npos);
  CHECK(error_of("io_method=aio").find("io_uring, sync") != std::string::npos);
  CHECK(error_of("log_checkpoints=maybe").find("log_checkpoints") != std::string::npos);
  CHECK(error_of("recovery_prefetch=sometimes").find("recovery_prefetch") != std::string::npos);
  CHECK(error_of("recovery_prefetch_distance=4kB").find("recovery_prefetch_distance") !=
        std::string::npos);
  CHECK(error_of("recovery_progress_interval=50ms").find("0 (off) or 100ms .. 1h") !=
        std::string::npos);
  CHECK(error_of("page_size=3000").find("page_size") != std::string::npos);
  CHECK(error_of("shared_buffers").find("KEY=VALUE") != std::string::npos);
}

TEST_CASE("config: wal_sync_concurrency takes a whole number from 1 to 16") {
  settings s;
  CHECK(s.wal_sync_concurrency == 2); // the default
  apply_assignment(s, "wal_sync_concurrency=1");
  CHECK(s.wal_sync_concurrency == 1);
  apply_assignment(s, "wal_sync_concurrency = 16");
  CHECK(s.wal_sync_concurrency == 16);
  apply_assignment(s, "wal_sync_concurrency=3");
  CHECK(s.wal_sync_concurrency == 3);
  CHECK_NOTHROW(validate(s));
  for (std::string bad : {"wal_sync_concurrency=0", "wal_sync_concurrency=17",
                          "wal_sync_concurrency=-1", "wal_sync_concurrency=1000000"}) {
    CAPTURE(bad);
    std::string error = error_of(bad);
    CHECK(error.find("wal_sync_concurrency") != std::string::npos);
    CHECK(error.find("1 .. 16") != std::string::npos);
  }
  for (std::string bad :
       {"wal_sync_concurrency=two", "wal_sync_concurrency=", "wal_sync_concurrency=4x",
        "wal_sync_concurrency=2.5", "wal_sync_concurrency=nan"}) {
    CAPTURE(bad);
    std::string error = error_of(bad);
    CHECK(error.find("wal_sync_concurrency") != std::string::npos);
    CHECK(error.find("1 .. 16") == std::string::npos); // says what is wrong, not a range
  }
  CHECK(error_of("wal_sync_concurrency=two").find("is not a number") != std::string::npos);
  CHECK(error_of("wal_sync_concurrency=2.5").find("whole number") != std::string::npos);
  // A refused value leaves the setting as it was.
  settings kept;
  apply_assignment(kept, "wal_sync_concurrency=5");
  CHECK_THROWS_AS(apply_assignment(kept, "wal_sync_concurrency=0"), config_error);
  CHECK(kept.wal_sync_concurrency == 5);
}

TEST_CASE("config: idle_poll takes on/off and refuses anything else") {
  settings s;
  CHECK_FALSE(s.idle_poll); // the default: a library does not spin its host's CPUs
  apply_assignment(s, "idle_poll=on");
  CHECK(s.idle_poll);
  apply_assignment(s, "idle_poll=off");
  CHECK_FALSE(s.idle_poll);
  apply_assignment(s, "idle_poll=on");
  CHECK(s.idle_poll);
  apply_assignment(s, "idle_poll=OFF");
  CHECK_FALSE(s.idle_poll);
  apply_assignment(s, "idle_poll=true");
  CHECK(s.idle_poll);
  apply_assignment(s, "idle_poll=0");
  CHECK_FALSE(s.idle_poll);
  for (std::string bad : {"idle_poll=maybe", "idle_poll=2", "idle_poll=onn", "idle_poll=o n"}) {
    CAPTURE(bad);
    std::string error = error_of(bad);
    CHECK(error.find("idle_poll") != std::string::npos);
    CHECK(error.find("on or off") != std::string::npos);
  }
  CHECK(error_of("idle_poll=").find("missing value for idle_poll") != std::string::npos);
}

TEST_CASE("config: wal_sync_concurrency and idle_poll round-trip through the configuration file") {
  settings s;
  apply_assignment(s, "wal_sync_concurrency=7");
  apply_assignment(s, "idle_poll=off");
  std::string rendered = render_config_file(s);
  CHECK(rendered.find("wal_sync_concurrency = 7") != std::string::npos);
  CHECK(rendered.find("idle_poll = off") != std::string::npos);
  char path[] = "/tmp/tidemark-conf-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << rendered;
  settings back;
  apply_config_file(back, path);
  std::remove(path);
  CHECK(back.wal_sync_concurrency == 7);
  CHECK_FALSE(back.idle_poll);
}

TEST_CASE("config: doublewrite without checksums is refused naming both settings (D7)") {
  settings s;
  apply_assignment(s, "data_checksums=off");
  apply_assignment(s, "torn_page_protection=doublewrite");
  try {
    validate(s);
    FAIL("accepted");
  } catch (const config_error& e) {
    std::string text = e.what();
    CHECK(text.find("doublewrite") != std::string::npos);
    CHECK(text.find("data_checksums") != std::string::npos);
  }
}

TEST_CASE("config: the file init writes reads back to the same settings") {
  settings s;
  apply_assignment(s, "shared_buffers=64MB");
  apply_assignment(s, "checkpoint_timeout=45s");
  apply_assignment(s, "bgwriter_lru_multiplier=3.5");
  apply_assignment(s, "doublewrite_flush_delay=0");
  char path[] = "/tmp/tidemark-conf-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  std::ofstream(path) << render_config_file(s);
  settings back;
  apply_config_file(back, path);
  std::remove(path);
  CHECK(back.shared_buffers == s.shared_buffers);
  CHECK(back.checkpoint_timeout == s.checkpoint_timeout);
  CHECK(back.bgwriter_lru_multiplier == s.bgwriter_lru_multiplier);
  CHECK(back.doublewrite_flush_delay.count() == 0);
  CHECK(render_config_file(s).find("doublewrite_flush_delay = 0ms") != std::string::npos);
  CHECK(render_config_file(back) == render_config_file(s));
}

TEST_CASE("config: a bad line in a file is reported with file and line number") {
  char path[] = "/tmp/tidemark-conf-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  std::ofstream(path) << "# comment\nshared_buffers = 64MB\nbogus = 1\n";
  settings s;
  std::string text;
  try {
    apply_config_file(s, path);
  } catch (const config_error& e) {
    text = e.what();
  }
  std::remove(path);
  CHECK(text.find("line 3") != std::string::npos);
  CHECK(text.find("bogus") != std::string::npos);
}

} // namespace
} // namespace tidemark::runtime

TEST_CASE("config: standby.conf takes whole numbers only, naming the file, line and key") {
  char pattern[] = "/tmp/tidemark-standby-conf-XXXXXX";
  std::string dir = mkdtemp(pattern);
  auto write = [&](const std::string& generation, const std::string& end) {
    std::ofstream(dir + "/standby.conf") << "primary = 127.0.0.1:5433\nstandby_name = s\n"
                                         << "generation = " << generation << "\n"
                                         << "backup_end_lsn = " << end << "\n";
  };
  write("2", "4096");
  auto read = tidemark::runtime::read_standby_file(dir);
  REQUIRE(read.has_value());
  CHECK(read->generation == 2);
  CHECK(read->backup_end_lsn == 4096);
  for (auto [generation, end] : {std::pair<const char*, const char*>{"12abc", "4096"},
                                 {"-1", "4096"},
                                 {"4294967296", "4096"},
                                 {"2", "0x10"},
                                 {"2", "18446744073709551616"}}) {
    CAPTURE(generation);
    CAPTURE(end);
    write(generation, end);
    try {
      tidemark::runtime::read_standby_file(dir);
      FAIL("accepted");
    } catch (const tidemark::config_error& error) {
      std::string what = error.what();
      CHECK(what.find("standby.conf line") != std::string::npos);
      CHECK(what.find("bad number for") != std::string::npos);
    }
  }
  std::remove((dir + "/standby.conf").c_str());
  rmdir(dir.c_str());
}
