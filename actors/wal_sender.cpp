// wal_sender: see wal_sender.hpp.
#include "actors/wal_sender.hpp"

#include "storage/check.hpp"
#include "storage/page.hpp"
#include "storage/wal_segment_reader.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace tidemark::actors {

namespace {

using namespace messages;
using storage::lsn_t;
using clock_type = std::chrono::steady_clock;

constexpr std::uint32_t max_chunk_bytes = 4u << 20;
constexpr auto heartbeat_interval = std::chrono::seconds(1);
constexpr auto probe_timeout = std::chrono::seconds(3); // per step: connect, then the answer

caf::error refusal(const std::string& why) { return caf::make_error(caf::sec::runtime_error, why); }

// Wakes the sender once per burst of WAL flushes: at most one wake_atom is in its mailbox.
class wake_on_flush final : public storage::flush_listener {
public:
  explicit wake_on_flush(wal_sender_actor sender) : sender_(std::move(sender)) {}
  void flushed(lsn_t) override {
    if (!pending_.exchange(true, std::memory_order_acq_rel))
      caf::anon_send(sender_, wake_atom::value);
  }
  void rearm() { pending_.store(false, std::memory_order_release); }

private:
  wal_sender_actor sender_;
  std::atomic<bool> pending_{false};
};

struct standby_slot {
  standby_position position;
  caf::actor_addr peer;
  bool connected = false;
  bool backup = false;  // a base backup's, until a standby streams under its name
  bool dropped = false; // fell more than max_standby_wal_size behind
  lsn_t sent = 0;
  clock_type::time_point heard;
};

struct waiting_fetch {
  caf::typed_response_promise<wal_chunk> promise;
  std::string name;
  lsn_t from = 0;
  std::uint32_t max_bytes = 0;
  clock_type::time_point since;
};

struct wal_sender_state {
  context* ctx = nullptr;
  checkpointer_actor checkpointer;
  std::uint64_t system_id = 0;
  std::uint32_t generation = 0;
  std::map<std::string, standby_slot> slots;
  std::vector<waiting_fetch> waiting;
  std::unique_ptr<storage::wal_segment_reader> wal;
  std::vector<storage::standby_slot_record> persisted; // as standby_slots says now
  std::uint64_t ticks = 0;
  bool superseded = false;        // a newer generation of this system runs (become_superseded)
  std::string superseded_because; // how this primary learned it
  std::size_t probes_pending = 0; // generation probes not answered yet (probe_generation)
  static inline const char* name = "wal_sender";
};

using sender_pointer = wal_sender_actor::stateful_pointer<wal_sender_state>;

// Whether a standby counts for synchronous commits now: streaming and heard from within
// wal_sender_timeout (one frozen by SIGSTOP stays connected, silent).
bool live(const wal_sender_state& st, const standby_slot& slot, clock_type::time_point now) {
  return slot.connected && !slot.backup && now - slot.heard <= st.ctx->config.wal_sender_timeout;
}

// This primary's state, with every standby's as last heard, for an answer.
primary_position where_primary_is(const wal_sender_state& st) {
  primary_position p;
  p.system_id = st.system_id;
  p.generation = st.generation;
  p.flushed = st.ctx->store.wal->flushed_lsn();
  p.unix_micros = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  p.acknowledged = st.ctx->sender.acknowledged.published();
  const auto now = clock_type::now();
  for (const auto& [name, slot] : st.slots)
    if (!slot.backup && !slot.dropped)
      p.standbys.push_back({name, slot.position.flushed, live(st, slot, now)});
  return p;
}

std::string in_quotes(const std::string& name) { return "\"" + name + "\""; }

// Why a standby (or backup) that says it is `who` may not copy this primary, if it may not.
std::optional<std::string> refuse(const wal_sender_state& st, const standby_position& who) {
  if (!storage::valid_standby_name(who.name))
    return "\"" + who.name + "\" is not a standby name (letters, digits, '.', '_' and '-')";
  if (who.system_id != st.system_id)
    return "standby " + in_quotes(who.name) + " is a copy of system " +
           std::to_string(who.system_id) + ", this primary is system " +
           std::to_string(st.system_id) + ": it was not seeded from this primary";
  if (who.generation != st.generation)
    return "standby " + in_quotes(who.name) + " follows generation " +
           std::to_string(who.generation) + " of this system, this primary is generation " +
           std::to_string(st.generation) +
           (who.generation > st.generation
              ? ": one of its copies was promoted since, so this primary is an old one and must "
                "not feed it"
              : ": it was seeded from an older primary; seed it again with tidemark basebackup");
  return std::nullopt;
}

// Why a standby that says it is `who` may not use the slot of its name: the name belongs
// to another standby (another base backup took it, or took it over since).
std::optional<std::string> refuse_owner(const wal_sender_state& st, const standby_position& who) {
  auto found = st.slots.find(who.name);
  if (found == st.slots.end() || found->second.dropped)
    return std::nullopt;
  const std::uint64_t owner = found->second.position.owner;
  if (owner == 0 || owner == who.owner) // 0: a slot from before ids, adopted by its standby
    return std::nullopt;
  return "the name " + in_quotes(who.name) +
         " belongs to another standby of this primary (a base backup took it over, or this "
         "directory was seeded before another standby took the name): seed this one again "
         "under a name of its own";
}

// This primary learned that a newer generation of its system runs (`what` says how): it
// stops acknowledging synchronous commits for good (the commits waiting, and every later
// one, end in commit_outcome_unknown) and serves no standby, so that two primaries never
// both acknowledge commits as on a standby. The mark on disk keeps it so across restarts.
void become_superseded(wal_sender_state& st, const std::string& what) {
  if (st.superseded)
    return;
  st.superseded = true;
  st.superseded_because = what;
  st.ctx->sender.acknowledged.stop(what + ": this is an old primary");
  try { // durable before the warning: a log that says it implies a restart knows it too
    storage::write_superseded_mark(*st.ctx->store.io, st.ctx->data_dir, what);
  } catch (const std::exception& error) {
    st.ctx->log(std::string("WARNING:  cannot record that this is an old primary (a restart "
                            "would not know): ") +
                error.what());
  }
  st.ctx->log("WARNING:  " + what +
              ": this is an old primary. It no longer acknowledges synchronous commits nor "
              "serves standbys; stop it, and seed it again from the new primary before it "
              "serves again");
}

// refuse() and refuse_owner(); a standby of a newer generation of this system tells this
// primary that one of its copies was promoted since (become_superseded), and an old
// primary serves no standby.
std::optional<std::string> admit(wal_sender_state& st, const standby_position& who) {
  std::optional<std::string> why = refuse(st, who);
  if (!why)
    why = refuse_owner(st, who);
  if (why && who.system_id == st.system_id && who.generation > st.generation)
    become_superseded(st, "standby " + in_quotes(who.name) + " follows generation " +
                            std::to_string(who.generation) +
                            " of this system and this primary is generation " +
                            std::to_string(st.generation));
  if (!why && st.superseded)
    why = "this primary is an old one (" + st.superseded_because +
          "): seed this standby again from the new primary";
  return why;
}

std::string gone_text(const std::string& name, lsn_t from) {
  return "WAL at " + storage::format_lsn(from) + " that standby " + in_quotes(name) +
         " needs is no longer on the primary (it fell more than max_standby_wal_size behind, "
         "or was away while the primary recycled its WAL): seed it again with tidemark "
         "basebackup";
}

// The lowest WAL any live slot still needs, and warnings for slots too far behind.
void update_keep(wal_sender_state& st) {
  context& ctx = *st.ctx;
  const lsn_t inserted = ctx.store.wal->inserted_lsn();
  lsn_t keep = ~lsn_t{0};
  for (auto& [name, slot] : st.slots) {
    if (slot.dropped)
      continue;
    lsn_t needs = slot.position.flushed;
    if (inserted > needs && inserted - needs > ctx.config.max_standby_wal_size) {
      slot.dropped = true;
      ctx.log("WARNING:  standby " + in_quotes(name) + " is " +
              std::to_string((inserted - needs) >> 20) +
              " MB of WAL behind, more than max_standby_wal_size: the primary no longer keeps WAL "
              "for it; it must be seeded again once that WAL is recycled");
      continue;
    }
    keep = std::min(keep, needs);
  }
  ctx.sender.keep_from.store(keep);
}

// Every ten seconds, a line per connected standby: where it is and how far behind.
void log_standbys(wal_sender_state& st) {
  if (++st.ticks % 10 != 0)
    return;
  const lsn_t flushed = st.ctx->store.wal->flushed_lsn();
  for (const auto& [name, slot] : st.slots) {
    if (!slot.connected || slot.backup)
      continue;
    const standby_position& p = slot.position;
    auto behind = [&](lsn_t at) { return flushed > at ? (flushed - at) >> 10 : 0; };
    st.ctx->log("LOG:  standby " + in_quotes(name) + ": sent " + storage::format_lsn(slot.sent) +
                ", written " + storage::format_lsn(p.written) + ", flushed " +
                storage::format_lsn(p.flushed) + ", replayed " + storage::format_lsn(p.replayed) +
                " (" + std::to_string(behind(p.replayed)) + " kB behind); replay read " +
                std::to_string(p.pages_read) + " pages, prefetch hits " +
                std::to_string(p.prefetch_hits));
  }
}

// Writes the slots to disk when they changed (once a second at most: the tick).
void persist_slots(wal_sender_state& st) {
  std::vector<storage::standby_slot_record> now;
  for (const auto& [name, slot] : st.slots)
    if (!slot.dropped)
      now.push_back({name, slot.position.flushed, slot.position.owner, slot.position.listen});
  if (now == st.persisted)
    return;
  try {
    storage::write_standby_slots(*st.ctx->store.io, st.ctx->data_dir, now);
    st.persisted = std::move(now);
  } catch (const std::exception& error) {
    st.ctx->log(std::string("WARNING:  cannot record the standbys' slots (a restart may "
                            "recycle WAL they need): ") +
                error.what());
  }
}

// Publishes to waiting commits the position the quorum of synchronous_standby_names has
// reached among the live standbys.
void publish_acknowledged(wal_sender_state& st) {
  using wait = settings::standby_wait;
  const wait mode = st.ctx->config.synchronous_standby;
  if (mode == wait::off || st.probes_pending > 0) // no standby counts before the probes end
    return;
  const auto now = clock_type::now();
  std::vector<standby_quorum::member> members;
  for (const auto& [name, slot] : st.slots) {
    if (!live(st, slot, now))
      continue;
    const standby_position& p = slot.position;
    members.push_back({name, mode == wait::remote_write   ? p.written
                             : mode == wait::remote_flush ? p.flushed
                                                          : p.replayed});
  }
  st.ctx->sender.acknowledged.publish(
    st.ctx->config.synchronous_standby_names.acknowledged(members));
}

standby_slot& note_position(wal_sender_state& st, const standby_position& who) {
  standby_slot& slot = st.slots[who.name];
  lsn_t flushed = std::max(slot.position.flushed, who.flushed);
  slot.position = who;
  slot.position.flushed = flushed;
  slot.heard = clock_type::now();
  return slot;
}

void watch_peer(sender_pointer self, standby_slot& slot) {
  slot.peer = self->current_sender() ? self->current_sender()->address() : caf::actor_addr{};
  slot.connected = true;
  if (self->current_sender())
    self->monitor(self->current_sender());
}

// Up to `max_bytes` of durable WAL from `from` (an empty chunk when there is none yet).
caf::expected<wal_chunk> read_chunk(wal_sender_state& st, const std::string& name, lsn_t from,
                                    std::uint32_t max_bytes) {
  wal_chunk chunk;
  chunk.primary = where_primary_is(st);
  chunk.start = from;
  if (chunk.primary.flushed <= from)
    return chunk;
  std::size_t length = static_cast<std::size_t>(std::min<std::uint64_t>(
    {chunk.primary.flushed - from, std::max<std::uint32_t>(max_bytes, 1), max_chunk_bytes}));
  chunk.bytes.resize(length);
  std::size_t got = 0;
  try {
    got = st.wal->read(from, reinterpret_cast<unsigned char*>(&chunk.bytes[0]), length);
  } catch (const std::exception& error) {
    return refusal("reading WAL for standby " + in_quotes(name) + ": " + error.what());
  }
  if (got == 0)
    return refusal(gone_text(name, from));
  chunk.bytes.resize(got);
  auto found = st.slots.find(name);
  if (found != st.slots.end())
    found->second.sent = std::max(found->second.sent, from + got);
  return chunk;
}

// Answers the fetches WAL is now durable for, and (with `heartbeat`) those that waited a
// second with an empty chunk.
void serve_waiting(wal_sender_state& st, bool heartbeat) {
  const lsn_t flushed = st.ctx->store.wal->flushed_lsn();
  const auto now = clock_type::now();
  auto still = st.waiting.begin();
  for (auto it = st.waiting.begin(); it != st.waiting.end(); ++it) {
    if (it->from < flushed || (heartbeat && now - it->since >= heartbeat_interval)) {
      caf::expected<wal_chunk> chunk = read_chunk(st, it->name, it->from, it->max_bytes);
      if (chunk)
        it->promise.deliver(std::move(*chunk));
      else
        it->promise.deliver(chunk.error());
    } else {
      *still++ = std::move(*it);
    }
  }
  st.waiting.erase(still, st.waiting.end());
}

// ---- base backups ------------------------------------------------------------------------

bool is_regular_file(const std::string& path, std::uint64_t* size) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return false;
  *size = static_cast<std::uint64_t>(st.st_size);
  return true;
}

