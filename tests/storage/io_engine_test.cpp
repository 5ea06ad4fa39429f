// Tests of the real I/O engines: every test body runs against both `sync` and `io_uring`
// (TEST_CASE_TEMPLATE over the method), so the two keep the one contract of io_engine.hpp.
#include "storage/io_engine.hpp"
#include "tests/storage/io_methods.hpp"
#include "tests/storage/test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace tidemark::storage;

namespace {

using test::sync_method;
using test::uring_method;

std::vector<unsigned char> read_back(io_engine& io, int fd, std::size_t length,
                                     std::uint64_t offset) {
  std::vector<unsigned char> bytes(length);
  REQUIRE(io.read(fd, bytes.data(), length, offset) == length);
  return bytes;
}

// Runs `operation`, which must throw io_error; returns it.
template <typename Operation>
io_error caught_io_error(Operation operation) {
  try {
    operation();
  } catch (const io_error& error) {
    return error;
  }
  FAIL("expected io_error");
  return io_error("unreachable", 0);
}

bool has_dev_full() { return access("/dev/full", W_OK) == 0; }

} // namespace

TEST_CASE_TEMPLATE("io_engine: names itself", M, sync_method, uring_method) {
  CHECK(make_io_engine(M::method)->name() == M::name);
}

TEST_CASE_TEMPLATE("io_engine: write then read round trip", M, sync_method, uring_method) {
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  const int fd = io->open_file(dir.file("data"), true);
  CHECK(io->path_of(fd) == dir.file("data"));
  const auto pages = test::random_bytes(3 * 8192, 1);
  io->write(fd, pages.data(), pages.size(), 0);
  const auto odd = test::random_bytes(12345, 2);
  io->write(fd, odd.data(), odd.size(), 100000 + 777);
  CHECK(read_back(*io, fd, pages.size(), 0) == pages);
  CHECK(read_back(*io, fd, odd.size(), 100000 + 777) == odd);
  CHECK(read_back(*io, fd, 100, 8192 + 50) ==
        std::vector<unsigned char>(pages.begin() + 8192 + 50, pages.begin() + 8192 + 150));
  CHECK(io->read(fd, nullptr, 0, 0) == 0);
  io->close_file(fd);
}

TEST_CASE_TEMPLATE("io_engine: a large write round trips", M, sync_method, uring_method) {
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  const int fd = io->open_file(dir.file("large"), true);
  const auto bytes = test::random_bytes(8u << 20, 3);
  io->write(fd, bytes.data(), bytes.size(), 4096);
  CHECK(read_back(*io, fd, bytes.size(), 4096) == bytes);
  CHECK(io->file_size(fd) == bytes.size() + 4096);
  io->close_file(fd);
}

TEST_CASE_TEMPLATE("io_engine: a short read at end of file zero-fills", M, sync_method,
                   uring_method) {
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  const int fd = io->open_file(dir.file("short"), true);
  const auto bytes = test::random_bytes(100, 4);
  io->write(fd, bytes.data(), bytes.size(), 0);
  std::vector<unsigned char> buffer(4096, 0xAA);
  CHECK(io->read(fd, buffer.data(), buffer.size(), 0) == 100);
  CHECK(std::equal(bytes.begin(), bytes.end(), buffer.begin()));
  CHECK(std::all_of(buffer.begin() + 100, buffer.end(), [](unsigned char b) { return b == 0; }));
  std::fill(buffer.begin(), buffer.end(), 0xAA);
  CHECK(io->read(fd, buffer.data(), buffer.size(), 1 << 20) == 0);
  CHECK(std::all_of(buffer.begin(), buffer.end(), [](unsigned char b) { return b == 0; }));
  io->close_file(fd);
}

TEST_CASE_TEMPLATE("io_engine: read_batch reads each like read(), zero-filling past the end", M,
                   sync_method, uring_method) {
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  const int a = io->open_file(dir.file("a"), true);
  const int b = io->open_file(dir.file("b"), true);
  const auto bytes_a = test::random_bytes(3 * 4096, 11);
  const auto bytes_b = test::random_bytes(4096 + 100, 12);
  io->write(a, bytes_a.data(), bytes_a.size(), 0);
  io->write(b, bytes_b.data(), bytes_b.size(), 0);
  std::vector<std::vector<unsigned char>> out(5, std::vector<unsigned char>(4096, 0xAA));
  const io_read reads[] = {{a, out[0].data(), 4096, 2 * 4096},
                           {b, out[1].data(), 4096, 0},
                           {a, out[2].data(), 4096, 0},
                           {b, out[3].data(), 4096, 4096},
                           {b, out[4].data(), 4096, 1 << 20}};
  io->read_batch(reads, 5);
  CHECK(std::equal(out[0].begin(), out[0].end(), bytes_a.begin() + 2 * 4096));
  CHECK(std::equal(out[1].begin(), out[1].end(), bytes_b.begin()));
  CHECK(std::equal(out[2].begin(), out[2].end(), bytes_a.begin()));
  CHECK(std::equal(out[3].begin(), out[3].begin() + 100, bytes_b.begin() + 4096));
  CHECK(std::all_of(out[3].begin() + 100, out[3].end(), [](unsigned char x) { return x == 0; }));
  CHECK(std::all_of(out[4].begin(), out[4].end(), [](unsigned char x) { return x == 0; }));
  io->close_file(a);
  io->close_file(b);
}

