// standby_quorum: see standby_quorum.hpp.
#include "actors/standby_quorum.hpp"

#include "storage/standby_slots.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace tidemark::actors {

namespace {

// Words (standby names, '*', numbers, FIRST/ANY) and the punctuation between them.
std::vector<std::string> tokens_of(const std::string& text) {
  std::vector<std::string> tokens;
  for (std::size_t i = 0; i < text.size();) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '(' || c == ')' || c == ',') {
      tokens.emplace_back(1, c);
      ++i;
    } else {
      std::size_t end = i;
      while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) &&
             text[end] != '(' && text[end] != ')' && text[end] != ',')
        ++end;
      tokens.push_back(text.substr(i, end - i));
      i = end;
    }
  }
  return tokens;
}

bool is_number(const std::string& word) {
  return !word.empty() && word.size() <= 9 &&
         std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string upper(std::string word) {
  for (char& c : word)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return word;
}

[[noreturn]] void bad(const std::string& text, const std::string& why) {
  throw std::invalid_argument("\"" + text + "\": " + why +
                              " (expected FIRST k (a, b, ...), ANY k (a, b, ...), or a list of "
                              "standby names; '*' matches every name)");
}

// The names of a list from tokens[at] to the end.
std::vector<std::string> names_of(const std::string& text, const std::vector<std::string>& tokens,
                                  std::size_t at) {
  std::vector<std::string> names;
  for (bool expect_name = true; at < tokens.size(); ++at, expect_name = !expect_name) {
    const std::string& t = tokens[at];
    if (!expect_name) {
      if (t != ",")
        bad(text, "names are separated by commas");
      continue;
    }
    if (t != "*" && !storage::valid_standby_name(t))
      bad(text, "\"" + t + "\" is not a standby name (1-64 letters, digits, '.', '_', '-')");
    if (std::find(names.begin(), names.end(), t) != names.end())
      bad(text, "\"" + t + "\" is listed twice");
    names.push_back(t);
  }
  if (names.empty() || tokens.back() == ",")
    bad(text, "the list of names is empty or ends in a comma");
  return names;
}

} // namespace

standby_quorum standby_quorum::parse(const std::string& text) {
  std::vector<std::string> tokens = tokens_of(text);
  standby_quorum q;
  if (tokens.empty())
    return q; // any one standby
  std::size_t at = 0;
  q.how = method::first;
  if (upper(tokens[0]) == "FIRST" || upper(tokens[0]) == "ANY") {
    q.how = upper(tokens[0]) == "ANY" ? method::any : method::first;
    if (tokens.size() < 2 || !is_number(tokens[1]))
      bad(text, tokens[0] + " is followed by the number of standbys");
    at = 1;
  }
  if (at < tokens.size() && is_number(tokens[at])) { // k ( list )
    q.count = static_cast<std::uint32_t>(std::stoul(tokens[at]));
    if (tokens.size() < at + 3 || tokens[at + 1] != "(" || tokens.back() != ")")
      bad(text, "the names go in parentheses after the number");
    tokens.pop_back();
    q.names = names_of(text, tokens, at + 2);
  } else {
    q.count = 1;
    q.names = names_of(text, tokens, at);
  }
  if (q.count == 0)
    bad(text, "the number of standbys is at least 1");
  bool wildcard = std::find(q.names.begin(), q.names.end(), "*") != q.names.end();
  if (!wildcard && q.count > q.names.size())
    bad(text, "waits for " + std::to_string(q.count) + " standbys but names " +
                std::to_string(q.names.size()));
  return q;
}

std::string standby_quorum::to_string() const {
  if (*this == standby_quorum{})
    return "";
  std::string text = (how == method::any ? "ANY " : "FIRST ") + std::to_string(count) + " (";
  for (std::size_t i = 0; i < names.size(); ++i)
    text += (i > 0 ? ", " : "") + names[i];
  return text + ")";
}

bool standby_quorum::counts(const std::string& name) const {
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return n == "*" || n == name; });
}

storage::lsn_t standby_quorum::acknowledged(const std::vector<member>& live) const {
  // Each candidate with its priority: the place of the first list entry it matches.
  struct candidate {
    std::size_t priority;
    storage::lsn_t position;
  };
  std::vector<candidate> candidates;
  for (const member& m : live)
    for (std::size_t p = 0; p < names.size(); ++p)
      if (names[p] == "*" || names[p] == m.name) {
        candidates.push_back({p, m.position});
        break;
      }
  if (candidates.size() < count)
    return 0;
  if (how == method::first) { // the `count` of highest priority must all have it
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const candidate& a, const candidate& b) {
                       return a.priority < b.priority;
                     });
    storage::lsn_t lowest = candidates[0].position;
    for (std::size_t i = 1; i < count; ++i)
      lowest = std::min(lowest, candidates[i].position);
    return lowest;
  }
  // ANY: the count-th highest position
  std::sort(candidates.begin(), candidates.end(),
            [](const candidate& a, const candidate& b) { return a.position > b.position; });
  return candidates[count - 1].position;
}

} // namespace tidemark::actors
