// The `sync` I/O engine: everything is a blocking system call on the calling thread —
// pread/pwrite/fdatasync as in posix_engine, and a batch is its writes one after another.
//
// Invariants:
//  - write_batch() issues the writes one after another, in order.
//  - The engine has no state besides the (locked) fd registry, so it is thread-safe.
#include "storage/posix_engine.hpp"

namespace tidemark::storage {
namespace {

class sync_engine final : public posix_engine {
public:
  explicit sync_engine(bool read_only) : posix_engine(read_only) {}
  std::string name() const override { return "sync"; }

  void write_batch(const io_write* writes, std::size_t count) override {
    for (std::size_t i = 0; i < count; ++i)
      write(writes[i].fd, writes[i].data, writes[i].length, writes[i].offset);
  }
};

} // namespace

std::unique_ptr<io_engine> make_sync_engine(bool read_only) {
  return std::make_unique<sync_engine>(read_only);
}

std::unique_ptr<io_engine> make_read_only_engine() { return make_sync_engine(true); }

} // namespace tidemark::storage
