// synchronous_standby_names: the syntax (PostgreSQL's), and the position a quorum of live
// standbys has reached for FIRST and ANY, with too few of them, with '*' and with names
// the list does not hold.
#include "actors/standby_quorum.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

using tidemark::actors::standby_quorum;
using method = standby_quorum::method;

TEST_CASE("synchronous_standby_names parses PostgreSQL's forms and refuses the rest") {
  standby_quorum any = standby_quorum::parse("ANY 2 (a, b, c)");
  CHECK(any.how == method::any);
  CHECK(any.count == 2);
  CHECK(any.names == std::vector<std::string>{"a", "b", "c"});
  CHECK(standby_quorum::parse("first 1(s1,s2)").to_string() == "FIRST 1 (s1, s2)");
  CHECK(standby_quorum::parse("s1, s2").to_string() == "FIRST 1 (s1, s2)");
  CHECK(standby_quorum::parse("2 (a, b)").to_string() == "FIRST 2 (a, b)");
  CHECK(standby_quorum::parse("ANY 3 (*)").to_string() == "ANY 3 (*)");
  CHECK(standby_quorum::parse("") == standby_quorum{});
  CHECK(standby_quorum::parse("  ").to_string().empty());
  for (const char* bad : {"ANY", "ANY x (a)", "ANY 0 (a)", "FIRST 3 (a, b)", "ANY 2 (a, a)",
                          "ANY 2 a, b", "ANY 2 (a, b", "a b", "a,", ",a", "(a)", "ANY 2 ()",
                          "a, b c", "ANY 1 (bad name)", "ANY 1 (a/b)"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(standby_quorum::parse(bad), std::invalid_argument);
  }
  CHECK_THROWS_WITH(standby_quorum::parse("FIRST 3 (a, b)"),
                    doctest::Contains("waits for 3 standbys but names 2"));
}

TEST_CASE("a quorum's position: ANY is the k-th highest, FIRST the lowest of the first k live") {
  standby_quorum any = standby_quorum::parse("ANY 2 (a, b, c)");
  CHECK(any.acknowledged({{"a", 300}, {"b", 100}, {"c", 200}}) == 200);
  CHECK(any.acknowledged({{"a", 300}, {"c", 200}}) == 200); // b is silent: a and c
  CHECK(any.acknowledged({{"a", 300}}) == 0);               // too few: commits wait
  CHECK(any.acknowledged({{"a", 300}, {"x", 500}}) == 0);   // x is not one of them

  standby_quorum first = standby_quorum::parse("FIRST 2 (a, b, c)");
  CHECK(first.acknowledged({{"c", 900}, {"a", 300}, {"b", 100}}) == 100); // a and b
  CHECK(first.acknowledged({{"c", 900}, {"a", 300}}) == 300);             // c takes b's place
  CHECK(first.acknowledged({{"c", 900}}) == 0);

  standby_quorum one = standby_quorum::parse("s1, s2");
  CHECK(one.acknowledged({{"s2", 50}, {"s1", 40}}) == 40); // s1 comes first
  CHECK(one.acknowledged({{"s2", 50}}) == 50);

  standby_quorum anyone; // the default: any one standby, whatever its name
  CHECK(anyone.acknowledged({{"x", 10}, {"y", 70}}) == 70);
  CHECK(anyone.acknowledged({}) == 0);
  CHECK(anyone.counts("whoever"));
  CHECK_FALSE(any.counts("x"));

  standby_quorum named_first = standby_quorum::parse("FIRST 2 (a, *)");
  CHECK(named_first.acknowledged({{"z", 10}, {"y", 90}, {"a", 50}}) ==
        10); // a, then the first of *
}
