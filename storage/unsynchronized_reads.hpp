// A scope whose reads race with writers on purpose: an optimistic read of a page
// (buffer_pool::begin_optimistic) reads bytes another thread may be writing, and keeps what
// it read only if a version check after it says no write happened. ThreadSanitizer would
// report those reads as races; inside the scope it does not look at the thread's reads
// (the version check's atomics still order it). Nothing in other builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

namespace tidemark::storage {

class unsynchronized_reads {
public:
#if defined(__SANITIZE_THREAD__)
  unsynchronized_reads() { AnnotateIgnoreReadsBegin(__FILE__, __LINE__); }
  ~unsynchronized_reads() { AnnotateIgnoreReadsEnd(__FILE__, __LINE__); }
#else
  unsynchronized_reads() {} // NOLINT: user-provided, so a scope object is not "unused"
  ~unsynchronized_reads() {}
#endif
  unsynchronized_reads(const unsynchronized_reads&) = delete;
  unsynchronized_reads& operator=(const unsynchronized_reads&) = delete;
};

} // namespace tidemark::storage
