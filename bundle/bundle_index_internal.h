// The .index file of a checkpoint: a TensorFlow "table", which is LevelDB's
// SSTable format, holding key "" -> BundleHeaderProto and then, in strictly
// increasing bytewise key order, tensor key -> BundleEntryProto.
//
//   +--------------+-----+--------------+-----------------+-------------+--------+
//   | data block 0 | ... | data block k | metaindex block | index block | footer |
//   +--------------+-----+--------------+-----------------+-------------+--------+
//   block   = contents, then a 5-byte trailer: type (0 none, 1 snappy) and
//             fixed32 Mask(CRC32C(contents ++ type))
//   entries = varint32 shared, varint32 non_shared, varint32 value_len,
//             key[shared:], value; every 16th entry (every entry in the index
//             block) restarts with shared = 0; then fixed32 restart offsets
//             and fixed32 num_restarts
//   index   = one entry per data block: a separator key >= its keys and <
//             the next block's, value = BlockHandle (varint64 offset, size)
//   meta    = always empty (8 bytes: 00 00 00 00 01 00 00 00)
//   footer  = metaindex and index BlockHandles, zero-padded to 40 bytes,
//             then magic 0xdb4775248b80fb57 (fixed64 LE): 48 bytes
//
// Writing uses leveldb::TableBuilder with TensorFlow's options (block size
// 256 KiB, restart interval 16, no compression) plus TensorFlow's one rule
// LevelDB lacks: an entry of >= 2 x block_size bytes starts a new block.
// Reading uses leveldb::Table (which also decompresses Snappy blocks, as files
// of older writers have: Debian's libleveldb links libsnappy, and
// tests/bundle/snappy_index_test.cc proves it) after this code has
// checked the footer and every block handle, trailer and Snappy header:
// LevelDB allocates whatever a block handle says before reading it, so a
// corrupt handle must never reach it. Debian builds LevelDB with assertions
// on, so keys handed to its builder are checked for order here first.
//
// Thread safety: pure functions of their arguments.

#ifndef CKFLOW_BUNDLE_BUNDLE_INDEX_INTERNAL_H_
#define CKFLOW_BUNDLE_BUNDLE_INDEX_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"
#include "bundle/protos/tensor_bundle.pb.h"
#include "bundle/tensor_slice.h"

namespace ckflow::internal {

inline constexpr size_t kTableBlockSize = 262144;
inline constexpr int kTableRestartInterval = 16;
inline constexpr size_t kTableFooterSize = 48;

using KeyValue = std::pair<std::string, std::string>;

// The bytes of a table, exactly as TensorFlow's TableBuilder writes them,
// built pair by pair so that a caller never holds every pair at once.
class TableWriter {
 public:
  TableWriter();
  ~TableWriter();
  TableWriter(const TableWriter&) = delete;
  TableWriter& operator=(const TableWriter&) = delete;