// The files a backup copies: the application's own files at the top, the relation files,
// the commit-status log. Not the WAL (shipped by wal_fetch), the control file and
// configuration (in the manifest), the doublewrite ring (it protects this primary's own
// writes) or the lock.
void list_backup_files(const std::string& dir, const std::string& sub,
                       std::vector<backup_file>& out) {
  std::string where = sub.empty() ? dir : dir + "/" + sub;
  DIR* d = ::opendir(where.c_str());
  if (d == nullptr)
    return;
  while (dirent* entry = ::readdir(d)) {
    std::string name = entry->d_name;
    if (name == "." || name == ".." || name.find(".tmp") != std::string::npos)
      continue;
    if (sub.empty() &&
        (name == "tidemark.lock" || name == "tidemark.conf" || name == "standby.conf" ||
         name == "promote.signal" || name == "promote.refused"))
      continue;
    std::string relative = sub.empty() ? name : sub + "/" + name;
    std::uint64_t size = 0;
    if (is_regular_file(dir + "/" + relative, &size))
      out.push_back({relative, size});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const backup_file& a, const backup_file& b) { return a.path < b.path; });
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

backup_manifest make_manifest(wal_sender_state& st, standby_slot& slot) {
  context& ctx = *st.ctx;
  storage::control_data control = storage::read_control_file(*ctx.store.io, ctx.data_dir);
  slot.position.flushed = std::max(slot.position.flushed, control.redo_lsn);
  backup_manifest m;
  m.control.assign(reinterpret_cast<const char*>(&control), sizeof control);
  m.config = read_text_file(ctx.data_dir + "/tidemark.conf");
  m.checkpoint_lsn = control.checkpoint_lsn;
  m.redo_lsn = control.redo_lsn;
  m.page_size = static_cast<std::uint32_t>(ctx.config.page_size);
  for (const char* sub : {"", "base", "xact"})
    list_backup_files(ctx.data_dir, sub, m.files);
  return m;
}

