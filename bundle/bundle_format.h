// Names and constants of TensorFlow's V2 checkpoint ("tensor bundle") files.
//
// A checkpoint with prefix P is P.index (a table of key -> entry, see
// bundle_reader.h) and P.data-SSSSS-of-NNNNN (tensor bytes, see
// bundle_writer.h), shard numbers printed with %05d.
//
// Thread safety: pure functions and constants.

#ifndef CKFLOW_BUNDLE_BUNDLE_FORMAT_H_
#define CKFLOW_BUNDLE_BUNDLE_FORMAT_H_

#include <string>
#include <string_view>

#include "base/types.h"

namespace ckflow {

// "P.index".
std::string IndexFilename(std::string_view prefix);
// "P.data-00000-of-00001" for shard 0 of 1.
std::string DataFilename(std::string_view prefix, int shard, int num_shards);

// The key of the object graph in object-based checkpoints (a scalar
// DT_STRING holding a serialized TrackableObjectGraph).
inline constexpr std::string_view kObjectGraphKey = "_CHECKPOINTABLE_OBJECT_GRAPH";

// An object-graph edge name as it appears in checkpoint keys (TensorFlow's
// escape_local_name): '.' becomes "..", then '/' becomes ".S".
std::string EscapeLocalName(std::string_view name);

// The format version this code writes (BundleHeaderProto.version.producer)
// and the one it reads as a consumer.
inline constexpr int kTensorBundleVersion = 1;

// Bytes per element of `dtype` as stored in a data file, for every
// memcpy-able TensorFlow type (including complex and quantized ones ckflow's
// Tensor cannot hold); 0 for DT_STRING, DT_VARIANT, DT_RESOURCE and unknown
// numbers.
size_t StoredElementSize(int dtype);

// "float32", ... as DataTypeName, plus TensorFlow's names of the types ckflow
// does not compute with ("complex64", "qint8", ...) and "dtype<N>" for an
// unknown number.
std::string StoredDataTypeName(int dtype);

}  // namespace ckflow

#endif  // CKFLOW_BUNDLE_BUNDLE_FORMAT_H_
