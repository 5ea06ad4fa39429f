// Message tracing: a sink that records every message between the write-path actors (time,
// sender, receiver, type, key fields), cheap enough to leave on in tests, and writes Chrome
// trace-event JSON (one track per actor) that Perfetto and chrome://tracing open.
//
// Recording takes a short lock and appends to a preallocated buffer; when the buffer is
// full further events are counted as dropped, never allocated. Event type names must be
// string literals (the sink stores the pointer).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace tidemark::messages {

enum class actor_role : std::uint8_t {
  application = 0,
  backend,
  wal_writer,
  bgwriter,
  checkpointer,
  sync_worker,
  dw_batcher,
  startup,
};
constexpr std::size_t actor_role_count = 8;
const char* to_string(actor_role role);

struct trace_event {
  std::int64_t time_ns = 0; // since the sink was created
  actor_role sender = actor_role::application;
  actor_role receiver = actor_role::application;
  const char* type = "";
  std::uint64_t a = 0, b = 0, c = 0; // key fields; their meaning per type is where the event is recorded
};

class trace_sink {
public:
  /// Called for every event as it is recorded, on the recording thread, before it is
  /// stored (capacity 0 stores nothing: a sink only for its listener).
  using listener = std::function<void(const trace_event&)>;

  explicit trace_sink(std::size_t capacity = 1 << 20, listener on_event = nullptr);

  void record(actor_role sender, actor_role receiver, const char* type, std::uint64_t a = 0,
              std::uint64_t b = 0, std::uint64_t c = 0);

  /// A copy of the events recorded so far, in recording order.
  std::vector<trace_event> events() const;
  std::uint64_t dropped() const { return dropped_.load(); }

  /// Chrome trace-event JSON: an instant event per message on the sender's track and a flow
  /// arrow to the receiver's track. io_error, naming the file, when it cannot be written.
  void write_chrome_json(const std::string& path) const;

private:
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  std::vector<trace_event> events_;
  std::size_t capacity_;
  std::atomic<std::uint64_t> dropped_{0};
  listener on_event_;
};

} // namespace tidemark::messages
