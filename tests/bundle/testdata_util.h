// The golden checkpoints of tests/testdata/ (written by TensorFlow 2.21 with
// interop/make_testdata.py) and TensorFlow's own account of each, its
// manifest.json; and CheckBundle, the reader-level check of a checkpoint
// ckflow wrote that the tests compare a rendered listing of.
//
// Thread safety: pure functions of the files they read.

#ifndef CKFLOW_TESTS_BUNDLE_TESTDATA_UTIL_H_
#define CKFLOW_TESTS_BUNDLE_TESTDATA_UTIL_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "bundle/bundle_reader.h"
#include "bundle/checkpoint_state.h"
#include "bundle/object_tree.h"

namespace ckflow::testing {

// One key as TensorFlow's reader lists it.
struct GoldenTensor {
  std::string key;
  std::string dtype;  // TensorFlow's name: "float32", "bfloat16", "string"
  std::vector<int64_t> shape;
  int64_t bytes = 0;   // length of ValueBytes() of its value
  uint32_t crc32 = 0;  // Crc32(ValueBytes()) of its value
};

// One checkpoint of a golden folder.
struct GoldenCheckpoint {
  std::string prefix;                 // absolute: TestDataDir()/<folder>/<prefix>
  bool v1 = false;                    // a V1 file (no .index)
  std::vector<GoldenTensor> tensors;  // in key order
  // The object graph as TensorFlow parsed it, rendered by CanonicalGraph;
  // empty for a name-based checkpoint.
  std::string object_graph;
};

// A folder of tests/testdata/ and its manifest.json.
struct GoldenFolder {
  std::string name;  // "tf1_saver_sharded"
  std::string dir;   // absolute
  std::string what;  // what it covers, one paragraph
  std::vector<GoldenCheckpoint> checkpoints;
  std::optional<CheckpointStateData> state;  // paths relative to dir, as stored
};
inline void PrintTo(const GoldenFolder& f, std::ostream* os) { *os << f.name; }

// The folders of tests/testdata/ that hold a manifest.json, sorted.
std::vector<std::string> GoldenFolderNames();
// Reads TestDataDir()/<name>/manifest.json. DataLoss if it does not parse.
StatusOr<GoldenFolder> ReadGoldenFolder(const std::string& name);
// The absolute prefix of the folder's newest checkpoint (its last in the
// manifest); "" (and a test failure) if the folder cannot be read.
std::string GoldenPrefix(const std::string& name);

// A value's bytes as the manifests hash them: numbers and bools as their
// elements' little-endian bytes; strings as each element's length (uint64
// little-endian) and bytes.
std::string ValueBytes(const Tensor& t);
// The bytes of the V1 file TensorFlow wrote, tf1_saver_v1/model.ckpt (its
// tensors are listed in interop/make_testdata.py's tf1_saver_v1).
std::string TfV1CheckpointBytes();

// zlib's CRC-32 (the polynomial 0xEDB88320), as Python's zlib.crc32.
uint32_t Crc32(std::string_view data);

// An object graph as lines that two graphs can be compared by: "node N",
// then its "  child NAME -> ID", "  attribute NAME FULL_NAME KEY" and
// "  slot ORIGINAL NAME -> ID" lines in stored order.
std::string CanonicalGraph(const CheckpointObjectGraph& graph);

// The table layout of an .index (or V1) file, read here from its bytes
// without ckflow's table code: footer, block handles, block trailers.
struct TableLayout {
  int data_blocks = 0;
  int metaindex_entries = 0;
  std::vector<std::string> separators;  // the index block's keys
  std::vector<int> compression;         // each data block's trailer type (0 none, 1 Snappy)
  bool footer_padding_zero = false;
};
// DataLoss naming the file for a bad footer, handle, or block checksum.
StatusOr<TableLayout> ReadTableLayout(const std::string& path);

// What an independent reader would check of a checkpoint ckflow wrote, at
// `path` (a prefix, its .index, or a directory whose state file names it):
// the table's layout and block checksums; the header, through
// BundleReader; every entry's data read and its CRC verified (slices of a
// partitioned tensor too); every byte of every data file covered by
// exactly one entry; the object graph's every key present. Returns the
// listing the tests look into:
//
//   prefix ckpt-1
//   index: 1 data block, separators [w], metaindex empty, footer padding zero
//   num_shards 2
//   dense/bias/.ATTRIBUTES/VARIABLE_VALUE float32[3] shard 1 offset 0 size 12 crc ok
//   w float32[10,6] in 3 slices: 0,4:- 4,3:- 7,3:-
//   data file 0: 120 bytes, covered
//   object graph: 7 nodes, 5 keys, every key in the bundle
//   (root)
//     ...                                        (ckflow tree's rendering)
//   state: model_checkpoint_path "ckpt-1", all ["ckpt-1"], timestamps 0
//                                                (for a directory)
//
// An error (DataLoss, NotFound, ...) for anything that does not check out.
StatusOr<std::string> CheckBundle(const std::string& path);

}  // namespace ckflow::testing

#endif  // CKFLOW_TESTS_BUNDLE_TESTDATA_UTIL_H_
