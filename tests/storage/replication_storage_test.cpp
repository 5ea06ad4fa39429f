// The storage mechanisms of streaming replication, without an actor system:
//  - received_wal: the standby's durable-arrival position (flushed_to, end, wait_beyond);
//  - wal_reader::follow(): reading WAL only as far as it arrived, waiting at its end
//    (also when the limit falls inside a record), and ending where the stream ended;
//    reading again WAL that arrived but read back wrong (zeros, short, EIO), and throwing
//    rather than ending short of it when it stays wrong;
//  - wal_log::append_received() and restart_at(): a byte-exact copy of a primary's WAL
//    received in odd-sized chunks, the gap check, and continuing the copy after its last
//    complete record (promotion) without stale bytes of a partly received record;
//  - wal_segment_reader: raw reads across segment boundaries, a missing segment, a short
//    segment file, with and without the cached descriptor;
//  - position_waiters: waiting for a published position, and stop();
//  - control file version 2 (generation) and reading a version 1 file.
// Blocking is checked with threads and the blocking APIs themselves, never with sleeps: a
// waiter is started and the test goes on once the kernel reports the thread asleep (its
// state in /proc), and a probe between a following reader and its received_wal records
// every wait with how many records the reader had returned by then.
#include "invariant_abort.hpp"
#include "wal_test_support.hpp"

#include "storage/control_file.hpp"
#include "storage/crc32c.hpp"
#include "storage/fault_engine.hpp"
#include "storage/position_waiters.hpp"
#include "storage/received_wal.hpp"
#include "storage/wal_segment_reader.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

using namespace tidemark::storage;
using namespace tidemark::storage::wal_test;

namespace {

// Where the primaries below start their WAL: inside the third segment, not at 0.
constexpr lsn_t primary_start = 2 * small_segment + 1000;

struct primary_records {
  std::vector<lsn_range> ranges;   // as insert() returned them
  std::vector<lsn_t> starts;       // ranges[i].start
  std::vector<lsn_t> aligned_ends; // where the next record starts
  lsn_t end() const { return aligned_ends.back(); }
};

// `count` records of varied lengths, every fourth with an uncompressible page image (so
// that records span the 64 KiB segments), inserted and flushed.
primary_records write_primary(wal_log& wal, std::size_t count) {
  primary_records out;
  record_builder builder;
  for (std::size_t i = 0; i < count; ++i) {
    build_record(builder, 100 + i, 60 + (i * 977) % 3000, i % 4 == 1);
    std::optional<lsn_range> range = wal.insert(builder, wal.redo_lsn());
    REQUIRE(range);
    out.ranges.push_back(*range);
    out.starts.push_back(range->start);
    out.aligned_ends.push_back(aligned_record_size(range->end));
  }
  wal.flush(wal.inserted_lsn());
  REQUIRE(wal.flushed_lsn() == out.end());
  return out;
}

std::vector<unsigned char> read_bytes(io_engine& io, const std::string& dir, lsn_t from, lsn_t to) {
  wal_segment_reader segments(io, dir, small_segment);
  std::vector<unsigned char> bytes(to - from);
  REQUIRE(segments.read(from, bytes.data(), bytes.size()) == bytes.size());
  return bytes;
}

// The bytes of a segment file as they are on disk.
std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  REQUIRE(file);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(file),
                                    std::istreambuf_iterator<char>());
}

bool all_zero(const std::vector<unsigned char>& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0; });
}

// Shared between a following reader's thread and the test: the records it returned, and
// every wait_beyond() it made with how many records it had returned at that moment.
class follow_probe final : public wal_arrival {
public:
  explicit follow_probe(received_wal& inner) : inner_(inner) {}

  lsn_t wait_beyond(lsn_t lsn) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      waits_.push_back({lsn, returned_.size()});
    }
    changed_.notify_all();
    return inner_.wait_beyond(lsn);
  }
  void returned(lsn_t lsn) {
    std::lock_guard<std::mutex> lock(mutex_);
    returned_.push_back(lsn);
  }
  void finished() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
    }
    changed_.notify_all();
  }
  /// Blocks until the reader waits beyond `lsn`; returns how many records it had returned
  /// then (reader_finished if the reader ended without such a wait).
  std::size_t wait_for_wait_beyond(lsn_t lsn) {
    std::unique_lock<std::mutex> lock(mutex_);
    std::size_t found = reader_finished;
    changed_.wait(lock, [&] {
      for (const auto& w : waits_)
        if (w.lsn == lsn) {
          found = w.returned;
          return true;
        }
      return finished_;
    });
    return found;
  }
  static constexpr std::size_t reader_finished = ~std::size_t{0};
  std::vector<lsn_t> returned_lsns() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return returned_;
  }

private:
  struct wait {
    lsn_t lsn;
    std::size_t returned;
  };
  received_wal& inner_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<wait> waits_;
  std::vector<lsn_t> returned_;
  bool finished_ = false;
};

