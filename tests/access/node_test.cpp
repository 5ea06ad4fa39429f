// The node page format against a std::map model: random inserts, erases and replaces with
// keys at the limits, empty keys and long shared prefixes; after every operation the node
// passes check_node(), holds exactly the model, and the logged ops replayed on the page as
// it was rebuild it byte for byte (what redo does). Splits leave two valid nodes that
// together hold every item, bounded by the separator, the left truncated in place.
#include "access/node.hpp"

#include "storage/wal_record.hpp"

#include <doctest/doctest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

using namespace tidemark::access;
namespace storage = tidemark::storage;

namespace {

struct test_node {
  explicit test_node(std::size_t page_size, node_kind kind = node_kind::leaf) : page(page_size, 0) {
    page_edit edit(page.data(), page.size(), nullptr);
    init_node(edit, kind, kind == node_kind::leaf ? 0 : 1, 0, 0);
  }
  node_view view() const { return node_view(page.data(), page.size()); }

  // Runs `change` through a logged edit and checks that its ops rebuild the page; returns
  // the length of those ops.
  template <class Change>
  std::size_t change(Change&& change) {
    std::vector<unsigned char> before = page;
    page_changes log;
    page_edit edit(page.data(), page.size(), &log);
    change(edit);
    storage::apply_ops(before.data(), before.size(), log.data(), log.size());
    REQUIRE(before == page);
    page_changes collapsed = log;
    collapsed.collapse(page.data(), page.size());
    CHECK(collapsed.size() <= storage::op_header_size + page.size() - storage::page_header_size);
    return log.size();
  }

  std::vector<unsigned char> page;
};

// Keys drawn to make comparisons hard: shared prefixes, the empty key, the longest key.
std::string random_node_key(std::mt19937_64& random) {
  switch (random() % 8) {
    case 0:
      return "";
    case 1:
      return std::string(max_key_size, static_cast<char>('a' + random() % 3));
    case 2:
    case 3:
      return "prefix/" + std::string(random() % 40, 'x') + std::to_string(random() % 50);
    default: {
      std::string key(random() % 24, '\0');
      for (char& c : key)
        c = static_cast<char>(random() % 4); // small alphabet: many ties in the prefix
      return key;
    }
  }
}

std::string random_node_value(std::mt19937_64& random, std::size_t page_size,
                              std::size_t key_size) {
  std::size_t most = max_item_size(page_size) - item_footprint(key_size, 0);
  std::size_t length = random() % 4 == 0 ? random() % (most + 1) : random() % 64;
  std::string value(length, '\0');
  for (char& c : value)
    c = static_cast<char>(random());
  return value;
}

void expect_model(const node_view& node, const std::map<std::string, std::string>& model) {
  REQUIRE(check_node(node) == "");
  REQUIRE(node.slot_count() == model.size());
  std::size_t slot = 0;
  for (const auto& [key, value] : model) {
    item_view item = node.item(slot++);
    REQUIRE(item.key == key);
    REQUIRE(item.value() == value);
  }
}

} // namespace

TEST_CASE("keys compare as bytes, a prefix first") {
  CHECK(compare_keys("", "") == 0);
  CHECK(compare_keys("", "a") < 0);
  CHECK(compare_keys("ab", "a") > 0);
  CHECK(compare_keys("a\xff", "b") < 0);
  CHECK(compare_keys(std::string("a\0", 2), "a") > 0);
  CHECK(compare_keys("\x80", "\x7f") > 0); // unsigned bytes
}

TEST_CASE("a leaf under random inserts, erases and replaces matches a std::map") {
  for (std::size_t page_size : {std::size_t{4096}, std::size_t{8192}, std::size_t{32768}}) {
    CAPTURE(page_size);
    std::mt19937_64 random(page_size);
    test_node node(page_size);
    std::map<std::string, std::string> model;
    for (int step = 0; step < 20000; ++step) {
      std::string key = random_node_key(random);
      bool found;
      std::size_t slot = node.view().lower_bound(key, &found);
      REQUIRE(found == (model.count(key) == 1));
      if (found && random() % 2 == 0) {
        node.change([&](page_edit& edit) { erase_item(edit, slot); });
        model.erase(key);
      } else if (found) {
        std::string value = random_node_value(random, page_size, key.size());
        std::size_t old_length = node.view().item(slot).payload_length;
        std::size_t growth = value.size() > old_length ? value.size() - old_length : 0;
        if (!node.view().fits(growth))
          continue;
        node.change([&](page_edit& edit) {
          replace_item(edit, slot, 0, static_cast<std::uint32_t>(value.size()), value);
        });
        model[key] = value;
      } else {
        std::string value = random_node_value(random, page_size, key.size());
        if (!node.view().fits(item_footprint(key.size(), value.size())))
          continue;
        node.change([&](page_edit& edit) {
          insert_item(edit, slot, key, 0, static_cast<std::uint32_t>(value.size()), value);
        });
        model[key] = value;
      }
      expect_model(node.view(), model);
    }
  }
}