// "base/3.1" -> the relation segment it names; false for anything else.
bool relation_segment_of(const std::string& path, storage::rel_id* rel, std::uint32_t* segno) {
  unsigned r = 0, s = 0;
  char tail = 0;
  if (std::sscanf(path.c_str(), "base/%u.%u%c", &r, &s, &tail) != 2)
    return false;
  *rel = static_cast<storage::rel_id>(r);
  *segno = s;
  return true;
}

bool safe_backup_path(const std::string& path) {
  if (path.empty() || path[0] == '/' || path.find("..") != std::string::npos)
    return false;
  auto slash = path.find('/');
  if (slash == std::string::npos)
    return path != "tidemark.lock" && path != "standby.conf";
  std::string top = path.substr(0, slash);
  return (top == "base" || top == "xact") && path.find('/', slash + 1) == std::string::npos;
}

// Copies one page through the buffer pool, which holds it whole, with its checksum.
void copy_through_pool(context& ctx, storage::page_id id, unsigned char* out) {
  storage::buffer_pool& pool = *ctx.store.pool;
  storage::buffer_id b = pool.pin(id);
  pool.lock_shared(b);
  std::memcpy(out, pool.page(b), ctx.config.page_size);
  pool.unlock_shared(b);
  pool.unpin(b);
  storage::finalize_page_for_write(out, ctx.config.page_size, id, ctx.config.data_checksums);
}

