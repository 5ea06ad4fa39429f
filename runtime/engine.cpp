// Names for the engine's enums.
#include "runtime/engine.hpp"

namespace tidemark::runtime {

const char* to_string(checkpoint_phase phase) {
  switch (phase) {
    case checkpoint_phase::idle:
      return "idle";
    case checkpoint_phase::write:
      return "write";
    case checkpoint_phase::sync:
      return "sync";
    case checkpoint_phase::finish:
      return "finish";
  }
  return "?";
}

} // namespace tidemark::runtime
