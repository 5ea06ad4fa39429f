// Message tracing: see trace.hpp.
#include "messages/trace.hpp"

#include <tidemark/errors.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace tidemark::messages {

const char* to_string(actor_role role) {
  switch (role) {
    case actor_role::application:
      return "application";
    case actor_role::backend:
      return "backend";
    case actor_role::wal_writer:
      return "wal_writer";
    case actor_role::bgwriter:
      return "bgwriter";
    case actor_role::checkpointer:
      return "checkpointer";
    case actor_role::sync_worker:
      return "sync_worker";
    case actor_role::dw_batcher:
      return "dw_batcher";
    case actor_role::startup:
      return "startup";
  }
  return "?";
}

const char* to_string(trace_type type) {
  switch (type) {
#define TIDEMARK_TRACE_NAME(name) \
  case trace_type::name: \
    return #name;
    TIDEMARK_TRACE_EVENTS(TIDEMARK_TRACE_NAME)
#undef TIDEMARK_TRACE_NAME
  }
  return "?";
}

trace_sink::trace_sink(std::size_t capacity, listener on_event)
  : start_(std::chrono::steady_clock::now()), capacity_(capacity), on_event_(std::move(on_event)) {
  events_.reserve(capacity);
}

void trace_sink::record(actor_role sender, actor_role receiver, trace_type type, std::uint64_t a,
                        std::uint64_t b, std::uint64_t c) {
  auto now = std::chrono::steady_clock::now();
  trace_event event{std::chrono::duration_cast<std::chrono::nanoseconds>(now - start_).count(),
                    sender,
                    receiver,
                    type,
                    a,
                    b,
                    c};
  if (on_event_)
    on_event_(event);
  if (capacity_ == 0) { // a sink only for its listener: nothing to store, no lock to take
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::lock_guard<std::mutex> guard(mutex_);
  if (events_.size() >= capacity_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  events_.push_back(event);
}

std::vector<trace_event> trace_sink::events() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return events_;
}

void trace_sink::write_chrome_json(const std::string& path) const {
  std::vector<trace_event> copy = events();
  std::ofstream out(path);
  if (!out) {
    int error = errno != 0 ? errno : EIO;
    throw tidemark::io_error("cannot create trace file " + path + ": " + std::strerror(error),
                             error);
  }
  out << "{\"traceEvents\":[\n";
  for (std::size_t r = 0; r < actor_role_count; ++r)
    out << (r ? ",\n" : "") << "{\"ph\":\"M\",\"pid\":1,\"tid\":" << r
        << ",\"name\":\"thread_name\",\"args\":{\"name\":\""
        << to_string(static_cast<actor_role>(r)) << "\"}}";
  for (std::size_t i = 0; i < copy.size(); ++i) {
    const trace_event& e = copy[i];
    double us = double(e.time_ns) / 1000.0;
    char line[640];
    // An instant on the sender's track, and a flow arrow from sender to receiver.
    std::snprintf(line, sizeof line,
                  ",\n{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"name\":\"%s\","
                  "\"args\":{\"to\":\"%s\",\"a\":%llu,\"b\":%llu,\"c\":%llu}}"
                  ",\n{\"ph\":\"s\",\"id\":%zu,\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"name\":\"%s\","
                  "\"cat\":\"msg\"}"
                  ",\n{\"ph\":\"f\",\"bp\":\"e\",\"id\":%zu,\"pid\":1,\"tid\":%d,\"ts\":%.3f,"
                  "\"name\":\"%s\",\"cat\":\"msg\"}",
                  int(e.sender), us, to_string(e.type), to_string(e.receiver),
                  static_cast<unsigned long long>(e.a), static_cast<unsigned long long>(e.b),
                  static_cast<unsigned long long>(e.c), i, int(e.sender), us, to_string(e.type), i,
                  int(e.receiver), us, to_string(e.type));
    out << line;
  }
  out << "\n]}\n";
  out.close();
  if (!out)
    throw tidemark::io_error("cannot write trace file " + path, EIO);
}

} // namespace tidemark::messages
