// wal_receiver: see wal_receiver.hpp.
#include "actors/wal_receiver.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>

namespace tidemark::actors {

namespace {

using namespace messages;
using storage::lsn_t;

constexpr std::uint32_t fetch_bytes = 4u << 20;
constexpr auto retry_interval = std::chrono::seconds(1);
constexpr auto answer_timeout = std::chrono::seconds(10); // the primary answers within 1 s

struct receiver_state {
  context* ctx = nullptr;
  storage::received_wal* arrival = nullptr;
  receiver_options options;
  wal_sender_actor sender;
  std::uint64_t connection = 0; // answers of an earlier connection are ignored
  lsn_t next = 0;               // where the next fetch starts
  bool refused = false;
  bool connecting = false; // a connect request is out
  std::string last_warning;
  static inline const char* name = "wal_receiver";
};

using receiver_pointer = wal_receiver_actor::stateful_pointer<receiver_state>;

standby_position where_standby_is(const receiver_state& st) {
  const context& ctx = *st.ctx;
  standby_position p = st.options.identity;
  p.written = ctx.standby.received.load();
  p.flushed = ctx.standby.flushed.load();
  p.replayed = ctx.standby.replayed.load();
  p.pages_read = ctx.store.pool->counters().reads.load();
  p.prefetch_hits = ctx.store.pool->counters().prefetch_hits.load();
  return p;
}

void set_error(context& ctx, const std::string& why) { ctx.standby.set_error(why); }

std::string primary_text(const receiver_state& st) {
  return st.options.host + ":" + std::to_string(st.options.port);
}

void note_primary(context& ctx, const primary_position& p) {
  ctx.standby.primary_flushed.store(p.flushed);
  ctx.standby.note_primary_clock(p.flushed, p.unix_micros);
  ctx.standby.primary_acknowledged.store(p.acknowledged);
  ctx.standby.note_peers(p.standbys);
}

void retry_later(receiver_pointer self) {
  self->delayed_send(self, retry_interval, tick_atom::value);
}

// The connection is gone (or never came): try again in a second, from the flushed WAL.
void lose_connection(receiver_pointer self, const std::string& why) {
  auto& st = self->state;
  if (st.sender)
    self->demonitor(st.sender.address());
  st.sender = nullptr;
  ++st.connection;
  if (st.ctx->standby.connected.exchange(false))
    st.ctx->log("LOG:  standby lost its primary at " + primary_text(st) + ": " + why +
                "; reconnecting");
  set_error(*st.ctx, why);
  retry_later(self);
}

// Streaming ends for good (refused, or the standby failed): the sender is let go
// entirely, its monitor included.
void drop_sender_for_good(receiver_pointer self) {
  auto& st = self->state;
  st.refused = true;
  if (st.sender)
    self->demonitor(st.sender.address());
  st.sender = nullptr;
  ++st.connection;
  st.ctx->standby.connected.store(false);
}

// The primary refused this standby: streaming stops for good.
void refused(receiver_pointer self, const std::string& why) {
  auto& st = self->state;
  drop_sender_for_good(self);
  set_error(*st.ctx, why);
  st.ctx->standby.refused.store(true);
  st.ctx->log("ERROR:  the primary at " + primary_text(st) + " refused this standby: " + why);
}

// The standby failed (redo stopped, or WAL could not be stored): streaming stops for good,
// and no flush is confirmed again. True when it did.
bool stopped_by_failure(receiver_pointer self) {
  auto& st = self->state;
  if (!st.ctx->failed())
    return false;
  if (!st.refused)
    drop_sender_for_good(self);
  return true;
}

// A refusal is an error our sender made (runtime_error with its words); anything else
// (timeout, connection lost, actor gone) is the network's.
void on_error(receiver_pointer self, std::uint64_t connection, const caf::error& error) {
  if (connection != self->state.connection)
    return;
  if (error.category() == caf::atom("system") &&
      error.code() == static_cast<std::uint8_t>(caf::sec::runtime_error))
    refused(self, error_text(error));
  else
    lose_connection(self, error_text(error));
}

// Appends, writes and fsyncs one chunk, then tells redo and the primary.
void store_chunk(receiver_pointer self, const wal_chunk& chunk) {
  auto& st = self->state;
  context& ctx = *st.ctx;
  if (stopped_by_failure(self))
    return;
  try {
    ctx.store.wal->append_received(chunk.start, chunk.bytes.data(), chunk.bytes.size());
    lsn_t written = ctx.store.wal->write_out();
    ctx.standby.received.store(written);
    if (st.sender) // remote_write commits need not wait for the fdatasync
      self->send(st.sender, standby_feedback{where_standby_is(st)});
    lsn_t flushed = ctx.store.wal->sync_through(written);
    ctx.standby.flushed.store(flushed);
    st.arrival->flushed_to(flushed);
    if (stopped_by_failure(self)) // redo stopped meanwhile: this flush is not confirmed
      return;
  } catch (const std::exception& error) {
    ctx.fail(std::string("the standby could not store the WAL it received: ") + error.what());
    refused(self, ctx.failure());
    return;
  }
  if (st.sender)
    self->send(st.sender, standby_feedback{where_standby_is(st)});
}

void fetch_next(receiver_pointer self) {
  auto& st = self->state;
  const std::uint64_t connection = st.connection;
  wal_fetch fetch{where_standby_is(st), st.next, fetch_bytes};
  self->request(st.sender, answer_timeout, fetch)
    .then(
      [self, connection](wal_chunk& chunk) {
        auto& st = self->state;
        if (connection != st.connection || stopped_by_failure(self))
          return;
        note_primary(*st.ctx, chunk.primary);
        if (chunk.bytes.empty()) { // the primary's heartbeat: nothing new
          if (st.sender)
            self->send(st.sender, standby_feedback{where_standby_is(st)});
          fetch_next(self);
          return;
        }
        if (chunk.start != st.next) {
          lose_connection(self, "the primary sent WAL at " + storage::format_lsn(chunk.start) +
                                  ", not at " + storage::format_lsn(st.next) + " as asked");
          return;
        }
        st.next += chunk.bytes.size();
        fetch_next(self); // on its way while this chunk is written
        store_chunk(self, chunk);
      },
      [self, connection](caf::error& error) { on_error(self, connection, error); });
}

// Opens the stream on a connected sender.
void open_stream(receiver_pointer self, wal_sender_actor sender) {
  auto& st = self->state;
  st.last_warning.clear();
  st.sender = std::move(sender);
  self->monitor(st.sender);
  const std::uint64_t connection = ++st.connection;
  const lsn_t from = st.ctx->standby.flushed.load();
  self->request(st.sender, answer_timeout, stream_open{where_standby_is(st), from})
    .then(
      [self, connection, from](primary_position& primary) {
        auto& st = self->state;
        if (connection != st.connection)
          return;
        note_primary(*st.ctx, primary);
        st.next = from;
        st.ctx->standby.connected.store(true);
        set_error(*st.ctx, "");
        st.ctx->log("LOG:  standby streaming from the primary at " + primary_text(st) + " from " +
                    storage::format_lsn(from));
        fetch_next(self);
      },
      [self, connection](caf::error& error) { on_error(self, connection, error); });
}

void cannot_connect(receiver_pointer self, const std::string& why) {
  auto& st = self->state;
  std::string text = "cannot reach the primary at " + primary_text(st) + ": " + why;
  if (text != st.last_warning)
    st.ctx->log("WARNING:  " + text + " (retrying every second)");
  st.last_warning = text;
  set_error(*st.ctx, text);
  st.connecting = false;
  retry_later(self);
}

// Asks the middleman to connect, without blocking this actor: a primary that accepts the
// connection but never completes the handshake (a dying process) is given up after the
// answer timeout like any other.
void connect(receiver_pointer self) {
  auto& st = self->state;
  if (st.refused || st.sender || st.connecting || st.ctx->failed())
    return;
  st.connecting = true;
  auto middleman = self->system().middleman().actor_handle();
  self
    ->request(middleman, answer_timeout, caf::connect_atom::value, st.options.host, st.options.port)
    .then(
      [self](const caf::node_id&, caf::strong_actor_ptr& peer, const std::set<std::string>& ifs) {
        auto& st = self->state;
        st.connecting = false;
        if (!peer)
          return cannot_connect(self, "no actor is published there");
        if (ifs != self->system().message_types(caf::detail::type_list<wal_sender_actor>{}))
          return refused(self, "the peer at " + primary_text(st) +
                                 " is not a WAL sender of this Tidemark version");
        open_stream(self, caf::actor_cast<wal_sender_actor>(std::move(peer)));
      },
      [self](caf::error& error) { cannot_connect(self, self->system().render(error)); });
}

wal_receiver_actor::behavior_type wal_receiver(receiver_pointer self, context* ctx,
                                               storage::received_wal* arrival,
                                               receiver_options options) {
  auto& st = self->state;
  st.ctx = ctx;
  st.arrival = arrival;
  st.options = std::move(options);
  ctx->standby.flushed.store(ctx->store.wal->flushed_lsn());
  ctx->standby.received.store(ctx->store.wal->flushed_lsn());
  self->set_down_handler([self](const caf::down_msg& down) {
    auto& st = self->state;
    if (st.sender && down.source == st.sender.address())
      lose_connection(self, "the primary's WAL sender went away");
  });
  self->send(self, tick_atom::value);
  return {
    [=](tick_atom) { connect(self); },
    [=](wake_atom) {
      if (stopped_by_failure(self))
        return;
      if (self->state.sender && self->state.ctx->standby.connected.load())
        self->send(self->state.sender, standby_feedback{where_standby_is(self->state)});
    },
  };
}

} // namespace

wal_receiver_actor spawn_wal_receiver(caf::actor_system& system, context& ctx,
                                      storage::received_wal& arrival, receiver_options options) {
  wal_receiver_actor receiver = system.spawn(wal_receiver, &ctx, &arrival, options);
  arrival.on_caught_up([receiver] { caf::anon_send(receiver, wake_atom::value); });
  return receiver;
}

} // namespace tidemark::actors