TEST_CASE_TEMPLATE("io_engine: write_batch of 200 writes across 3 files", M, sync_method,
                   uring_method) {
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  int fds[3];
  for (int i = 0; i < 3; ++i)
    fds[i] = io->open_file(dir.file("batch" + std::to_string(i)), true);
  constexpr std::size_t count = 200;
  std::vector<std::vector<unsigned char>> contents;
  std::vector<io_write> writes;
  for (std::size_t i = 0; i < count; ++i) {
    contents.push_back(test::random_bytes(512 + (i % 7) * 1000, 100 + i));
    writes.push_back(
      io_write{fds[i % 3], contents.back().data(), contents.back().size(), (i / 3) * 8192});
  }
  io->write_batch(writes.data(), writes.size());
  for (std::size_t i = 0; i < count; ++i) {
    CAPTURE(i);
    CHECK(read_back(*io, writes[i].fd, writes[i].length, writes[i].offset) == contents[i]);
  }
  for (int fd : fds) {
    io->sync(fd, sync_kind::data);
    CHECK(io->file_size(fd) > 60 * 8192);
    io->close_file(fd);
  }
  io->write_batch(nullptr, 0);
}

TEST_CASE_TEMPLATE("io_engine: sync, file_size and truncate", M, sync_method, uring_method) {
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  const int fd = io->open_file(dir.file("sized"), true);
  CHECK(io->file_size(fd) == 0);
  const auto bytes = test::random_bytes(10000, 5);
  io->write(fd, bytes.data(), bytes.size(), 0);
  io->sync(fd, sync_kind::data);
  io->sync(fd, sync_kind::full);
  CHECK(io->file_size(fd) == 10000);
  io->truncate(fd, 4096);
  CHECK(io->file_size(fd) == 4096);
  io->truncate(fd, 65536);
  CHECK(io->file_size(fd) == 65536);
  CHECK(read_back(*io, fd, 100, 5000) == std::vector<unsigned char>(100, 0));
  io->close_file(fd);
}

TEST_CASE_TEMPLATE("io_engine: rename, unlink and sync_directory", M, sync_method, uring_method) {
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  const int fd = io->open_file(dir.file("tmp"), true);
  const auto bytes = test::random_bytes(4096, 6);
  io->write(fd, bytes.data(), bytes.size(), 0);
  io->sync(fd, sync_kind::full);
  io->close_file(fd);
  io->rename(dir.file("tmp"), dir.file("final"));
  io->sync_directory(dir.path());
  CHECK_THROWS_AS(io->open_file(dir.file("tmp"), false), io_error);
  const int renamed = io->open_file(dir.file("final"), false);
  CHECK(read_back(*io, renamed, bytes.size(), 0) == bytes);
  io->close_file(renamed);
  io->unlink(dir.file("final"));
  io->sync_directory(dir.path());
  CHECK_THROWS_AS(io->open_file(dir.file("final"), false), io_error);
}

TEST_CASE_TEMPLATE("io_engine: errors name the path", M, sync_method, uring_method) {
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  const std::string missing = dir.file("missing");
  const io_error open_error = caught_io_error([&] { io->open_file(missing, false); });
  CHECK(std::string(open_error.what()).find(missing) != std::string::npos);
  CHECK(open_error.error_number() == ENOENT);
  CHECK_FALSE(open_error.fsync_failed());
  const io_error rename_error = caught_io_error([&] { io->rename(missing, dir.file("x")); });
  CHECK(std::string(rename_error.what()).find(missing) != std::string::npos);
  const io_error unlink_error = caught_io_error([&] { io->unlink(missing); });
  CHECK(std::string(unlink_error.what()).find(missing) != std::string::npos);
  const io_error dir_error = caught_io_error([&] { io->sync_directory(missing); });
  CHECK(std::string(dir_error.what()).find(missing) != std::string::npos);
}

TEST_CASE_TEMPLATE("io_engine: a failed write names path, offset and length", M, sync_method,
                   uring_method) {
  if (!has_dev_full())
    return; // the failure is provoked with /dev/full
  auto io = make_io_engine(M::method);
  const int fd = io->open_file("/dev/full", false);
  const auto bytes = test::random_bytes(4096, 7);
  const io_error error = caught_io_error([&] { io->write(fd, bytes.data(), bytes.size(), 8192); });
  const std::string message = error.what();
  CHECK(message.find("/dev/full") != std::string::npos);
  CHECK(message.find("8192") != std::string::npos);
  CHECK(message.find("4096") != std::string::npos);
  CHECK(error.error_number() == ENOSPC);
  CHECK_FALSE(error.fsync_failed());
  io->close_file(fd);
}

