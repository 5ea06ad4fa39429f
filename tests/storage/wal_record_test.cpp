// WAL record format: build/seal/decode round trips, CRC and structure rejection, and the
// semantics of apply_ops() shared by forward processing and redo.
#include "storage/crc32c.hpp"
#include "storage/wal_record.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <climits>
#include <cstring>
#include <vector>

using namespace tidemark::storage;

namespace {

using test::page_size;

std::vector<unsigned char> sealed_copy(const record_builder& builder, lsn_t lsn = 4096) {
  std::vector<unsigned char> bytes(builder.data(), builder.data() + builder.size());
  seal_record(bytes.data(), lsn, lsn - 512, lsn - 1024, builder.payload_crc());
  return bytes;
}

// Re-seals bytes changed after finish(), so only the structure checks can reject them.
void reseal(std::vector<unsigned char>& bytes) {
  std::uint32_t payload_crc =
    crc32c(bytes.data() + sizeof(record_header), bytes.size() - sizeof(record_header));
  seal_record(bytes.data(), 4096, 0, 0, payload_crc);
}

decode_result decode(const std::vector<unsigned char>& bytes, std::size_t page = page_size) {
  record_view view;
  return decode_record(bytes.data(), bytes.size(), page, view);
}

std::int64_t load_i64(const unsigned char* at) {
  std::int64_t value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

} // namespace

TEST_CASE("wal_record: build and decode round trip with images and main data") {
  std::vector<unsigned char> image(page_size);
  for (std::size_t i = 0; i < page_size; ++i)
    image[i] = static_cast<unsigned char>(i * 13);
  const checkpoint_payload payload{123456, 77, 999};

  record_builder builder;
  builder.reset(record_type::checkpoint, 42);
  builder.begin_block(page_id{3, 7});
  builder.add_i64(64, -5);
  builder.write_bytes(100, "hello", 5);
  CHECK(builder.block_ops_length() == 5 + 8 + 5 + 5);
  builder.end_block(image.data(), page_size);
  builder.begin_block(page_id{4, 9});
  builder.write_bytes(200, "xy", 2);
  builder.end_block(nullptr, page_size);
  builder.set_main_data(&payload, sizeof payload);
  builder.finish();
  CHECK(builder.has_images());
  CHECK(builder.image_count() == 1);

  std::vector<unsigned char> bytes = sealed_copy(builder, 8192);
  record_view view;
  REQUIRE(decode_record(bytes.data(), bytes.size(), page_size, view) == decode_result::ok);
  CHECK(view.lsn() == 8192);
  CHECK(view.header.prev_lsn == 8192 - 512);
  CHECK(view.header.durable_lsn == 8192 - 1024);
  CHECK(view.header.xid == 42);
  CHECK(view.type() == record_type::checkpoint);
  CHECK(view.end_lsn() == 8192 + builder.size());
  REQUIRE(view.block_count == 2);
  CHECK(view.blocks[0].id == page_id{3, 7});
  CHECK(view.blocks[0].ops_length == 23);
  REQUIRE(view.blocks[0].image != nullptr);
  std::vector<unsigned char> restored(page_size);
  restore_image(view.blocks[0], restored.data(), page_size);
  CHECK(restored == image);
  CHECK(view.blocks[1].id == page_id{4, 9});
  CHECK(view.blocks[1].image == nullptr);
  REQUIRE(view.main_length == sizeof payload);
  checkpoint_payload decoded;
  std::memcpy(&decoded, view.main, sizeof decoded);
  CHECK(decoded.redo_lsn == 123456);
  CHECK(decoded.next_xid == 77);
}

namespace {

// One record with one block carrying `image`; returns its decoded view over `bytes`.
record_view record_with_image(const std::vector<unsigned char>& image,
                              std::vector<unsigned char>& bytes) {
  record_builder builder;
  builder.reset(record_type::transaction, 5);
  builder.begin_block(page_id{3, 1});
  builder.add_i64(64, 1);
  builder.end_block(image.data(), page_size);
  builder.finish();
  bytes = sealed_copy(builder);
  record_view view;
  REQUIRE(decode_record(bytes.data(), bytes.size(), page_size, view) == decode_result::ok);
  REQUIRE(view.blocks[0].image != nullptr);
  return view;
}

} // namespace

TEST_CASE("wal_record: a compressible page image is stored compressed and restores exactly") {
  std::vector<unsigned char> image(page_size, 'c'); // like tpcb's rows: id, balance, filler
  for (std::size_t row = 0; row < 80; ++row)
    std::memcpy(image.data() + 32 + row * 100, &row, sizeof row);
  std::vector<unsigned char> bytes;
  record_view view = record_with_image(image, bytes);
  CHECK(view.blocks[0].image_compressed);
  CHECK(view.blocks[0].image_length < page_size / 4);
  CHECK(bytes.size() < page_size / 4);
  std::vector<unsigned char> restored(page_size);
  restore_image(view.blocks[0], restored.data(), page_size);
  CHECK(restored == image);
}

TEST_CASE("wal_record: an incompressible page image is stored as is") {
  std::vector<unsigned char> image(page_size);
  std::uint64_t x = 88172645463325252ull; // xorshift: no repeats for LZ4 to find
  for (unsigned char& b : image) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<unsigned char>(x);
  }
  std::vector<unsigned char> bytes;
  record_view view = record_with_image(image, bytes);
  CHECK_FALSE(view.blocks[0].image_compressed);
  CHECK(view.blocks[0].image_length == page_size);
  std::vector<unsigned char> restored(page_size);
  restore_image(view.blocks[0], restored.data(), page_size);
  CHECK(restored == image);
}