// Runs `reader` to its end on a thread of its own, reporting records to the probe. If a
// test stops early (a failed REQUIRE), the stream is ended so that the thread finishes.
struct follower {
  wal_reader& reader;
  follow_probe& probe;
  received_wal& arrival;
  std::string end_description;
  lsn_t end_lsn = 0;
  bool data_ok = true;
  std::thread thread;

  follower(wal_reader& r, follow_probe& p, received_wal& a) : reader(r), probe(p), arrival(a) {
    reader.follow(&probe);
    thread = std::thread([this] {
      while (const record_view* record = reader.next()) {
        data_ok &= main_data_matches(*record);
        probe.returned(record->lsn());
      }
      end_description = reader.end_description();
      end_lsn = reader.end_lsn();
      probe.finished();
    });
  }
  ~follower() {
    if (thread.joinable()) {
      arrival.end();
      thread.join();
    }
  }
  void join() { thread.join(); }
};

std::vector<lsn_t> prefix(const std::vector<lsn_t>& lsns, std::size_t count) {
  return std::vector<lsn_t>(lsns.begin(), lsns.begin() + static_cast<std::ptrdiff_t>(count));
}

// Appends [from, to) of `bytes` (which start at `base`) to `wal` in chunks of the sizes
// listed, cycling through them, flushing after every `flush_every` chunks.
void append_chunks(wal_log& wal, const std::vector<unsigned char>& bytes, lsn_t base, lsn_t from,
                   lsn_t to, const std::vector<std::size_t>& sizes, std::size_t flush_every) {
  std::size_t n = 0;
  for (lsn_t at = from; at < to; ++n) {
    std::size_t piece = std::min<std::size_t>(sizes[n % sizes.size()], to - at);
    wal.append_received(at, bytes.data() + (at - base), piece);
    at += piece;
    REQUIRE(wal.inserted_lsn() == at);
    if (n % flush_every == flush_every - 1) {
      lsn_t written = wal.write_out();
      CHECK(written == at);
      CHECK(wal.sync_through(written) == at);
    }
  }
}

// The calling thread's kernel id, to watch it from another thread.
pid_t current_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// Returns once thread `tid` of this process is asleep (state S: blocked in a futex wait,
// that is, in the condition variable of the call it was about to make) or has exited.
// It watches the thread's state rather than guessing a time, so a wait is known to be
// pending when the test goes on.
void wait_until_asleep(pid_t tid) {
  std::string path = "/proc/self/task/" + std::to_string(tid) + "/stat";
  for (;;) {
    std::ifstream stat(path);
    std::string line;
    if (!stat || !std::getline(stat, line))
      return; // the thread has exited
    std::size_t paren = line.rfind(')');
    if (paren == std::string::npos || paren + 2 >= line.size())
      FAIL("unexpected " << path << ": " << line);
    if (line[paren + 2] == 'S')
      return;
    std::this_thread::yield();
  }
}

// A thread started by start_asleep(); join it before the test ends.
struct sleeper {
  std::thread thread;
  pid_t tid;
  void join() { thread.join(); }
};

// Starts `body` on a thread and returns once the thread is asleep in it (or done).
sleeper start_asleep(std::function<void()> body) {
  auto tid = std::make_shared<std::atomic<pid_t>>(0);
  std::thread thread([tid, body = std::move(body)] {
    tid->store(current_tid());
    body();
  });
  while (tid->load() == 0)
    std::this_thread::yield();
  wait_until_asleep(tid->load());
  return sleeper{std::move(thread), tid->load()};
}

} // namespace

// ---- received_wal -------------------------------------------------------------------------

TEST_CASE("replication storage: received_wal wait_beyond returns at once when flushed is beyond") {
  received_wal arrival(1000);
  CHECK(arrival.flushed() == 1000);
  CHECK_FALSE(arrival.ended());
  CHECK(arrival.wait_beyond(0) == 1000);
  CHECK(arrival.wait_beyond(999) == 1000);
}

TEST_CASE("replication storage: received_wal wait_beyond blocks until flushed_to from another "
          "thread") {
  received_wal arrival(1000);
  std::atomic<lsn_t> seen{0};
  sleeper waiter = start_asleep([&] { seen = arrival.wait_beyond(1500); }); // must wait
  arrival.flushed_to(1200); // not beyond 1500: the waiter keeps waiting
  wait_until_asleep(waiter.tid);
  arrival.flushed_to(1500); // still not beyond
  wait_until_asleep(waiter.tid);
  arrival.flushed_to(2000);
  waiter.join();
  CHECK(seen == 2000); // an early return would have seen 1200 or 1500

  // Several waiters at different positions, released one by one.
  std::vector<std::atomic<lsn_t>> results(3);
  std::vector<sleeper> waiters;
  for (std::size_t i = 0; i < 3; ++i)
    waiters.push_back(start_asleep([&, i] { results[i] = arrival.wait_beyond(2000 + 1000 * i); }));
  arrival.flushed_to(2500);
  waiters[0].join();
  CHECK(results[0] == 2500);
  arrival.flushed_to(3500);
  waiters[1].join();
  CHECK(results[1] == 3500);
  arrival.flushed_to(4500);
  waiters[2].join();
  CHECK(results[2] == 4500);
}

