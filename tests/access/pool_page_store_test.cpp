// The tree on the real page store: buffer pool, WAL, redo. A tree built by random puts and
// erases (splits up to new roots, full-page images after a redo point) is rebuilt by redo
// from its WAL alone into an empty pool; and with the WAL cut at random points (the tail a
// power loss takes, mid-record included), redo rebuilds exactly the operations whose
// records survived, and the tree passes check_tree every time. Reads without latches see
// whole, current values while writers change, split and erase and the pool evicts.
#include "access/pool_page_store.hpp"
#include "access/tree.hpp"
#include "storage/redo.hpp"
#include "storage/relation_files.hpp"
#include "storage/wal_reader.hpp"
#include "tests/storage/test_support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace tidemark::access;
namespace storage = tidemark::storage;
namespace fs = std::filesystem;

namespace {

constexpr std::size_t page_size = 8192;
constexpr std::uint64_t wal_segment = 256 * 1024;
constexpr rel_id pool_tree_rel = 10;

struct engine {
  explicit engine(const std::string& dir, std::size_t buffers = 4096)
    : files(*io, dir, page_size, 64 * page_size),
      wal(*io, storage::wal_options{dir, wal_segment, 1 << 20}, 0, 0), pool(buffers, files, true) {}
  std::unique_ptr<storage::io_engine> io = storage::make_io_engine(storage::io_method::sync);
  storage::relation_files files;
  storage::wal_log wal;
  storage::buffer_pool pool;
};

struct operation {
  std::string key;
  std::optional<std::string> value; // none: erase
  lsn_t end;                        // the WAL position after it (8-byte aligned)
};

// Random puts and erases; a checkpoint-like redo point midway, so that pages changed
// after it log full-page images.
std::vector<operation> build(engine& e, pool_page_store& store, int count) {
  tree::create(store, pool_tree_rel);
  tree t(store, pool_tree_rel);
  std::mt19937_64 random(3);
  std::vector<operation> log;
  for (int i = 0; i < count; ++i) {
    if (i == count / 2)
      e.wal.begin_redo_point();
    std::string key = "key" + std::to_string(random() % 4000) + std::string(random() % 30, 'p');
    if (random() % 4 == 0) {
      t.erase(key);
      log.push_back({key, std::nullopt, e.wal.inserted_lsn()});
    } else {
      std::string value(random() % 300, static_cast<char>('a' + random() % 26));
      t.put(key, value);
      log.push_back({key, value, e.wal.inserted_lsn()});
    }
  }
  e.wal.flush(e.wal.inserted_lsn());
  return log;
}

// The operations whose records end by `end` (insert positions are 8-byte aligned).
std::map<std::string, std::string> model_until(const std::vector<operation>& log, lsn_t end) {
  std::map<std::string, std::string> model;
  for (const operation& op : log) {
    if (op.end > storage::aligned_record_size(end))
      break;
    if (op.value)
      model[op.key] = *op.value;
    else
      model.erase(op.key);
  }
  return model;
}

// Redo of `dir`'s WAL into an empty pool over its files; the tree it leaves, and the end
// of the last record replayed.
std::map<std::string, std::string> recover(const std::string& dir, lsn_t* replayed_to) {
  auto io = storage::make_io_engine(storage::io_method::sync);
  storage::relation_files files(*io, dir, page_size, 64 * page_size);
  storage::buffer_pool pool(4096, files, true);
  std::atomic<lsn_t> replayed{0};
  std::atomic<std::uint64_t> records{0};
  storage::redo_options options;
  options.replayed = &replayed;
  options.records = &records;
  storage::wal_reader reader(*io, dir, wal_segment, page_size, 0);
  storage::replay(reader, pool, 1, nullptr, options);
  *replayed_to = replayed.load();
  pool_page_store store(pool, nullptr, false);
  REQUIRE(check_tree(store, pool_tree_rel) == "");
  tree t(store, pool_tree_rel);
  std::map<std::string, std::string> contents;
  for (auto entry = t.first_from("", true); entry; entry = t.first_from(entry->first, false))
    contents.insert(*entry);
  return contents;
}

} // namespace

TEST_CASE("a tree in the buffer pool is rebuilt by redo from its WAL alone") {
  storage::test::temp_dir dir;
  std::vector<operation> log;
  {
    engine e(dir.path());
    pool_page_store store(e.pool, &e.wal, true);
    log = build(e, store, 20000);
    CHECK(e.wal.counters().fpi.load() > 0);
  } // the pool is dropped: no data page was ever written
  lsn_t replayed;
  std::map<std::string, std::string> recovered = recover(dir.path(), &replayed);
  CHECK(storage::aligned_record_size(replayed) == log.back().end);
  CHECK(recovered == model_until(log, replayed));
  CHECK(recovered.size() > 1000);
}