TEST_CASE("wal_record: a compressed image that does not decompress to a page is rejected") {
  std::vector<unsigned char> image(page_size, 'c');
  std::vector<unsigned char> bytes;
  record_view view = record_with_image(image, bytes);
  REQUIRE(view.blocks[0].image_compressed);
  const std::size_t length_at = sizeof(record_header) + sizeof(block_ref_header) + 5 + 8;

  SUBCASE("stored length of a whole page is a bad structure") {
    std::vector<unsigned char> bad = bytes;
    const std::uint16_t whole = page_size;
    std::memcpy(bad.data() + length_at, &whole, sizeof whole);
    reseal(bad);
    CHECK(decode(bad) == decode_result::bad_structure);
  }
  SUBCASE("compressed flag without the image flag is a bad structure") {
    std::vector<unsigned char> bad = bytes;
    bad[sizeof(record_header) + offsetof(block_ref_header, flags)] = block_image_lz4;
    reseal(bad);
    CHECK(decode(bad) == decode_result::bad_structure);
  }
  SUBCASE("damaged LZ4 bytes behind a valid checksum throw data_error on restore") {
    std::vector<unsigned char> bad = bytes;
    std::memset(bad.data() + length_at + 2, 0xFF, view.blocks[0].image_length);
    reseal(bad);
    record_view damaged;
    REQUIRE(decode_record(bad.data(), bad.size(), page_size, damaged) == decode_result::ok);
    std::vector<unsigned char> page(page_size);
    CHECK_THROWS_AS(restore_image(damaged.blocks[0], page.data(), page_size), data_error);
  }
}

TEST_CASE("wal_record: reset starts an empty record and reuses the buffer") {
  record_builder builder;
  builder.reset(record_type::transaction, 1);
  builder.begin_block(page_id{1, 1});
  builder.write_bytes(40, "abcdef", 6);
  builder.end_block(nullptr, page_size);
  builder.finish();
  builder.reset(record_type::transaction, 2);
  builder.finish();
  CHECK(builder.size() == sizeof(record_header));
  CHECK_FALSE(builder.has_images());
  record_view view;
  std::vector<unsigned char> bytes = sealed_copy(builder);
  REQUIRE(decode_record(bytes.data(), bytes.size(), page_size, view) == decode_result::ok);
  CHECK(view.block_count == 0);
  CHECK(view.main_length == 0);
  CHECK(view.header.xid == 2);
}

