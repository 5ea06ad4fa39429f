// Eager doublewrite repair at startup, before redo (DESIGN §6 step 3). Every page image of
// every ring record (doublewrite_record.hpp) that may still be live, whose checksum and
// identity verify, is a candidate; per page the image with the highest LSN wins (D5). The
// on-disk page is then restored from it when the decision table says so — whether or not a
// checksum noticed anything:
//
//   on-disk page                          action    why
//   fails checksum / identity             restore   torn (or misdirected) in-place write
//   all zero (never written)              restore   the in-place write was lost entirely
//   valid, LSN older than the slot        restore   in-place write lost or torn into a
//                                                   page that still verifies
//   valid, same LSN, different bytes      restore   torn in a way the checksum missed
//   valid, same LSN, same bytes           keep      the in-place write made it
//   valid, LSN newer than the slot        keep      a later write made it (a stale slot)
//
// Which records: with an intact header, the chain from its horizon — the record there with
// the horizon's sequence (or, if none, at the start of the record area), then each next
// one right behind the last or at the start, with the next sequence — until neither place
// holds it. The ring (doublewrite_ring.hpp) keeps every record not FREE yet, and every
// record on that chain, from being overwritten until a newer header is durable, and never
// repeats a sequence, so the chain holds every record that may be live and nothing stale
// joins it. Without an intact header (a ring from before the header slots, or one whose
// only header was torn at its first write) every intact record of the whole file is used.
//
// A restored page carries an LSN whose WAL was durable before the slot was written (W1),
// so redo continues from it. Restored segments are fsynced before redo starts.
#pragma once

#include "storage/io_engine.hpp"
#include "storage/page.hpp"
#include "storage/relation_files.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tidemark::storage {

enum class repair_action { keep, restore };

struct repair_inputs {
  page_verdict disk = page_verdict::ok;
  lsn_t disk_lsn = 0;
  lsn_t slot_lsn = 0;
  bool same_bytes = false;
};

repair_action decide_repair(const repair_inputs& in);

struct repair_report {
  std::uint64_t images_read = 0;      // images of intact ring records
  std::uint64_t pages_considered = 0; // distinct pages with a valid image
  std::uint64_t pages_repaired = 0;
  std::uint64_t repaired_checksum = 0; // on-disk page failed verification or was zero
  std::uint64_t repaired_lsn = 0;      // on-disk page valid but older
  std::uint64_t repaired_bytes = 0;    // same LSN, different bytes
  std::uint64_t ring_bytes_read = 0;   // the header slots and every pass of every thread
  std::uint64_t records_read = 0;      // intact records used
  bool bounded = false;                // an intact header bounded the scan to its chain
  double seconds = 0;                  // wall time of the repair
};

struct ring_check_report {
  bool present = false;
  std::uint64_t images = 0;     // images in intact records
  std::uint64_t unreadable = 0; // of which the page does not decode or verify
};

/// Reads the ring file (if it exists) and checks every image of every intact record in it
/// (the whole file, past the header slots when a header is intact), changing nothing.
ring_check_report check_ring(io_engine& io, const std::string& ring_path, std::size_t page_size);

/// Threads the repair pass runs on: one per core, at most four. Each reads the records
/// once more (ring_bytes_read counts every read).
std::size_t repair_threads();

/// Reads the ring file (if it exists) — only the chain when a header is intact — and
/// repairs pages through `files`.
repair_report repair_from_ring(io_engine& io, const std::string& ring_path, relation_files& files);

} // namespace tidemark::storage
