// The embedding API: see database.hpp for the boot and shutdown order.
#include "runtime/instance.hpp"

#include "runtime/tables.hpp"

#include "actors/bgwriter.hpp"
#include "actors/checkpointer.hpp"
#include "actors/dw_batcher.hpp"
#include "actors/sync_worker.hpp"
#include "actors/wal_writer.hpp"
#include "runtime/data_directory.hpp"
#include "runtime/startup.hpp"
#include "storage/check.hpp"
#include "storage/directory_sync.hpp"
#include "storage/wal_reader.hpp"

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <thread>

namespace tidemark::runtime {

namespace {

// Messages an actor on the shared scheduler handles before its thread serves another.
constexpr std::size_t messages_per_turn = 16;
// How long idle pollers keep spinning after the last commit (a few group-commit cycles).
constexpr std::chrono::microseconds idle_poll_linger{2000};

// The engine `s` asks for, wrapped in the fault-injecting one when `faults` is set (then
// `*wrapper`, if given, points at the wrapper).
std::unique_ptr<storage::io_engine> make_engine(const settings& s,
                                                const std::optional<storage::fault_config>& faults,
                                                storage::fault_engine** wrapper = nullptr) {
  std::unique_ptr<storage::io_engine> real = storage::make_io_engine(s.io);
  if (!faults)
    return real;
  auto wrapped = std::make_unique<storage::fault_engine>(std::move(real), *faults);
  if (wrapper != nullptr)
    *wrapper = wrapped.get();
  return wrapped;
}

void write_initial_wal(storage::io_engine& io, const settings& s, const std::string& dir,
                       storage::control_data& control) {
  storage::wal_options options;
  options.dir = dir + "/wal";
  options.segment_size = s.wal_segment_size;
  options.buffer_size = s.wal_buffer_size();
  storage::wal_log wal(io, options, 0, 0);
  storage::checkpoint_payload payload{0, 1, 0};
  storage::record_builder record;
  record.reset(storage::record_type::checkpoint, 0);
  record.set_main_data(&payload, sizeof payload);
  record.finish();
  auto position = wal.insert(record, wal.redo_lsn());
  wal.flush(position->end);
  control.checkpoint_lsn = position->start;
  control.redo_lsn = position->start;
  control.next_xid = 1;
}

} // namespace

// ---- create ------------------------------------------------------------------------------

void instance::create(
  const std::string& dir, const std::vector<std::string>& overrides,
  const std::function<void(storage::relation_files&, const settings&)>& populate,
  const std::optional<storage::fault_config>& faults) {
  settings s;
  for (const std::string& o : overrides)
    apply_assignment(s, o);
  validate(s);
  check_new_data_directory(dir);
  make_data_directory_tree(dir);
  std::unique_ptr<storage::io_engine> io = make_engine(s, faults);
  storage::write_whole_file(*io, config_file_path(dir), render_config_file(s));
  {
    storage::relation_files files(*io, dir + "/base", s.page_size, s.segment_size);
    populate(files, s);
  }
  storage::control_data control;
  control.system_id = std::random_device{}() * 0x100000001ull;
  control.page_size = static_cast<std::uint32_t>(s.page_size);
  control.data_checksums = s.data_checksums;
  control.segment_size = s.segment_size;
  control.wal_segment_size = s.wal_segment_size;
  control.state = static_cast<std::uint32_t>(storage::cluster_state::shut_down);
  control.protection = static_cast<std::uint32_t>(record_of(s.protection));
  write_initial_wal(*io, s, dir, control);
  // Everything written so far (configuration, pages, WAL, directory entries) is durable
  // before the control file makes this a data directory.
  storage::sync_directory_tree(*io, dir, storage::directory_sync_method::fsync);
  storage::write_control_file(*io, dir, control);
  io->sync_directory(dir);
}

// ---- open ----------------------------------------------------------------------------------

namespace {

// The mode a start must recover in when it differs from the configured one: the mode the
// crashed run recorded. Pages it wrote since the redo point rely on that mode's protection
// (images in the WAL, or copies in the ring), and so do pages recovery writes.
std::optional<torn_page_protection> mode_to_recover_in(const std::string& dir,
                                                       const instance_options& options) {
  std::unique_ptr<storage::io_engine> reader = storage::make_io_engine(storage::io_method::sync);
  storage::control_data control = storage::read_control_file(*reader, dir);
  if (!needs_recovery(control))
    return std::nullopt;
  settings configured = resolve_settings(dir, options.overrides, control);
  auto recorded = protection_of(static_cast<storage::recorded_protection>(control.protection));
  if (!recorded || *recorded == configured.protection)
    return std::nullopt;
  return recorded;
}

} // namespace

std::unique_ptr<instance> instance::open(const std::string& dir, const instance_options& options) {
  check_data_directory(dir);
  if (options.standby) // a standby recovers in its primary's mode and switches with it
    return open_once(dir, options);
  std::optional<recovery_outcome> earlier;
  if (auto crashed_mode = mode_to_recover_in(dir, options)) {
    // Recover and stop cleanly in the crashed run's mode, then start in the new one.
    instance_options recover_options = options;
    recover_options.overrides.push_back(std::string("torn_page_protection=") +
                                        to_string(*crashed_mode));
    std::unique_ptr<instance> recovering = open_once(dir, recover_options);
    recovering->close();
    earlier = recovering->recovery_;
    earlier->protection_switched = true;
  }
  std::unique_ptr<instance> db = open_once(dir, options);
  if (earlier)
    db->recovery_ = *earlier;
  return db;
}

std::unique_ptr<instance> instance::open_read_only(const std::string& dir,
                                                   const instance_options& options) {
  check_data_directory(dir);
  std::unique_ptr<instance> db(new instance());
  db->read_only_ = true;
  db->lock_ = directory_lock::shared(dir);
  auto e = std::make_unique<engine>();
  e->data_dir = dir;
  e->store.io = storage::make_read_only_engine();
  const storage::control_data control = storage::read_control_file(*e->store.io, dir);
  e->set_control(control);
  if (needs_recovery(control))
    throw config_error("data directory \"" + dir + "\" was not shut down cleanly (" +
                       storage::to_string(static_cast<storage::cluster_state>(control.state)) +
                       "): a read-only open cannot run crash recovery; open it for writing "
                       "once, then read-only");
  e->config = resolve_settings(dir, options.overrides, control);
  db->current_ = e->config;
  e->log_sink = options.log;
  const settings& s = e->config;
  e->store.files = std::make_unique<storage::relation_files>(*e->store.io, dir + "/base",
                                                             s.page_size, s.segment_size);
  e->store.pool =
    std::make_unique<storage::buffer_pool>(s.buffer_count(), *e->store.files, s.data_checksums);
  e->tails = std::make_unique<storage::append_tails>(*e->store.files);
  e->tables = std::make_unique<access::pool_page_store>(*e->store.pool, nullptr, false);
  e->next_xid.store(control.next_xid);
  db->recovery_.previous_state =
    storage::to_string(static_cast<storage::cluster_state>(control.state));
  db->recovery_.protection = to_string(s.protection);
  db->engine_ = std::move(e);
  return db;
}

namespace {

config_error not_a_standby(const std::string& dir) {
  return config_error("\"" + dir +
                      "\" is not a standby (no standby.conf): make one with tidemark basebackup");
}

} // namespace

std::unique_ptr<instance> instance::open_once(const std::string& dir,
                                              const instance_options& options) {
  // Asked to run a standby in a directory that is none: refused before the lock file is
  // made, so that the refusal leaves the directory as it was.
  if (options.standby && !read_standby_file(dir))
    throw not_a_standby(dir);
  std::unique_ptr<instance> db(new instance());
  db->lock_ = directory_lock::exclusive(dir);
  db->detach_io_actors_ = options.detach_io_actors;
  auto e = std::make_unique<engine>();
  e->data_dir = dir;
  storage::control_data control;
  {
    // The control file is read with a plain engine: nothing is written before it is valid.
    std::unique_ptr<storage::io_engine> reader = storage::make_io_engine(storage::io_method::sync);
    control = storage::read_control_file(*reader, dir);
  }
  e->set_control(control);
  e->config = resolve_settings(dir, options.overrides, control);
  db->overrides_ = options.overrides;
  db->current_ = e->config;
  e->log_sink = options.log;
  e->store.io = make_engine(e->config, options.faults, &e->faults);
  db->standby_ = read_standby_file(dir);
  if (db->standby_ && db->standby_->generation < control.generation) {
    remove_standby_file(*e->store.io, dir); // a promotion completed its checkpoint, then crashed
    db->standby_.reset();
  }
  if (db->standby_ && !options.standby)
    throw config_error("\"" + dir + "\" is a standby of " + db->standby_->primary +
                       ": run it with tidemark standby, or make it a primary with tidemark "
                       "promote");
  if (!db->standby_ && options.standby)
    throw not_a_standby(dir);
  if (db->standby_)
    db->standby_primary_ = options.primary.empty() ? db->standby_->primary : options.primary;
  if (options.trace || options.trace_listener)
    e->store.trace =
      std::make_unique<messages::trace_sink>(options.trace ? std::size_t(1) << 20 : 0,
                                             options.trace_listener);
  db->recovery_ = prepare_storage(*e);
  if (!e->config.replication_listen.empty() && !db->standby_) {
    // Slots from before this start: their WAL is kept from the first checkpoint on.
    db->recorded_slots_ = storage::read_standby_slots(dir);
    for (const storage::standby_slot_record& slot : db->recorded_slots_)
      e->sender.keep_from.store(std::min(e->sender.keep_from.load(), slot.flushed));
  }
  // Every control file written from now on records the mode this run writes pages in.
  control.protection = static_cast<std::uint32_t>(record_of(e->config.protection));
  e->set_control(control);
  if (db->standby_)
    db->recovery_.needed = true; // a standby is always recovering
  e->recovering.store(db->recovery_.needed);
  db->engine_ = std::move(e);
  db->start_actors();
  if (db->standby_) {
    db->start_standby(options);
    return db;
  }
  try {
    replay(*db->engine_, db->recovery_);
    if (db->recovery_.needed) {
      const std::uint64_t written_before =
        db->engine_->store.writer->written(storage::write_source::checkpointer);
      auto started = std::chrono::steady_clock::now();
      db->request_checkpoint(messages::checkpoint_reason::end_of_recovery);
      db->recovery_.checkpoint_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      db->recovery_.pages_written_by_checkpoint =
        db->engine_->store.writer->written(storage::write_source::checkpointer) - written_before;
      db->log_recovery();
    } else {
      // The checkpointer runs already: its ticks read the control data meanwhile.
      control = db->engine_->control();
      control.state = static_cast<std::uint32_t>(storage::cluster_state::in_production);
      storage::write_control_file(*db->engine_->store.io, dir, control);
      db->engine_->set_control(control);
    }
  } catch (const std::exception& error) {
    // The directory must still need recovery: no checkpoint, no control file change, no
    // WAL recycled. A failed engine's close() writes nothing (engine.hpp).
    db->engine_->fail(std::string("recovery did not complete: ") + error.what());
    throw; // ~database stops the actors
  }
  db->engine_->recovering.store(false);
  ensure_catalog(*db->engine_);
  db->remove_leftover_tables();
  db->start_replication();
  return db;
}

void instance::remove_leftover_tables(
  const std::function<void(const std::vector<storage::rel_id>&)>& before_removing) {
  std::vector<storage::rel_id> dropped = dropped_table_relations(*this);
  if (dropped.empty())
    return;
  if (before_removing)
    before_removing(dropped);
  for (storage::rel_id relation : dropped)
    remove_table_files(*this, relation);
  engine_->log("LOG:  removed the files of " + std::to_string(dropped.size()) +
               " dropped table(s) left behind");
}

void instance::log_recovery() const {
  const recovery_outcome& r = recovery_;
  char line[1024];
  std::snprintf(
    line, sizeof line,
    "LOG:  recovery complete (%s): %llu WAL records (%.1f MB) replayed in %.3f s (%.0f "
    "records/s); pages read by redo %llu, prefetched %llu (used %llu), advised to the kernel %llu; "
    "pages written by redo "
    "%llu, by the bgwriter %llu, by the end-of-recovery checkpoint %llu (%.3f s); %llu blocks "
    "changed, %llu page images restored; doublewrite repair read %llu images (%.1f MB of "
    "the ring, %s) and repaired %llu pages in %.3f s; startup sync %.3f s; redo stopped at %s",
    r.protection.c_str(), static_cast<unsigned long long>(r.records), double(r.wal_bytes) / 1e6,
    r.seconds, r.seconds > 0 ? double(r.records) / r.seconds : 0.0,
    static_cast<unsigned long long>(r.pages_read),
    static_cast<unsigned long long>(r.pages_prefetched),
    static_cast<unsigned long long>(r.prefetch_hits),
    static_cast<unsigned long long>(r.pages_advised),
    static_cast<unsigned long long>(r.pages_written_by_redo),
    static_cast<unsigned long long>(r.pages_written_by_bgwriter),
    static_cast<unsigned long long>(r.pages_written_by_checkpoint), r.checkpoint_seconds,
    static_cast<unsigned long long>(r.blocks_applied),
    static_cast<unsigned long long>(r.images_restored),
    static_cast<unsigned long long>(r.ring_images_read), double(r.ring_bytes_read) / 1e6,
    r.ring_bounded ? "from its horizon" : "all of it",
    static_cast<unsigned long long>(r.pages_repaired), r.repair_seconds, r.startup_sync_seconds,
    r.end_reason.c_str());
  engine_->log(line);
  if (!r.prefetch_error.empty())
    engine_->log("WARNING:  recovery prefetch stopped early (redo read for itself): " +
                 r.prefetch_error);
}

void instance::start_actors() {
  system_config_ = std::make_unique<caf::actor_system_config>();
  system_config_->add_message_types<caf::id_block::tidemark>();
  if (uses_network())
    system_config_->load<caf::io::middleman>();
  system_config_->set("logger.verbosity", caf::atom("quiet"));
  const settings& s = engine_->config;
  system_config_->set("scheduler.policy",
                      s.scheduler_sharing ? caf::atom("sharing") : caf::atom("stealing"));
  std::size_t threads = s.scheduler_threads != 0
                          ? s.scheduler_threads
                          : std::max(1u, std::thread::hardware_concurrency());
  system_config_->set("scheduler.max-threads", threads);
  // CAF's default lets an actor run for as long as its mailbox is non-empty: an actor fed
  // a steady stream (the wal_writer's flush_wanted under load, when not detached) would
  // keep its thread and starve the others and the stop request.
  system_config_->set("scheduler.max-throughput", messages_per_turn);
  system_ = std::make_unique<caf::actor_system>(*system_config_);
  watch_ = std::make_unique<actor_watch>(*engine_);
  sync_worker_ = actors::spawn_sync_worker(*system_, *engine_, detach_io_actors_);
  watch_->watch(sync_worker_, "sync_worker");
  engine_->store.registry.attach(sync_worker_, engine_->store.trace.get());
  if (engine_->doublewrite()) {
    dw_batcher_ = actors::spawn_dw_batcher(*system_, *engine_, sync_worker_, detach_io_actors_);
    watch_->watch(dw_batcher_, "dw_batcher");
    engine_->store.batcher = dw_batcher_;
  }
  wal_writer_ = actors::spawn_wal_writer(*system_, *engine_, detach_io_actors_);
  watch_->watch(wal_writer_, "wal_writer");
  if (s.idle_poll && detach_io_actors_)
    engine_->idle_poll.start(0, idle_poll_linger);
  checkpointer_ = actors::spawn_checkpointer(*system_, *engine_, sync_worker_, detach_io_actors_);
  watch_->watch(checkpointer_, "checkpointer");
  bgwriter_ = actors::spawn_bgwriter(*system_, *engine_, detach_io_actors_);
  watch_->watch(bgwriter_, "bgwriter");
}

void instance::end_actor_abnormally(const std::string& name) {
  if (!watch_)
    throw tidemark::usage_error("end_actor_abnormally: no actors run (read-only or closed)");
  watch_->end_abnormally(name);
}

std::vector<std::string> instance::watched_actors() const {
  return watch_ ? watch_->names() : std::vector<std::string>{};
}

void instance::request_checkpoint(messages::checkpoint_reason reason) {
  caf::scoped_actor self{*system_};
  messages::checkpoint_request request{static_cast<std::uint8_t>(reason), true};
  bool refused = false;
  std::string why;
  self->request(checkpointer_, caf::infinite, request)
    .receive([](const messages::checkpoint_done&) {},
             [&](const caf::error& e) {
               refused = true;
               why = actors::error_text(e);
             });
  if (!refused)
    return;
  if (engine_->failed())
    throw tidemark::engine_stopped_error("checkpoint failed: the engine stopped after a failure "
                                         "(the next open runs crash recovery): " +
                                         engine_->failure());
  throw tidemark::data_error("checkpoint failed: " + why);
}

void instance::checkpoint() {
  if (read_only_)
    throw tidemark::usage_error("checkpoint: the database is open read-only");
  if (standby_)
    throw tidemark::usage_error("checkpoint: the database is a standby (it makes restartpoints "
                                "on its own schedule)");
  request_checkpoint(messages::checkpoint_reason::requested);
}

void instance::observe_checkpoints(
  std::function<void(const messages::checkpoint_event&)> on_event) {
  TIDEMARK_CHECK(!checkpoint_watcher_, "observe_checkpoints() once per database");
  checkpoint_watcher_ = system_->spawn([on_event](messages::checkpoint_observer_actor::pointer)
                                         -> messages::checkpoint_observer_actor::behavior_type {
    return {[on_event](const messages::checkpoint_event& e) { on_event(e); }};
  });
  caf::anon_send(checkpointer_, messages::subscribe_atom::value, checkpoint_watcher_);
}

void instance::stop_actors() {
  if (!system_)
    return;
  {
    // Writers first: one may be waiting for a doublewrite chunk that only the batcher and
    // the sync worker can free.
    caf::scoped_actor self{*system_};
    if (wal_sender_) { // first: it may run a base backup's checkpoint
      engine_->store.wal->set_flush_listener(nullptr);
      caf::anon_send_exit(wal_sender_, caf::exit_reason::user_shutdown);
      self->wait_for(wal_sender_);
    }
    caf::anon_send_exit(bgwriter_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(checkpointer_, caf::exit_reason::user_shutdown);
    self->wait_for(bgwriter_, checkpointer_);
  }
  caf::anon_send_exit(wal_writer_, caf::exit_reason::user_shutdown);
  if (dw_batcher_)
    caf::anon_send_exit(dw_batcher_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(sync_worker_, caf::exit_reason::user_shutdown);
  if (checkpoint_watcher_)
    caf::anon_send_exit(checkpoint_watcher_, caf::exit_reason::user_shutdown);
  engine_->store.pool->set_allocation_listener(nullptr);
  engine_->counters.bgwriter.listener.reset();
  system_->await_all_actors_done();
  engine_->sender.wakeup.reset();
  engine_->idle_poll.stop();
  engine_->store.registry.attach(messages::sync_worker_actor{}, nullptr);
  engine_->store.batcher = nullptr;
  wal_writer_ = nullptr;
  checkpointer_ = nullptr;
  bgwriter_ = nullptr;
  sync_worker_ = nullptr;
  dw_batcher_ = nullptr;
  checkpoint_watcher_ = nullptr;
  wal_sender_ = nullptr;
  replication_address_.clear();
  watch_.reset();
}

void instance::close() {
  if (closed_)
    return;
  closed_ = true;
  std::string failure;
  if (!read_only_) // commits waiting for a synchronous standby end with an error
    engine_->sender.acknowledged.stop("the database is closing");
  if (standby_) {
    // A standby writes no checkpoint of its own: a restart replays from its last one.
    try {
      end_standby_stream();
    } catch (const std::exception& e) {
      failure = e.what();
    }
  } else if (read_only_) {
    // nothing to write
  } else if (!engine_->failed()) {
    try {
      request_checkpoint(messages::checkpoint_reason::shutdown);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  if (failure.empty() && engine_->failed()) // a standby's too (its receiver or redo failed)
    failure = engine_->failure();
  stop_actors();
  system_.reset();
  lock_.release();
  if (!failure.empty())
    throw tidemark::engine_stopped_error("the engine stopped after a failure; the next open "
                                         "runs crash recovery: " +
                                         failure);
}

instance_session instance::open_session() { return instance_session(*this); }

instance::~instance() {
  if (!engine_) // open() failed before the engine existed: lock_ releases itself
    return;
  if (!closed_) {
    try {
      close();
    } catch (const std::exception&) {
      // The failure was reported where it happened; recovery handles the rest.
    }
  }
}

} // namespace tidemark::runtime
