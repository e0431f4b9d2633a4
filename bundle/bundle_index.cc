#include <leveldb/env.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/status.h>
#include <leveldb/table.h>
#include <leveldb/table_builder.h>
#include <snappy.h>

#include <algorithm>
#include <memory>
#include <new>
#include <optional>

#include "bundle/bundle_coding_internal.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/crc32c.h"

namespace ckflow::internal {
namespace {

constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;
constexpr size_t kBlockTrailerSize = 5;

Status FromLevelDb(std::string_view path, const leveldb::Status& s) {
  return DataLossError(path, ": ", s.ToString());
}

// TableBuilder's output, kept in memory: index files are small, and writing
// them in one piece keeps the file protocol (temp name, rename) in one place.
class StringSink final : public leveldb::WritableFile {
 public:
  explicit StringSink(std::string* out) : out_(out) {}
  leveldb::Status Append(const leveldb::Slice& data) override {
    out_->append(data.data(), data.size());
    return leveldb::Status::OK();
  }
  leveldb::Status Close() override { return leveldb::Status::OK(); }
  leveldb::Status Flush() override { return leveldb::Status::OK(); }
  leveldb::Status Sync() override { return leveldb::Status::OK(); }

 private:
  std::string* const out_;
};

// Serves reads from the index bytes already in memory. Returning a view into
// them (rather than copying into `scratch`) lets LevelDB parse blocks in
// place.
class MemoryFile final : public leveldb::RandomAccessFile {
 public:
  explicit MemoryFile(std::string_view contents) : contents_(contents) {}
  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result,
                       char* /*scratch*/) const override {
    if (offset > contents_.size()) return leveldb::Status::IOError("read past the end of file");
    *result =
        leveldb::Slice(contents_.data() + offset, std::min<uint64_t>(n, contents_.size() - offset));
    return leveldb::Status::OK();
  }