caf::expected<file_chunk> read_backup_file(wal_sender_state& st, const file_fetch& f) {
  context& ctx = *st.ctx;
  if (!safe_backup_path(f.path))
    return refusal("base backup: \"" + f.path + "\" is not a file of a base backup");
  if (f.length > max_chunk_bytes)
    return refusal("base backup: chunks are at most " + std::to_string(max_chunk_bytes) + " bytes");
  const std::size_t page_size = ctx.config.page_size;
  storage::rel_id rel = 0;
  std::uint32_t segno = 0;
  const bool pages = relation_segment_of(f.path, &rel, &segno);
  if (pages && (f.offset % page_size != 0 || f.length % page_size != 0))
    return refusal("base backup: relation files are copied in whole pages");
  file_chunk chunk;
  chunk.bytes.resize(f.length);
  auto* bytes = reinterpret_cast<unsigned char*>(&chunk.bytes[0]);
  try {
    int fd = ctx.store.io->open_file(ctx.data_dir + "/" + f.path, false);
    std::size_t got = 0;
    try {
      std::uint64_t size = ctx.store.io->file_size(fd);
      std::uint64_t wanted = f.offset >= size ? 0
                                              : std::min<std::uint64_t>(f.length, size - f.offset);
      if (pages)
        wanted -= wanted % page_size;
      got = wanted == 0 ? 0
                        : ctx.store.io->read(fd, bytes, static_cast<std::size_t>(wanted), f.offset);
    } catch (...) {
      ctx.store.io->close_file(fd);
      throw;
    }
    ctx.store.io->close_file(fd);
    chunk.bytes.resize(got);
    if (pages) {
      const std::uint64_t per_segment = ctx.config.segment_size / page_size;
      for (std::size_t at = 0; at + page_size <= got; at += page_size) {
        storage::page_id id{rel, static_cast<storage::block_id>(segno * per_segment +
                                                                (f.offset + at) / page_size)};
        storage::page_verdict verdict =
          storage::verify_page(bytes + at, page_size, id, ctx.config.data_checksums);
        if (verdict == storage::page_verdict::ok || verdict == storage::page_verdict::all_zero)
          continue;
        copy_through_pool(ctx, id, bytes + at); // being written as we read: torn
        ++chunk.pages_reread;
      }
    }
  } catch (const std::exception& error) {
    return refusal("base backup: copying " + f.path + ": " + error.what());
  }
  return chunk;
}

