// A standby's name is one standby's: the primary keeps WAL for it by name, so a second
// standby under the name would share (and advance) its slot. A base backup under a name
// another standby has is refused unless it takes the name over, and then the standby that
// had it is refused for good; a copy of a standby's directory running beside it waits
// instead of streaming on a second connection. Before, both were accepted.
#include <tidemark/database.hpp>

#include "observing.hpp"
#include "replicated_primary.hpp"
#include "scratch_directory.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace tidemark;

namespace {

const std::vector<std::string> settings = {"shared_buffers=1MB", "log_checkpoints=off"};
const std::string streaming = "standby \"s\" streaming from";

std::unique_ptr<database> open_standby(const std::string& dir, test::log_lines& log) {
  open_options options;
  options.settings = settings;
  options.settings.push_back("replication_listen=''");
  options.standby = true;
  options.log = log.sink();
  return database::open(dir, options);
}

} // namespace

TEST_CASE("standby names: a name in use is refused, and taken over only when asked") {
  test::scratch_directory primary_dir("tidemark-primary"), first_dir("tidemark-standby"),
    second_dir("tidemark-standby");
  test::log_lines primary_log, first_log, second_log;
  auto primary = test::create_replicated_primary(primary_dir.dir, settings, primary_log.sink());
  const std::string address = primary->replication_address();
  database::base_backup(first_dir.dir, address, "s");
  auto first = open_standby(first_dir.dir, first_log);
  REQUIRE(test::poll_until([&] { return primary_log.count(streaming) == 1; }));

  CHECK_THROWS_WITH_AS(database::base_backup(second_dir.dir, address, "s"),
                       doctest::Contains("belongs to another standby (that standby is streaming)"),
                       replication_error);
  CHECK_FALSE(std::filesystem::exists(second_dir.dir + "/standby.conf"));

  base_backup_options take_over;
  take_over.name = "s";
  take_over.take_over = true;
  database::base_backup(second_dir.dir, address, take_over);
  CHECK(primary_log.contains("base backup \"s\" takes the name over"));
  auto second = open_standby(second_dir.dir, second_log);
  // The standby that had the name is refused at its next request, for good.
  REQUIRE(test::poll_until([&] { return first->standby().refused; }));
  CHECK(first->standby().error.find("belongs to another standby") != std::string::npos);
  REQUIRE(test::poll_until([&] { return primary_log.count(streaming) == 2; }));
  CHECK(second->standby().refused == false);

  // The name and its owner are kept across the primary's restart.
  second->close();
  primary->close();
  primary.reset();
  open_options reopen;
  reopen.settings = settings;
  reopen.settings.push_back("replication_listen=127.0.0.1:0");
  primary = database::open(primary_dir.dir, reopen);
  std::filesystem::remove_all(first_dir.dir);
  CHECK_THROWS_WITH_AS(database::base_backup(first_dir.dir, primary->replication_address(), "s"),
                       doctest::Contains("the primary keeps WAL for that standby"),
                       replication_error);
  first->close();
  primary->close();
}

TEST_CASE("standby names: a copy of a standby's directory waits while the standby streams") {
  test::scratch_directory primary_dir("tidemark-primary"), standby_dir("tidemark-standby"),
    copy_dir("tidemark-standby");
  test::log_lines primary_log, standby_log, copy_log;
  auto primary = test::create_replicated_primary(primary_dir.dir, settings, primary_log.sink());
  database::base_backup(standby_dir.dir, primary->replication_address(), "s");
  std::filesystem::copy(standby_dir.dir, copy_dir.dir, std::filesystem::copy_options::recursive);
  auto standby = open_standby(standby_dir.dir, standby_log);
  REQUIRE(test::poll_until([&] { return primary_log.count(streaming) == 1; }));

  auto copy = open_standby(copy_dir.dir, copy_log);
  REQUIRE(test::poll_until(
    [&] { return copy->standby().error.find("on another connection") != std::string::npos; }));
  CHECK_FALSE(copy->standby().connected);
  CHECK_FALSE(copy->standby().refused); // it waits: the one streaming may go away
  CHECK(primary_log.count(streaming) == 1);

  standby->close(); // the copy takes the slot over once the standby is gone
  REQUIRE(test::poll_until([&] { return primary_log.count(streaming) == 2; }));
  CHECK(test::poll_until([&] { return copy->standby().connected; }));
  copy->close();
  primary->close();
}
