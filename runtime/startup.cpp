// Startup and crash recovery: see startup.hpp.
#include "runtime/startup.hpp"

#include "actors/page_sinks.hpp"
#include "storage/check.hpp"
#include "storage/directory_sync.hpp"
#include "storage/doublewrite_repair.hpp"
#include "storage/redo.hpp"
#include "storage/wal_reader.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <stdexcept>

#include <chrono>
#include <cstdio>

namespace tidemark::runtime {

namespace {

void check_init_setting(const std::string& key, std::uint64_t configured, std::uint64_t recorded,
                        const std::string& shown) {
  if (configured != recorded)
    throw config_error(key + " is fixed when the data directory is created: this directory has " +
                       key + " = " + shown + "; remove the setting or re-create the directory");
}

std::string wal_dir(const std::string& data_dir) { return data_dir + "/wal"; }

// Pass 1: read all WAL from the redo point without changing anything.
void validate_wal(engine& e, recovery_outcome& report, storage::lsn_t* prev) {
  const storage::control_data c = e.control();
  storage::wal_reader reader(*e.store.io, wal_dir(e.data_dir), c.wal_segment_size, c.page_size,
                             c.redo_lsn);
  if (reader.read_at(c.checkpoint_lsn) == nullptr)
    throw storage::data_error("control file points at checkpoint record " +
                              storage::format_lsn(c.checkpoint_lsn) +
                              " but no valid WAL record is there: WAL is missing or corrupt");
  storage::wal_reader scan(*e.store.io, wal_dir(e.data_dir), c.wal_segment_size, c.page_size,
                           c.redo_lsn);
  while (scan.next() != nullptr) {
  }
  if (auto corruption = scan.find_corruption())
    throw storage::data_error("WAL is corrupt at " + storage::format_lsn(corruption->bad_lsn) +
                              " in " + corruption->segment_path + " (" + corruption->reason +
                              "), yet the record at " + storage::format_lsn(corruption->proof_lsn) +
                              " shows WAL up to " + storage::format_lsn(corruption->proof_durable) +
                              " had been made durable; refusing to recover past lost commits");
  if (scan.end_lsn() <= c.checkpoint_lsn)
    throw storage::data_error("WAL ends at " + storage::format_lsn(scan.end_lsn()) +
                              " before the checkpoint record " +
                              storage::format_lsn(c.checkpoint_lsn));
  report.end_lsn = scan.end_lsn();
  report.end_reason = scan.end_description();
  *prev = scan.last_record_lsn();
}

// After a process crash the files may hold writes that reached only the page cache. Make
// them all durable before recovery overwrites anything: the ring before it is reused, the
// pages redo skips as already newer (they are never written again, and the WAL that would
// rebuild them is recycled once the redo point moves), the commit-status log, the WAL.
void sync_data_directory(engine& e, recovery_outcome& report) {
  storage::directory_sync_report synced =
    storage::sync_directory_tree(*e.store.io, e.data_dir, e.config.recovery_init_sync_method);
  report.startup_sync_files = synced.files;
  report.startup_sync_seconds = synced.seconds;
}

// DESIGN §6 step 3: eager repair from the doublewrite ring. It runs whatever the current
// setting says when the crashed run wrote through the ring (or did not record its mode).
void repair_torn_pages(engine& e, recovery_outcome& report) {
  auto recorded = static_cast<storage::recorded_protection>(e.control().protection);
  if (recorded != storage::recorded_protection::doublewrite &&
      recorded != storage::recorded_protection::unknown)
    return; // a clean start since the ring was last used made every page it protects durable
  std::string ring = e.data_dir + "/doublewrite/ring";
  storage::relation_files files(*e.store.io, e.data_dir + "/base", e.config.page_size,
                                e.config.segment_size);
  storage::repair_report repaired = storage::repair_from_ring(*e.store.io, ring, files);
  report.repair_seconds = repaired.seconds;
  report.ring_images_read = repaired.images_read;
  report.ring_records_read = repaired.records_read;
  report.ring_bytes_read = repaired.ring_bytes_read;
  report.ring_bounded = repaired.bounded;
  report.pages_repaired = repaired.pages_repaired;
  report.repaired_lsn = repaired.repaired_lsn;
  report.repaired_checksum = repaired.repaired_checksum;
  report.repaired_bytes = repaired.repaired_bytes;
}

// "LOG:  redo in progress: at 0/1A2B3C40, 45 % of 268 MB of WAL, 1234567 records, 412000
// records/s"
void log_redo_progress(const engine& e, const recovery_outcome& report, storage::lsn_t redo_lsn,
                       const storage::redo_progress& at) {
  const double total = double(report.end_lsn - redo_lsn);
  const double done = double(at.position - redo_lsn);
  char line[256];
  std::snprintf(line, sizeof line,
                "LOG:  redo in progress: at %s, %.0f %% of %.0f MB of WAL, %llu records, "
                "%.0f records/s",
                storage::format_lsn(at.position).c_str(), total > 0 ? 100.0 * done / total : 100.0,
                total / 1e6, static_cast<unsigned long long>(at.records),
                at.seconds > 0 ? double(at.records) / at.seconds : 0.0);
  e.log(line);
}

void build_storage(engine& e, storage::lsn_t end, storage::lsn_t prev) {
  const settings& s = e.config;
  storage::wal_options options;
  options.dir = wal_dir(e.data_dir);
  options.segment_size = s.wal_segment_size;
  options.buffer_size = s.wal_buffer_size();
  e.store.files = std::make_unique<storage::relation_files>(*e.store.io, e.data_dir + "/base",
                                                            s.page_size, s.segment_size);
  e.store.wal = std::make_unique<storage::wal_log>(*e.store.io, options, end, prev);
  e.store.wal->set_redo_lsn(e.control().redo_lsn);
  e.store.pool =
    std::make_unique<storage::buffer_pool>(s.buffer_count(), *e.store.files, s.data_checksums);
  e.tails = std::make_unique<storage::append_tails>(*e.store.files);
  e.store.commit_log = std::make_unique<storage::commit_log>(*e.store.io, e.data_dir + "/xact",
                                                             s.page_size, *e.store.wal,
                                                             e.store.registry);
  e.tables = std::make_unique<access::pool_page_store>(
    *e.store.pool, e.store.wal.get(), e.full_page_writes(), e.store.commit_log.get(),
    [engine = &e](const std::string& why) { engine->fail(why); });
  e.store.writer = std::make_unique<storage::page_writer>(*e.store.wal, *e.store.files,
                                                          e.store.registry, s.data_checksums);
  if (e.doublewrite()) {
    std::uint32_t ring_pages = s.doublewrite_ring_pages != 0
                                 ? s.doublewrite_ring_pages
                                 : storage::default_ring_pages(s.page_size);
    e.store.ring = std::make_unique<storage::doublewrite_ring>(
      *e.store.io, e.data_dir + "/doublewrite", s.page_size, ring_pages, s.doublewrite_batch_pages,
      std::min(storage::default_staging_chunks(s.bgwriter_lru_maxpages, s.doublewrite_batch_pages),
               ring_pages / s.doublewrite_batch_pages));
    e.store.victims = std::make_unique<actors::doublewrite_victim_writer>(e);
  } else {
    e.store.victims = std::make_unique<actors::direct_victim_writer>(*e.store.writer);
  }
  e.store.pool->set_victim_writer(e.store.victims.get());
}

} // namespace

std::string config_file_path(const std::string& data_dir) { return data_dir + "/tidemark.conf"; }

storage::recorded_protection record_of(torn_page_protection mode) {
  switch (mode) {
    case torn_page_protection::full_page_writes:
      return storage::recorded_protection::full_page_writes;
    case torn_page_protection::doublewrite:
      return storage::recorded_protection::doublewrite;
    case torn_page_protection::off:
      return storage::recorded_protection::off;
  }
  TIDEMARK_UNREACHABLE("record_of: every torn_page_protection has a recorded value");
}

std::optional<torn_page_protection> protection_of(storage::recorded_protection recorded) {
  switch (recorded) {
    case storage::recorded_protection::full_page_writes:
      return torn_page_protection::full_page_writes;
    case storage::recorded_protection::doublewrite:
      return torn_page_protection::doublewrite;
    case storage::recorded_protection::off:
      return torn_page_protection::off;
    case storage::recorded_protection::unknown:
      break;
  }
  return std::nullopt;
}

bool needs_recovery(const storage::control_data& control) {
  return control.state != static_cast<std::uint32_t>(storage::cluster_state::shut_down);
}

settings resolve_settings(const std::string& data_dir, const std::vector<std::string>& overrides,
                          const storage::control_data& control) {
  settings s;
  s.page_size = control.page_size;
  apply_config_file(s, config_file_path(data_dir));
  for (const std::string& o : overrides)
    apply_assignment(s, o);
  check_init_setting("page_size", s.page_size, control.page_size, format_bytes(control.page_size));
  check_init_setting("data_checksums", s.data_checksums, control.data_checksums,
                     control.data_checksums ? "on" : "off");
  check_init_setting("segment_size", s.segment_size, control.segment_size,
                     format_bytes(control.segment_size));
  check_init_setting("wal_segment_size", s.wal_segment_size, control.wal_segment_size,
                     format_bytes(control.wal_segment_size));
  validate(s);
  return s;
}

recovery_outcome prepare_storage(engine& e) {
  const storage::control_data control = e.control();
  recovery_outcome report;
  report.previous_state = storage::to_string(static_cast<storage::cluster_state>(control.state));
  report.redo_lsn = control.redo_lsn;
  storage::lsn_t prev = 0;
  validate_wal(e, report, &prev);
  report.needed = needs_recovery(control);
  report.protection = to_string(e.config.protection);
  if (report.needed) {
    sync_data_directory(e, report);
    repair_torn_pages(e, report);
  }
  build_storage(e, report.end_lsn, prev);
  e.next_xid.store(control.next_xid);
  return report;
}

void replay(engine& e, recovery_outcome& report, storage::received_wal* arrival) {
  if (!report.needed)
    return;
  // Where redo starts. On a standby the checkpointer's restartpoints replace the control
  // data while redo runs: redo keeps to this copy.
  const storage::control_data control = e.control();
  auto started = std::chrono::steady_clock::now();
  if (e.store.trace) // redo's bounds, so a trace tells writes during redo from later ones
    e.store.trace->record(messages::actor_role::startup, messages::actor_role::startup,
                          messages::trace_type::redo_begin, control.redo_lsn);
  storage::wal_reader reader(*e.store.io, wal_dir(e.data_dir), control.wal_segment_size,
                             control.page_size, control.redo_lsn);
  if (arrival != nullptr)
    reader.follow(arrival, &e.standby.wal_rereads);
  const storage::buffer_pool_counters& pool = e.store.pool->counters();
  const std::uint64_t reads_before = pool.reads.load(), prefetched_before = pool.prefetched.load(),
                      hits_before = pool.prefetch_hits.load();
  const std::uint64_t redo_writes_before = e.store.writer->written(storage::write_source::backend),
                      bgwriter_writes_before =
                        e.store.writer->written(storage::write_source::bgwriter);
  std::unique_ptr<storage::wal_prefetcher> prefetcher;
  if (e.config.recovery_prefetch)
    prefetcher = std::make_unique<storage::wal_prefetcher>(
      *e.store.io, wal_dir(e.data_dir), control.wal_segment_size, control.page_size,
      control.redo_lsn, arrival != nullptr ? ~storage::lsn_t{0} : report.end_lsn, *e.store.pool,
      *e.store.files, e.config.recovery_prefetch_distance, arrival,
      storage::wal_prefetcher::target::by_pool_size, &e.standby.wal_rereads);
  storage::redo_options options;
  options.prefetcher = prefetcher.get();
  if (arrival != nullptr) { // a standby shows its own status; redo tells it where it is
    options.replayed = &e.standby.replayed;
    options.records = &e.standby.records;
    options.checkpoint_replayed = [&e](storage::lsn_t at, const storage::checkpoint_payload& p) {
      e.standby.note_replayed_checkpoint({at, p.redo_lsn, p.next_xid, p.time_unix_ms});
    };
    options.before_reusing_unlinked = [&e] { e.tables->epochs().wait_for_sections(); };
  } else {
    options.progress_every = e.config.recovery_progress_interval;
  }
  options.progress = [&e, &report, &control](const storage::redo_progress& at) {
    log_redo_progress(e, report, control.redo_lsn, at);
  };
  storage::redo_summary summary =
    storage::replay(reader, *e.store.pool, control.next_xid, e.store.commit_log.get(), options);
  if (prefetcher) {
    prefetcher->stop();
    report.prefetch_error = prefetcher->report().error;
    report.pages_advised = prefetcher->report().advised;
  }
  report.end_lsn = reader.end_lsn();
  report.end_reason = reader.end_description();
  report.ended_at_stream_end = reader.ended_at_stream_end();
  report.last_record_lsn = reader.last_record_lsn();
  report.wal_bytes = report.end_lsn - control.redo_lsn;
  report.pages_read = pool.reads.load() - reads_before;
  report.pages_prefetched = pool.prefetched.load() - prefetched_before;
  report.prefetch_hits = pool.prefetch_hits.load() - hits_before;
  report.pages_written_by_redo =
    e.store.writer->written(storage::write_source::backend) - redo_writes_before;
  report.pages_written_by_bgwriter =
    e.store.writer->written(storage::write_source::bgwriter) - bgwriter_writes_before;
  if (e.store.trace)
    e.store.trace->record(messages::actor_role::startup, messages::actor_role::startup,
                          messages::trace_type::redo_end, summary.records);
  report.records = summary.records;
  report.blocks_applied = summary.blocks_applied;
  report.images_restored = summary.images_restored;
  e.next_xid.store(summary.next_xid);
  report.seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

} // namespace tidemark::runtime
