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

} // namespace tidemark::actors