// ---- the actor -----------------------------------------------------------------------------

// A generation probe ended (`outcome` says how); once none is pending, standbys count for
// synchronous commits.
void probe_done(wal_sender_state& st, const std::string& where, const std::string& outcome) {
  st.ctx->log("LOG:  asked " + where + " which generation runs there: " + outcome);
  if (--st.probes_pending == 0)
    publish_acknowledged(st);
}

// Asks the WAL sender at `where` (a standby's address once promoted) which system and
// generation it serves: a newer generation of this system there means a standby was
// promoted while this primary was down, and this is an old primary. Nothing answering
// (no one there, another program, a timeout) says nothing either way.
void probe_generation(sender_pointer self, const std::string& where) {
  auto& st = self->state;
  const auto colon = where.rfind(':');
  if (colon == std::string::npos) {
    st.ctx->log("WARNING:  a standby's address once promoted is not HOST:PORT: " + where);
    return;
  }
  const std::uint16_t port = static_cast<std::uint16_t>(std::atoi(where.c_str() + colon + 1));
  ++st.probes_pending;
  auto middleman = self->system().middleman().actor_handle();
  self->request(middleman, probe_timeout, caf::connect_atom::value, where.substr(0, colon), port)
    .then(
      [self, where](const caf::node_id&, caf::strong_actor_ptr& peer,
                    const std::set<std::string>& ifs) {
        auto& st = self->state;
        if (!peer ||
            ifs != self->system().message_types(caf::detail::type_list<wal_sender_actor>{}))
          return probe_done(st, where, "no WAL sender of this version there");
        self
          ->request(caf::actor_cast<wal_sender_actor>(std::move(peer)), probe_timeout,
                    generation_probe{st.system_id, st.generation})
          .then(
            [self, where](const generation_answer& answer) {
              auto& st = self->state;
              if (answer.system_id == st.system_id && answer.generation > st.generation)
                become_superseded(st, "generation " + std::to_string(answer.generation) +
                                        " of this system runs at " + where +
                                        " and this primary is generation " +
                                        std::to_string(st.generation));
              probe_done(st, where,
                         answer.system_id != st.system_id
                           ? "another system"
                           : "generation " + std::to_string(answer.generation));
            },
            [self, where](caf::error& error) {
              probe_done(self->state, where, self->system().render(error));
            });
      },
      [self, where](caf::error& error) {
        probe_done(self->state, where, "not reachable (" + self->system().render(error) + ")");
      });
}

