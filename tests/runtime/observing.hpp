// Observing a running database from a test: its log lines kept (and off stderr), and
// waiting until a condition on what it reports holds. Public-API tests only.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tidemark::test {

// Log lines of one database (open_options::log = lines.sink()).
struct log_lines {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string all;
    for (const std::string& line : lines)
      all += line + "\n";
    return all;
  }
  /// How many lines hold `text`.
  std::size_t count(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex);
    std::size_t found = 0;
    for (const std::string& line : lines)
      if (line.find(text) != std::string::npos)
        ++found;
    return found;
  }
  bool contains(const std::string& text) { return count(text) > 0; }
};

/// True once `condition()` holds; false when `limit` passed first. The pause only paces
/// the observer of what the database reports.
inline bool poll_until(const std::function<bool()>& condition,
                       std::chrono::steady_clock::duration limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return condition();
}

} // namespace tidemark::test