TEST_CASE("a WAL cut anywhere recovers exactly the tree changes before the cut") {
  storage::test::temp_dir dir;
  std::vector<operation> log;
  {
    engine e(dir.path());
    pool_page_store store(e.pool, &e.wal, true);
    log = build(e, store, 8000);
  }
  std::mt19937_64 random(11);
  for (int cut_round = 0; cut_round < 12; ++cut_round) {
    storage::test::temp_dir copy;
    fs::copy(dir.path(), copy.path(),
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    // Zero everything from the cut on: the segment holding it from there, later ones whole.
    lsn_t cut = 1 + random() % log.back().end;
    CAPTURE(cut);
    for (const auto& entry : fs::directory_iterator(copy.path())) {
      std::string name = entry.path().filename().string();
      if (name.size() != 16 || name.find_first_not_of("0123456789ABCDEF") != std::string::npos)
        continue;
      lsn_t start = std::stoull(name, nullptr, 16);
      if (start >= cut) {
        fs::remove(entry.path());
      } else if (start + wal_segment > cut) {
        std::vector<char> zeros(start + wal_segment - cut, 0);
        FILE* file = std::fopen(entry.path().c_str(), "r+b");
        REQUIRE(file != nullptr);
        std::fseek(file, static_cast<long>(cut - start), SEEK_SET);
        std::fwrite(zeros.data(), 1, zeros.size(), file);
        std::fclose(file);
      }
    }
    lsn_t replayed;
    std::map<std::string, std::string> recovered = recover(copy.path(), &replayed);
    CHECK(replayed <= cut);
    CHECK(recovered == model_until(log, replayed));
  }
}

namespace {

// Writes dirty victims in place once the WAL covers them (W1), as the runtime's direct
// victim writer does.
struct wal_first_writer final : storage::victim_writer {
  explicit wal_first_writer(engine& e) : e(e) {}
  storage::victim_write write_victim(storage::buffer_id, page_id id, lsn_t lsn, void* copy,
                                     bool) override {
    e.wal.flush(lsn);
    storage::finalize_page_for_write(copy, page_size, id, true);
    e.files.write_page(id, copy);
    return storage::victim_write::completed;
  }
  engine& e;
};

// A value that says which key and which version it is, and is whole only if every byte
// is what those make it: "<key>/<version>/" then a letter they choose, as long as the key
// chooses (so that a new version overwrites the old one in place).
std::string versioned_value(int key, int version) {
  std::string head = std::to_string(key) + "/" + std::to_string(version) + "/";
  return head + std::string(300 + (key * 7) % 700 - head.size(), char('a' + (key + version) % 26));
}

// The version of a whole value of `key`; -1 when the value is not one versioned_value made.
int version_of(const std::string& value, int key) {
  std::size_t slash = value.find('/');
  std::size_t second = value.find('/', slash + 1);
  if (slash == std::string::npos || second == std::string::npos)
    return -1;
  int version = std::stoi(value.substr(slash + 1, second - slash - 1));
  return value == versioned_value(key, version) ? version : -1;
}

} // namespace

TEST_CASE("reads without latches see whole values, never older than one seen before, while "
          "writers replace, split and erase and a small pool evicts") {
  storage::test::temp_dir dir;
  engine e(dir.path(), 64); // the tree's leaves are twice as many as the pool's buffers
  wal_first_writer writer(e);
  e.pool.set_victim_writer(&writer);
  pool_page_store store(e.pool, &e.wal, true);
  tree::create(store, pool_tree_rel);
  constexpr int keys = 1500, versions = 60, writers = 2, readers = 2;
  auto key_of = [](int key) { return "key" + std::to_string(key); };

  std::atomic<int> writing{writers};
  std::atomic<int> writing_key[writers] = {};
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w)
    threads.emplace_back([&, w] { // thread w alone writes the keys k with k % writers == w
      tree t(store, pool_tree_rel);
      for (int version = 0; version < versions; ++version)
        for (int key = w; key < keys; key += writers) {
          writing_key[w].store(key);
          if ((key + version) % 5 == 4)
            t.erase(key_of(key));
          else
            t.put(key_of(key), versioned_value(key, version));
        }
      writing.fetch_sub(1);
    });
  std::atomic<long> torn{0}, went_back{0}, found{0};
  for (int r = 0; r < readers; ++r)
    threads.emplace_back([&, r] {
      tree t(store, pool_tree_rel);
      std::vector<int> newest(keys, -1);
      std::mt19937 random(r);
      while (writing.load() > 0) {
        // Half the reads go to the key a writer is changing now (its leaf is changing), half
        // anywhere (the leaf may be one the pool is evicting).
        int key = random() % 2 ? writing_key[random() % writers].load()
                               : static_cast<int>(random() % keys);
        std::optional<std::string> value = t.read(key_of(key)).value;
        if (!value)
          continue;
        int version = version_of(*value, key);
        found.fetch_add(1);
        if (version < 0)
          torn.fetch_add(1);
        else if (version < newest[key])
          went_back.fetch_add(1);
        newest[key] = std::max(newest[key], version);
      }
    });
  for (std::thread& thread : threads)
    thread.join();
  CHECK(found.load() > 0);
  CHECK(torn.load() == 0);
  CHECK(went_back.load() == 0);
  CHECK(e.files.nblocks(pool_tree_rel) > 2 * 64); // the pool evicted tree pages all along
  CHECK(check_tree(store, pool_tree_rel) == "");
  tree t(store, pool_tree_rel);
  for (int key = 0; key < keys; ++key) {
    std::optional<std::string> value = t.read(key_of(key)).value;
    int last = versions - 1;
    CAPTURE(key);
    if ((key + last) % 5 == 4)
      CHECK_FALSE(value.has_value());
    else
      CHECK(value == versioned_value(key, last));
  }
}