TEST_CASE("wal_record: any flipped byte is a checksum mismatch") {
  record_builder builder;
  builder.reset(record_type::transaction, 9);
  builder.begin_block(page_id{1, 2});
  builder.add_i64(48, 3);
  builder.end_block(nullptr, page_size);
  builder.set_main_data("main", 4);
  builder.finish();
  const std::vector<unsigned char> good = sealed_copy(builder);
  REQUIRE(decode(good) == decode_result::ok);
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::vector<unsigned char> bad = good;
    bad[i] ^= 0x10;
    // The first four bytes are total_length: a changed length no longer fits the bytes.
    decode_result expected = i < 4 ? decode_result::bad_length : decode_result::bad_checksum;
    CHECK(decode(bad) == expected);
  }
}

TEST_CASE("wal_record: a different lsn breaks the checksum") {
  record_builder builder;
  builder.reset(record_type::transaction, 9);
  builder.finish();
  std::vector<unsigned char> bytes = sealed_copy(builder, 4096);
  std::uint64_t other_lsn = 8192;
  std::memcpy(bytes.data() + offsetof(record_header, lsn), &other_lsn, sizeof other_lsn);
  CHECK(decode(bytes) == decode_result::bad_checksum);
}

TEST_CASE("wal_record: ops outside the page are a bad structure") {
  record_builder builder;
  builder.reset(record_type::transaction, 1);
  builder.begin_block(page_id{1, 1});
  builder.write_bytes(8190, "abcd", 4);
  builder.end_block(nullptr, page_size);
  builder.finish();
  std::vector<unsigned char> bytes = sealed_copy(builder);
  CHECK(decode(bytes, page_size) == decode_result::bad_structure);
  CHECK(decode(bytes, 16384) == decode_result::ok);

  builder.reset(record_type::transaction, 1);
  builder.begin_block(page_id{1, 1});
  builder.add_i64(5000, 1);
  builder.end_block(nullptr, 4096);
  builder.finish();
  CHECK(decode(sealed_copy(builder), 4096) == decode_result::bad_structure);
}

TEST_CASE("wal_record: malformed block structure is rejected even with a valid checksum") {
  record_builder builder;
  builder.reset(record_type::transaction, 1);
  builder.begin_block(page_id{1, 1});
  builder.add_i64(64, 1);
  builder.end_block(nullptr, page_size);
  builder.finish();
  const std::vector<unsigned char> good = sealed_copy(builder);
  const std::size_t block_at = sizeof(record_header);
  const std::size_t op_at = block_at + sizeof(block_ref_header);

  SUBCASE("add_i64 with a length other than 8") {
    std::vector<unsigned char> bad = good;
    bad[op_at + 3] = 4;
    reseal(bad);
    CHECK(decode(bad) == decode_result::bad_structure);
  }
  SUBCASE("unknown op kind") {
    std::vector<unsigned char> bad = good;
    bad[op_at] = 9;
    reseal(bad);
    CHECK(decode(bad) == decode_result::bad_structure);
  }
  SUBCASE("image flag without image bytes") {
    std::vector<unsigned char> bad = good;
    bad[block_at + offsetof(block_ref_header, flags)] = block_has_image;
    reseal(bad);
    CHECK(decode(bad) == decode_result::bad_structure);
  }
  SUBCASE("more blocks than the record holds") {
    std::vector<unsigned char> bad = good;
    bad[offsetof(record_header, block_count)] = 2;
    reseal(bad);
    CHECK(decode(bad) == decode_result::bad_structure);
  }
  SUBCASE("an unknown record type") {
    std::vector<unsigned char> bad = good;
    bad[offsetof(record_header, type)] = 9;
    reseal(bad);
    CHECK(decode(bad) == decode_result::bad_structure);
  }
  SUBCASE("main length disagreeing with the bytes") {
    std::vector<unsigned char> bad = good;
    bad[offsetof(record_header, main_length)] = 1;
    reseal(bad);
    CHECK(decode(bad) == decode_result::bad_structure);
  }
}