TEST_CASE_TEMPLATE("io_engine: a failed write in a batch throws after the batch drained", M,
                   sync_method, uring_method) {
  if (!has_dev_full())
    return;
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  const int good = io->open_file(dir.file("good"), true);
  const int full = io->open_file("/dev/full", false);
  const auto bytes = test::random_bytes(4096, 8);
  std::vector<io_write> writes;
  for (std::size_t i = 0; i < 150; ++i)
    writes.push_back(io_write{i == 75 ? full : good, bytes.data(), bytes.size(), i * 4096});
  const io_error error = caught_io_error([&] { io->write_batch(writes.data(), writes.size()); });
  CHECK(std::string(error.what()).find("/dev/full") != std::string::npos);
  // The engine (and this thread's ring) stays usable.
  io->write(good, bytes.data(), bytes.size(), 0);
  CHECK(read_back(*io, good, bytes.size(), 0) == bytes);
  io->close_file(full);
  io->close_file(good);
}

TEST_CASE_TEMPLATE("io_engine: a failed sync reports fsync_failed", M, sync_method, uring_method) {
  if (!has_dev_full())
    return; // fsync of a character device fails with EINVAL
  auto io = make_io_engine(M::method);
  const int fd = io->open_file("/dev/full", false);
  const io_error error = caught_io_error([&] { io->sync(fd, sync_kind::data); });
  CHECK(error.fsync_failed());
  CHECK(std::string(error.what()).find("/dev/full") != std::string::npos);
  io->close_file(fd);
}

TEST_CASE_TEMPLATE("io_engine: after a failed sync every read is refused, naming the failure", M,
                   sync_method, uring_method) {
  if (!has_dev_full())
    return; // fsync of a character device fails with EINVAL
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  const int fd = io->open_file(dir.file("data"), true);
  const auto bytes = test::random_bytes(8192, 3);
  io->write(fd, bytes.data(), bytes.size(), 0);
  CHECK(read_back(*io, fd, bytes.size(), 0) == bytes);
  const int device = io->open_file("/dev/full", false);
  caught_io_error([&] { io->sync(device, sync_kind::data); });
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<unsigned char> back(bytes.size());
    const io_error error = caught_io_error([&] { io->read(fd, back.data(), back.size(), 0); });
    CHECK(error.fsync_failed());
    const std::string what = error.what();
    CHECK(what.find("read of '" + dir.file("data") + "' refused") != std::string::npos);
    CHECK(what.find("/dev/full") != std::string::npos); // the first failure
  }
  io->write(fd, bytes.data(), bytes.size(), 0); // only reads are refused
  io->close_file(device);
  io->close_file(fd);
}

TEST_CASE_TEMPLATE("io_engine: write_back keeps the data and fails like a sync", M, sync_method,
                   uring_method) {
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  const int fd = io->open_file(dir.file("paced"), true);
  const auto bytes = test::random_bytes(256 << 10, 7);
  io->write(fd, bytes.data(), bytes.size(), 0);
  io->write_back(fd, 0, bytes.size() / 2, false);
  io->write_back(fd, 0, bytes.size(), true);
  CHECK(read_back(*io, fd, bytes.size(), 0) == bytes);
  io->close_file(fd);
  if (!has_dev_full())
    return; // sync_file_range of a character device fails with ESPIPE
  const int device = io->open_file("/dev/full", false);
  const io_error error = caught_io_error([&] { io->write_back(device, 0, 4096, true); });
  CHECK(error.fsync_failed());
  CHECK(std::string(error.what()).find("/dev/full") != std::string::npos);
  io->close_file(device);
}

TEST_CASE_TEMPLATE("io_engine: threads share one engine", M, sync_method, uring_method) {
  test::temp_dir dir;
  auto io = make_io_engine(M::method);
  constexpr int thread_count = 4;
  std::vector<std::thread> threads;
  std::vector<int> mismatches(thread_count, 0);
  for (int t = 0; t < thread_count; ++t)
    threads.emplace_back([&, t] {
      const int fd = io->open_file(dir.file("thread" + std::to_string(t)), true);
      for (std::uint64_t round = 0; round < 50; ++round) {
        const auto bytes = test::random_bytes(8192, t * 1000 + round);
        io->write(fd, bytes.data(), bytes.size(), round * 8192);
        std::vector<unsigned char> back(bytes.size());
        io->read(fd, back.data(), back.size(), round * 8192);
        mismatches[t] += back != bytes;
      }
      io->sync(fd, sync_kind::data);
      io->close_file(fd);
    });
  for (auto& thread : threads)
    thread.join();
  for (int t = 0; t < thread_count; ++t)
    CHECK(mismatches[t] == 0);
}
