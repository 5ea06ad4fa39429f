// The context's small behaviours: fsync dispatch by file kind, write source and actor
// role, sync registration as messages. See context.hpp.
#include "actors/context.hpp"

#include <pthread.h>

#include <caf/all.hpp>

#include <cstdio>

namespace tidemark::actors {

void name_this_thread(const char* name) { ::pthread_setname_np(::pthread_self(), name); }

std::string error_text(const caf::error& error) {
  const caf::message& context = error.context();
  if (context.size() == 1 && context.match_element<std::string>(0))
    return context.get_as<std::string>(0);
  return "actor error code " + std::to_string(static_cast<int>(error.code()));
}

void context::log(const std::string& line) const {
  if (log_sink) {
    log_sink(line);
    return;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

void context::sync_file(const storage::file_tag& tag) {
  switch (tag.kind) {
    case storage::file_kind::relation:
      store.files->sync_segment(tag.segment);
      return;
    case storage::file_kind::commit_log:
      store.commit_log->sync_segment(tag.segment.segno);
      return;
  }
}

void context::write_back_file(const storage::file_tag& tag, std::uint64_t offset,
                              std::uint64_t length) {
  if (tag.kind == storage::file_kind::relation)
    store.files->write_back_segment(tag.segment, offset, length);
}

messages::actor_role role_of(storage::write_source source) {
  switch (source) {
    case storage::write_source::backend:
      return messages::actor_role::backend;
    case storage::write_source::bgwriter:
      return messages::actor_role::bgwriter;
    case storage::write_source::checkpointer:
      return messages::actor_role::checkpointer;
  }
  return messages::actor_role::application;
}

storage::write_source source_of(messages::actor_role role) {
  switch (role) {
    case messages::actor_role::bgwriter:
      return storage::write_source::bgwriter;
    case messages::actor_role::checkpointer:
      return storage::write_source::checkpointer;
    default:
      return storage::write_source::backend;
  }
}

void actor_sync_registry::register_files(const storage::file_write* files, std::size_t count,
                                         storage::write_source source) {
  messages::sync_register request;
  request.source = static_cast<std::uint8_t>(role_of(source));
  request.files.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const storage::file_write& w = files[i];
    request.files.push_back(
      {{static_cast<std::uint8_t>(w.tag.kind), w.tag.segment.rel, w.tag.segment.segno},
       w.bytes,
       w.begin,
       w.end});
  }
  caf::anon_send(worker_, std::move(request));
  // Recorded after the send: a registration traced before an event was enqueued before it.
  if (trace_ != nullptr)
    for (std::size_t i = 0; i < count; ++i)
      trace_->record(role_of(source), messages::actor_role::sync_worker,
                     messages::trace_type::sync_register, files[i].tag.segment.rel,
                     files[i].tag.segment.segno, static_cast<std::uint64_t>(files[i].tag.kind));
}

} // namespace tidemark::actors
