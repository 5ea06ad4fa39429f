// Streaming replication in the runtime: the primary's WAL sender published on
// replication_listen, a standby's receiver and continuous redo, promotion, and the base
// backup client. The policies are the actors' (actors/wal_sender.hpp, wal_receiver.hpp);
// this file boots and stops them in the right order.
//
// Rules it keeps:
//  - A standby's redo runs in a thread of its own, following the WAL the receiver has
//    fsynced (storage::received_wal); it ends only when the stream is ended (promotion or
//    close), after the receiver stopped writing. If it ends any other way (WAL fsynced here
//    that cannot be read back, a page that fails verification), the standby stops: the
//    engine fails, the status and log say where redo stopped, no flush is confirmed again.
//  - Promotion needs a consistent copy: WAL through the base backup's end has arrived.
//    It also needs redo to have replayed all the WAL fsynced here (up to a record cut off
//    where the stream ended): the primary acknowledged commits on that fsync, so a shorter
//    end would throw them away; promote() refuses instead and the directory stays a
//    standby. The log then continues after the last complete record replayed, the
//    end-of-recovery checkpoint records the next generation, and only then is standby.conf
//    removed.
//  - A base backup writes the control file last: until then the new directory is not a
//    data directory (open refuses it), so an interrupted copy is never mistaken for one.
#include "runtime/standby.hpp"

#include "runtime/tables.hpp"

#include "actors/wal_receiver.hpp"
#include "actors/wal_sender.hpp"
#include "runtime/data_directory.hpp"
#include "runtime/instance.hpp"
#include "runtime/startup.hpp"
#include "storage/directory_sync.hpp"
#include "storage/standby_slots.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <random>
#include <set>

