// The reports' one field list (visit_fields, tidemark/reports.hpp): it names every field of
// its struct, once, and the JSON the tidemark program writes (workload::set_fields) has
// every field under its published name with its value. So a field added to a report and
// its list reaches every writer without further changes, and one forgotten in the list
// fails here.
#include <tidemark/reports.hpp>

#include "workload/json.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace tidemark;

// Where each listed field sits in the struct: [offset, offset + size).
struct extent {
  std::size_t begin, end, align;
};

// Gives every listed field a value of its own (numbers 1, 2, ...), and records where it is.
struct field_filler {
  const unsigned char* base;
  std::vector<extent>* extents;
  std::vector<std::string>* names;
  template <class T>
  void operator()(const char* name, T& field) {
    const std::size_t n = names->size() + 1;
    if constexpr (std::is_same_v<T, bool>)
      field = true;
    else if constexpr (std::is_same_v<T, std::string>)
      field = "value-" + std::to_string(n);
    else
      field = static_cast<T>(n);
    auto at = static_cast<std::size_t>(reinterpret_cast<const unsigned char*>(&field) - base);
    extents->push_back({at, at + sizeof(T), alignof(T)});
    names->emplace_back(name);
  }
};

// The listed fields tile the struct: no gap between them (or at its end) that alignment
// padding does not explain, and none listed twice. A member missing from the list leaves
// a gap as wide as itself (a bool between two bools could hide in padding; every report
// member that could is listed beside members of its own size).
template <class Report>
std::vector<std::string> check_list_covers(Report& report) {
  std::vector<extent> extents;
  std::vector<std::string> names;
  report.visit_fields(
    field_filler{reinterpret_cast<const unsigned char*>(&report), &extents, &names});
  REQUIRE(!extents.empty());
  std::sort(extents.begin(), extents.end(),
            [](const extent& a, const extent& b) { return a.begin < b.begin; });
  std::size_t covered = 0;
  for (const extent& e : extents) {
    CAPTURE(e.begin);
    CHECK(e.begin >= covered);          // listed once
    CHECK(e.begin - covered < e.align); // nothing unlisted before it
    covered = e.end;
  }
  CHECK(sizeof(Report) - covered < alignof(Report)); // nothing unlisted at the end
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  return names;
}

// The JSON text of a field's value, as json_object writes it.
template <class T>
std::string value_text(const T& field) {
  if constexpr (std::is_same_v<T, bool>) {
    return field ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return '"' + field + '"';
  } else if constexpr (std::is_same_v<T, double>) {
    char text[64];
    std::snprintf(text, sizeof text, "%.6g", field);
    return text;
  } else {
    return std::to_string(field);
  }
}

// `rendered` has the entry "leaf": value, where leaf is the name's last part (JSON nests
// dotted names) and the value is not the start of a longer number.
bool has_entry(const std::string& rendered, const std::string& name, const std::string& value) {
  const std::string entry = '"' + name.substr(name.rfind('.') + 1) + "\": " + value;
  for (std::size_t at = rendered.find(entry); at != std::string::npos;
       at = rendered.find(entry, at + 1)) {
    const char next = at + entry.size() < rendered.size() ? rendered[at + entry.size()] : '\n';
    if (next == ',' || next == '\n' || next == '}')
      return true;
  }
  return false;
}

template <class Report>
void check_json_has_every_field() {
  Report report;
  const std::vector<std::string> names = check_list_covers(report);
  workload::json_object json;
  workload::set_fields(json, report);
  const std::string rendered = json.render();
  std::size_t seen = 0;
  report.visit_fields([&](const char* name, const auto& field) {
    CAPTURE(name);
    CHECK(has_entry(rendered, name, value_text(field)));
    ++seen;
  });
  CHECK(seen == names.size());
}

// A report whose list forgets a member.
struct incomplete_report {
  std::uint64_t listed = 0;
  std::uint64_t forgotten = 0;
  double also_listed = 0;
  template <class Visit>
  void visit_fields(Visit&& visit) {
    visit("listed", listed);
    visit("also_listed", also_listed);
  }
};

} // namespace

TEST_CASE("reports: the recovery report's field list names every field, and its JSON has each") {
  check_json_has_every_field<recovery_report>();
}

TEST_CASE("reports: the standby status's field list names every field, and its JSON has each") {
  check_json_has_every_field<standby_status>();
}

TEST_CASE("reports: the base backup report's field list names every field, and its JSON has each") {
  check_json_has_every_field<base_backup_report>();
}

TEST_CASE("reports: a member missing from a field list is found") {
  incomplete_report report;
  std::vector<extent> extents;
  std::vector<std::string> names;
  report.visit_fields(
    field_filler{reinterpret_cast<const unsigned char*>(&report), &extents, &names});
  REQUIRE(extents.size() == 2);
  CHECK(extents[1].begin - extents[0].end >= extents[1].align); // the gap the check fails on
}
