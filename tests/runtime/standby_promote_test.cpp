// Promotion against what the primary last said of its standbys (docs/replication.md, the
// failover runbook): a standby told that another standby had flushed more WAL refuses to
// be promoted, naming it (and saying when promoting it would lose acknowledged commits);
// promote_options::force promotes it all the same; a peer that is not ahead is no reason
// to refuse. The peers are set as the WAL receiver sets them from the primary's answers.
#include <tidemark/database.hpp>

#include "actors/context.hpp"
#include "replicated_primary.hpp"
#include "runtime/api_bridge.hpp"
#include "runtime/instance.hpp"
#include "scratch_directory.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace tidemark;

namespace {

// A standby of a primary that has committed a transaction, opened without streaming (the
// primary is stopped), and the WAL it has flushed.
struct stopped_primary_standby {
  test::scratch_directory primary_dir{"tidemark-primary"}, standby_dir{"tidemark-standby"};
  std::unique_ptr<database> standby;

  stopped_primary_standby() {
    const std::vector<std::string> settings = {"shared_buffers=1MB", "log_checkpoints=off"};
    auto primary = test::create_replicated_primary(primary_dir.dir, settings);
    session s = primary->open_session();
    s.begin();
    s.add_i64({1, 0}, 64, 1);
    s.commit();
    database::base_backup(standby_dir.dir, primary->replication_address(), "me");
    primary->close();
    open_options standby_options;
    standby_options.settings = settings;
    standby_options.standby = true;
    standby_options.stream = false;
    standby = database::open(standby_dir.dir, standby_options);
  }
  // What the primary's last answer would have said: every standby, this one included.
  void primary_said(std::uint64_t acknowledged, std::vector<messages::standby_peer> peers) {
    actors::standby_state& state = internal_access::of(*standby).internals().standby;
    state.primary_acknowledged.store(acknowledged);
    state.note_peers(std::move(peers));
  }
};

} // namespace

TEST_CASE("promote refuses a standby another standby was ahead of, unless forced") {
  stopped_primary_standby node;
  const std::uint64_t flushed = node.standby->standby().flushed;
  REQUIRE(flushed > 0);
  node.primary_said(flushed + 100, {{"me", flushed, true},
                                    {"far", flushed + 4096, false},
                                    {"near", flushed + 100, true}});
  standby_status s = node.standby->standby();
  CHECK(s.peer_ahead == "far");
  CHECK(s.peer_ahead_flushed == flushed + 4096);
  CHECK(s.primary_acknowledged == flushed + 100);
  std::string refusal;
  try {
    node.standby->promote();
  } catch (const usage_error& error) {
    refusal = error.what();
  }
  CHECK(refusal.find("standby \"far\" had WAL up to") != std::string::npos);
  CHECK(refusal.find("would lose acknowledged commits") != std::string::npos);
  CHECK(node.standby->is_standby()); // nothing changed
  promote_options force;
  force.force = true;
  node.standby->promote(force);
  CHECK_FALSE(node.standby->is_standby());
  node.standby->close();
}

TEST_CASE("promote goes ahead when no other standby was ahead") {
  stopped_primary_standby node;
  const std::uint64_t flushed = node.standby->standby().flushed;
  node.primary_said(flushed, {{"me", flushed, true}, {"behind", flushed - 1, true}});
  CHECK(node.standby->standby().peer_ahead.empty());
  CHECK(node.standby->generation() == 0); // the primary's, from init
  node.standby->promote();
  CHECK_FALSE(node.standby->is_standby());
  CHECK(node.standby->generation() == 1); // a history of its own from here
  node.standby->close();
  CHECK_THROWS_AS(node.standby->generation(), usage_error);
}