namespace tidemark::runtime {

bool instance::uses_network() const {
  return standby_.has_value() || !engine_->config.replication_listen.empty();
}

void instance::start_replication() {
  const std::string& listen = engine_->config.replication_listen;
  if (listen.empty() || wal_sender_)
    return;
  endpoint where = parse_endpoint("replication_listen", listen, true);
  wal_sender_ =
    actors::spawn_wal_sender(*system_, *engine_, checkpointer_, std::move(recorded_slots_));
  watch_->watch(wal_sender_, "wal_sender");
  auto published = system_->middleman().publish(wal_sender_, where.port, where.host.c_str(), true);
  if (!published)
    throw config_error("replication_listen: cannot listen on " + listen + ": " +
                       system_->render(published.error()));
  replication_address_ = where.host + ":" + std::to_string(*published);
  engine_->log("LOG:  WAL sender listening on " + replication_address_);
}

namespace {

// Where a primary could reach this standby once it is promoted: its replication_listen when
// that names a host and a port (a wildcard host or port 0 says nothing a peer could dial).
std::string address_once_promoted(const std::string& listen) {
  if (listen.empty())
    return "";
  endpoint where = parse_endpoint("replication_listen", listen, true);
  for (const char* wildcard : {"0.0.0.0", "::", "[::]", "*"})
    if (where.host == wildcard)
      return "";
  return where.port == 0 ? "" : listen;
}

} // namespace

void instance::start_standby(const instance_options& options) {
  engine& e = *engine_;
  const storage::control_data control = e.control();
  e.standby.flushed.store(e.store.wal->flushed_lsn());
  e.standby.received.store(e.store.wal->flushed_lsn());
  e.standby.replayed.store(control.redo_lsn);
  arrival_ = std::make_unique<storage::received_wal>(e.store.wal->flushed_lsn());
  e.standby.restartpoints.store(true);
  e.standby.restart_redo.store(control.redo_lsn);
  if (options.stream) {
    endpoint primary = parse_endpoint("primary", standby_primary_);
    actors::receiver_options receiving;
    receiving.host = primary.host;
    receiving.port = primary.port;
    receiving.identity.name = standby_->name;
    receiving.identity.owner = standby_->id;
    receiving.identity.listen = address_once_promoted(e.config.replication_listen);
    receiving.identity.system_id = control.system_id;
    receiving.identity.generation = control.generation;
    wal_receiver_ = actors::spawn_wal_receiver(*system_, e, *arrival_, receiving);
    watch_->watch(wal_receiver_, "wal_receiver");
  } else {
    arrival_->end(); // replay what is here, then stop
  }
  standby_redo_report_ = recovery_; // redo fills its own copy; recovery_ after the join
  standby_redo_ = std::thread([this] {
    actors::name_this_thread("tm-standby-redo");
    engine& e = *engine_;
    try {
      replay(e, standby_redo_report_, arrival_.get());
      if (!arrival_->ended()) // only promotion or close ends the stream, and with it redo
        throw std::runtime_error(
          "redo ended at " + storage::format_lsn(standby_redo_report_.end_lsn) +
          " while WAL was still arriving: " + standby_redo_report_.end_reason);
    } catch (const std::exception& error) {
      standby_redo_error_ = std::current_exception();
      std::string why = "standby redo stopped at " +
                        storage::format_lsn(e.standby.replayed.load()) + ": " + error.what();
      if (e.failed()) // redo met the failure's consequence: name its cause too
        why += " (after the engine failed: " + e.failure() + ")";
      stop_standby(why);
    }
  });
}

// Redo cannot go on: the standby stops, loudly. The receiver sees the failure and confirms
// no further flush; promote() refuses; status and log name where redo stopped.
void instance::stop_standby(const std::string& why) {
  engine& e = *engine_;
  e.standby.set_error(why);
  e.log("ERROR:  " + why +
        "; the standby stopped (it confirms no more WAL to its primary; "
        "open it again to read its WAL afresh)");
  e.fail(why);
}

void instance::end_standby_stream() {
  if (!arrival_)
    return;
  if (wal_receiver_) {
    caf::scoped_actor self{*system_};
    caf::anon_send_exit(wal_receiver_, caf::exit_reason::user_shutdown);
    self->wait_for(wal_receiver_);
    wal_receiver_ = nullptr;
  }
  arrival_->end();
  if (standby_redo_.joinable()) {
    standby_redo_.join();
    recovery_ = standby_redo_report_;
  }
  arrival_->on_caught_up(nullptr); // its handle of the receiver: the system waits for it
  if (standby_redo_error_)
    std::rethrow_exception(standby_redo_error_);
}

void instance::promote(
  bool force, const std::function<void(const std::vector<storage::rel_id>&)>& before_removing) {
  if (!standby_)
    throw tidemark::usage_error("promote: the database is not a standby");
  engine& e = *engine_;
  const storage::lsn_t flushed = e.standby.flushed.load();
  if (flushed < standby_->backup_end_lsn)
    throw tidemark::usage_error(
      "promote: the standby is not consistent yet: it has WAL up to " +
      storage::format_lsn(flushed) + " and its base backup is consistent from " +
      storage::format_lsn(standby_->backup_end_lsn) + "; let it stream further first");
  if (!force)
    refuse_if_behind_a_peer();
  try {
    end_standby_stream();
  } catch (const std::exception& error) {
    throw tidemark::data_error(std::string("promote: refused, the standby stays a standby: ") +
                               error.what());
  }
  // Every commit a primary acknowledged under remote_flush is in the WAL fsynced here: the
  // new history starts after all of it, or nowhere.
  const storage::lsn_t fsynced = arrival_->flushed();
  if (recovery_.end_lsn < fsynced && !recovery_.ended_at_stream_end) {
    const std::string why = "promote: refused, the standby stays a standby: redo ended at " +
                            storage::format_lsn(recovery_.end_lsn) + " (" + recovery_.end_reason +
                            ") but WAL through " + storage::format_lsn(fsynced) +
                            " was fsynced here";
    stop_standby(why);
    throw tidemark::data_error(why);
  }
  e.standby.restartpoints.store(false);
  e.store.wal->restart_at(recovery_.end_lsn, recovery_.last_record_lsn);
  e.standby.promoting.store(true); // the end-of-recovery checkpoint records the next generation
  const std::uint64_t written_before = e.store.writer->written(storage::write_source::checkpointer);
  auto started = std::chrono::steady_clock::now();
  request_checkpoint(messages::checkpoint_reason::end_of_recovery);
  recovery_.checkpoint_seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  recovery_.pages_written_by_checkpoint =
    e.store.writer->written(storage::write_source::checkpointer) - written_before;
  remove_standby_file(*e.store.io, e.data_dir);
  standby_.reset();
  arrival_.reset();
  e.recovering.store(false);
  ensure_catalog(e); // a primary from before keyed tables had none to stream
  remove_leftover_tables(before_removing);
  e.log("LOG:  promoted: redo ended at " + storage::format_lsn(recovery_.end_lsn) + " after " +
        std::to_string(recovery_.records) + " records; now generation " +
        std::to_string(e.control().generation) + ", accepting writes");
  try {
    start_replication();
  } catch (const config_error& error) { // promoted all the same: it only cannot feed standbys
    e.log(std::string("WARNING:  ") + error.what());
  }
}

void instance::refuse_if_behind_a_peer() const {
  const standby_status s = standby();
  if (s.peer_ahead.empty())
    return;
  const bool loses_acknowledged = s.primary_acknowledged > s.flushed;
  throw tidemark::usage_error(
    "promote: standby \"" + s.peer_ahead + "\" had WAL up to " +
    storage::format_lsn(s.peer_ahead_flushed) +
    " when the primary last answered, and this one has " + storage::format_lsn(s.flushed) +
    (loses_acknowledged ? "; the primary's synchronous standbys had confirmed up to " +
                            storage::format_lsn(s.primary_acknowledged) +
                            ", so promoting this one would lose acknowledged commits"
                        : "") +
    ": promote the standby furthest ahead; promote with force only if \"" + s.peer_ahead +
    "\" is gone for good");
}

standby_status instance::standby() const {
  standby_status s;
  if (!standby_)
    return s;
  const engine& e = *engine_;
  s.connected = e.standby.connected.load();
  s.primary = standby_primary_;
  s.error = e.standby.error();
  s.primary_flushed = e.standby.primary_flushed.load();
  s.received = e.standby.received.load();
  s.flushed = e.standby.flushed.load();
  s.replayed = e.standby.replayed.load();
  s.backup_end = standby_->backup_end_lsn;
  s.records = e.standby.records.load();
  s.restartpoints = e.counters.checkpoints.restartpoints.load();
  s.restart_redo = e.standby.restart_redo.load();
  s.wal_rereads = e.standby.wal_rereads.load();
  s.failed = e.failed();
  s.refused = e.standby.refused.load();
  if (s.failed && s.error.empty())
    s.error = e.failure();
  s.seconds_behind = e.standby.replay_delay(std::chrono::duration_cast<std::chrono::microseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
  const auto& pool = e.store.pool->counters();
  s.pages_read = pool.reads.load();
  s.prefetched = pool.prefetched.load();
  s.prefetch_hits = pool.prefetch_hits.load();
  s.primary_acknowledged = e.standby.primary_acknowledged.load();
  for (const messages::standby_peer& peer : e.standby.peers())
    if (peer.name != standby_->name && peer.flushed > s.flushed &&
        peer.flushed > s.peer_ahead_flushed) {
      s.peer_ahead = peer.name;
      s.peer_ahead_flushed = peer.flushed;
    }
  return s;
}

std::vector<messages::standby_view> instance::standbys() {
  if (!wal_sender_)
    return {};
  std::vector<messages::standby_view> views;
  caf::scoped_actor self{*system_};
  self->request(wal_sender_, std::chrono::seconds(10), messages::standbys_atom::value)
    .receive([&](std::vector<messages::standby_view>& v) { views = std::move(v); },
             [&](const caf::error&) {});
  return views;
}

// ---- base backup -------------------------------------------------------------------------

namespace {

constexpr std::uint32_t chunk_bytes = 1u << 20;
// A primary answers a connection's handshake at once; a peer that accepts the connection
// and stays silent (not a Tidemark primary, or a dying one) is given up after this.
constexpr auto connect_timeout = std::chrono::seconds(10);

struct backup_client {
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  messages::wal_sender_actor sender;

  explicit backup_client(const endpoint& primary) {
    config.add_message_types<caf::id_block::tidemark>();
    config.load<caf::io::middleman>();
    config.set("logger.verbosity", caf::atom("quiet"));
    system = std::make_unique<caf::actor_system>(config);
    const std::string where = primary.host + ":" + std::to_string(primary.port);
    std::string failure;
    { // the middleman's own connect, with a deadline (remote_actor would wait for good)
      caf::scoped_actor self{*system};
      self
        ->request(system->middleman().actor_handle(), connect_timeout, caf::connect_atom::value,
                  primary.host, primary.port)
        .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& peer, const std::set<std::string>& ifs) {
            if (!peer)
              failure = "no actor is published there";
            else if (ifs !=
                     system->message_types(caf::detail::type_list<messages::wal_sender_actor>{}))
              failure = "it is not a WAL sender of this Tidemark version";
            else
              sender = caf::actor_cast<messages::wal_sender_actor>(std::move(peer));
          },
          [&](const caf::error& e) {
            failure = e == caf::sec::request_timeout
                        ? "no answer to the connection's handshake within " +
                            std::to_string(connect_timeout.count()) + " s"
                        : system->render(e);
          });
    }
    if (!failure.empty())
      throw tidemark::replication_error("base backup: cannot reach the primary at " + where + ": " +
                                        failure);
  }

  template <class Reply, class Request>
  Reply ask(const Request& request) {
    caf::scoped_actor self{*system};
    Reply reply;
    std::string failure;
    self->request(sender, std::chrono::seconds(60), request)
      .receive([&](Reply& r) { reply = std::move(r); },
               [&](const caf::error& e) { failure = actors::error_text(e); });
    if (!failure.empty())
      throw tidemark::replication_error("base backup: " + failure);
    return reply;
  }
};

// The name given, checked, or a random one.
std::string backup_name(const std::string& given) {
  if (!given.empty() && !storage::valid_standby_name(given))
    throw config_error("--name \"" + given +
                       "\" is not a standby name (1 to 64 letters, "
                       "digits, '.', '_' or '-')");
  if (!given.empty())
    return given;
  char text[32];
  std::snprintf(text, sizeof text, "standby-%08x", static_cast<unsigned>(std::random_device{}()));
  return text;
}

// A new standby's id: random, never 0 (the id of standbys seeded before ids).
std::uint64_t new_standby_id() {
  std::random_device random;
  std::uint64_t id = 0;
  while (id == 0)
    id = (std::uint64_t{random()} << 32) ^ random();
  return id;
}

// Copies every file the manifest lists, a chunk at a time, into `new_dir`.
void copy_files(backup_client& client, storage::io_engine& io, const std::string& new_dir,
                const messages::backup_manifest& manifest, base_backup_report& report,
                const std::function<void(const std::string&)>& progress) {
  std::uint64_t total = 0;
  for (const auto& f : manifest.files)
    total += f.size;
  auto last_line = std::chrono::steady_clock::now();
  for (const auto& f : manifest.files) {
    int fd = io.open_file(new_dir + "/" + f.path, true);
    try {
      for (std::uint64_t offset = 0; offset < f.size; offset += chunk_bytes) {
        auto length =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(chunk_bytes, f.size - offset));
        if (f.path.rfind("base/", 0) == 0)
          length -= length % manifest.page_size;
        if (length == 0)
          break;
        messages::file_chunk chunk = client.ask<messages::file_chunk>(
          messages::file_fetch{report.standby_name, f.path, offset, length});
        if (!chunk.bytes.empty())
          io.write(fd, chunk.bytes.data(), chunk.bytes.size(), offset);
        report.bytes += chunk.bytes.size();
        report.pages_reread += chunk.pages_reread;
        if (chunk.bytes.size() < length)
          break; // the file shrank (truncated on the primary): redo rebuilds the rest
        if (progress && std::chrono::steady_clock::now() - last_line >= std::chrono::seconds(1)) {
          progress("basebackup: " + std::to_string(report.bytes >> 20) + " of " +
                   std::to_string(total >> 20) + " MB copied");
          last_line = std::chrono::steady_clock::now();
        }
      }
    } catch (...) {
      io.close_file(fd);
      throw;
    }
    io.close_file(fd);
    ++report.files;
  }
}

