// Minimal JSON writer: see json.hpp.
#include "workload/json.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace tidemark::workload {

std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void json_object::put(const std::string& path, std::string rendered) {
  std::vector<entry>* level = &entries_;
  std::size_t start = 0;
  for (;;) {
    std::size_t dot = path.find('.', start);
    std::string key =
      path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    entry* found = nullptr;
    for (entry& e : *level)
      if (e.key == key)
        found = &e;
    if (found == nullptr) {
      level->push_back(entry{key, {}, {}, false});
      found = &level->back();
    }
    if (dot == std::string::npos) {
      found->scalar = std::move(rendered);
      found->is_object = false;
      return;
    }
    found->is_object = true;
    level = &found->children;
    start = dot + 1;
  }
}

void json_object::set(const std::string& path, double value) {
  if (!std::isfinite(value))
    value = 0;
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", value);
  put(path, text);
}
void json_object::set(const std::string& path, std::uint64_t value) {
  put(path, std::to_string(value));
}
void json_object::set(const std::string& path, std::int64_t value) {
  put(path, std::to_string(value));
}
void json_object::set(const std::string& path, bool value) { put(path, value ? "true" : "false"); }
void json_object::set(const std::string& path, const std::string& value) {
  put(path, json_quote(value));
}

void json_object::set_list(const std::string& path, const std::vector<std::string>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i)
    out += (i ? ", " : "") + json_quote(values[i]);
  put(path, out + "]");
}

std::string json_object::render_entries(const std::vector<entry>& entries, int indent) {
  std::string pad(static_cast<std::size_t>(indent + 2), ' ');
  std::string out = "{\n";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const entry& e = entries[i];
    out += pad + json_quote(e.key) + ": " +
           (e.is_object ? render_entries(e.children, indent + 2) : e.scalar);
    out += i + 1 < entries.size() ? ",\n" : "\n";
  }
  return out + std::string(static_cast<std::size_t>(indent), ' ') + "}";
}

std::string json_object::render(int indent) const { return render_entries(entries_, indent); }

// Written beside it and renamed over it: a reader polling the file (a status file that
// is rewritten every interval) sees the old report or the new one, never half of one.
void json_object::write_file(const std::string& path) const {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << render() << "\n";
    out.close();
    if (!out)
      throw std::runtime_error("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + temporary + " to " + path);
}

} // namespace tidemark::workload
