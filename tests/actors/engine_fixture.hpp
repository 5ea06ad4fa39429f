// An engine over a fresh data directory for actor tests: storage objects built as the
// runtime builds them (prepare_storage), tracing on, I/O through the fault engine (so tests
// can make fsyncs fail), and no actors — each test spawns the ones it examines.
#pragma once

#include "runtime/instance.hpp"
#include "runtime/startup.hpp"

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tidemark::test {

struct engine_fixture {
  /// Puts a test engine (one that watches or delays calls) between the fault engine and
  /// the real one.
  using io_wrapper =
    std::function<std::unique_ptr<storage::io_engine>(std::unique_ptr<storage::io_engine>)>;

  std::string dir;
  runtime::engine engine;
  /// Called for every trace event as it is recorded, on the recording thread; a test sets
  /// it before it spawns the actors whose events it watches.
  std::function<void(const messages::trace_event&)> on_trace;

  explicit engine_fixture(std::vector<std::string> settings = {}, const io_wrapper& wrap = {},
                          storage::fault_config fault_settings = {}) {
    char pattern[] = "/tmp/tidemark-actor-test-XXXXXX";
    dir = std::string(mkdtemp(pattern)) + "/data";
    settings.insert(settings.begin(), "log_checkpoints=off"); // a test may turn it on
    runtime::instance::create(dir, settings, [](auto&, const auto&) {});
    auto plain = storage::make_io_engine(storage::io_method::sync);
    engine.data_dir = dir;
    engine.set_control(storage::read_control_file(*plain, dir));
    engine.config = runtime::resolve_settings(dir, settings, engine.control());
    auto real = storage::make_io_engine(storage::io_method::sync);
    auto faults =
      std::make_unique<storage::fault_engine>(wrap ? wrap(std::move(real)) : std::move(real),
                                              std::move(fault_settings));
    engine.faults = faults.get();
    engine.store.io = std::move(faults);
    engine.store.trace =
      std::make_unique<messages::trace_sink>(std::size_t(1) << 20,
                                             [this](const messages::trace_event& event) {
                                               if (on_trace)
                                                 on_trace(event);
                                             });
    runtime::prepare_storage(engine);
  }
  ~engine_fixture() { std::filesystem::remove_all(std::filesystem::path(dir).parent_path()); }

  /// Commits one transaction adding 1 at (rel, block, 64), through the real write path.
  void touch(storage::rel_id rel, storage::block_id block) {
    storage::page_transaction txn(*engine.store.pool, engine.store.wal.get(), *engine.tails,
                                  engine.full_page_writes(), engine.store.commit_log.get());
    txn.begin(engine.next_xid++);
    txn.add_i64({rel, block}, 64, 1);
    txn.commit();
  }

  /// Writes block 0 of `rel` (an empty page), so the relation's first segment file exists.
  void create_file(storage::rel_id rel) {
    std::vector<unsigned char> page(engine.config.page_size, 0);
    storage::finalize_page_for_write(page.data(), page.size(), {rel, 0}, true);
    engine.store.files->write_page({rel, 0}, page.data());
  }

  /// Events of one type, in order.
  std::vector<messages::trace_event> events(messages::trace_type type) const {
    std::vector<messages::trace_event> out;
    for (const auto& e : engine.store.trace->events())
      if (type == e.type)
        out.push_back(e);
    return out;
  }
};

} // namespace tidemark::test