TEST_CASE("wal_record: apply_ops adds with wrapping and writes bytes") {
  std::vector<unsigned char> page(page_size, 0);
  std::int64_t max = LLONG_MAX;
  std::memcpy(&page[64], &max, sizeof max);

  record_builder builder;
  builder.reset(record_type::transaction, 1);
  builder.begin_block(page_id{1, 1});
  builder.add_i64(64, 1);
  builder.add_i64(72, -3);
  builder.add_i64(72, -4);
  builder.write_bytes(8187, "tail!", 5);
  apply_ops(page.data(), page_size, builder.block_ops(), builder.block_ops_length());

  CHECK(load_i64(&page[64]) == LLONG_MIN);
  CHECK(load_i64(&page[72]) == -7);
  CHECK(std::memcmp(&page[8187], "tail!", 5) == 0);
  std::memset(&page[64], 0, 16);
  std::memset(&page[8187], 0, 5);
  CHECK(page == std::vector<unsigned char>(page_size, 0)); // nothing else was touched
}

TEST_CASE("wal_record: a move op copies bytes within the page, overlapping or not") {
  std::vector<unsigned char> page(page_size, 0);
  std::memcpy(&page[100], "abcdefgh", 8);
  auto move = [&](std::uint16_t to, std::uint16_t from, std::uint16_t count) {
    unsigned char op[op_header_size + sizeof(move_op)];
    op[0] = static_cast<unsigned char>(op_kind::move_bytes);
    std::uint16_t length = sizeof(move_op);
    move_op data{from, count};
    std::memcpy(op + 1, &to, 2);
    std::memcpy(op + 3, &length, 2);
    std::memcpy(op + op_header_size, &data, sizeof data);
    return std::vector<unsigned char>(op, op + sizeof op);
  };
  std::vector<unsigned char> ops = move(104, 100, 8); // overlapping, upwards
  apply_ops(page.data(), page_size, ops.data(), ops.size());
  CHECK(std::memcmp(&page[100], "abcdabcdefgh", 12) == 0);
  ops = move(8184, 104, 8); // to the page's end
  apply_ops(page.data(), page_size, ops.data(), ops.size());
  CHECK(std::memcmp(&page[8184], "abcdefgh", 8) == 0);

  // In a record (in place of a write op of the same length): a move reaching past the
  // page, from either end, is a bad structure.
  record_builder builder;
  builder.reset(record_type::transaction, 1);
  builder.begin_block(page_id{1, 1});
  builder.write_bytes(64, "abcd", 4);
  builder.end_block(nullptr, page_size);
  builder.finish();
  const std::vector<unsigned char> written = sealed_copy(builder);
  const std::size_t op_at = sizeof(record_header) + sizeof(block_ref_header);
  auto with_op = [&](const std::vector<unsigned char>& op) {
    std::vector<unsigned char> bytes = written;
    std::copy(op.begin(), op.end(), bytes.begin() + op_at);
    reseal(bytes);
    return decode(bytes, page_size);
  };
  CHECK(with_op(move(8184, 100, 8)) == decode_result::ok);
  CHECK(with_op(move(8185, 100, 8)) == decode_result::bad_structure);
  CHECK(with_op(move(100, 8185, 8)) == decode_result::bad_structure);
}

TEST_CASE("wal_record: decoded ops apply like the builder's ops") {
  std::vector<unsigned char> forward(page_size, 0), replayed(page_size, 0);
  record_builder builder;
  builder.reset(record_type::transaction, 1);
  builder.begin_block(page_id{1, 1});
  builder.add_i64(100, 250);
  builder.write_bytes(300, "row", 3);
  apply_ops(forward.data(), page_size, builder.block_ops(), builder.block_ops_length());
  builder.end_block(nullptr, page_size);
  builder.finish();

  std::vector<unsigned char> bytes = sealed_copy(builder);
  record_view view;
  REQUIRE(decode_record(bytes.data(), bytes.size(), page_size, view) == decode_result::ok);
  apply_ops(replayed.data(), page_size, view.blocks[0].ops, view.blocks[0].ops_length);
  CHECK(forward == replayed);
}
