// BundleWriter: writes one TensorFlow V2 checkpoint (a single-shard tensor
// bundle), byte for byte as TensorFlow's BundleWriter does.
//
// Files written for prefix P:
//
//   P.data-00000-of-00001   the tensors' bytes, in Add() order, densely packed:
//     +-----------+-----------+-----+
//     | tensor 0  | tensor 1  | ... |   numeric: raw little-endian elements,
//     +-----------+-----------+-----+   row-major (bool: one byte 0/1);
//                                       DT_STRING: see bundle_coding_internal.h
//   P.index                  a table, keys in bytewise order:
//     ""   -> BundleHeaderProto {num_shards: 1, endianness: LITTLE,
//                                version {producer: 1}}   = 08 01 1A 02 08 01
//     key  -> BundleEntryProto {dtype, shape, shard_id: 0, offset, size,
//                               crc32c: Mask(CRC32C of the entry's bytes)}
//   a tensor added in slices (AddSlice), as TensorFlow's BundleWriter does:
//     key  -> BundleEntryProto {dtype, full shape, slices: [TensorSliceProto
//             per slice: one extent per dimension, empty when it is whole]}
//     EncodeTensorNameSlice(key, slice) -> an ordinary entry of the slice
//
// Crash safety: the data goes to "P.data-00000-of-00001.tempstate<random>"
// and the index to "P.index.tempstate<random>"; Finish() completes both, then
// renames the data file and last the index. Until then nothing exists under
// the final names. A checkpoint already saved under P is moved aside first
// and put back if a rename fails, so a failed save never damages it; a
// failure also removes the temp files.
//
// Large tensors are checksummed and written in parallel chunks (ParallelFor),
// each chunk checksummed just before it is written while it is still in
// cache, and the chunk CRCs combined.
//
// Thread safety: a BundleWriter is used by one thread at a time.

#ifndef CKFLOW_BUNDLE_BUNDLE_WRITER_H_
#define CKFLOW_BUNDLE_BUNDLE_WRITER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/file_system.h"
#include "base/status.h"
#include "base/tensor.h"
#include "bundle/tensor_slice.h"

namespace ckflow {

class BackgroundCall;

class BundleWriter {
 public:
  struct Options {
    FileSystem* fs = nullptr;  // null: FileSystem::Default()
    // fsync the data and index files before renaming them into place, so the
    // checkpoint also survives a power loss. TensorFlow does not.
    bool sync = false;
  };

  // Creates the directory of `prefix` (and its parents) and opens the data
  // temp file. Errors: those of the file system (NotFound, PermissionDenied,
  // ...), naming the path.
  static StatusOr<std::unique_ptr<BundleWriter>> Create(const std::string& prefix,
                                                        const Options& options);
  static StatusOr<std::unique_ptr<BundleWriter>> Create(const std::string& prefix) {
    return Create(prefix, Options());
  }

  // Deletes the temp files unless Finish() succeeded.
  ~BundleWriter();
  BundleWriter(const BundleWriter&) = delete;
  BundleWriter& operator=(const BundleWriter&) = delete;

  // Appends `tensor` to the data file under `key`. Keys may come in any
  // order. Errors: InvalidArgument for key "" (the header's), a key added
  // before, an invalid tensor or a DT_RESOURCE one; FailedPrecondition after
  // Finish(); a write error, which also fails every later call. A tensor
  // over a source (base/tensor_source_internal.h) is read from it, once;
  // its error is a write error.
  Status Add(std::string_view key, const Tensor& tensor);

  // Like Add, for a fixed-size dtype (any memcpy-able TensorFlow type,
  // including ones ckflow's Tensor cannot hold) whose elements are already
  // laid out as stored: `data` holds shape.num_elements() elements of
  // StoredElementSize(dtype) bytes. InvalidArgument if the size disagrees or
  // the dtype is not fixed-size.
  Status AddRaw(std::string_view key, int dtype, const TensorShape& shape, std::string_view data);