// Another primary asks which generation runs here (probe_generation); an older generation
// of this system asking is an old primary, which now knows it is one.
generation_answer answer_probe(wal_sender_state& st, const generation_probe& probe) {
  if (probe.system_id == st.system_id && probe.generation < st.generation)
    st.ctx->log("WARNING:  a primary of generation " + std::to_string(probe.generation) +
                " of this system (an old primary) asked which generation runs here; told "
                "generation " +
                std::to_string(st.generation) + ", it stops acknowledging synchronous commits");
  return {st.system_id, st.generation};
}

// The sender's state at start: the slots recorded before a restart are kept (their WAL is
// not recycled) until their standbys come back or are dropped.
void start_sender(sender_pointer self, context* ctx, checkpointer_actor checkpointer,
                  std::vector<storage::standby_slot_record> slots) {
  auto& st = self->state;
  st.ctx = ctx;
  st.checkpointer = std::move(checkpointer);
  const storage::control_data control = ctx->control();
  st.system_id = control.system_id;
  st.generation = control.generation;
  st.wal = std::make_unique<storage::wal_segment_reader>(*ctx->store.io, ctx->data_dir + "/wal",
                                                         ctx->config.wal_segment_size, false);
  for (const storage::standby_slot_record& recorded : slots) { // from before a restart
    standby_slot& slot = st.slots[recorded.name];
    slot.position.name = recorded.name;
    slot.position.system_id = st.system_id;
    slot.position.generation = st.generation;
    slot.position.flushed = recorded.flushed;
    slot.position.owner = recorded.owner;
    slot.position.listen = recorded.listen;
    slot.heard = clock_type::now();
  }
  st.persisted = std::move(slots);
  update_keep(st);
  if (std::optional<std::string> mark = storage::read_superseded_mark(ctx->data_dir))
    become_superseded(st, *mark + " (recorded in global/superseded)");
  else
    for (const auto& [name, slot] : st.slots) // a standby promoted while this one was down?
      if (!slot.position.listen.empty())
        probe_generation(self, slot.position.listen);
  self->set_down_handler([self](const caf::down_msg& down) {
    auto& st = self->state;
    for (auto& [name, slot] : st.slots)
      if (slot.connected && slot.peer == down.source) {
        slot.connected = false;
        st.ctx->log("LOG:  standby " + in_quotes(name) + " disconnected at " +
                    storage::format_lsn(slot.position.flushed));
      }
    persist_slots(st);
    publish_acknowledged(st);
  });
}

