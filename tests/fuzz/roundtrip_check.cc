// CheckRoundTripInput (checkpoint_checks.h): the writer and the merge, checked
// against what they were given.

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bundle/bundle_reader.h"
#include "bundle/bundle_writer.h"
#include "bundle/merge.h"
#include "tests/fuzz/checkpoint_checks.h"
#include "tests/test_util.h"

namespace ckflow::fuzz {
namespace {

namespace fs = std::filesystem;

// Hands out the input's bytes; past the end, zeros (so every input is a
// complete recipe and the fuzzer need not learn a length field).
class Bytes {
 public:
  explicit Bytes(std::span<const uint8_t> input) : input_(input) {}
  bool empty() const { return at_ >= input_.size(); }
  uint8_t Next() { return at_ < input_.size() ? input_[at_++] : 0; }
  void Fill(char* dst, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<char>(Next());
  }

 private:
  std::span<const uint8_t> input_;
  size_t at_ = 0;
};

constexpr DataType kDtypes[] = {DT_FLOAT,  DT_DOUBLE, DT_INT32,  DT_UINT8, DT_INT16,
                                DT_INT8,   DT_STRING, DT_INT64,  DT_BOOL,  DT_BFLOAT16,
                                DT_UINT16, DT_HALF,   DT_UINT32, DT_UINT64};

Tensor MakeTensor(Bytes& bytes) {
  const DataType dtype = kDtypes[bytes.Next() % std::size(kDtypes)];
  std::vector<int64_t> dims(bytes.Next() % 4);
  for (int64_t& d : dims) d = bytes.Next() % 5;  // zero-size tensors included
  Tensor tensor(dtype, TensorShape(dims));
  if (dtype == DT_STRING) {
    for (std::string& s : tensor.flat<std::string>()) {
      const uint8_t n = bytes.Next();
      // Mostly short; 255 makes one long enough for a two-byte varint.
      s.resize(n == 255 ? 300 : n % 40);
      bytes.Fill(s.data(), s.size());
    }
  } else if (dtype == DT_BOOL) {
    for (bool& b : tensor.flat<bool>()) b = (bytes.Next() & 1) != 0;
  } else {
    bytes.Fill(static_cast<char*>(tensor.raw_data()), tensor.TotalBytes());
  }
  return tensor;
}

}  // namespace

std::string CheckRoundTripInput(std::span<const uint8_t> input, const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  const std::string shard_prefixes[2] = {dir + "/shards/part-0", dir + "/shards/part-1"};
  std::unique_ptr<BundleWriter> writers[2];
  for (int i = 0; i < 2; ++i) {
    auto writer = BundleWriter::Create(shard_prefixes[i]);
    if (!writer.ok()) return writer.status().ToString();
    writers[i] = *std::move(writer);
  }

  std::map<std::string, Tensor> expected;
  bool key_in_both_shards = false;
  std::set<std::string> keys_of[2];
  Bytes bytes(input);
  for (int n = 0; n < 64 && !bytes.empty(); ++n) {
    const int shard = bytes.Next() & 1;
    std::string key(bytes.Next() % 24, '\0');
    bytes.Fill(key.data(), key.size());
    Tensor tensor = MakeTensor(bytes);
    const Status added = writers[shard]->Add(key, tensor);
    const bool must_fail = key.empty() || keys_of[shard].count(key) > 0;
    if (added.ok() == must_fail || (!added.ok() && added.code() != StatusCode::kInvalidArgument)) {
      return "Add of tensor " + std::to_string(n) + " returned " + added.ToString();
    }
    if (!added.ok()) continue;
    keys_of[shard].insert(key);
    key_in_both_shards = key_in_both_shards || keys_of[1 - shard].count(key) > 0;
    expected.insert_or_assign(key, std::move(tensor));
  }
  for (auto& writer : writers) {
    if (Status s = writer->Finish(); !s.ok()) return "Finish returned " + s.ToString();
  }

  const std::string prefix = dir + "/merged";
  const Status merged = MergeBundles(shard_prefixes, prefix);
  if (key_in_both_shards) {
    if (merged.ok()) return "MergeBundles accepted a key both shards hold";
    if (merged.code() != StatusCode::kInvalidArgument) {
      return "MergeBundles of a key both shards hold returned " + merged.ToString();
    }
    return "";
  }
  if (!merged.ok()) return "MergeBundles returned " + merged.ToString();

  auto reader = BundleReader::Open(prefix);
  if (!reader.ok()) return "BundleReader::Open returned " + reader.status().ToString();
  if ((*reader)->entries().size() != expected.size()) {
    return "read back " + std::to_string((*reader)->entries().size()) + " entries of " +
           std::to_string(expected.size());
  }
  // Keys below are named by their place in byte order (they may hold any
  // byte); the entries must come in that order.
  std::vector<const BundleEntry*> numeric;
  size_t rank = 0;
  for (const auto& [key, tensor] : expected) {
    const std::string which =
        "key " + std::to_string(rank) + " of " + std::to_string(expected.size());
    if ((*reader)->entries()[rank++].key != key) return "entries are not in byte order at " + which;
    StatusOr<Tensor> read = (*reader)->Lookup(key);
    if (!read.ok()) return "Lookup of " + which + " returned " + read.status().ToString();
    if (!testing::SameTensor(*read, tensor)) return "Lookup of " + which + " read other bits";
    if (tensor.dtype() != DT_STRING) numeric.push_back((*reader)->FindEntry(key));
  }
  std::string problem;
  const Status batched = (*reader)->ReadBatch(numeric, [&](size_t i, std::string_view data) {
    const Tensor& tensor = expected.at(numeric[i]->key);
    if (data.size() != tensor.TotalBytes() ||
        std::memcmp(data.data(), tensor.raw_data(), data.size()) != 0) {
      problem = "ReadBatch read other bits for batch entry " + std::to_string(i);
    }
    return OkStatus();
  });
  if (!batched.ok()) return "ReadBatch returned " + batched.ToString();
  return problem;
}

}  // namespace ckflow::fuzz
