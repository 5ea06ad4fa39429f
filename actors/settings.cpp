// Names for the settings' enums: see settings.hpp.
#include "actors/settings.hpp"

#include "messages/types.hpp"

namespace tidemark::actors {

messages::settings_reload reloadable_part(const settings& s) {
  messages::settings_reload r;
  r.checkpoint_timeout_ms = static_cast<std::uint64_t>(s.checkpoint_timeout.count());
  r.checkpoint_completion_target = s.checkpoint_completion_target;
  r.max_wal_size = s.max_wal_size;
  r.log_checkpoints = s.log_checkpoints;
  r.bgwriter_delay_ms = static_cast<std::uint64_t>(s.bgwriter_delay.count());
  r.bgwriter_lru_maxpages = s.bgwriter_lru_maxpages;
  r.bgwriter_lru_multiplier = s.bgwriter_lru_multiplier;
  r.write_back_sweep_ms = static_cast<std::uint64_t>(s.write_back_sweep.count());
  r.doublewrite_flush_delay_ms = static_cast<std::uint64_t>(s.doublewrite_flush_delay.count());
  r.background_write_limit = s.background_write_limit;
  return r;
}

void apply_reload(settings& s, const messages::settings_reload& r) {
  using std::chrono::milliseconds;
  s.checkpoint_timeout = milliseconds(r.checkpoint_timeout_ms);
  s.checkpoint_completion_target = r.checkpoint_completion_target;
  s.max_wal_size = r.max_wal_size;
  s.log_checkpoints = r.log_checkpoints;
  s.bgwriter_delay = milliseconds(r.bgwriter_delay_ms);
  s.bgwriter_lru_maxpages = r.bgwriter_lru_maxpages;
  s.bgwriter_lru_multiplier = r.bgwriter_lru_multiplier;
  s.write_back_sweep = milliseconds(r.write_back_sweep_ms);
  s.doublewrite_flush_delay = milliseconds(r.doublewrite_flush_delay_ms);
  s.background_write_limit = r.background_write_limit;
}

const char* to_string(torn_page_protection mode) {
  switch (mode) {
    case torn_page_protection::full_page_writes:
      return "full_page_writes";
    case torn_page_protection::doublewrite:
      return "doublewrite";
    case torn_page_protection::off:
      return "off";
  }
  return "?";
}

const char* to_string(settings::standby_wait wait) {
  switch (wait) {
    case settings::standby_wait::off:
      return "off";
    case settings::standby_wait::remote_write:
      return "remote_write";
    case settings::standby_wait::remote_flush:
      return "remote_flush";
    case settings::standby_wait::remote_apply:
      return "remote_apply";
  }
  return "?";
}

} // namespace tidemark::actors
