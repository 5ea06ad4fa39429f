// instance::reload(): tidemark.conf read again and the reloadable settings handed to the
// actors that use them (a settings_reload message each; they keep their own copies), the
// others named as needing a restart. See database::reload().
//
// Invariants:
//  - All or nothing: a configuration that does not parse or validate changes nothing.
//  - Only settings is_reloadable_setting() names reach the running engine; the copy
//    setting() shows changes after every actor has the new values.
//  - One reload at a time (reload_mutex_). The lock on the shown copy (settings_mutex_) is
//    held only to read or replace it: never while an actor is asked or a line is logged,
//    since a log callback, on that actor's thread or on this one, may call setting().
#include "runtime/instance.hpp"

#include "runtime/config.hpp"
#include "runtime/startup.hpp"

#include <tidemark/errors.hpp>
#include <tidemark/settings.hpp>

#include <caf/all.hpp>

namespace tidemark::runtime {

namespace {

// Sends `reload` to `actor` (when it runs) and waits for it to have been handled.
template <class Actor>
void hand_over(caf::scoped_actor& self, const Actor& actor,
               const messages::settings_reload& reload) {
  if (!actor)
    return;
  caf::error failed;
  self->request(actor, caf::infinite, reload)
    .receive([] {}, [&failed](caf::error& error) { failed = std::move(error); });
  if (failed)
    throw tidemark::engine_stopped_error("reload: an actor did not take the new settings (" +
                                         caf::to_string(failed) + ")");
}

} // namespace

tidemark::reload_report instance::reload() {
  if (read_only_)
    throw tidemark::usage_error("reload: the database is open read-only (no actor runs)");
  std::lock_guard<std::mutex> one_at_a_time(reload_mutex_);
  const settings fresh = resolve_settings(engine_->data_dir, overrides_, engine_->control());
  settings running;
  {
    std::lock_guard<std::mutex> guard(settings_mutex_);
    running = current_;
  }
  tidemark::reload_report report;
  for (const tidemark::setting_description& d : tidemark::describe_settings()) {
    std::string before = show_setting(running, d.name), after = show_setting(fresh, d.name);
    if (before == after)
      continue;
    (d.reloadable ? report.changed : report.need_restart).push_back(d.name + " = " + after);
  }
  if (!report.changed.empty()) {
    const messages::settings_reload reload = actors::reloadable_part(fresh);
    caf::scoped_actor self{*system_};
    hand_over(self, checkpointer_, reload);
    hand_over(self, bgwriter_, reload);
    hand_over(self, sync_worker_, reload);
    hand_over(self, dw_batcher_, reload);
    std::lock_guard<std::mutex> guard(settings_mutex_);
    actors::apply_reload(current_, reload);
  }
  for (const std::string& line : report.changed)
    engine_->log("LOG:  reloaded: " + line);
  for (const std::string& line : report.need_restart)
    engine_->log("LOG:  not reloaded (takes a restart): " + line);
  return report;
}

std::string instance::setting(const std::string& key) const {
  std::lock_guard<std::mutex> guard(settings_mutex_);
  return show_setting(current_, key);
}

} // namespace tidemark::runtime