TEST_CASE("replication storage: received_wal end releases waiters without growth and ignores later "
          "flushes") {
  received_wal arrival(1000);
  std::atomic<lsn_t> seen{0};
  sleeper waiter = start_asleep([&] { seen = arrival.wait_beyond(1000); });
  arrival.end();
  waiter.join();
  CHECK(seen == 1000); // released by the end, not by growth
  CHECK(arrival.ended());

  arrival.flushed_to(5000); // after end: ignored
  CHECK(arrival.flushed() == 1000);
  CHECK(arrival.wait_beyond(1000) == 1000); // returns at once once ended
  CHECK(arrival.wait_beyond(1u << 30) == 1000);
}

TEST_CASE("replication storage: received_wal flushed never decreases") {
  received_wal arrival(1000);
  arrival.flushed_to(800);
  CHECK(arrival.flushed() == 1000);
  arrival.flushed_to(1000);
  CHECK(arrival.flushed() == 1000);
  arrival.flushed_to(3000);
  arrival.flushed_to(2000);
  CHECK(arrival.flushed() == 3000);
  CHECK(arrival.wait_beyond(2500) == 3000);
}

// ---- wal_reader::follow -------------------------------------------------------------------

TEST_CASE("replication storage: a following reader returns what arrived, waits, then ends with the "
          "stream") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), primary_start, 0);
  primary_records records = write_primary(wal, 40);
  REQUIRE(records.end() > primary_start + 2 * small_segment); // spans segment files
  constexpr std::size_t k = 7;

  received_wal arrival(records.aligned_ends[k - 1]); // the first k records arrived
  follow_probe probe(arrival);
  wal_reader reader(*io, dir.path(), small_segment, page_size, primary_start);
  follower run(reader, probe, arrival);

  // The reader waits beyond the end of the first k records, having returned exactly them.
  CHECK(probe.wait_for_wait_beyond(records.aligned_ends[k - 1]) == k);
  CHECK(probe.returned_lsns() == prefix(records.starts, k));

  arrival.flushed_to(records.end());
  CHECK(probe.wait_for_wait_beyond(records.end()) == records.starts.size());
  CHECK(probe.returned_lsns() == records.starts);

  arrival.end();
  run.join();
  CHECK(run.data_ok);
  CHECK(run.end_lsn == records.end());
  CHECK(run.end_description.find("end of the WAL that arrived") != std::string::npos);
  CHECK(reader.next() == nullptr); // stays ended
  CHECK(reader.end_lsn() == records.end());
  CHECK(reader.ended_at_stream_end());
}

TEST_CASE("replication storage: a following reader does not return a record that arrived only in "
          "part") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  wal_log wal(*io, small_options(dir.path()), primary_start, 0);
  primary_records records = write_primary(wal, 20);
  constexpr std::size_t k = 4;
  REQUIRE(records.ranges[k].end - records.starts[k] > sizeof(record_header) + 40);

  // Inside record k, past its header.
  lsn_t in_body = records.starts[k] + sizeof(record_header) + 21;
  // Inside record k + 1's header.
  lsn_t in_header = records.starts[k + 1] + 13;
  // One byte short of record k + 1's end (its padding not counted).
  lsn_t one_short = records.ranges[k + 1].end - 1;

  received_wal arrival(in_body);
  follow_probe probe(arrival);
  wal_reader reader(*io, dir.path(), small_segment, page_size, primary_start);
  follower run(reader, probe, arrival);

  CHECK(probe.wait_for_wait_beyond(in_body) == k);
  arrival.flushed_to(in_header);
  CHECK(probe.wait_for_wait_beyond(in_header) == k + 1);
  arrival.flushed_to(one_short);
  CHECK(probe.wait_for_wait_beyond(one_short) == k + 1);
  arrival.flushed_to(records.ranges[k + 1].end); // complete without its padding: enough
  CHECK(probe.wait_for_wait_beyond(records.ranges[k + 1].end) == k + 2);

  arrival.flushed_to(records.starts[k + 2] + 30); // part of the next header, then the end
  CHECK(probe.wait_for_wait_beyond(records.starts[k + 2] + 30) == k + 2);
  arrival.end();
  run.join();
  CHECK(probe.returned_lsns() == prefix(records.starts, k + 2));
  CHECK(run.data_ok);
  CHECK(run.end_lsn == records.starts[k + 2]); // the last complete record's end
  CHECK(run.end_description.find("end of the WAL that arrived") != std::string::npos);

  // A stream that had already ended in the middle of a record: the reader ends before it.
  received_wal ended(in_body);
  ended.end();
  wal_reader short_reader(*io, dir.path(), small_segment, page_size, primary_start);
  short_reader.follow(&ended);
  std::size_t count = 0;
  while (short_reader.next())
    ++count;
  CHECK(count == k);
  CHECK(short_reader.end_lsn() == records.starts[k]);
  CHECK(short_reader.end_description() ==
        "record at " + format_lsn(records.starts[k]) + ": end of the WAL that arrived");
  CHECK(short_reader.ended_at_stream_end());
}

