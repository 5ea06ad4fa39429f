// A deterministic actor system plus an engine with just a WAL, on the fault engine (no
// faults unless a test asks for them), in a temporary directory: what the wal_writer tests
// drive. insert_record() appends one empty transaction record and returns its end LSN.
#pragma once

#include "deterministic_fixture.hpp"
#include "runtime/engine.hpp"
#include "storage/fault_engine.hpp"
#include "storage/wal_log.hpp"
#include "storage/wal_record.hpp"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

namespace tidemark::test {

struct wal_engine_fixture : deterministic_fixture {
  std::string dir;
  runtime::engine engine;

  explicit wal_engine_fixture(std::uint32_t sync_concurrency) {
    char pattern[] = "/tmp/tidemark-walwriter-XXXXXX";
    dir = mkdtemp(pattern);
    auto io =
      std::make_unique<storage::fault_engine>(storage::make_io_engine(storage::io_method::sync),
                                              storage::fault_config{});
    engine.faults = io.get();
    engine.store.io = std::move(io);
    engine.config.wal_sync_concurrency = sync_concurrency;
    engine.store.wal =
      std::make_unique<storage::wal_log>(*engine.store.io,
                                         storage::wal_options{dir, 1 << 20, 1 << 20}, 0, 0);
  }
  ~wal_engine_fixture() { std::filesystem::remove_all(dir); }

  storage::lsn_t insert_record(storage::xid_t xid) {
    storage::record_builder record;
    record.reset(storage::record_type::transaction, xid);
    record.finish();
    return engine.store.wal->insert(record, engine.store.wal->redo_lsn())->end;
  }
};

} // namespace tidemark::test