  // Internal error unless `key` follows the previous key (bytewise, strictly).
  Status Add(std::string_view key, std::string_view value);
  // The table's bytes; the writer accepts nothing after.
  StatusOr<std::string> Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// TableWriter's bytes for `entries`.
StatusOr<std::string> BuildTable(std::span<const KeyValue> entries);

// Every key/value pair of the table whose bytes are `contents`, checking
// every block checksum. DataLoss naming `path` if the bytes are not a valid
// table.
StatusOr<std::vector<KeyValue>> ReadTable(std::string_view path, std::string_view contents);

// ReadTable's pairs handed to `visit` in key order as they are read (the
// views live only during the call); the first error it returns stops the
// walk and is returned. With `only_key`, just the first pair (a bundle's
// header) and `only_key`'s, if present: one seek instead of a pass over
// every entry. Without `only_key`, `expect` (if set) learns the number of
// pairs before the first is visited, from the check of every block that
// precedes the visit: a caller collecting them allocates once.
using TableVisitor = std::function<Status(std::string_view key, std::string_view value)>;
Status VisitTable(std::string_view path, std::string_view contents,
                  std::optional<std::string_view> only_key, const TableVisitor& visit,
                  const std::function<void(uint64_t pairs)>& expect = nullptr);

struct BundleIndex {
  std::string path;  // the .index file
  tensorflow::BundleHeaderProto header;
  // In key order; the header entry is not among them.
  std::vector<std::pair<std::string, tensorflow::BundleEntryProto>> entries;
};

// Reads the index of checkpoint `prefix`: NotFound if it is missing,
// DataLoss if it is corrupt, InvalidArgument if its format version is not
// one this code reads.
StatusOr<BundleIndex> ReadBundleIndex(FileSystem* fs, const std::string& prefix);

// ReadBundleIndex of the index file at `path` without collecting it: each
// entry goes to `visit` (with the already checked header) as it is parsed,
// and the header is returned. The entry is valid only during the call.
// With `only_key`, only that key's entry (if present) is visited.
using BundleEntryVisitor =
    std::function<Status(std::string_view key, const tensorflow::BundleHeaderProto& header,
                         const tensorflow::BundleEntryProto& entry)>;
StatusOr<tensorflow::BundleHeaderProto> VisitBundleIndex(FileSystem* fs, const std::string& path,
                                                         std::optional<std::string_view> only_key,
                                                         const BundleEntryVisitor& visit);

// VisitBundleIndex without the parse: each entry's value as stored, for a
// caller that decodes it itself (BundleReader, with DecodePlainEntry).
// `expect`, as VisitTable's, learns the number of entries (the header not
// counted).
using BundleEntryBytesVisitor = std::function<Status(
    std::string_view key, const tensorflow::BundleHeaderProto& header, std::string_view value)>;
StatusOr<tensorflow::BundleHeaderProto> VisitBundleIndexBytes(
    FileSystem* fs, const std::string& path, std::optional<std::string_view> only_key,
    const BundleEntryBytesVisitor& visit,
    const std::function<void(uint64_t entries)>& expect = nullptr);

// The fields of a BundleEntryProto a reader keeps, for an entry without
// slices.
struct PlainEntry {
  static constexpr int kMaxRank = 8;
  int32_t dtype = 0;
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int32_t shard_id = 0;
  int64_t offset = 0;
  int64_t size = 0;
  uint32_t crc32c = 0;
};

// Decodes the wire bytes of the entries writers produce (TensorFlow's and
// this one's: dimensions without names, no slices) straight into `out`,
// without protobuf's message objects: an index of many small variables
// spent most of its parse allocating and freeing those. A scalar field
// given twice keeps the last value, as protobuf does. False for anything
// else (slices, an unknown rank or field, a second shape, which protobuf
// would merge into the first, a rank over kMaxRank, bytes that are not a
// valid message), which is then left to protobuf: where this returns true,
// protobuf parses the same bytes to the same fields
// (tests/bundle/plain_entry_test.cc checks it on random bytes).
bool DecodePlainEntry(std::string_view bytes, PlainEntry* out);

// The header of a bundle written by this host: num_shards, host byte order,
// version {producer: 1}.
tensorflow::BundleHeaderProto MakeBundleHeader(int num_shards);

// The bytes of an .index file with `header` and `entries` (sorted by key,
// no key "").
StatusOr<std::string> BuildBundleIndex(
    const tensorflow::BundleHeaderProto& header,
    std::span<const std::pair<std::string, tensorflow::BundleEntryProto>> entries);

// A TensorSliceProto as a TensorSlice: an extent without a length is the
// whole dimension. Unchecked against any shape.
TensorSlice TensorSliceFromProto(const tensorflow::TensorSliceProto& proto);

}  // namespace ckflow::internal

#endif  // CKFLOW_BUNDLE_BUNDLE_INDEX_INTERNAL_H_