// WAL written and fsynced through a fault engine whose first read of those bytes goes bad
// `repeats` times (0: for good), read back by a following reader whose stream has ended.
struct bad_read_run {
  std::size_t records_read = 0, records_written = 0;
  lsn_t end_lsn = 0, start = 0;
  bool ended_at_stream_end = false;
  std::uint64_t rereads = 0;
  std::string error; // the data_error the reader threw
};

bad_read_run follow_through_bad_reads(read_fault kind, std::uint32_t repeats) {
  temp_dir dir;
  fault_config config;
  config.bad_reads = {kind, 1, "", repeats};
  fault_engine io(make_io_engine(io_method::sync), config);
  wal_log wal(io, small_options(dir.path()), primary_start, 0);
  primary_records records = write_primary(wal, 40);
  received_wal arrival(records.end());
  arrival.end();
  std::atomic<std::uint64_t> rereads{0};
  wal_reader reader(io, dir.path(), small_segment, page_size, primary_start);
  reader.follow(&arrival, &rereads);
  bad_read_run run;
  run.records_written = records.starts.size();
  run.start = primary_start;
  try {
    while (const record_view* record = reader.next()) {
      CHECK(main_data_matches(*record));
      ++run.records_read;
    }
    run.end_lsn = reader.end_lsn();
    run.ended_at_stream_end = reader.ended_at_stream_end();
    CHECK(run.end_lsn == records.end());
  } catch (const tidemark::data_error& error) {
    run.error = error.what();
  }
  run.rereads = rereads.load();
  CHECK(io.reads_faulted() >= 1);
  return run;
}

TEST_CASE("replication storage: a following reader reads again WAL that arrived and read back "
          "wrong") {
  for (read_fault kind : {read_fault::zeros, read_fault::short_read, read_fault::error}) {
    CAPTURE(static_cast<int>(kind));
    bad_read_run run = follow_through_bad_reads(kind, wal_reader::max_rereads);
    CHECK(run.error.empty());
    CHECK(run.records_read == run.records_written);
    CHECK(run.ended_at_stream_end);
    CHECK(run.rereads == wal_reader::max_rereads);
  }
}

TEST_CASE("replication storage: a following reader never ends silently short of WAL that arrived") {
  for (read_fault kind : {read_fault::zeros, read_fault::short_read, read_fault::error}) {
    CAPTURE(static_cast<int>(kind));
    bad_read_run run = follow_through_bad_reads(kind, 0); // every read of those bytes is bad
    CHECK(run.records_read == 0);
    CHECK(run.rereads == wal_reader::max_rereads);
    CHECK(run.error.find("WAL record at " + format_lsn(run.start) + " in ") != std::string::npos);
    CHECK(run.error.find("cannot be read back") != std::string::npos);
  }

  // Crash recovery's reader (not following) takes the same zeros for the end of its WAL,
  // as after a crash it must: there, the end-of-WAL proofs (find_corruption) judge it.
  temp_dir dir;
  fault_config config;
  config.bad_reads = {read_fault::zeros, 1, "", 0};
  fault_engine io(make_io_engine(io_method::sync), config);
  wal_log wal(io, small_options(dir.path()), primary_start, 0);
  write_primary(wal, 10);
  wal_reader reader(io, dir.path(), small_segment, page_size, primary_start);
  CHECK(reader.next() == nullptr);
  CHECK(reader.end_description().find("zero record length") != std::string::npos);
  CHECK_FALSE(reader.ended_at_stream_end());
}

TEST_CASE("replication storage: a following reader reads a standby's log as it is received") {
  // The reader follows the standby's own log, whose bytes beyond what was flushed are not
  // on disk yet (zeros): whatever it read ahead must not stand in for WAL that arrives later.
  temp_dir primary_dir, copy_dir;
  auto io = make_io_engine(io_method::sync);
  wal_log primary(*io, small_options(primary_dir.path()), primary_start, 0);
  primary_records records = write_primary(primary, 60);
  std::vector<unsigned char> bytes =
    read_bytes(*io, primary_dir.path(), primary_start, records.end());

  wal_log copy(*io, small_options(copy_dir.path(), small_segment, 64u << 10), primary_start, 0);
  received_wal arrival(copy.flushed_lsn());
  follow_probe probe(arrival);
  wal_reader reader(*io, copy_dir.path(), small_segment, page_size, primary_start);
  follower run(reader, probe, arrival);
  REQUIRE(probe.wait_for_wait_beyond(primary_start) == 0);

  const std::vector<std::size_t> sizes = {1, 7, 13, 333, 40001, 4097, 5, 999, 24, 3000, 70000};
  std::size_t n = 0;
  for (lsn_t at = primary_start; at < records.end(); ++n) {
    std::size_t piece = std::min<std::size_t>(sizes[n % sizes.size()], records.end() - at);
    copy.append_received(at, bytes.data() + (at - primary_start), piece);
    at += piece;
    REQUIRE(copy.flush(at) == at);
    arrival.flushed_to(at);
    // The reader has consumed all it can and waits for more: the complete records below
    // `at`, exactly.
    std::size_t complete = 0;
    while (complete < records.ranges.size() && records.ranges[complete].end <= at)
      ++complete;
    CAPTURE(at);
    REQUIRE(probe.wait_for_wait_beyond(at) == complete);
  }
  CHECK(probe.returned_lsns() == records.starts);
  arrival.end();
  run.join();
  CHECK(run.data_ok);
  CHECK(run.end_lsn == records.end());
  CHECK(run.end_description.find("end of the WAL that arrived") != std::string::npos);
}