// A standby starts streaming from open.from: refused when that WAL is beyond this
// primary's durable WAL (it followed another primary) or already recycled.
caf::result<primary_position> open_stream(sender_pointer self, stream_open& open) {
  auto& st = self->state;
  if (auto why = admit(st, open.standby))
    return refusal(*why);
  const std::string& name = open.standby.name;
  if (auto twin = st.slots.find(name);
      twin != st.slots.end() && live(st, twin->second, clock_type::now()) &&
      self->current_sender() && twin->second.peer != self->current_sender()->address())
    return caf::make_error(caf::sec::redundant_connection, // the receiver tries again later
                           "standby " + in_quotes(name) +
                             " is streaming from this primary on another connection (a copy "
                             "of its directory running too?); this one waits until that one "
                             "is gone");
  const lsn_t flushed = st.ctx->store.wal->flushed_lsn();
  if (open.from > flushed)
    return refusal("standby " + in_quotes(name) + " has WAL up to " +
                   storage::format_lsn(open.from) + ", beyond this primary's durable WAL at " +
                   storage::format_lsn(flushed) +
                   ": it followed another primary; seed it again with tidemark basebackup");
  unsigned char probe;
  if (open.from < flushed && st.wal->read(open.from, &probe, 1) != 1)
    return refusal(gone_text(name, open.from));
  open.standby.flushed = open.from;
  standby_slot& slot = note_position(st, open.standby);
  slot.backup = false;
  slot.dropped = false;
  slot.sent = open.from;
  watch_peer(self, slot);
  update_keep(st);
  persist_slots(st); // a new slot is on disk before its WAL could be recycled
  publish_acknowledged(st);
  st.ctx->log("LOG:  standby " + in_quotes(name) + " streaming from " +
              storage::format_lsn(open.from));
  return where_primary_is(st);
}

// Durable WAL from fetch.from, at once when there is some, else when the next flush comes.
caf::result<wal_chunk> fetch_wal(sender_pointer self, wal_fetch& fetch) {
  auto& st = self->state;
  if (auto why = admit(st, fetch.standby))
    return refusal(*why);
  note_position(st, fetch.standby);
  update_keep(st);
  publish_acknowledged(st);
  if (fetch.from < st.ctx->store.wal->flushed_lsn()) {
    caf::expected<wal_chunk> chunk =
      read_chunk(st, fetch.standby.name, fetch.from, fetch.max_bytes);
    if (!chunk)
      return chunk.error();
    return std::move(*chunk);
  }
  auto promise = self->make_response_promise<wal_chunk>();
  st.waiting.push_back(
    {promise, fetch.standby.name, fetch.from, fetch.max_bytes, clock_type::now()});
  return promise;
}

// Why a base backup may not take the name it asks for: a standby of this primary has it
// (streaming, or away with WAL kept for it), and the backup did not say take_over. A slot
// of a backup whose copy stopped midway is free again.
std::optional<std::string> claim_name(wal_sender_state& st, const backup_begin& begin) {
  auto found = st.slots.find(begin.name);
  if (found == st.slots.end() || found->second.dropped)
    return std::nullopt;
  const standby_slot& slot = found->second;
  if (slot.position.owner == begin.owner || (slot.backup && !slot.connected))
    return std::nullopt;
  const std::string state = slot.connected ? (slot.backup ? "a base backup is copying under it"
                                                          : "that standby is streaming")
                                           : "the primary keeps WAL for that standby";
  if (!begin.take_over)
    return "the standby name " + in_quotes(begin.name) + " belongs to another standby (" + state +
           "): choose another name, or take the name over (basebackup --take-over) if that "
           "standby is gone or being replaced; it is refused from then on";
  st.ctx->log("LOG:  base backup " + in_quotes(begin.name) + " takes the name over (" + state +
              "): the standby that had it is refused from now on");
  return std::nullopt;
}