 private:
  const std::string_view contents_;
};

struct BlockHandle {
  uint64_t offset = 0;
  uint64_t size = 0;
};

bool DecodeBlockHandle(const char** p, const char* end, BlockHandle* handle) {
  return GetVarint64(p, end, &handle->offset) && GetVarint64(p, end, &handle->size);
}

// Checks that the block at `handle` and its trailer lie inside
// contents[0, limit), its type is known, its checksum matches and a Snappy
// block is well formed (which bounds its uncompressed size). Returns the
// block's contents, uncompressed into *storage if needed.
StatusOr<std::string_view> CheckBlock(std::string_view path, std::string_view contents,
                                      uint64_t limit, const BlockHandle& handle,
                                      std::string_view what, std::string* storage) {
  if (handle.offset > limit || handle.size > limit - handle.offset ||
      kBlockTrailerSize > limit - handle.offset - handle.size) {
    return DataLossError(path, ": ", what, " at offset ", handle.offset, " (", handle.size,
                         " bytes) runs past the end of the table (", limit, " bytes)");
  }
  const char* data = contents.data() + handle.offset;
  const size_t n = static_cast<size_t>(handle.size);
  const char type = data[n];
  uint32_t crc = crc32c::Extend(crc32c::Value(data, n), &type, 1);
  if (crc32c::kVerifyStored && crc32c::Unmask(DecodeFixed32(data + n + 1)) != crc) {
    return DataLossError(path, ": block checksum mismatch at offset ", handle.offset, " (", what,
                         ")");
  }
  if (type == 0) return std::string_view(data, n);
  if (type != 1) {
    return DataLossError(path, ": bad block type ", static_cast<int>(type), " at offset ",
                         handle.offset, " (", what, ")");
  }
  if (!snappy::IsValidCompressedBuffer(data, n)) {
    return DataLossError(path, ": corrupt Snappy block at offset ", handle.offset, " (", what, ")");
  }
  if (storage == nullptr) return std::string_view();
  if (!snappy::Uncompress(data, n, storage)) {
    return DataLossError(path, ": corrupt Snappy block at offset ", handle.offset);
  }
  return std::string_view(*storage);
}

// Walks the entries of a table block (LevelDB's block format: each entry the
// varint lengths of its key's shared and unshared parts and of its value,
// then those bytes; at the end the restart array) and calls visit(value) on
// each. LevelDB's own parser reads the lengths as 32-bit and checks their
// sum in 32 bits, so a sum that wraps would send it past the block, and it
// trusts the restart array to point at entries: here the lengths are checked
// in 64 bits, and every restart point must be an entry's start (or the end).
// `starts` is scratch space, reused from block to block.
template <typename Visit>
Status WalkBlock(std::string_view path, std::string_view block, std::string_view what,
                 std::vector<uint32_t>& starts, Visit&& visit) {
  auto corrupt = [&](std::string_view problem) {
    return DataLossError(path, ": corrupt ", what, " (", problem, ")");
  };
  if (block.size() < 4) return corrupt("shorter than its restart count");
  const uint64_t num_restarts = DecodeFixed32(block.data() + block.size() - 4);
  if (num_restarts > (block.size() - 4) / 4) return corrupt("restart array overflows");
  const char* begin = block.data();
  const char* p = begin;
  const char* end = begin + block.size() - 4 - 4 * num_restarts;
  starts.clear();
  uint64_t key_size = 0;
  while (p < end) {
    starts.push_back(static_cast<uint32_t>(p - begin));
    uint64_t shared, non_shared, value_size;
    if (!GetVarint64(&p, end, &shared) || !GetVarint64(&p, end, &non_shared) ||
        !GetVarint64(&p, end, &value_size)) {
      return corrupt("truncated entry header");
    }
    const auto left = static_cast<uint64_t>(end - p);
    if (shared > key_size || non_shared > left || value_size > left - non_shared) {
      return corrupt("entry runs past the block");
    }
    key_size = shared + non_shared;
    p += non_shared;
    CKFLOW_RETURN_IF_ERROR(visit(std::string_view(p, value_size)));
    p += value_size;
  }
  const auto limit = static_cast<uint32_t>(end - begin);
  for (uint64_t i = 0; i < num_restarts; ++i) {
    const uint32_t restart = DecodeFixed32(end + 4 * i);
    if (restart != limit && !std::binary_search(starts.begin(), starts.end(), restart)) {
      return corrupt("restart point " + std::to_string(restart) + " is not an entry's start");
    }
  }
  return OkStatus();
}

// The BlockHandle values of the index block's entries.
StatusOr<std::vector<BlockHandle>> ParseIndexBlock(std::string_view path, std::string_view block,
                                                   std::vector<uint32_t>& starts) {
  std::vector<BlockHandle> handles;
  CKFLOW_RETURN_IF_ERROR(WalkBlock(path, block, "index block", starts, [&](std::string_view value) {
    const char* p = value.data();
    BlockHandle handle;
    if (!DecodeBlockHandle(&p, value.data() + value.size(), &handle)) {
      return DataLossError(path, ": corrupt index block (bad block handle)");
    }
    handles.push_back(handle);
    return OkStatus();
  }));
  return handles;
}

// Everything LevelDB will allocate or trust, checked before it sees the file.
// Returns the number of entries (LevelDB keeps no count).
StatusOr<uint64_t> PrevalidateTable(std::string_view path, std::string_view contents) {
  if (contents.size() < kTableFooterSize) {
    return DataLossError(path, ": file is ", contents.size(),
                         " bytes, too short for the 48-byte table footer");
  }
  const uint64_t limit = contents.size() - kTableFooterSize;
  const char* footer = contents.data() + limit;
  const uint64_t magic =
      DecodeFixed32(footer + 40) | (static_cast<uint64_t>(DecodeFixed32(footer + 44)) << 32);
  if (magic != kTableMagic) {
    char hex[32];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(magic));
    return DataLossError(path, ": bad magic number 0x", hex,
                         " (not a TensorFlow checkpoint index)");
  }
  const char* p = footer;
  BlockHandle metaindex, index;
  if (!DecodeBlockHandle(&p, footer + 40, &metaindex) ||
      !DecodeBlockHandle(&p, footer + 40, &index)) {
    return DataLossError(path, ": corrupt table footer");
  }
  std::string storage;
  std::vector<uint32_t> starts;
  uint64_t entries = 0;
  const auto any_value = [&entries](std::string_view) {
    ++entries;
    return OkStatus();
  };
  // LevelDB reads the metaindex only for a filter policy, which has none.
  CKFLOW_RETURN_IF_ERROR(
      CheckBlock(path, contents, limit, metaindex, "metaindex block", nullptr).status());
  CKFLOW_ASSIGN_OR_RETURN(std::string_view index_block,
                          CheckBlock(path, contents, limit, index, "index block", &storage));
  CKFLOW_ASSIGN_OR_RETURN(std::vector<BlockHandle> handles,
                          ParseIndexBlock(path, index_block, starts));
  for (const BlockHandle& handle : handles) {
    CKFLOW_ASSIGN_OR_RETURN(std::string_view data_block,
                            CheckBlock(path, contents, limit, handle, "data block", &storage));
    CKFLOW_RETURN_IF_ERROR(WalkBlock(path, data_block, "data block", starts, any_value));
  }
  return entries;
}