TEST_CASE("a full leaf splits into two nodes that hold every item, bounded by the separator") {
  for (std::size_t page_size : {std::size_t{4096}, std::size_t{8192}}) {
    for (int round = 0; round < 200; ++round) {
      CAPTURE(page_size);
      CAPTURE(round);
      std::mt19937_64 random(round * 7919 + page_size);
      test_node node(page_size);
      std::map<std::string, std::string> model;
      // Fill until an item does not fit, then split with it.
      for (;;) {
        std::string key = random_node_key(random);
        std::string value = random_node_value(random, page_size, key.size());
        if (model.count(key))
          continue;
        bool found;
        std::size_t slot = node.view().lower_bound(key, &found);
        if (node.view().fits(item_footprint(key.size(), value.size()))) {
          node.change([&](page_edit& edit) {
            insert_item(edit, slot, key, 0, static_cast<std::uint32_t>(value.size()), value);
          });
          model[key] = value;
          continue;
        }
        std::vector<node_item> items = node_items(node.view());
        items.insert(items.begin() + static_cast<std::ptrdiff_t>(slot),
                     node_item{key, 0, static_cast<std::uint32_t>(value.size()), value});
        model[key] = value;
        bool append = slot + 1 == items.size() && round % 2 == 0;
        std::size_t split = choose_split(items, page_size, 0, append);
        std::string separator = shortest_separator(items[split - 1].key, items[split].key);
        CHECK(compare_keys(items[split - 1].key, separator) < 0);
        CHECK(compare_keys(separator, items[split].key) <= 0);
        // As the tree splits: the node keeps the items below the separator in place (a
        // truncation logged in a few bytes), the rest go to a new node, and the new item then
        // goes to the half that covers it.
        std::vector<node_item> existing = node_items(node.view());
        std::size_t keep = 0;
        while (keep < existing.size() && compare_keys(existing[keep].key, separator) < 0)
          ++keep;
        std::vector<node_item> right_items(existing.begin() + static_cast<std::ptrdiff_t>(keep),
                                           existing.end());
        test_node& left = node;
        test_node right(page_size);
        std::size_t logged =
          left.change([&](page_edit& edit) { truncate_node(edit, keep, separator, 9); });
        CHECK(logged <= 96 + 11 * keep + separator.size()); // moves and slots, not items
        right.change([&](page_edit& edit) {
          build_node(edit, node_kind::leaf, 0, right_items, nullptr, 0, 8);
        });
        REQUIRE(check_node(left.view()) == "");
        REQUIRE(check_node(right.view()) == "");
        test_node& covering = compare_keys(key, separator) < 0 ? left : right;
        bool present;
        std::size_t at = covering.view().lower_bound(key, &present);
        REQUIRE(covering.view().fits(item_footprint(key.size(), value.size())));
        covering.change([&](page_edit& edit) {
          insert_item(edit, at, key, 0, static_cast<std::uint32_t>(value.size()), value);
        });
        REQUIRE(check_node(covering.view()) == "");
        CHECK(left.view().high_key() == separator);
        CHECK(left.view().right() == 9);
        CHECK(right.view().left() == 8);
        std::map<std::string, std::string> together;
        for (const node_view& half : {left.view(), right.view()})
          for (std::size_t s = 0; s < half.slot_count(); ++s)
            together[std::string(half.key(s))] = std::string(half.item(s).value());
        CHECK(together == model);
        CHECK(left.view().slot_count() + right.view().slot_count() == model.size());
        break;
      }
    }
  }
}

TEST_CASE("a split of an ascending load packs the left node") {
  std::size_t page_size = 8192;
  std::vector<node_item> items;
  for (int i = 0; i < 100; ++i) {
    std::string key = "key" + std::to_string(1000 + i);
    items.push_back({key, 0, 60, std::string(60, 'v')});
  }
  std::size_t even = choose_split(items, page_size, 0, false);
  std::size_t packed = choose_split(items, page_size, 0, true);
  CHECK(even == 50);
  CHECK(packed == 99);
}

TEST_CASE("an inner node routes a key to the child whose range holds it") {
  test_node node(8192, node_kind::inner);
  const char* keys[] = {"", "d", "h", "p"}; // the first counts as minus infinity
  for (std::uint32_t i = 0; i < 4; ++i)
    node.change([&](page_edit& edit) { insert_item(edit, i, keys[i], 0, 100 + i, {}); });
  REQUIRE(check_node(node.view()) == "");
  CHECK(node.view().item(node.view().child_slot("")).child() == 100);
  CHECK(node.view().item(node.view().child_slot("c")).child() == 100);
  CHECK(node.view().item(node.view().child_slot("d")).child() == 101);
  CHECK(node.view().item(node.view().child_slot("g")).child() == 101);
  CHECK(node.view().item(node.view().child_slot("h")).child() == 102);
  CHECK(node.view().item(node.view().child_slot("zz")).child() == 103);
}

TEST_CASE("check_node names what is wrong with a damaged node") {
  test_node node(4096);
  for (int i = 0; i < 10; ++i) {
    std::string key = "k" + std::to_string(i);
    node.change([&](page_edit& edit) { insert_item(edit, i, key, 0, 3, "val"); });
  }
  REQUIRE(check_node(node.view()) == "");
  SUBCASE("keys out of order") {
    std::swap(node.page[slots_offset], node.page[slots_offset + 2]);
    std::swap(node.page[slots_offset + 1], node.page[slots_offset + 3]);
    CHECK(check_node(node.view()).find("out of order") != std::string::npos);
  }
  SUBCASE("a slot pointing outside the item area") {
    std::uint16_t bad = 70;
    std::memcpy(&node.page[slots_offset], &bad, 2);
    CHECK(check_node(node.view()).find("outside the item area") != std::string::npos);
  }
  SUBCASE("dead bytes miscounted") {
    node.page[node_header_offset + 12] += 1;
    CHECK(check_node(node.view()).find("dead bytes") != std::string::npos);
  }
  SUBCASE("no magic") {
    node.page[node_header_offset] = 0;
    CHECK(check_node(node.view()).find("not a tree node") != std::string::npos);
  }
}