// ---- wal_log::append_received and restart_at ----------------------------------------------

TEST_CASE("replication storage: WAL received in odd chunks reads back as the primary's records") {
  temp_dir primary_dir, copy_dir;
  auto io = make_io_engine(io_method::sync);
  wal_log primary(*io, small_options(primary_dir.path()), primary_start, 0);
  primary_records records = write_primary(primary, 60);
  std::vector<unsigned char> bytes =
    read_bytes(*io, primary_dir.path(), primary_start, records.end());

  // The standby's log: same start, a 64 KiB ring (chunks above 32 KiB are split, 100003
  // bytes exceed the whole ring).
  wal_log copy(*io, small_options(copy_dir.path(), small_segment, 64u << 10), primary_start, 0);
  std::vector<std::size_t> sizes = {1, 7, 13, 333, 40001, 4097, 100003, 5, 65536, 999, 24};
  append_chunks(copy, bytes, primary_start, primary_start, records.end(), sizes, 3);
  CHECK(copy.flush(records.end()) == records.end());
  CHECK(copy.flushed_lsn() == records.end());
  CHECK(copy.counters().bytes == records.end() - primary_start);

  read_result read = read_all(*io, copy_dir.path(), small_segment, primary_start);
  CHECK(read.lsns == records.starts);
  CHECK(read.end_lsn == records.end());
  CHECK(read.end_description.find("zero record length") != std::string::npos);
  CHECK(read_bytes(*io, copy_dir.path(), primary_start, records.end()) == bytes);
  CHECK(wal_log::list_segments(copy_dir.path()) == wal_log::list_segments(primary_dir.path()));
}

TEST_CASE("replication storage: append_received at a wrong lsn breaks an invariant") {
  temp_dir primary_dir, copy_dir;
  auto io = make_io_engine(io_method::sync);
  wal_log primary(*io, small_options(primary_dir.path()), primary_start, 0);
  primary_records records = write_primary(primary, 5);
  std::vector<unsigned char> bytes =
    read_bytes(*io, primary_dir.path(), primary_start, records.end());

  wal_log copy(*io, small_options(copy_dir.path()), primary_start, 0);
  const char* gap = "continues the log";
  CHECK(
    test::aborts_on_invariant([&] { copy.append_received(primary_start + 8, bytes.data() + 8, 8); },
                              gap));
  copy.append_received(primary_start, bytes.data(), 101);
  lsn_t at = primary_start + 101;
  // A gap, an overlap, a repeat.
  CHECK(
    test::aborts_on_invariant([&] { copy.append_received(at + 1, bytes.data() + 102, 10); }, gap));
  CHECK(
    test::aborts_on_invariant([&] { copy.append_received(at - 1, bytes.data() + 100, 10); }, gap));
  CHECK(
    test::aborts_on_invariant([&] { copy.append_received(primary_start, bytes.data(), 10); }, gap));
  copy.append_received(at, bytes.data() + 101, bytes.size() - 101);
  copy.flush(records.end());
  CHECK(read_all(*io, copy_dir.path(), small_segment, primary_start).lsns == records.starts);
}