Status VisitTableWithLevelDb(std::string_view path, std::string_view contents,
                             std::optional<std::string_view> only_key, const TableVisitor& visit) {
  MemoryFile file(contents);
  leveldb::Options options;
  options.paranoid_checks = crc32c::kVerifyStored;
  leveldb::Table* table = nullptr;
  leveldb::Status s = leveldb::Table::Open(options, &file, contents.size(), &table);
  if (!s.ok()) return FromLevelDb(path, s);
  std::unique_ptr<leveldb::Table> table_owner(table);
  leveldb::ReadOptions read_options;
  read_options.verify_checksums = crc32c::kVerifyStored;
  read_options.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(table->NewIterator(read_options));
  auto key = [&] { return std::string_view(it->key().data(), it->key().size()); };
  auto value = [&] { return std::string_view(it->value().data(), it->value().size()); };
  if (only_key.has_value()) {
    // The first entry (the header, key "") and `only_key`'s, if present.
    it->SeekToFirst();
    if (it->Valid()) CKFLOW_RETURN_IF_ERROR(visit(key(), value()));
    if (it->Valid() && !only_key->empty()) {
      it->Seek(leveldb::Slice(only_key->data(), only_key->size()));
      if (it->Valid() && key() == *only_key) CKFLOW_RETURN_IF_ERROR(visit(key(), value()));
    }
  } else {
    // The iterator's key lives until Next(), so the previous one is kept.
    std::string previous;
    bool first = true;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      if (!first && !(std::string_view(previous) < key())) {
        return DataLossError(path, ": keys out of order ('", previous, "' then '", key(), "')");
      }
      first = false;
      CKFLOW_RETURN_IF_ERROR(visit(key(), value()));
      previous.assign(key());
    }
  }
  if (!it->status().ok()) return FromLevelDb(path, it->status());
  return OkStatus();
}

}  // namespace

struct TableWriter::Impl {
  Impl() : sink(&out), builder(Options(), &sink) {}
  static leveldb::Options Options() {
    leveldb::Options options;
    options.block_size = kTableBlockSize;
    options.block_restart_interval = kTableRestartInterval;
    options.compression = leveldb::kNoCompression;
    return options;
  }
  std::string out;
  StringSink sink;
  leveldb::TableBuilder builder;
  std::string last_key;
  bool finished = false;
};

TableWriter::TableWriter() : impl_(std::make_unique<Impl>()) {}