// Fetches the WAL from the redo point through the backup's end into `new_dir`, fsynced.
void copy_wal(backup_client& client, storage::io_engine& io, const std::string& new_dir,
              const storage::control_data& control, std::uint64_t id, base_backup_report& report) {
  storage::wal_options options;
  options.dir = new_dir + "/wal";
  options.segment_size = control.wal_segment_size;
  options.buffer_size = 4u << 20;
  storage::lsn_t start = report.redo_lsn - report.redo_lsn % 8;
  storage::wal_log wal(io, options, start, 0);
  storage::lsn_t at = start;
  while (at < report.end_lsn) {
    messages::standby_position me;
    me.name = report.standby_name;
    me.owner = id;
    me.system_id = control.system_id;
    me.generation = control.generation;
    me.written = me.flushed = at;
    messages::wal_chunk chunk =
      client.ask<messages::wal_chunk>(messages::wal_fetch{me, at, chunk_bytes * 4});
    if (chunk.bytes.empty())
      continue; // not durable on the primary yet: the fetch waited a second
    if (chunk.start != at)
      throw tidemark::data_error("base backup: the primary sent WAL at " +
                                 storage::format_lsn(chunk.start) + ", not at " +
                                 storage::format_lsn(at));
    wal.append_received(at, chunk.bytes.data(), chunk.bytes.size());
    at += chunk.bytes.size();
    wal.flush(at);
    report.wal_bytes += chunk.bytes.size();
  }
}

} // namespace