TEST_CASE("replication storage: restart_at continues after the last complete record without stale "
          "bytes") {
  temp_dir primary_dir, copy_dir;
  auto io = make_io_engine(io_method::sync);
  wal_log primary(*io, small_options(primary_dir.path()), primary_start, 0);
  primary_records records = write_primary(primary, 60);
  std::vector<unsigned char> bytes =
    read_bytes(*io, primary_dir.path(), primary_start, records.end());

  // A record k that starts well before a segment boundary and ends more than 200 bytes after
  // it: the copy receives it only up to 101 bytes into the next segment.
  std::size_t k = 0;
  lsn_t boundary = 0;
  for (std::size_t i = 1; i < records.ranges.size() && k == 0; ++i) {
    lsn_t next_segment = records.starts[i] - records.starts[i] % small_segment + small_segment;
    if (records.starts[i] + 300 < next_segment && records.ranges[i].end > next_segment + 200) {
      k = i;
      boundary = next_segment;
    }
  }
  REQUIRE(k > 0);
  lsn_t cut = boundary + 101;

  wal_log copy(*io, small_options(copy_dir.path(), small_segment, 64u << 10), primary_start, 0);
  append_chunks(copy, bytes, primary_start, primary_start, cut, {4099, 777, 33333}, 2);
  copy.flush(cut);
  REQUIRE(copy.flushed_lsn() == cut);
  REQUIRE(std::filesystem::exists(segment_file(copy_dir.path(), small_segment, boundary)));
  // And some more that arrived but was not flushed.
  copy.append_received(cut, bytes.data() + (cut - primary_start), 50);

  // Beyond the flushed WAL: a broken invariant.
  CHECK(test::aborts_on_invariant([&] { copy.restart_at(cut + 8, records.starts[k]); },
                                  "within the flushed WAL"));

  lsn_t end = records.starts[k]; // = aligned end of record k - 1
  lsn_t prev = records.starts[k - 1];
  copy.restart_at(end, prev);
  CHECK(copy.inserted_lsn() == end);
  CHECK(copy.flushed_lsn() == end);
  CHECK_FALSE(std::filesystem::exists(segment_file(copy_dir.path(), small_segment, boundary)));
  CHECK(all_zero(read_bytes(*io, copy_dir.path(), end, boundary))); // the partial record is gone

  record_builder builder;
  build_record(builder, 9999, 40); // shorter than the partial record it replaces
  std::optional<lsn_range> range = copy.insert(builder, copy.redo_lsn());
  REQUIRE(range);
  CHECK(range->start == end);
  copy.flush(range->end);

  wal_reader reader(*io, copy_dir.path(), small_segment, page_size, primary_start);
  std::vector<lsn_t> lsns;
  while (const record_view* record = reader.next()) {
    CHECK(main_data_matches(*record));
    lsns.push_back(record->lsn());
    if (record->header.xid == 9999) {
      CHECK(record->header.prev_lsn == prev);
      CHECK(record->lsn() == end);
    }
  }
  std::vector<lsn_t> expected = prefix(records.starts, k);
  expected.push_back(end);
  CHECK(lsns == expected);
  CHECK(reader.end_lsn() == aligned_record_size(range->end));
  CHECK(reader.end_description().find("zero record length") != std::string::npos);
  REQUIRE(aligned_record_size(range->end) < boundary);
  CHECK(all_zero(read_bytes(*io, copy_dir.path(), aligned_record_size(range->end), boundary)));

  // The continued log keeps going into the next segment, created afresh.
  for (xid_t xid = 10000; copy.inserted_lsn() < boundary + 1000; ++xid) {
    build_record(builder, xid, 2500);
    REQUIRE(copy.insert(builder, copy.redo_lsn()));
  }
  copy.flush(copy.inserted_lsn());
  read_result all = read_all(*io, copy_dir.path(), small_segment, primary_start);
  CHECK(all.lsns.size() > k + 1);
  CHECK(all.end_lsn == copy.inserted_lsn());
}

// ---- wal_segment_reader -------------------------------------------------------------------

TEST_CASE("replication storage: wal_segment_reader reads across segments, stops at a missing one") {
  temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  primary_records records;
  {
    wal_log wal(*io, small_options(dir.path()), 0, 0);
    records = write_primary(wal, 60);
  }
  REQUIRE(records.end() > 3 * small_segment);
  std::vector<unsigned char> disk = file_bytes(dir.file(wal_log::segment_name(0)));
  for (lsn_t s = small_segment; s < 3 * small_segment; s += small_segment) {
    std::vector<unsigned char> more = file_bytes(dir.file(wal_log::segment_name(s)));
    REQUIRE(more.size() == small_segment);
    disk.insert(disk.end(), more.begin(), more.end());
  }
  REQUIRE(disk.size() == 3 * small_segment);

  for (bool cache : {true, false}) {
    CAPTURE(cache);
    wal_segment_reader segments(*io, dir.path(), small_segment, cache);
    CHECK(segments.segment_size() == small_segment);
    CHECK(segments.segment_start(small_segment + 5) == small_segment);
    CHECK(segments.segment_path(small_segment) == dir.file(wal_log::segment_name(small_segment)));

    // Across the first boundary, then across the second, then back into the first segment.
    for (lsn_t from : {small_segment - 3001, 2 * small_segment - 17, lsn_t{5}}) {
      std::vector<unsigned char> out(40000);
      CHECK(segments.read(from, out.data(), out.size()) == out.size());
      CHECK(std::equal(out.begin(), out.end(), disk.begin() + static_cast<std::ptrdiff_t>(from)));
    }
    // The three segments in one read.
    std::vector<unsigned char> whole(3 * small_segment);
    CHECK(segments.read(0, whole.data(), whole.size()) == whole.size());
    CHECK(whole == disk);
    // The records decode from the bytes read.
    record_header header;
    std::memcpy(&header, whole.data() + records.starts[3], sizeof header);
    CHECK(header.lsn == records.starts[3]);
  }

  // A missing segment ends the read there: the prefix that exists.
  std::filesystem::remove(dir.file(wal_log::segment_name(2 * small_segment)));
  for (bool cache : {true, false}) {
    CAPTURE(cache);
    wal_segment_reader segments(*io, dir.path(), small_segment, cache);
    std::vector<unsigned char> out(100000, 0xEE);
    lsn_t from = small_segment + 1234;
    std::size_t expected = 2 * small_segment - from;
    CHECK(segments.read(from, out.data(), out.size()) == expected);
    CHECK(std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(expected),
                     disk.begin() + static_cast<std::ptrdiff_t>(from)));
    CHECK(segments.read(2 * small_segment + 8, out.data(), 10) == 0); // starts in the gap
    // Segments after the gap are not read either.
    CHECK(segments.read(2 * small_segment - 10, out.data(), small_segment + 20) == 10);
    // The cached descriptor is not confused by the missing one: segment 0 still reads.
    CHECK(segments.read(100, out.data(), 200) == 200);
    CHECK(std::equal(out.begin(), out.begin() + 200, disk.begin() + 100));
    segments.forget();
    CHECK(segments.read(small_segment + 1, out.data(), 64) == 64);
  }

  // A short segment file: the bytes past its end read as zeros.
  std::filesystem::resize_file(dir.file(wal_log::segment_name(small_segment)), 1000);
  for (bool cache : {true, false}) {
    CAPTURE(cache);
    wal_segment_reader segments(*io, dir.path(), small_segment, cache);
    std::vector<unsigned char> out(3000, 0xEE);
    CHECK(segments.read(small_segment, out.data(), out.size()) == out.size());
    CHECK(std::equal(out.begin(), out.begin() + 1000,
                     disk.begin() + static_cast<std::ptrdiff_t>(small_segment)));
    CHECK(std::all_of(out.begin() + 1000, out.end(), [](unsigned char b) { return b == 0; }));
  }
}