TableWriter::~TableWriter() {
  // LevelDB's builder asserts that it was finished or abandoned.
  if (!impl_->finished) impl_->builder.Abandon();
}

Status TableWriter::Add(std::string_view key, std::string_view value) {
  if (impl_->finished) return InternalError("table key '", key, "' added after Finish");
  // LevelDB asserts on this (Debian builds it with assertions on).
  if (impl_->builder.NumEntries() > 0 && !(impl_->last_key < key)) {
    return InternalError("table keys out of order: '", impl_->last_key, "' then '", key, "'");
  }
  try {
    impl_->last_key.assign(key);
    // TensorFlow's TableBuilder (not LevelDB's) ends the current block
    // before an entry of at least twice the block size.
    if (impl_->builder.NumEntries() > 0 && key.size() + value.size() >= 2 * kTableBlockSize) {
      impl_->builder.Flush();
    }
    impl_->builder.Add(leveldb::Slice(key.data(), key.size()),
                       leveldb::Slice(value.data(), value.size()));
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("out of memory building a table of ", impl_->builder.NumEntries(),
                                  " entries");
  }
  return OkStatus();
}

StatusOr<std::string> TableWriter::Finish() {
  if (impl_->finished) return InternalError("table finished twice");
  impl_->finished = true;
  try {
    leveldb::Status s = impl_->builder.Finish();
    if (!s.ok()) return InternalError("building a table: ", s.ToString());
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("out of memory building a table of ", impl_->builder.NumEntries(),
                                  " entries");
  }
  return std::move(impl_->out);
}

StatusOr<std::string> BuildTable(std::span<const KeyValue> entries) {
  TableWriter table;
  for (const auto& [key, value] : entries) CKFLOW_RETURN_IF_ERROR(table.Add(key, value));
  return table.Finish();
}

Status VisitTable(std::string_view path, std::string_view contents,
                  std::optional<std::string_view> only_key, const TableVisitor& visit,
                  const std::function<void(uint64_t)>& expect) {
  CKFLOW_ASSIGN_OR_RETURN(const uint64_t entries, PrevalidateTable(path, contents));
  if (expect && !only_key.has_value()) expect(entries);
  try {
    return VisitTableWithLevelDb(path, contents, only_key, visit);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(path, ": out of memory reading the table");
  }
}

StatusOr<std::vector<KeyValue>> ReadTable(std::string_view path, std::string_view contents) {
  std::vector<KeyValue> table;
  CKFLOW_RETURN_IF_ERROR(
      VisitTable(path, contents, {}, [&](std::string_view key, std::string_view value) {
        table.emplace_back(key, value);
        return OkStatus();
      }));
  return table;
}

namespace {

Status CheckHeader(const std::string& path, const tensorflow::BundleHeaderProto& header) {
  const tensorflow::VersionDef& version = header.version();
  if (version.producer() < 0) {
    return InvalidArgumentError(path, ": checkpoint producer version ", version.producer(),
                                " is below the minimum 0 this code reads");
  }
  if (version.min_consumer() > kTensorBundleVersion) {
    return InvalidArgumentError(path, ": checkpoint needs a reader of version ",
                                version.min_consumer(), " or newer; this code is version ",
                                kTensorBundleVersion);
  }
  for (int bad : version.bad_consumers()) {
    if (bad == kTensorBundleVersion) {
      return InvalidArgumentError(path, ": checkpoint disallows reader version ",
                                  kTensorBundleVersion);
    }
  }
  if (header.num_shards() < 0) {
    return DataLossError(path, ": negative num_shards ", header.num_shards());
  }
  if (header.endianness() != tensorflow::BundleHeaderProto::LITTLE &&
      header.endianness() != tensorflow::BundleHeaderProto::BIG) {
    return DataLossError(path, ": unknown endianness ", static_cast<int>(header.endianness()));
  }
  return OkStatus();
}

}  // namespace