base_backup_report base_backup(const std::string& new_dir, const std::string& primary_text,
                               const tidemark::base_backup_options& options) {
  auto started = std::chrono::steady_clock::now();
  endpoint primary = parse_endpoint("--primary", primary_text);
  check_new_data_directory(new_dir);
  if (::rmdir(new_dir.c_str()) != 0 && errno != ENOENT) // made again once the primary answers
    throw config_error("cannot use \"" + new_dir + "\": " + std::strerror(errno));
  base_backup_report report;
  report.standby_name = backup_name(options.name);
  const std::uint64_t id = new_standby_id();
  backup_client client(primary);
  messages::backup_manifest manifest = client.ask<messages::backup_manifest>(
    messages::backup_begin{report.standby_name, id, options.take_over});
  storage::control_data control;
  if (manifest.control.size() != sizeof control)
    throw tidemark::data_error("base backup: the primary sent a control file of " +
                               std::to_string(manifest.control.size()) + " bytes");
  std::memcpy(&control, manifest.control.data(), sizeof control);
  report.redo_lsn = manifest.redo_lsn;

  make_data_directory_tree(new_dir);
  std::unique_ptr<storage::io_engine> io = storage::make_io_engine(storage::io_method::sync);
  storage::write_whole_file(*io, config_file_path(new_dir), manifest.config);
  copy_files(client, *io, new_dir, manifest, report, options.progress);
  messages::backup_end end =
    client.ask<messages::backup_end>(messages::backup_finish{report.standby_name});
  report.end_lsn = end.end_lsn;
  copy_wal(client, *io, new_dir, control, id, report);

  standby_file standby;
  standby.primary = primary_text;
  standby.name = report.standby_name;
  standby.id = id;
  standby.generation = control.generation;
  standby.backup_end_lsn = report.end_lsn;
  write_standby_file(*io, new_dir, standby);
  storage::sync_directory_tree(*io, new_dir, storage::directory_sync_method::fsync);
  control.state = static_cast<std::uint32_t>(storage::cluster_state::in_recovery);
  storage::write_control_file(*io, new_dir, control);
  io->sync_directory(new_dir);
  report.seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

} // namespace tidemark::runtime