  // Adds `slice_tensor` as the part `slice` of the tensor saved under
  // `full_key`, of shape `full_shape` (TensorFlow's AddSlice): slices of one
  // key may come in any order, interleaved with other keys; a slice that
  // covers the whole shape is added as the tensor itself (Add). Errors as
  // Add's, and InvalidArgument if the slice does not fit `full_shape`, the
  // tensor is not the slice's shape, or an earlier slice of the key had
  // another dtype or full shape. Slices are not checked to be disjoint
  // (that needs them all; readers check).
  Status AddSlice(std::string_view full_key, const TensorShape& full_shape,
                  const TensorSlice& slice, const Tensor& slice_tensor);

  // Writes the index and renames both files into place. After it (OK or
  // not) the writer accepts nothing more; on error no file of the new
  // checkpoint remains.
  Status Finish();

  const std::string& prefix() const { return prefix_; }

 private:
  // Keys and dimensions live in two arenas (keys_, dims_), not in each
  // entry: a save of many small tensors would otherwise pay two allocations
  // per tensor to add it and two frees to destroy it.
  struct Entry {
    size_t key_offset;
    size_t key_size;
    size_t dims_offset;
    int rank;
    int dtype;
    int64_t offset = 0;
    int64_t size = 0;
    uint32_t masked_crc32c = 0;
    std::vector<TensorSlice> slices;  // non-empty: a full entry, no data
  };

  BundleWriter(std::string prefix, const Options& options, std::string data_temp_path,
               std::unique_ptr<WritableFile> data_file);
  Status CheckAdd(std::string_view key);
  std::string_view KeyOf(const Entry& e) const { return {keys_.data() + e.key_offset, e.key_size}; }
  std::span<const int64_t> DimsOf(const Entry& e) const {
    return std::span<const int64_t>(dims_).subspan(e.dims_offset, e.rank);
  }
  // Whether `key` sorts after every key added so far, known by one
  // comparison while the keys came sorted.
  bool FollowsAll(std::string_view key) const {
    return tail_.empty() && (entries_.empty() || KeyOf(entries_.back()) < key);
  }
  // The index in entries_ of the entry added under `key`, or -1.
  int64_t Find(std::string_view key) const;
  Entry& Insert(std::string_view key, int dtype, const TensorShape& shape);
  // Appends bytes to the data file; returns their CRC32C.
  StatusOr<uint32_t> AppendData(std::string_view data);
  // Appends `size` bytes that `read(offset, length, consume)` hands to
  // `consume` (a callable taking a std::string_view, returning Status) in
  // order, a range at a time (ranges of a large value are read on several
  // threads at once); returns their CRC32C. A template, not a
  // std::function: a save of many small values calls it for each.
  template <typename Read>
  StatusOr<uint32_t> AppendBytes(uint64_t size, const Read& read);
  // Hands the buffered bytes to a background write (after the previous
  // one has finished) and starts a new buffer.
  Status FlushBuffer();
  // Waits for the background write; its error, if it failed.
  Status WaitForWrite();
  Status FinishFiles();
  void DeleteTempFiles();

  // Constant after construction.
  const std::string prefix_;
  const Options options_;
  FileSystem* const fs_;
  const std::string data_temp_path_;
  const std::string index_temp_path_;

  std::unique_ptr<WritableFile> data_file_;
  std::string buffer_;  // data not yet written, ending at size_
  // The buffer before it, which write_ is writing to the data file (the
  // small values of a save are copied and checksummed on the caller's
  // thread while the previous megabyte goes to the file on another), and
  // that write's result, which WaitForWrite() collects.
  std::string in_flight_;
  std::unique_ptr<BackgroundCall> write_;
  Status in_flight_status_;
  uint64_t size_ = 0;           // logical size of the data file
  std::vector<Entry> entries_;  // in Add() order
  std::string keys_;            // every entry's key, back to back
  std::vector<int64_t> dims_;   // every entry's dimensions, back to back
  // entries_[0, sorted_) came with strictly increasing keys (a saver adds
  // its keys sorted): a key past them is new after one comparison, and
  // Finish() walks them without sorting. The entries after them, which came
  // out of order, are found through tail_ (key -> index in entries_).
  size_t sorted_ = 0;
  std::unordered_map<std::string, size_t> tail_;
  Status write_error_;  // sticky
  bool finished_ = false;
  bool renamed_ = false;  // Finish() succeeded: the files are in place
};

}  // namespace ckflow

#endif  // CKFLOW_BUNDLE_BUNDLE_WRITER_H_