StatusOr<tensorflow::BundleHeaderProto> VisitBundleIndexBytes(
    FileSystem* fs, const std::string& path, std::optional<std::string_view> only_key,
    const BundleEntryBytesVisitor& visit, const std::function<void(uint64_t)>& expect) {
  CKFLOW_ASSIGN_OR_RETURN(std::string contents, fs->ReadFileToString(path));
  tensorflow::BundleHeaderProto header;
  bool seen_header = false;
  auto expect_entries = [&](uint64_t pairs) {
    if (expect) expect(pairs > 0 ? pairs - 1 : 0);  // the header is no entry
  };
  CKFLOW_RETURN_IF_ERROR(VisitTable(
      path, contents, only_key,
      [&](std::string_view key, std::string_view value) -> Status {
        if (!seen_header) {
          if (!key.empty()) return DataLossError(path, ": no header entry (key \"\") in the table");
          if (!header.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
            return DataLossError(path, ": header entry is not a BundleHeaderProto");
          }
          seen_header = true;
          return CheckHeader(path, header);
        }
        return visit(key, header, value);
      },
      expect_entries));
  if (!seen_header) return DataLossError(path, ": no header entry (key \"\") in the table");
  return header;
}

StatusOr<tensorflow::BundleHeaderProto> VisitBundleIndex(FileSystem* fs, const std::string& path,
                                                         std::optional<std::string_view> only_key,
                                                         const BundleEntryVisitor& visit) {
  // One message parsed into again and again: its repeated fields keep
  // their allocations.
  tensorflow::BundleEntryProto entry;
  return VisitBundleIndexBytes(
      fs, path, only_key,
      [&](std::string_view key, const tensorflow::BundleHeaderProto& header,
          std::string_view value) -> Status {
        if (!entry.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          return DataLossError(path, ": entry of key '", key, "' is not a BundleEntryProto");
        }
        return visit(key, header, entry);
      });
}

namespace {

// Protobuf's wire format, as much of it as DecodePlainEntry accepts.
constexpr uint64_t kVarint = 0, kFixed32 = 5, kLengthDelimited = 2;
constexpr uint64_t Tag(int field, uint64_t wire_type) {
  return static_cast<uint64_t>(field) << 3 | wire_type;
}

// A varint of at most ten bytes whose value fits in 64 bits (protobuf drops
// higher bits; such bytes are left to it).
bool ReadVarint(const char*& p, const char* end, uint64_t* value) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p == end) return false;
    const auto byte = static_cast<uint8_t>(*p++);
    if (shift == 63 && byte > 1) return false;
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *value = result;
      return true;
    }
  }
  return false;
}

// A length prefix and the bytes it covers: [*begin, *end).
bool ReadLengthDelimited(const char*& p, const char* end, const char** begin,
                         const char** field_end) {
  uint64_t length;
  if (!ReadVarint(p, end, &length) || length > static_cast<uint64_t>(end - p)) return false;
  *begin = p;
  *field_end = p + length;
  p = *field_end;
  return true;
}

// TensorShapeProto.Dim: only its size (a name is left to protobuf, which
// checks it is UTF-8).
bool DecodeDim(const char* p, const char* end, int64_t* size) {
  *size = 0;
  while (p < end) {
    uint64_t tag, value;
    if (!ReadVarint(p, end, &tag) || tag != Tag(1, kVarint) || !ReadVarint(p, end, &value)) {
      return false;
    }
    *size = static_cast<int64_t>(value);  // the last one, as protobuf keeps
  }
  return true;
}

