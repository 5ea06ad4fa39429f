// A test helper for TIDEMARK_CHECK (storage/check.hpp): runs a body in a forked child and
// says whether the child died of a violated invariant naming the given rule. The child is
// single-threaded code under test only (storage objects without threads of their own), so
// fork is safe; nothing the child does reaches the parent's state.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <functional>
#include <string>

namespace tidemark::storage::test {

// True when `body` aborts (SIGABRT) after printing "invariant violated" and `rule_part`
// on stderr; false when it returns, throws, or dies any other way.
inline bool aborts_on_invariant(const std::function<void()>& body, const std::string& rule_part) {
  int out[2];
  if (pipe(out) != 0)
    return false;
  pid_t child = fork();
  if (child < 0)
    return false;
  if (child == 0) {
    dup2(out[1], STDERR_FILENO);
    close(out[0]);
    try {
      body();
    } catch (...) {
    }
    _exit(0);
  }
  close(out[1]);
  std::string text;
  char buffer[512];
  for (ssize_t got; (got = read(out[0], buffer, sizeof buffer)) != 0;)
    if (got > 0)
      text.append(buffer, static_cast<std::size_t>(got));
    else if (errno != EINTR)
      break;
  close(out[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
         text.find("invariant violated") != std::string::npos &&
         text.find(rule_part) != std::string::npos;
}

} // namespace tidemark::storage::test
