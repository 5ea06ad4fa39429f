// WAL record encoding: record_builder (assembly), seal_record (insert-time header fields and
// the final CRC), decode_record (validation into a record_view) and apply_ops (the one place
// page operations are executed, for forward processing and redo alike).
//
// Invariants:
//  - Every multi-byte field is read and written with memcpy: records sit at arbitrary
//    offsets of buffers and ops are packed without alignment.
//  - decode_record() accepts a record only if the CRC matches and every block, op, image and
//    the main data lie exactly inside total_length, with every op inside the page; so
//    apply_ops() on a decoded record never touches bytes outside the page.
//  - The builder's buffer keeps its capacity across reset(): steady-state building does not
//    allocate (an image is compressed straight into it).
#include "storage/wal_record.hpp"

#include "storage/check.hpp"
#include "storage/crc32c.hpp"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <lz4.h>
#include <stdexcept>
#include <string>

namespace tidemark::storage {

namespace {

constexpr std::size_t header_size = sizeof(record_header);
constexpr std::size_t block_header_size = sizeof(block_ref_header);

template <class T>
T load(const unsigned char* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

template <class T>
void store(unsigned char* at, T value) {
  std::memcpy(at, &value, sizeof(T));
}

std::uint32_t header_crc(std::uint32_t payload_crc, record_header header) {
  header.crc = 0;
  return crc32c_extend(payload_crc, &header, header_size);
}

struct op_header {
  op_kind kind;
  std::uint16_t offset;
  std::uint16_t length;
};

op_header load_op(const unsigned char* at) {
  return {static_cast<op_kind>(at[0]), load<std::uint16_t>(at + 1), load<std::uint16_t>(at + 3)};
}

bool valid_ops(const unsigned char* ops, std::size_t length, std::size_t page_size) {
  std::size_t pos = 0;
  while (pos < length) {
    if (length - pos < op_header_size)
      return false;
    op_header op = load_op(ops + pos);
    pos += op_header_size;
    if (op.kind != op_kind::add_i64 && op.kind != op_kind::write_bytes &&
        op.kind != op_kind::move_bytes)
      return false;
    if (op.kind == op_kind::add_i64 && op.length != sizeof(std::int64_t))
      return false;
    if (std::size_t{op.offset} + op.length > page_size || length - pos < op.length)
      return false;
    if (op.kind == op_kind::move_bytes) {
      if (op.length != sizeof(move_op))
        return false;
      auto move = load<move_op>(ops + pos);
      if (std::size_t{move.source} + move.count > page_size ||
          std::size_t{op.offset} + move.count > page_size)
        return false;
    }
    pos += op.length;
  }
  return true;
}

// Decodes the blocks and main data after the header; false if anything is out of bounds.
bool decode_body(const unsigned char* bytes, std::size_t length, std::size_t page_size,
                 record_view& out) {
  auto type = static_cast<record_type>(out.header.type);
  if (type != record_type::transaction && type != record_type::checkpoint &&
      type != record_type::structure)
    return false;
  std::size_t pos = header_size;
  std::size_t count = out.header.blocks();
  out.blocks.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (length - pos < block_header_size)
      return false;
    auto ref = load<block_ref_header>(bytes + pos);
    pos += block_header_size;
    const std::uint16_t known_flags = block_has_image | block_image_lz4;
    if ((ref.flags & ~known_flags) != 0 || ref.flags == block_image_lz4 ||
        length - pos < ref.ops_length)
      return false;
    if (!valid_ops(bytes + pos, ref.ops_length, page_size))
      return false;
    block_ref_view& block = out.blocks[i];
    block = {page_id{ref.rel, ref.block}, bytes + pos, ref.ops_length, nullptr, 0, false};
    pos += ref.ops_length;
    if (ref.flags & block_image_lz4) {
      if (length - pos < sizeof(std::uint16_t))
        return false;
      std::size_t stored = load<std::uint16_t>(bytes + pos);
      pos += sizeof(std::uint16_t);
      if (stored == 0 || stored >= page_size || length - pos < stored)
        return false;
      block.image = bytes + pos;
      block.image_length = stored;
      block.image_compressed = true;
      pos += stored;
    } else if (ref.flags & block_has_image) {
      if (length - pos < page_size)
        return false;
      block.image = bytes + pos;
      block.image_length = page_size;
      pos += page_size;
    }
  }
  if (length - pos != out.header.main_length)
    return false;
  out.block_count = count;
  out.main = bytes + pos;
  out.main_length = out.header.main_length;
  return true;
}

} // namespace

std::string format_lsn(lsn_t lsn) {
  char text[32];
  std::snprintf(text, sizeof text, "%X/%08X", static_cast<unsigned>(lsn >> 32),
                static_cast<unsigned>(lsn & 0xffffffffu));
  return text;
}

// ---- record_builder -----------------------------------------------------------------------

void record_builder::reset(record_type type, xid_t xid) {
  bytes_.assign(header_size, 0);
  header().type = static_cast<std::uint8_t>(type);
  header().xid = xid;
  block_start_ = 0;
  block_count_ = 0;
  image_count_ = 0;
  main_length_ = 0;
  payload_crc_ = 0;
}

void record_builder::shrink_to(std::size_t keep_bytes) {
  if (bytes_.capacity() > keep_bytes)
    std::vector<unsigned char>().swap(bytes_);
}

void record_builder::set_flags(std::uint8_t flags) { header().flags = flags; }

void record_builder::begin_block(page_id id) {
  TIDEMARK_CHECK(block_start_ == 0 && block_count_ < max_blocks_per_record,
                 "record_builder: one block open at a time, at most max_blocks_per_record");
  TIDEMARK_CHECK(main_length_ == 0, "record_builder: blocks precede the main data");
  block_start_ = bytes_.size();
  block_ref_header ref{id.rel, id.block, 0, 0};
  bytes_.resize(block_start_ + block_header_size);
  store(bytes_.data() + block_start_, ref);
}

void record_builder::add_i64(std::uint16_t offset, std::int64_t delta) {
  write_op(op_kind::add_i64, offset, &delta, sizeof delta);
}

void record_builder::write_bytes(std::uint16_t offset, const void* data, std::uint16_t length) {
  write_op(op_kind::write_bytes, offset, data, length);
}

void record_builder::add_ops(const unsigned char* ops, std::size_t length, std::size_t page_size) {
  TIDEMARK_CHECK(block_start_ != 0, "record_builder: ops belong to an open block");
  TIDEMARK_CHECK(valid_ops(ops, length, page_size), "record_builder: encoded ops are well formed");
  bytes_.insert(bytes_.end(), ops, ops + length);
}

void record_builder::write_op(op_kind kind, std::uint16_t offset, const void* data,
                              std::uint16_t length) {
  TIDEMARK_CHECK(block_start_ != 0, "record_builder: an op belongs to an open block");
  std::size_t at = bytes_.size();
  bytes_.resize(at + op_header_size + length);
  unsigned char* p = bytes_.data() + at;
  p[0] = static_cast<unsigned char>(kind);
  store(p + 1, offset);
  store(p + 3, length);
  std::memcpy(p + op_header_size, data, length);
}

const unsigned char* record_builder::block_ops() const {
  return bytes_.data() + block_start_ + block_header_size;
}

std::size_t record_builder::block_ops_length() const {
  return bytes_.size() - block_start_ - block_header_size;
}

void record_builder::end_block(const void* image, std::size_t page_size) {
  std::size_t ops_length = block_ops_length();
  TIDEMARK_CHECK(block_start_ != 0, "record_builder: end_block() closes an open block");
  TIDEMARK_CHECK(ops_length <= max_block_ops_length,
                 "record_builder: a block's ops fit max_block_ops_length (the transaction checks "
                 "it)");
  std::uint16_t flags = 0;
  if (image) {
    flags = append_image(image, page_size);
    ++image_count_;
  }
  unsigned char* ref = bytes_.data() + block_start_;
  store(ref + offsetof(block_ref_header, flags), flags);
  store(ref + offsetof(block_ref_header, ops_length), static_cast<std::uint16_t>(ops_length));
  block_start_ = 0;
  ++block_count_;
}

// Appends the image compressed (u16 length + LZ4 block) when that is shorter than the page,
// else as is. Returns the block flags that say which.
std::uint16_t record_builder::append_image(const void* image, std::size_t page_size) {
  std::size_t at = bytes_.size();
  const int bound = LZ4_compressBound(static_cast<int>(page_size));
  bytes_.resize(at + sizeof(std::uint16_t) + static_cast<std::size_t>(bound));
  const int compressed =
    LZ4_compress_default(static_cast<const char*>(image),
                         reinterpret_cast<char*>(bytes_.data() + at + sizeof(std::uint16_t)),
                         static_cast<int>(page_size), bound);
  if (compressed > 0 && sizeof(std::uint16_t) + static_cast<std::size_t>(compressed) < page_size) {
    store(bytes_.data() + at, static_cast<std::uint16_t>(compressed));
    bytes_.resize(at + sizeof(std::uint16_t) + static_cast<std::size_t>(compressed));
    return block_has_image | block_image_lz4;
  }
  bytes_.resize(at + page_size);
  std::memcpy(bytes_.data() + at, image, page_size);
  return block_has_image;
}

void record_builder::set_main_data(const void* data, std::size_t length) {
  TIDEMARK_CHECK(block_start_ == 0 && main_length_ == 0 && length <= max_main_length,
                 "record_builder: main data set once, after the blocks, at most max_main_length");
  std::size_t at = bytes_.size();
  bytes_.resize(at + length);
  if (length > 0)
    std::memcpy(bytes_.data() + at, data, length);
  main_length_ = length;
}

void record_builder::finish() {
  TIDEMARK_CHECK(block_start_ == 0, "record_builder: finish() with every block closed");
  record_header& h = header();
  h.total_length = static_cast<std::uint32_t>(bytes_.size());
  h.block_count = static_cast<std::uint8_t>(block_count_ & 0xFF);
  h.block_count_high = static_cast<std::uint8_t>(block_count_ >> 8);
  h.main_length = static_cast<std::uint32_t>(main_length_);
  payload_crc_ = crc32c(bytes_.data() + header_size, bytes_.size() - header_size);
}

record_header& record_builder::header() { return *reinterpret_cast<record_header*>(bytes_.data()); }

// ---- sealing, decoding, applying ----------------------------------------------------------

void seal_record(unsigned char* record, lsn_t lsn, lsn_t prev_lsn, lsn_t durable_lsn,
                 std::uint32_t payload_crc) {
  auto header = load<record_header>(record);
  header.lsn = lsn;
  header.prev_lsn = prev_lsn;
  header.durable_lsn = durable_lsn;
  header.crc = header_crc(payload_crc, header);
  store(record, header);
}

decode_result decode_record(const unsigned char* bytes, std::size_t length, std::size_t page_size,
                            record_view& out) {
  if (length < header_size)
    return decode_result::bad_length;
  out.header = load<record_header>(bytes);
  if (out.header.total_length != length)
    return decode_result::bad_length;
  std::uint32_t payload_crc = crc32c(bytes + header_size, length - header_size);
  if (header_crc(payload_crc, out.header) != out.header.crc)
    return decode_result::bad_checksum;
  if (!decode_body(bytes, length, page_size, out))
    return decode_result::bad_structure;
  return decode_result::ok;
}

void restore_image(const block_ref_view& block, void* page, std::size_t page_size) {
  TIDEMARK_CHECK(block.image != nullptr, "only a block with a page image is restored from one");
  if (!block.image_compressed) {
    std::memcpy(page, block.image, page_size);
    return;
  }
  const int restored =
    LZ4_decompress_safe(reinterpret_cast<const char*>(block.image), static_cast<char*>(page),
                        static_cast<int>(block.image_length), static_cast<int>(page_size));
  if (restored != static_cast<int>(page_size))
    throw data_error("WAL page image of relation " + std::to_string(block.id.rel) + " block " +
                     std::to_string(block.id.block) + " does not decompress to a page");
}

void apply_ops(void* page, std::size_t page_size, const unsigned char* ops, std::size_t length) {
  auto* bytes = static_cast<unsigned char*>(page);
  std::size_t pos = 0;
  while (pos < length) {
    op_header op = load_op(ops + pos);
    TIDEMARK_CHECK(std::size_t{op.offset} + op.length <= page_size,
                   "a decoded op lies inside its page (valid_ops checked it)");
    const unsigned char* data = ops + pos + op_header_size;
    if (op.kind == op_kind::add_i64) {
      // Wrapping arithmetic on the unsigned representation: no signed-overflow UB.
      auto value = load<std::uint64_t>(bytes + op.offset);
      store(bytes + op.offset, value + load<std::uint64_t>(data));
    } else if (op.kind == op_kind::move_bytes) {
      auto move = load<move_op>(data);
      TIDEMARK_CHECK(std::size_t{move.source} + move.count <= page_size &&
                       std::size_t{op.offset} + move.count <= page_size,
                     "a decoded move lies inside its page (valid_ops checked it)");
      std::memmove(bytes + op.offset, bytes + move.source, move.count);
    } else {
      std::memcpy(bytes + op.offset, data, op.length);
    }
    pos += op_header_size + op.length;
  }
}

} // namespace tidemark::storage