// ---- position_waiters ---------------------------------------------------------------------

TEST_CASE("replication storage: position_waiters wait_for returns false when already published") {
  position_waiters waiters;
  CHECK(waiters.published() == 0);
  CHECK_FALSE(waiters.wait_for(0));
  waiters.publish(100);
  CHECK(waiters.published() == 100);
  CHECK_FALSE(waiters.wait_for(50));
  CHECK_FALSE(waiters.wait_for(100));
  waiters.publish(70); // never backwards
  CHECK(waiters.published() == 100);
}

TEST_CASE("replication storage: position_waiters wait_for blocks until published from another "
          "thread") {
  position_waiters waiters;
  waiters.publish(100);
  std::atomic<bool> waited{false};
  std::atomic<lsn_t> published_when_returned{0};
  sleeper waiter = start_asleep([&] {
    waited = waiters.wait_for(200);
    published_when_returned = waiters.published();
  });
  waiters.publish(150); // not enough
  wait_until_asleep(waiter.tid);
  waiters.publish(200);
  waiter.join();
  CHECK(waited); // it was asleep in wait_for when 200 was published
  CHECK(published_when_returned == 200);
}

TEST_CASE("replication storage: position_waiters stop makes pending and later unsatisfied waits "
          "throw") {
  position_waiters waiters;
  waiters.publish(100);
  std::string caught;
  bool returned = false;
  sleeper waiter = start_asleep([&] {
    try {
      waiters.wait_for(300);
      returned = true;
    } catch (const position_stopped& e) {
      caught = e.what();
    }
  });
  waiters.stop("the engine is closing"); // the wait is pending: the waiter is asleep in it
  waiter.join();
  CHECK_FALSE(returned);
  CHECK(caught == "the engine is closing");

  // Later unsatisfied waits throw too, with the first reason.
  waiters.stop("another reason");
  CHECK_THROWS_WITH_AS(waiters.wait_for(101), "the engine is closing", position_stopped);
  CHECK_THROWS_WITH_AS(waiters.wait_for(1000), "the engine is closing", position_stopped);
  // A wait for what is already published still returns, without waiting.
  CHECK_FALSE(waiters.wait_for(100));
  CHECK_FALSE(waiters.wait_for(40));
  CHECK(waiters.published() == 100);
}

// ---- control file -------------------------------------------------------------------------

