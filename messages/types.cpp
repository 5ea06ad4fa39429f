// Names for message enums (for logs and traces).
#include "messages/types.hpp"

namespace tidemark::messages {

const char* to_string(checkpoint_reason reason) {
  switch (reason) {
    case checkpoint_reason::time:
      return "time";
    case checkpoint_reason::wal:
      return "wal";
    case checkpoint_reason::requested:
      return "requested";
    case checkpoint_reason::shutdown:
      return "shutdown";
    case checkpoint_reason::end_of_recovery:
      return "end-of-recovery";
    case checkpoint_reason::restartpoint:
      return "restartpoint";
  }
  return "?";
}

} // namespace tidemark::messages
