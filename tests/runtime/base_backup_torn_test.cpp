// A page torn on the primary's disk while a base backup copies it (as a page being
// written in place as the backup reads it looks): the WAL sender finds it fails its
// checksum, copies the pool's copy instead and counts it (pages_reread); the copy's files
// then check clean, and a standby opened on it reads the page's committed bytes.
#include "replicated_primary.hpp"
#include "scratch_directory.hpp"

#include <tidemark/database.hpp>

#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace tidemark;

namespace {

constexpr relation_id relation = 2;
constexpr std::uint32_t blocks = 8;
constexpr std::uint32_t torn_block = 5;
constexpr std::uint32_t payload_offset = 64;

std::vector<unsigned char> payload(std::uint32_t block, std::size_t length) {
  std::vector<unsigned char> bytes(length);
  for (std::size_t i = 0; i < length; ++i)
    bytes[i] = static_cast<unsigned char>(block * 31 + i * 7);
  return bytes;
}

// Overwrites the second half of `block` in the relation's first segment file, behind the
// engine's back: the first half still matches the page, the rest does not.
void tear_on_disk(const std::string& dir, std::uint32_t page_size) {
  std::string path = dir + "/base/" + std::to_string(relation) + ".0";
  int fd = ::open(path.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  std::vector<unsigned char> garbage(page_size / 2, 0xA5);
  REQUIRE(::pwrite(fd, garbage.data(), garbage.size(),
                   off_t(torn_block) * page_size + page_size / 2) == ssize_t(garbage.size()));
  ::close(fd);
}

} // namespace

TEST_CASE("base backup: a page torn on the primary's disk is copied again from its pool, and the "
          "standby reads it whole") {
  test::scratch_directory primary_dir("tidemark-primary"), copy_dir("tidemark-standby");
  const std::vector<std::string> settings = {"shared_buffers=1MB", "log_checkpoints=off",
                                             "checkpoint_timeout=1h", "segment_size=1MB"};
  auto primary = test::create_replicated_primary(primary_dir.dir, settings);
  const std::uint32_t page_size = primary->page_size();
  const std::uint32_t length = page_size - 2 * payload_offset;
  {
    session s = primary->open_session();
    s.begin();
    for (std::uint32_t b = 0; b < blocks; ++b)
      s.write_bytes({relation, b}, payload_offset, payload(b, length).data(), length);
    s.commit();
  }
  primary->checkpoint(); // every page on disk, each still in the pool, clean
  tear_on_disk(primary_dir.dir, page_size);

  base_backup_report backup =
    database::base_backup(copy_dir.dir, primary->replication_address(), "torn");
  CHECK(backup.pages_reread == 1);
  file_check_report check = database::check_files(copy_dir.dir);
  CHECK(check.failures == 0);
  CHECK(check.pages_checked >= blocks);

  open_options options;
  options.settings = settings;
  options.settings.push_back("replication_listen=''");
  options.standby = true;
  auto standby = database::open(copy_dir.dir, options);
  // Replay up to the backup's end (the base backup's WAL) before reading.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (standby->standby().replayed < backup.end_lsn &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5)); // paces the observer only
  REQUIRE(standby->standby().replayed >= backup.end_lsn);
  session reader = standby->open_session();
  std::vector<unsigned char> read(length);
  reader.begin();
  reader.read_bytes({relation, torn_block}, payload_offset, read.data(), length);
  reader.commit();
  CHECK(read == payload(torn_block, length));
  standby->close();
  primary->close();
}