namespace {

control_data sample_v2() {
  control_data data;
  data.system_id = 0x0123456789ABCDEFu;
  data.page_size = 8192;
  data.data_checksums = 1;
  data.segment_size = 1u << 30;
  data.wal_segment_size = 16u << 20;
  data.state = static_cast<std::uint32_t>(cluster_state::shut_down);
  data.protection = static_cast<std::uint32_t>(recorded_protection::doublewrite);
  data.checkpoint_lsn = 0x123458;
  data.redo_lsn = 0x123000;
  data.next_xid = 4242;
  data.checkpoint_time_unix_ms = 1700000012345;
  data.generation = 3;
  return data;
}

template <class T>
void put(std::string& bytes, std::size_t offset, T value) {
  std::memcpy(&bytes[offset], &value, sizeof value);
}

// The 88-byte version 1 layout, written field by field.
std::string version_1_file(bool bad_crc) {
  std::string bytes(88, '\0');
  put<std::uint32_t>(bytes, 0, control_magic);
  put<std::uint32_t>(bytes, 4, 1);
  put<std::uint64_t>(bytes, 8, 0xFEDCBA9876543210u); // system_id
  put<std::uint32_t>(bytes, 16, 4096);               // page_size
  put<std::uint32_t>(bytes, 20, 1);                  // data_checksums
  put<std::uint64_t>(bytes, 24, 1u << 28);           // segment_size
  put<std::uint64_t>(bytes, 32, 1u << 24);           // wal_segment_size
  put<std::uint32_t>(bytes, 40, static_cast<std::uint32_t>(cluster_state::in_production));
  put<std::uint32_t>(bytes, 44, static_cast<std::uint32_t>(recorded_protection::full_page_writes));
  put<std::uint64_t>(bytes, 48, 0xABC0408);     // checkpoint_lsn
  put<std::uint64_t>(bytes, 56, 0xABC0000);     // redo_lsn
  put<std::uint64_t>(bytes, 64, 987654);        // next_xid
  put<std::uint64_t>(bytes, 72, 1600000000123); // checkpoint_time_unix_ms
  std::uint32_t crc = crc32c(bytes.data(), 80);
  put<std::uint32_t>(bytes, 80, bad_crc ? crc ^ 0x10 : crc);
  put<std::uint32_t>(bytes, 84, 0); // padding
  return bytes;
}

void write_raw_control_file(const std::string& data_dir, const std::string& bytes) {
  std::filesystem::create_directories(data_dir + "/global");
  std::ofstream file(control_file_path(data_dir), std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(file);
}

} // namespace

TEST_CASE("replication storage: control file version 2 keeps the generation") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  write_control_file(*io, dir.path(), sample_v2());
  CHECK(std::filesystem::file_size(control_file_path(dir.path())) == sizeof(control_data));
  control_data read = read_control_file(*io, dir.path());
  CHECK(read.version == 2);
  CHECK(read.generation == 3);
  CHECK(read.system_id == sample_v2().system_id);
  CHECK(read.redo_lsn == sample_v2().redo_lsn);
  CHECK(read.checkpoint_time_unix_ms == sample_v2().checkpoint_time_unix_ms);

  read.generation = 4; // a promotion
  write_control_file(*io, dir.path(), read);
  CHECK(read_control_file(*io, dir.path()).generation == 4);

  // The generation is covered by the CRC.
  read.crc = crc32c(&read, offsetof(control_data, crc));
  std::string bytes(reinterpret_cast<const char*>(&read), sizeof read);
  bytes[offsetof(control_data, generation)] ^= 1;
  write_raw_control_file(dir.path(), bytes);
  CHECK_THROWS_WITH_AS(read_control_file(*io, dir.path()), doctest::Contains("checksum"),
                       data_error);
}

TEST_CASE("replication storage: a version 1 control file is read with every field and generation "
          "0") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  write_raw_control_file(dir.path(), version_1_file(false));
  control_data read = read_control_file(*io, dir.path());
  CHECK(read.magic == control_magic);
  CHECK(read.version == control_version); // converted: written back as version 2
  CHECK(read.system_id == 0xFEDCBA9876543210u);
  CHECK(read.page_size == 4096);
  CHECK(read.data_checksums == 1);
  CHECK(read.segment_size == 1u << 28);
  CHECK(read.wal_segment_size == 1u << 24);
  CHECK(read.state == static_cast<std::uint32_t>(cluster_state::in_production));
  CHECK(read.protection == static_cast<std::uint32_t>(recorded_protection::full_page_writes));
  CHECK(read.checkpoint_lsn == 0xABC0408);
  CHECK(read.redo_lsn == 0xABC0000);
  CHECK(read.next_xid == 987654);
  CHECK(read.checkpoint_time_unix_ms == 1600000000123);
  CHECK(read.generation == 0);

  // Written back, it is a version 2 file with the same contents.
  write_control_file(*io, dir.path(), read);
  CHECK(std::filesystem::file_size(control_file_path(dir.path())) == sizeof(control_data));
  control_data again = read_control_file(*io, dir.path());
  CHECK(again.version == 2);
  CHECK(again.system_id == read.system_id);
  CHECK(again.checkpoint_lsn == read.checkpoint_lsn);
  CHECK(again.next_xid == read.next_xid);
  CHECK(again.generation == 0);
}

TEST_CASE("replication storage: a version 1 control file with a bad CRC or truncated is refused") {
  test::temp_dir dir;
  auto io = make_io_engine(io_method::sync);
  write_raw_control_file(dir.path(), version_1_file(true));
  CHECK_THROWS_WITH_AS(read_control_file(*io, dir.path()), doctest::Contains("checksum"),
                       data_error);

  // A damaged field (not the CRC) is caught as well.
  std::string damaged = version_1_file(false);
  damaged[60] ^= 0x01; // in redo_lsn
  write_raw_control_file(dir.path(), damaged);
  CHECK_THROWS_WITH_AS(read_control_file(*io, dir.path()), doctest::Contains("checksum"),
                       data_error);

  write_raw_control_file(dir.path(), version_1_file(false).substr(0, 60));
  CHECK_THROWS_WITH_AS(read_control_file(*io, dir.path()), doctest::Contains("truncated"),
                       data_error);
}
