// A test io_engine that forwards every call to a real engine. Tests derive from it and
// override only the calls they watch, delay or fail (sync, open/close, ...); when
// io_engine's interface changes, this is the one wrapper to follow it.
#pragma once

#include "storage/io_engine.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace tidemark::storage::test {

class delegating_engine : public io_engine {
public:
  explicit delegating_engine(std::unique_ptr<io_engine> inner) : inner_(std::move(inner)) {}

  std::string name() const override { return inner_->name(); }
  int open_file(const std::string& path, bool create) override {
    return inner_->open_file(path, create);
  }
  void close_file(int fd) override { inner_->close_file(fd); }
  std::size_t read(int fd, void* data, std::size_t length, std::uint64_t offset) override {
    return inner_->read(fd, data, length, offset);
  }
  void write(int fd, const void* data, std::size_t length, std::uint64_t offset) override {
    inner_->write(fd, data, length, offset);
  }
  void write_batch(const io_write* writes, std::size_t count) override {
    inner_->write_batch(writes, count);
  }
  void sync(int fd, sync_kind kind) override { inner_->sync(fd, kind); }
  void write_back(int fd, std::uint64_t offset, std::uint64_t length, bool wait) override {
    inner_->write_back(fd, offset, length, wait);
  }
  void will_need(int fd, std::uint64_t offset, std::uint64_t length) override {
    inner_->will_need(fd, offset, length);
  }
  std::uint64_t file_size(int fd) override { return inner_->file_size(fd); }
  void truncate(int fd, std::uint64_t length) override { inner_->truncate(fd, length); }
  void rename(const std::string& from, const std::string& to) override { inner_->rename(from, to); }
  void unlink(const std::string& path) override { inner_->unlink(path); }
  void sync_directory(const std::string& dir) override { inner_->sync_directory(dir); }
  void sync_file_system(const std::string& dir) override { inner_->sync_file_system(dir); }
  std::string path_of(int fd) const override { return inner_->path_of(fd); }

protected:
  io_engine& inner() { return *inner_; }
  const io_engine& inner() const { return *inner_; }

private:
  std::unique_ptr<io_engine> inner_;
};

} // namespace tidemark::storage::test
