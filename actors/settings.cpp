// Names for the settings' enums: see settings.hpp.
#include "actors/settings.hpp"

namespace tidemark::actors {

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