bool DecodeShape(const char* p, const char* end, PlainEntry* out) {
  while (p < end) {
    uint64_t tag, value;
    const char *begin, *field_end;
    if (!ReadVarint(p, end, &tag)) return false;
    if (tag == Tag(2, kLengthDelimited)) {
      if (out->rank == PlainEntry::kMaxRank || !ReadLengthDelimited(p, end, &begin, &field_end) ||
          !DecodeDim(begin, field_end, &out->dims[out->rank])) {
        return false;
      }
      ++out->rank;
    } else if (tag == Tag(3, kVarint)) {
      // unknown_rank: only false is plain.
      if (!ReadVarint(p, end, &value) || value != 0) return false;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

bool DecodePlainEntry(std::string_view bytes, PlainEntry* out) {
  *out = PlainEntry{};
  const char* p = bytes.data();
  const char* const end = p + bytes.size();
  bool seen_shape = false;  // a second one would merge into the first
  while (p < end) {
    uint64_t tag, value;
    const char *begin, *field_end;
    if (!ReadVarint(p, end, &tag)) return false;
    switch (tag) {
      case Tag(1, kVarint):  // dtype, an open enum: protobuf keeps the low 32 bits
        if (!ReadVarint(p, end, &value)) return false;
        out->dtype = static_cast<int32_t>(static_cast<uint32_t>(value));
        break;
      case Tag(2, kLengthDelimited):  // shape
        if (seen_shape || !ReadLengthDelimited(p, end, &begin, &field_end)) return false;
        seen_shape = true;
        if (!DecodeShape(begin, field_end, out)) return false;
        break;
      case Tag(3, kVarint):  // shard_id, an int32
        if (!ReadVarint(p, end, &value)) return false;
        out->shard_id = static_cast<int32_t>(static_cast<uint32_t>(value));
        break;
      case Tag(4, kVarint):  // offset
        if (!ReadVarint(p, end, &value)) return false;
        out->offset = static_cast<int64_t>(value);
        break;
      case Tag(5, kVarint):  // size
        if (!ReadVarint(p, end, &value)) return false;
        out->size = static_cast<int64_t>(value);
        break;
      case Tag(6, kFixed32):  // crc32c
        if (end - p < 4) return false;
        out->crc32c = DecodeFixed32(p);
        p += 4;
        break;
      default:  // slices (7), an unknown field, a known one of another wire type
        return false;
    }
  }
  return true;
}

StatusOr<BundleIndex> ReadBundleIndex(FileSystem* fs, const std::string& prefix) {
  BundleIndex index;
  index.path = IndexFilename(prefix);
  CKFLOW_ASSIGN_OR_RETURN(
      index.header, VisitBundleIndex(fs, index.path, {},
                                     [&](std::string_view key, const tensorflow::BundleHeaderProto&,
                                         const tensorflow::BundleEntryProto& entry) {
                                       index.entries.emplace_back(std::string(key), entry);
                                       return OkStatus();
                                     }));
  return index;
}

tensorflow::BundleHeaderProto MakeBundleHeader(int num_shards) {
  tensorflow::BundleHeaderProto header;
  header.set_num_shards(num_shards);
  header.set_endianness(tensorflow::BundleHeaderProto::LITTLE);  // see bundle_coding.cc
  header.mutable_version()->set_producer(kTensorBundleVersion);
  return header;
}

StatusOr<std::string> BuildBundleIndex(
    const tensorflow::BundleHeaderProto& header,
    std::span<const std::pair<std::string, tensorflow::BundleEntryProto>> entries) {
  TableWriter table;
  std::string value;  // reused: one allocation for every entry
  header.SerializeToString(&value);
  CKFLOW_RETURN_IF_ERROR(table.Add("", value));
  for (const auto& [key, entry] : entries) {
    entry.SerializeToString(&value);
    CKFLOW_RETURN_IF_ERROR(table.Add(key, value));
  }
  return table.Finish();
}

TensorSlice TensorSliceFromProto(const tensorflow::TensorSliceProto& proto) {
  TensorSlice slice;
  for (const auto& extent : proto.extent()) {
    const bool has_length =
        extent.has_length_case() == tensorflow::TensorSliceProto::Extent::kLength;
    slice.extents.push_back(
        {extent.start(), has_length ? extent.length() : TensorSlice::kFullExtent});
  }
  return slice;
}

}  // namespace ckflow::internal
