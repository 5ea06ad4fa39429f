// database::reload(): tidemark.conf read again while the database runs. A new
// checkpoint_timeout starts timed checkpoints that the old one kept away; a new
// bgwriter_lru_maxpages turns LRU cleaning on; a setting only a restart takes is named
// and keeps its value; settings given at open still win over the file; a broken file
// changes nothing.
#include "scratch_directory.hpp"

#include <tidemark/database.hpp>
#include <tidemark/errors.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace tidemark;

namespace {

// Replaces the line setting `key` in DIR/tidemark.conf with `key = value`.
void set_in_file(const std::string& dir, const std::string& key, const std::string& value) {
  const std::string path = dir + "/tidemark.conf";
  std::ifstream in(path);
  std::ostringstream out;
  bool found = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + " = ", 0) == 0) {
      line = key + " = " + value;
      found = true;
    }
    out << line << "\n";
  }
  REQUIRE(found);
  std::ofstream(path, std::ios::trunc) << out.str();
}

bool names(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

// Commits one transaction changing 8 pages of relation 1 from `block` on.
void write_pages(session& s, std::uint32_t block) {
  s.begin();
  for (std::uint32_t b = block; b < block + 8; ++b)
    s.add_i64({1, b}, 64, 1);
  s.commit();
}

std::unique_ptr<database> create_then_open(const std::string& dir,
                                           const std::vector<std::string>& in_file,
                                           const std::vector<std::string>& at_open = {}) {
  create_options create;
  create.settings = in_file;
  database::create(dir, create);
  open_options options;
  options.settings = at_open;
  return database::open(dir, options);
}

} // namespace

TEST_CASE("reload: a shorter checkpoint_timeout starts timed checkpoints without a restart") {
  test::scratch_directory scratch("tidemark-reload");
  auto db = create_then_open(scratch.dir, {"checkpoint_timeout=1h", "log_checkpoints=off"});
  session s = db->open_session();
  write_pages(s, 0);
  CHECK(db->stats().checkpoints.timed == 0);
  set_in_file(scratch.dir, "checkpoint_timeout", "1s");
  reload_report report = db->reload();
  CHECK(names(report.changed, "checkpoint_timeout = 1s"));
  CHECK(report.need_restart.empty());
  CHECK(db->setting("checkpoint_timeout") == "1s");
  // Something to checkpoint, until a timed checkpoint came (the deadline only bounds a
  // failure; the checkpointer looks every 100 ms).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (std::uint32_t block = 0;
       db->stats().checkpoints.timed == 0 && std::chrono::steady_clock::now() < deadline;
       block = (block + 8) % 256)
    write_pages(s, block);
  CHECK(db->stats().checkpoints.timed >= 1);
  db->close();
}

TEST_CASE("reload: bgwriter_lru_maxpages from 0 turns the bgwriter's cleaning on") {
  test::scratch_directory scratch("tidemark-reload");
  auto db = create_then_open(scratch.dir, {"shared_buffers=64", "bgwriter_lru_maxpages=0",
                                           "checkpoint_timeout=1h", "log_checkpoints=off"});
  session s = db->open_session();
  for (std::uint32_t block = 0; block < 512; block += 8)
    write_pages(s, block); // eight times the pool: sessions write every victim themselves
  CHECK(db->stats().buffers.written_by_bgwriter == 0);
  CHECK(db->stats().buffers.written_by_sessions > 0);
  set_in_file(scratch.dir, "bgwriter_lru_maxpages", "100");
  CHECK(names(db->reload().changed, "bgwriter_lru_maxpages = 100"));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (std::uint32_t block = 0;
       db->stats().buffers.written_by_bgwriter == 0 && std::chrono::steady_clock::now() < deadline;
       block = (block + 8) % 512)
    write_pages(s, block);
  CHECK(db->stats().buffers.written_by_bgwriter > 0);
  db->close();
}

TEST_CASE("reload: what only a restart takes is named and kept, settings given at open win, a "
          "broken file changes nothing") {
  test::scratch_directory scratch("tidemark-reload");
  auto db = create_then_open(scratch.dir, {"shared_buffers=1MB", "log_checkpoints=off"},
                             {"bgwriter_delay=20ms"});
  set_in_file(scratch.dir, "shared_buffers", "2MB");
  set_in_file(scratch.dir, "bgwriter_delay", "300ms"); // given at open: the open's stays
  set_in_file(scratch.dir, "checkpoint_completion_target", "0.5");
  reload_report report = db->reload();
  CHECK(report.changed == std::vector<std::string>{"checkpoint_completion_target = 0.5"});
  CHECK(report.need_restart == std::vector<std::string>{"shared_buffers = 2MB"});
  CHECK(db->setting("shared_buffers") == "1MB");
  CHECK(db->setting("bgwriter_delay") == "20ms");
  CHECK(db->setting("checkpoint_completion_target") == "0.5");

  set_in_file(scratch.dir, "checkpoint_completion_target", "0.7");
  set_in_file(scratch.dir, "max_wal_size", "lots");
  CHECK_THROWS_AS(db->reload(), config_error);
  CHECK(db->setting("checkpoint_completion_target") == "0.5"); // not half-applied
  db->close();
  CHECK_THROWS_AS(db->reload(), usage_error);
}

TEST_CASE("reload: a log callback may read a setting while reload() logs what it changed") {
  test::scratch_directory scratch("tidemark-reload");
  create_options create;
  create.settings = {"log_checkpoints=off"};
  database::create(scratch.dir, create);
  database* opened = nullptr;
  std::vector<std::string> seen; // the target as the callback read it, per reload line
  open_options options;
  options.log = [&](const std::string& line) {
    if (opened != nullptr && line.find("reloaded:") != std::string::npos)
      seen.push_back(opened->setting("checkpoint_completion_target"));
  };
  auto db = database::open(scratch.dir, options);
  opened = db.get();
  set_in_file(scratch.dir, "checkpoint_completion_target", "0.6");
  CHECK(names(db->reload().changed, "checkpoint_completion_target = 0.6"));
  CHECK(seen == std::vector<std::string>{"0.6"}); // the new value, read without a deadlock
  opened = nullptr;
  db->close();
}
