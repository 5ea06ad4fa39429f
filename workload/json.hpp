// A minimal JSON object writer for the command-line reports (bench, verify, recover).
// Nested objects by path: set("latency_ms.p99", 1.2) creates {"latency_ms": {"p99": 1.2}}.
// Keys keep insertion order.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tidemark::workload {

class json_object {
public:
  void set(const std::string& path, double value);
  void set(const std::string& path, std::uint64_t value);
  void set(const std::string& path, std::int64_t value);
  void set(const std::string& path, bool value);
  void set(const std::string& path, const std::string& value);
  void set(const std::string& path, const char* value) { set(path, std::string(value)); }
  void set_list(const std::string& path, const std::vector<std::string>& values);
  std::string render(int indent = 0) const;
  /// Writes the object to `path`; throws std::runtime_error naming the file.
  /// Replaces `path` atomically (a temporary file beside it, renamed over it).
  void write_file(const std::string& path) const;

private:
  struct entry {
    std::string key;
    std::string scalar; // rendered value, when not an object
    std::vector<entry> children;
    bool is_object = false;
  };
  void put(const std::string& path, std::string rendered);
  static std::string render_entries(const std::vector<entry>& entries, int indent);
  std::vector<entry> entries_;
};

std::string json_quote(const std::string& text);

/// Sets every field `report` lists (its visit_fields: tidemark/reports.hpp) under its
/// published name.
template <class Report>
void set_fields(json_object& json, const Report& report) {
  report.visit_fields([&json](const char* name, const auto& value) { json.set(name, value); });
}

} // namespace tidemark::workload