// A base backup begins: its slot keeps WAL from the redo point of the checkpoint it asks
// for, and the manifest (control file, settings, files to copy) follows that checkpoint.
caf::result<backup_manifest> begin_backup(sender_pointer self, const backup_begin& begin) {
  auto& st = self->state;
  if (begin.name.empty())
    return refusal("a base backup must have a name");
  if (st.superseded)
    return refusal("this primary is an old one (" + st.superseded_because +
                   "): take the base backup from the new primary");
  if (auto why = claim_name(st, begin))
    return refusal(*why);
  standby_slot& slot = st.slots[begin.name];
  slot.position.owner = begin.owner;
  slot.position.name = begin.name;
  slot.position.system_id = st.system_id;
  slot.position.generation = st.generation;
  slot.position.flushed = st.ctx->store.wal->redo_lsn(); // kept from now on
  slot.backup = true;
  slot.dropped = false;
  slot.heard = clock_type::now();
  watch_peer(self, slot);
  update_keep(st);
  persist_slots(st);
  auto promise = self->make_response_promise<backup_manifest>();
  std::string name = begin.name;
  checkpoint_request request{static_cast<std::uint8_t>(checkpoint_reason::requested), true};
  self->request(st.checkpointer, caf::infinite, request)
    .then(
      [self, promise, name](const checkpoint_done&) mutable {
        auto& st = self->state;
        try {
          promise.deliver(make_manifest(st, st.slots[name]));
          st.ctx->log("LOG:  base backup " + in_quotes(name) + " started at redo point " +
                      storage::format_lsn(st.slots[name].position.flushed));
        } catch (const std::exception& error) {
          promise.deliver(refusal(std::string("base backup: ") + error.what()));
        }
      },
      [promise](caf::error& error) mutable {
        promise.deliver(refusal("base backup: its checkpoint failed: " + error_text(error)));
      });
  return promise;
}

std::vector<standby_view> standby_views(const wal_sender_state& st) {
  std::vector<standby_view> views;
  const auto now = clock_type::now();
  for (const auto& [name, slot] : st.slots)
    views.push_back({slot.position, slot.connected, slot.sent,
                     std::chrono::duration<double>(now - slot.heard).count()});
  return views;
}

wal_sender_actor::behavior_type wal_sender(sender_pointer self, context* ctx,
                                           checkpointer_actor checkpointer,
                                           std::vector<storage::standby_slot_record> slots) {
  start_sender(self, ctx, std::move(checkpointer), std::move(slots));
  self->delayed_send(self, heartbeat_interval, tick_atom::value);
  return {
    [=](stream_open& open) -> caf::result<primary_position> { return open_stream(self, open); },
    [=](wal_fetch& fetch) -> caf::result<wal_chunk> { return fetch_wal(self, fetch); },
    [=](standby_feedback& feedback) {
      auto& st = self->state;
      if (admit(st, feedback.standby))
        return;
      note_position(st, feedback.standby);
      update_keep(st);
      publish_acknowledged(st);
    },
    [=](backup_begin& begin) -> caf::result<backup_manifest> { return begin_backup(self, begin); },
    [=](file_fetch& fetch) -> caf::result<file_chunk> {
      caf::expected<file_chunk> chunk = read_backup_file(self->state, fetch);
      if (!chunk)
        return chunk.error();
      return std::move(*chunk);
    },
    [=](backup_finish& finish) -> caf::result<backup_end> {
      auto& st = self->state;
      if (st.slots.count(finish.name) == 0)
        return refusal("no base backup named " + in_quotes(finish.name) + " was begun");
      // Every page copied is at or below what had been inserted: the copy is consistent
      // once WAL up to here is replayed.
      return backup_end{st.ctx->store.wal->inserted_lsn()};
    },
    [=](standbys_atom) -> std::vector<standby_view> { return standby_views(self->state); },
    [=](const generation_probe& probe) { return answer_probe(self->state, probe); },
    [=](wake_atom) {
      auto& st = self->state;
      storage::checked_downcast<wake_on_flush>(st.ctx->sender.wakeup.get(),
                                               "the sender's wake-up is the one it installed")
        .rearm();
      serve_waiting(st, false);
    },
    [=](tick_atom) {
      auto& st = self->state;
      serve_waiting(st, true);
      update_keep(st);
      publish_acknowledged(st); // a standby fallen silent no longer counts
      persist_slots(st);
      log_standbys(st);
      self->delayed_send(self, heartbeat_interval, tick_atom::value);
    },
  };
}

} // namespace

wal_sender_actor spawn_wal_sender(caf::actor_system& system, context& ctx,
                                  checkpointer_actor checkpointer,
                                  std::vector<storage::standby_slot_record> slots) {
  wal_sender_actor sender =
    system.spawn(wal_sender, &ctx, std::move(checkpointer), std::move(slots));
  ctx.sender.wakeup = std::make_unique<wake_on_flush>(sender);
  ctx.store.wal->set_flush_listener(ctx.sender.wakeup.get());
  return sender;
}

} // namespace tidemark::actors
