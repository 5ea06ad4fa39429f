// The `io_uring` I/O engine (liburing): a batch of writes goes to the kernel in one
// submission. Single transfers and syncs are posix_engine's plain system calls: a single
// request gains nothing from a ring, and io_uring runs every fsync on an io-wq worker
// thread, which costs two thread hand-offs per WAL flush (measured: -30 % tps).
//
// Invariants:
//  - Each calling thread has its own ring (thread_local, created on first use with
//    ring_entries SQEs, destroyed at thread exit), so the engine is thread-safe without a
//    lock on the I/O path. Rings are shared by all engine objects a thread uses.
//  - Between calls a thread's ring is empty: a call returns (or throws) only after every
//    request it submitted has completed and its CQE was consumed, so no later call can see
//    a stale completion and the kernel never touches a caller's buffer after return.
//  - In flight never exceeds ring_entries (and the CQ ring holds twice as many), so
//    completions cannot overflow.
//  - Short writes are resubmitted for the remainder, -EINTR/-EAGAIN results are retried;
//    any other error stops new submissions, waits for what is in flight, then throws
//    io_error naming path, offset and length.
//  - Writes inside one write_batch() may complete in any order: a batch must not contain
//    overlapping writes.
//  - No heap allocation per call: each thread reuses its request and ready-list vectors.
#include "storage/check.hpp"
#include "storage/posix_engine.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <liburing.h>
#include <optional>
#include <vector>
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace tidemark::storage {
namespace {

constexpr unsigned ring_entries = 64;

#if defined(__SANITIZE_THREAD__)
// liburing maps and unmaps a ring with raw system calls ThreadSanitizer does not see, so
// when a thread's ring is closed at its exit and a later thread's ring is mapped at the
// same address, TSan takes the new ring's writes for races with the old one's. The kernel
// orders them (the old mapping is gone before the new one is made); these tell TSan so:
// a ring's thread releases this key as it closes the ring, every new ring acquires it.
char ring_reuse_key;
void ring_closing() { __tsan_release(&ring_reuse_key); }
void ring_created() { __tsan_acquire(&ring_reuse_key); }
#else
void ring_closing() {}
void ring_created() {}
#endif

// io_uring lengths are 32-bit; larger transfers are continued like short ones.
constexpr std::size_t max_bytes_per_request = std::size_t{1} << 30;

// The calling thread's ring, created on first use.
class thread_ring {
public:
  thread_ring() = default;
  thread_ring(const thread_ring&) = delete;
  thread_ring& operator=(const thread_ring&) = delete;
  ~thread_ring() { discard(); }

  io_uring& get() {
    if (!ready_)
      create();
    return ring_;
  }

  /// Closes the ring, dropping prepared but unsubmitted SQEs; the next get() makes a new one.
  void discard() {
    if (ready_) {
      ring_closing();
      io_uring_queue_exit(&ring_);
    }
    ready_ = false;
  }

private:
  void create() {
    const int result = io_uring_queue_init(ring_entries, &ring_, 0);
    if (result < 0)
      throw io_error("io_uring_queue_init failed" + describe_errno(-result) +
                       " (the kernel refused an io_uring; use io_method=sync)",
                     -result);
    ring_created();
    ready_ = true;
  }

  io_uring ring_{};
  bool ready_ = false;
};

thread_local thread_ring this_thread_ring;

struct request {
  int fd = -1;
  const unsigned char* write_from = nullptr;
  unsigned char* read_into = nullptr; // a read when set
  std::size_t length = 0;
  std::uint64_t offset = 0;
  std::size_t done = 0; // bytes transferred so far
};

// Reused by every call on this thread (no allocation per batch once grown).
thread_local std::vector<request> this_thread_requests;
thread_local std::vector<std::size_t> this_thread_ready;

struct failure {
  const char* operation = nullptr;
  const request* where = nullptr;
  int error_number = 0;
};

class uring_engine final : public posix_engine {
public:
  uring_engine() { this_thread_ring.get(); } // surface a refused ring at construction

  std::string name() const override { return "io_uring"; }

  /// One submission for the whole batch; a single write is a plain pwrite.
  void write_batch(const io_write* writes, std::size_t count) override {
    if (count == 1) {
      write(writes[0].fd, writes[0].data, writes[0].length, writes[0].offset);
      return;
    }
    std::vector<request>& requests = this_thread_requests;
    requests.clear();
    for (std::size_t i = 0; i < count; ++i)
      requests.push_back(write_request(writes[i]));
    execute(requests.data(), requests.size());
  }

  /// One submission for the whole batch; a single read is a plain pread.
  void read_batch(const io_read* reads, std::size_t count) override {
    if (count == 1) {
      read(reads[0].fd, reads[0].data, reads[0].length, reads[0].offset);
      return;
    }
    std::vector<request>& requests = this_thread_requests;
    requests.clear();
    for (std::size_t i = 0; i < count; ++i) {
      request r;
      r.fd = reads[i].fd;
      r.read_into = static_cast<unsigned char*>(reads[i].data);
      r.length = reads[i].length;
      r.offset = reads[i].offset;
      requests.push_back(r);
    }
    execute(requests.data(), requests.size());
    for (std::size_t i = 0; i < count; ++i)
      check_readable(reads[i].fd);
  }

private:
  class runner;

  static request write_request(const io_write& w) {
    request r;
    r.fd = w.fd;
    r.write_from = static_cast<const unsigned char*>(w.data);
    r.length = w.length;
    r.offset = w.offset;
    return r;
  }

  void execute(request* requests, std::size_t count);

  [[noreturn]] void raise(const failure& f) const {
    const request& r = *f.where;
    throw_transfer_error(f.operation, r.fd, r.length - r.done, r.offset + r.done, f.error_number);
  }
};

// Drives the requests of one engine call through this thread's ring until all completed
// (or one failed and everything in flight has drained).
class uring_engine::runner {
public:
  runner(io_uring& ring, request* requests, std::size_t count)
    : ring_(ring), requests_(requests), ready_(this_thread_ready) {
    ready_.clear();
    for (std::size_t i = count; i-- > 0;) // reversed: ready_ is a stack, submit in order
      if (requests[i].length > 0)
        ready_.push_back(i);
    unfinished_ = ready_.size();
  }

  /// Returns the first failure, if any, once nothing is in flight any more.
  std::optional<failure> run() {
    for (;;) {
      if (!failure_)
        prepare_ready();
      submit_prepared();
      if (in_flight_ == 0)
        break;
      wait_and_reap();
    }
    TIDEMARK_CHECK(failure_ || (unfinished_ == 0 && prepared_ == 0),
                   "a batch ends with every request completed, unless one failed");
    return failure_;
  }

  /// True when the ring holds SQEs that could not be submitted: it must be discarded.
  bool ring_unusable() const { return prepared_ > 0; }

private:
  // Fills SQEs while requests wait and fewer than ring_entries are prepared or in flight.
  void prepare_ready() {
    while (!ready_.empty() && prepared_ + in_flight_ < ring_entries) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr)
        return; // SQ ring full: submit, reap, continue
      prepare(*sqe, ready_.back());
      ready_.pop_back();
      ++prepared_;
    }
  }

  void prepare(io_uring_sqe& sqe, std::size_t index) {
    request& r = requests_[index];
    const std::size_t chunk = std::min(r.length - r.done, max_bytes_per_request);
    const auto chunk32 = static_cast<unsigned>(chunk);
    if (r.read_into != nullptr)
      io_uring_prep_read(&sqe, r.fd, r.read_into + r.done, chunk32, r.offset + r.done);
    else
      io_uring_prep_write(&sqe, r.fd, r.write_from + r.done, chunk32, r.offset + r.done);
    io_uring_sqe_set_data64(&sqe, index);
  }

  // Hands prepared SQEs to the kernel. A refusal with requests in flight is retried after
  // reaping (each round reaps at least one completion, so this ends); a refusal with
  // nothing in flight is a failure.
  void submit_prepared() {
    if (prepared_ == 0 || submit_failed_)
      return;
    int submitted;
    do {
      submitted = io_uring_submit(&ring_);
    } while (submitted == -EINTR);
    if (submitted > 0) {
      TIDEMARK_CHECK(static_cast<std::size_t>(submitted) <= prepared_,
                     "the kernel took no more requests than were prepared");
      prepared_ -= static_cast<std::size_t>(submitted);
      in_flight_ += static_cast<std::size_t>(submitted);
      return;
    }
    const int error_number = submitted == 0 ? EAGAIN : -submitted;
    if ((error_number == EAGAIN || error_number == EBUSY) && in_flight_ > 0)
      return;
    submit_failed_ = true;
    record_failure("io_uring_submit", requests_[0], error_number);
  }

  void wait_and_reap() {
    io_uring_cqe* cqe = nullptr;
    int result;
    do {
      result = io_uring_wait_cqe(&ring_, &cqe);
    } while (result == -EINTR);
    if (result < 0)
      abandon_in_flight(-result);
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      complete(static_cast<std::size_t>(io_uring_cqe_get_data64(cqe)), cqe->res);
      ++seen;
    }
    io_uring_cq_advance(&ring_, seen);
  }

  // The kernel may still use the callers' buffers: returning would corrupt memory or disk.
  [[noreturn]] void abandon_in_flight(int error_number) {
    std::fprintf(stderr, "tidemark: io_uring_wait_cqe failed with %zu requests in flight%s\n",
                 in_flight_, describe_errno(error_number).c_str());
    std::abort();
  }

  void complete(std::size_t index, int result) {
    TIDEMARK_CHECK(in_flight_ > 0, "a completion belongs to a request in flight");
    --in_flight_;
    request& r = requests_[index];
    if (result < 0) {
      if (is_retryable(-result))
        ready_.push_back(index);
      else
        record_failure(r.read_into != nullptr ? "read (io_uring)" : "write (io_uring)", r, -result);
    } else if (result == 0 && r.read_into != nullptr) {
      std::memset(r.read_into + r.done, 0, r.length - r.done); // past end of file, as read()
      r.done = r.length;
      finish();
    } else if (result == 0) {
      record_failure("write (io_uring, no progress)", r, EIO);
    } else {
      r.done += static_cast<std::size_t>(result);
      if (r.done < r.length)
        ready_.push_back(index); // short transfer: continue with the remainder
      else
        finish();
    }
  }

  void finish() {
    TIDEMARK_CHECK(unfinished_ > 0, "a request finishes once");
    --unfinished_;
  }

  void record_failure(const char* operation, const request& r, int error_number) {
    if (!failure_)
      failure_ = failure{operation, &r, error_number};
  }

  io_uring& ring_;
  request* requests_;
  std::vector<std::size_t>& ready_; // requests waiting for an SQE (stack)
  std::size_t unfinished_ = 0;      // requests not yet completely done
  std::size_t prepared_ = 0;        // SQEs filled in, not yet accepted by the kernel
  std::size_t in_flight_ = 0;       // submitted, completion not yet reaped
  bool submit_failed_ = false;
  std::optional<failure> failure_;
};

void uring_engine::execute(request* requests, std::size_t count) {
  runner run(this_thread_ring.get(), requests, count);
  const std::optional<failure> failed = run.run();
  if (run.ring_unusable())
    this_thread_ring.discard();
  if (failed)
    raise(*failed);
}

} // namespace

std::unique_ptr<io_engine> make_uring_engine() { return std::make_unique<uring_engine>(); }

} // namespace tidemark::storage
