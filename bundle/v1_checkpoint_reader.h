// V1CheckpointReader: reads a TensorFlow 1 V1 checkpoint, the single file a
// tf.compat.v1.train.Saver(write_version=SaverDef.V1) writes (TensorFlow's
// SaveSlices op, tensor_slice_writer / tensor_slice_reader). Old TF1
// trainers left such checkpoints; TensorFlow 2.21 still writes and reads
// them.
//
// The file is a table (the .index format, bundle_index_internal.h: blocks
// with masked CRC32C trailers, a footer with LevelDB's magic) whose values
// are serialized tensorflow.SavedTensorSlices:
//
//   ""                                   -> {meta: {tensor: [SavedSliceMeta
//                                             {name, shape, type, slice*}],
//                                             versions}}
//   EncodeTensorNameSlice(name, slice)   -> {data: SavedSlice {name, slice,
//                                             data: TensorProto}}
//
// Every tensor has one or more slices (one whole-tensor slice, "-:-", for
// an ordinary variable), each stored under its own key with its values in
// the TensorProto's typed field (float_val, int64_val, ... ; see
// protos/saved_tensor_slice.proto), one value per element of the slice, in
// row-major order. A sharded V1 save writes one such file per device,
// "<path>-00000-of-00002", ...; each holds its own variables.
//
// Open() reads the file once, checks every block checksum and the metadata
// (shapes, types, slices inside their tensor and tiling it exactly, a
// stored entry for each); values are decoded on lookup. Errors name the file
// and the key: DataLoss for a damaged file or entry, NotFound for a missing
// file or tensor, InvalidArgument for a box outside the tensor or a type
// ckflow cannot hold.
//
// Thread safety: after Open, all const methods may be called concurrently.

#ifndef CKFLOW_BUNDLE_V1_CHECKPOINT_READER_H_
#define CKFLOW_BUNDLE_V1_CHECKPOINT_READER_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"
#include "base/tensor.h"
#include "bundle/tensor_slice.h"

namespace ckflow {

class V1CheckpointReader {
 public:
  struct TensorInfo {
    std::string name;
    DataType dtype = DT_INVALID;
    TensorShape shape;                // the full tensor's
    std::vector<TensorSlice> slices;  // as stored; together they tile `shape`
  };

  // Opens and checks the V1 file at `path`. NotFound if there is no such
  // file; DataLoss if it is not a V1 checkpoint or is damaged.
  static StatusOr<std::unique_ptr<V1CheckpointReader>> Open(const std::string& path,
                                                            FileSystem* fs = nullptr);
  ~V1CheckpointReader();
  V1CheckpointReader(const V1CheckpointReader&) = delete;
  V1CheckpointReader& operator=(const V1CheckpointReader&) = delete;

  const std::string& path() const { return path_; }
  // In name order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The tensor named `name`, or null; lives as long as the reader.
  const TensorInfo* Find(std::string_view name) const;

  // The whole tensor `name`, assembled from its slices.
  StatusOr<Tensor> Lookup(std::string_view name) const;
  // The box `slice` of tensor `name` (InvalidArgument if it does not fit).
  StatusOr<Tensor> LookupSlice(std::string_view name, const TensorSlice& slice) const;

 private:
  V1CheckpointReader(std::string path, std::vector<TensorInfo> tensors,
                     std::map<std::string, std::string, std::less<>> values);

  const std::string path_;
  const std::vector<TensorInfo> tensors_;
  // Slice key -> serialized SavedTensorSlices; decoded on lookup.
  const std::map<std::string, std::string, std::less<>> values_;
};

// Whether `path` looks like a V1 checkpoint: a file (not a directory) with
// no "<path>.index" beside it, as TensorFlow's checkpoint_exists tells the
// formats apart.
bool IsV1Checkpoint(const std::string& path, FileSystem* fs = nullptr);

}  // namespace ckflow

#endif  // CKFLOW_BUNDLE_V1_CHECKPOINT_READER_H_
