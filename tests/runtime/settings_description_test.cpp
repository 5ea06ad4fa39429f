// tidemark::describe_settings() (tidemark/settings.hpp) against the parser it describes:
// the same keys and defaults as the tidemark.conf a new directory gets, the same init-only
// settings, and for every setting a listing that the parser keeps — each listed value and
// both ends of each range accepted, the values just past a range refused, and a plain
// number counted in the unit listed.
#include "runtime/config.hpp"

#include <tidemark/settings.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace tidemark::runtime {
namespace {

bool accepts(const std::string& key, const std::string& value) {
  settings s;
  try {
    apply_setting(s, key, value);
    return true;
  } catch (const config_error&) {
    return false;
  }
}

std::string error_for(const std::string& key, const std::string& value) {
  settings s;
  try {
    apply_setting(s, key, value);
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

// The value a setting shows after `value` was applied to the defaults.
std::string shown_after(const std::string& key, const std::string& value) {
  settings s;
  apply_setting(s, key, value);
  return show_setting(s, key);
}

std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  for (std::size_t next; (next = text.find(separator, at)) != std::string::npos;
       at = next + separator.size())
    parts.push_back(text.substr(at, next - at));
  parts.push_back(text.substr(at));
  return parts;
}

// "64kB" -> 65536; "16 pages" -> 16 pages of the default page size.
std::uint64_t bytes_of(const std::string& text) {
  static const std::map<std::string, std::uint64_t> units = {
    {"B", 1},           {"kB", 1ull << 10}, {"MB", 1ull << 20},
    {"GB", 1ull << 30}, {"TB", 1ull << 40}, {" pages", settings{}.page_size}};
  std::size_t used = 0;
  std::uint64_t number = std::stoull(text, &used);
  auto unit = units.find(text.substr(used));
  REQUIRE_MESSAGE(unit != units.end(), "a size the test cannot read: " << text);
  return number * unit->second;
}

// "100ms", "1s", "1h", "1d" -> milliseconds.
std::int64_t ms_of(const std::string& text) {
  static const std::map<std::string, std::int64_t> units = {
    {"ms", 1}, {"s", 1000}, {"min", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};
  std::size_t used = 0;
  std::int64_t number = std::stoll(text, &used);
  auto unit = units.find(text.substr(used));
  REQUIRE_MESSAGE(unit != units.end(), "a duration the test cannot read: " << text);
  return number * unit->second;
}

// The text of a limit as a value to set ("16 pages" is set as the plain number 16).
std::string as_value(const std::string& limit) {
  auto pages = limit.find(" pages");
  return pages == std::string::npos ? limit : limit.substr(0, pages);
}

std::string decimal(double value) {
  std::ostringstream out;
  out.precision(15);
  out << value;
  return out.str();
}

TEST_CASE("describe_settings: the keys and defaults of the tidemark.conf a new directory gets") {
  std::vector<setting_description> listed = describe_settings();
  std::istringstream conf(render_config_file(settings{}));
  std::vector<std::pair<std::string, std::string>> written; // key, value
  for (std::string line; std::getline(conf, line);) {
    if (line.empty() || line[0] == '#')
      continue;
    auto eq = line.find(" = ");
    auto comment = line.find("\t# ");
    REQUIRE(eq != std::string::npos);
    REQUIRE(comment != std::string::npos);
    written.emplace_back(line.substr(0, eq), line.substr(eq + 3, comment - eq - 3));
    CHECK((line.find("(init)", comment) != std::string::npos) ==
          is_init_setting(written.back().first));
    CHECK((line.find("(reload)", comment) != std::string::npos) ==
          is_reloadable_setting(written.back().first));
  }
  REQUIRE(listed.size() == written.size());
  for (std::size_t i = 0; i < listed.size(); ++i) {
    CAPTURE(listed[i].name);
    CHECK(listed[i].name == written[i].first);
    CHECK((listed[i].default_value.empty() ? "''" : listed[i].default_value) == written[i].second);
    CHECK(listed[i].fixed_at_init == is_init_setting(listed[i].name));
    CHECK(listed[i].reloadable == is_reloadable_setting(listed[i].name));
    CHECK_FALSE((listed[i].reloadable && listed[i].fixed_at_init));
    CHECK_FALSE(listed[i].meaning.empty());
    CHECK_FALSE(listed[i].allowed.empty());
  }
}

TEST_CASE("describe_settings: every listed value and range is what the parser keeps") {
  const std::regex range(
    R"(^(0 \(off\) or |auto, or )?(\S+(?: pages)?) \.\. (\S+?)(, a multiple of (\S+))?$)");
  for (const setting_description& d : describe_settings()) {
    CAPTURE(d.name);
    CAPTURE(d.allowed);
    const std::string& key = d.name;
    std::string default_text = d.default_value.empty() ? "''" : d.default_value;
    CHECK(accepts(key, default_text));
    CHECK(shown_after(key, default_text) == d.default_value);
    std::smatch m;
    if (d.type == "boolean") {
      CHECK(d.allowed == "on | off");
      CHECK(accepts(key, "on"));
      CHECK(accepts(key, "off"));
      CHECK_FALSE(accepts(key, "maybe"));
    } else if (d.type == "enum" || d.allowed.find(" | ") != std::string::npos) {
      std::vector<std::string> values = split(d.allowed, " | ");
      CHECK(values.size() >= 2);
      for (const std::string& v : values) {
        CAPTURE(v);
        CHECK(accepts(key, v));
        CHECK(shown_after(key, v) == v);
      }
      const std::string other = d.type == "size" ? "12kB" : "no_such_value";
      CHECK_FALSE(accepts(key, other));
      std::string joined; // the error lists the same values
      for (const std::string& v : values)
        joined += (joined.empty() ? "" : ", ") + v;
      CHECK(error_for(key, other).find(joined) != std::string::npos);
    } else if (d.type == "list") {
      CHECK(accepts(key, "ANY 2 (a, b, c)"));
      CHECK(shown_after(key, "any 2 (a,b,c)") == "ANY 2 (a, b, c)");
      CHECK(shown_after(key, "a, b") == "FIRST 1 (a, b)");
      CHECK(shown_after(key, "2 (a, *)") == "FIRST 2 (a, *)");
      CHECK_FALSE(accepts(key, "ANY 0 (a)"));
      CHECK_FALSE(accepts(key, "FIRST 3 (a, b)"));
      CHECK_FALSE(accepts(key, "ANY 2 (a, a)"));
      CHECK_FALSE(accepts(key, "ANY 2 a, b"));
      CHECK_FALSE(accepts(key, "a b"));
    } else if (d.type == "address") {
      CHECK(accepts(key, "127.0.0.1:0"));
      CHECK(accepts(key, "''"));
      CHECK_FALSE(accepts(key, "nowhere"));
    } else {
      REQUIRE_MESSAGE(std::regex_match(d.allowed, m, range), "not a range the test can read");
      const bool zero_is_off = m[1].matched && m[1] == "0 (off) or ";
      if (m[1].matched && m[1] == "auto, or ") { // sized by Tidemark unless set
        CHECK(accepts(key, "auto"));
        CHECK(shown_after(key, "auto") == "auto");
      }
      const std::string low = m[2], high = m[3];
      CHECK(accepts(key, as_value(low)));
      CHECK(accepts(key, high));
      if (zero_is_off)
        CHECK(accepts(key, "0"));
      if (d.type == "size") {
        std::uint64_t lo = bytes_of(low), hi = bytes_of(high);
        if (lo > 0)
          CHECK_FALSE(accepts(key, std::to_string(lo - 1) + "B"));
        CHECK_FALSE(accepts(key, std::to_string(hi + 1) + "B"));
        if (m[5].matched)
          CHECK_FALSE(accepts(key, std::to_string(lo + bytes_of(m[5]) / 2) + "B"));
      } else if (d.type == "duration") {
        std::int64_t lo = ms_of(low), hi = ms_of(high);
        if (lo > 0)
          CHECK_FALSE(accepts(key, std::to_string(lo - 1) + "ms"));
        CHECK_FALSE(accepts(key, std::to_string(hi + 1) + "ms"));
      } else if (d.type == "integer") {
        CHECK_FALSE(accepts(key, decimal(std::stod(low) - 1)));
        CHECK_FALSE(accepts(key, decimal(std::stod(high) + 1)));
      } else {
        REQUIRE(d.type == "real");
        CHECK_FALSE(accepts(key, decimal(std::stod(low) - 0.01)));
        CHECK_FALSE(accepts(key, decimal(std::stod(high) + 0.01)));
      }
    }
    // A plain number counts the unit listed: the default, written that way, reads back
    // (a default of "auto" is no number).
    if ((d.type == "size" || d.type == "duration") && d.default_value != "auto") {
      REQUIRE_FALSE(d.unit.empty());
      std::string plain;
      if (d.type == "size") {
        std::uint64_t unit = d.unit == "pages" ? settings{}.page_size : bytes_of("1" + d.unit);
        std::uint64_t value = bytes_of(d.default_value);
        REQUIRE(value % unit == 0);
        plain = std::to_string(value / unit);
      } else {
        std::int64_t unit = ms_of("1" + d.unit), value = ms_of(d.default_value);
        REQUIRE(value % unit == 0);
        plain = std::to_string(value / unit);
      }
      CAPTURE(plain);
      CHECK(shown_after(key, plain) == d.default_value);
    }
  }
}

} // namespace
} // namespace tidemark::runtime
