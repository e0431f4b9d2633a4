// BundleReader: reads a TensorFlow V2 checkpoint (tensor bundle), whether
// TensorFlow or ckflow wrote it.
//
// Reads, for prefix P (see bundle_writer.h for the writer's side):
//
//   P.index   table (bundle_index_internal.h), possibly Snappy-compressed:
//     ""   -> BundleHeaderProto {num_shards, endianness, version}
//     key  -> BundleEntryProto {dtype, shape, shard_id, offset, size, crc32c,
//                               slices}        (absent fields are 0)
//   a partitioned tensor: its key's entry has dtype, full shape and slices
//     (no data); each slice's data is an ordinary entry under
//     EncodeTensorNameSlice(key, slice) (tensor_slice.h)
//   P.data-SSSSS-of-NNNNN, SSSSS = entry.shard_id, NNNNN = header.num_shards:
//     bytes [offset, offset + size) of an entry hold its tensor; Mask(CRC32C)
//     of them (DT_STRING: of the lengths, length checksum and bytes, see
//     bundle_coding_internal.h) must equal entry.crc32c.
//
// Open() reads and checks the whole index once: every block checksum, the
// header's version and byte order, and each entry's metadata (shape valid,
// shard in range, size consistent with dtype and shape). Data files are
// opened on first use and kept open. Every read checks the entry's bounds
// against its data file and its CRC, and byte-swaps data written on a
// big-endian host.
//
// A partitioned tensor reads like any other: Lookup() and ReadInto() of its
// key assemble it from its slices, and ReadSliceInto() reads any box of any
// tensor, sliced or not, the box spanning stored slices as needed. Each
// stored slice is read once, straight into the destination when its rows
// are contiguous there (one pread), else through a buffer of its size. Its
// slices must tile it exactly: each within the full shape, none
// overlapping, all present under their keys with the full entry's dtype
// (DataLoss naming the key otherwise).
//
// ReadInto() reads straight into a caller's tensor (a variable's memory):
// numeric bytes go from the file into the destination with pread, no
// intermediate copy. Tensors above 1 MiB are read in 1 MiB chunks in
// parallel (ParallelFor), each chunk checksummed right after its read, while
// it is in cache, and the chunk CRCs combined.
//
// Errors name the file and the key: NotFound (missing index or data file),
// DataLoss (corrupt or truncated file, checksum mismatch), InvalidArgument
// (unsupported format version or dtype, destination mismatch).
//
// Thread safety: after Open, all const methods may be called concurrently.

#ifndef CKFLOW_BUNDLE_BUNDLE_READER_H_
#define CKFLOW_BUNDLE_BUNDLE_READER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_system.h"
#include "base/mutex.h"
#include "base/status.h"
#include "base/tensor.h"
#include "bundle/tensor_slice.h"

namespace ckflow {

// One tensor's metadata, as the index stores it.
struct BundleEntry {
  std::string key;
  // TensorFlow's DT_* number: possibly a type ckflow's Tensor cannot hold
  // (complex64, ...) or one this code does not know.
  int dtype = 0;
  TensorShape shape;
  int shard_id = 0;
  int64_t offset = 0;
  int64_t size = 0;
  uint32_t masked_crc32c = 0;  // as stored; crc32c::Unmask gives the CRC
  // Non-empty: the full-tensor entry of a partitioned tensor, whose data
  // lives under one key per slice (EncodeTensorNameSlice); each slice is
  // checked at Open to fit `shape`.
  std::vector<TensorSlice> slices;
  bool is_sliced() const { return !slices.empty(); }
};

class BundleReader {
 public:
  struct Options {
    FileSystem* fs = nullptr;  // null: FileSystem::Default()
    // Index only this key (one seek into the index, not a pass over all of
    // it): for reading one known tensor from a large checkpoint.
    std::optional<std::string> only_key;
  };

  // Opens the checkpoint with `prefix` (P.index must exist) and checks its
  // index as described above.
  static StatusOr<std::unique_ptr<BundleReader>> Open(const std::string& prefix,
                                                      const Options& options);
  static StatusOr<std::unique_ptr<BundleReader>> Open(const std::string& prefix) {
    return Open(prefix, Options());
  }

  ~BundleReader();
  BundleReader(const BundleReader&) = delete;
  BundleReader& operator=(const BundleReader&) = delete;

  const std::string& prefix() const { return prefix_; }
  int num_shards() const { return num_shards_; }
  // The data files were written on a big-endian host; reads swap bytes.
  bool big_endian() const { return big_endian_; }
  // Every tensor entry in key order (the header is not an entry).
  const std::vector<BundleEntry>& entries() const { return entries_; }
  // The entry of `key`, or null. The pointer lives as long as the reader.
  const BundleEntry* FindEntry(std::string_view key) const;
  // The same, looking first at entries()[position]: where the key was in a
  // checkpoint like this one. One comparison when it is still there, where
  // a search of thousands of keys is a dozen cold cache lines.
  const BundleEntry* FindEntry(std::string_view key, int64_t position) const;
  bool Contains(std::string_view key) const { return FindEntry(key) != nullptr; }

  // Starts reading the data files into the system's page cache without
  // waiting (RandomAccessFile::Prefetch), if they hold at most `max_bytes`
  // in all. A restore calls it before its matching, so that from a cold
  // cache the device reads while the CPU matches. A file that does not open
  // is skipped: the reads report it.
  void PrefetchData(uint64_t max_bytes) const;

  // The tensor saved under `key`: NotFound if there is none; errors above.
  StatusOr<Tensor> Lookup(std::string_view key) const;

  // Reads the tensor saved under `key` into *dest, which must have the
  // entry's dtype and shape (InvalidArgument otherwise). On error *dest's
  // contents are unspecified.
  Status ReadInto(std::string_view key, Tensor* dest) const;
  Status ReadInto(const BundleEntry& entry, Tensor* dest) const;

  // Reads the box `slice` of the tensor saved under `key` (sliced or not)
  // into *dest, which must have the tensor's dtype and the box's shape.
  // NotFound for a missing key; InvalidArgument if the box does not fit the
  // tensor or the destination; DataLoss for corrupt slices (see above).
  Status ReadSliceInto(std::string_view key, const TensorSlice& slice, Tensor* dest) const;
  Status ReadSliceInto(const BundleEntry& entry, const TensorSlice& slice, Tensor* dest) const;
  StatusOr<Tensor> LookupSlice(std::string_view key, const TensorSlice& slice) const;

  // ReadInto (with `slice`, ReadSliceInto) into a destination of another
  // dtype: each element is converted (base/cast.h, CastElements) as its
  // bytes are read and checksummed, a buffer of 1 MiB per thread at a
  // time, so a converting restore costs no second pass over the tensor.
  // The caller decides that the conversion is wanted; InvalidArgument if no
  // rule makes it (a string, or complex to real).
  Status ReadCastInto(const BundleEntry& entry, const TensorSlice* slice, Tensor* dest) const;

  // Reads many small numeric entries with few reads: entries that lie close
  // together in one data file are read as one range, then each is checked
  // (bounds, CRC, bools, byte order) and handed to consume(i, bytes) with
  // its verified bytes; `bytes` lives only for the call. This is how
  // thousands of small variables restore in one pass instead of one read
  // each. Stops at the first error (the entries consumed so far are good).
  // InvalidArgument for a DT_STRING entry, which has no fixed layout.
  //
  // A range is at most kMaxBatchReadBytes (or one entry), read into a
  // buffer per thread that stays that size: it is checked and copied out
  // while still in the core's cache, and a thread keeps no more than that
  // once the restore is done. Larger ranges saved no time.
  static constexpr uint64_t kMaxBatchReadBytes = 256 << 10;
  Status ReadBatch(std::span<const BundleEntry* const> entries,
                   const std::function<Status(size_t, std::string_view)>& consume) const;

  // The entry's bytes as stored, after checking bounds and checksum: for
  // copying or comparing entries of any dtype, including ones a Tensor
  // cannot hold. Only for entries of a fixed-size dtype or DT_STRING, and
  // not for the full entry of a sliced tensor (which holds no bytes).
  StatusOr<std::string> ReadRaw(const BundleEntry& entry) const;

  // Reads `entry` and checks its checksum (and, for DT_STRING, its
  // encoding; for DT_BOOL, that every byte is 0 or 1) without keeping the
  // data: numeric entries go through a 1 MiB buffer per thread.
  Status Verify(const BundleEntry& entry) const;

  // P.data-SSSSS-of-NNNNN for shard `shard` of this checkpoint.
  std::string DataPath(int shard) const;

 private:
  BundleReader(std::string prefix, FileSystem* fs, int num_shards, bool big_endian,
               std::vector<BundleEntry> entries);

  // One stored piece of a tensor: its box and the entry holding its data.
  struct StoredSlice {
    TensorSlice slice;
    const BundleEntry* entry;
  };
  // The pieces `full` is stored in (itself, unless sliced), checked as
  // described above, each within its data file.
  StatusOr<std::vector<StoredSlice>> StoredSlicesOf(const BundleEntry& full) const;
  // Reads box `want` of `full` (already checked to fit) into *dest.
  Status ReadBox(const BundleEntry& full, const TensorSlice& want, Tensor* dest) const;
  // Copies the part of `stored` inside `want` into *dest (shaped as want).
  Status CopyStoredSlice(const BundleEntry& full, const StoredSlice& stored,
                         const TensorSlice& want, Tensor* dest) const;

  // Checks that the entry's data can be read (dtype stored densely or as
  // strings, not sliced, within its data file) and returns that file.
  StatusOr<const RandomAccessFile*> EntryFile(const BundleEntry& entry) const;
  // EntryFile's checks: that the entry has data of its own (not slices, a
  // dtype with a size), and that it lies within `file`.
  Status CheckHasData(const BundleEntry& entry) const;
  static Status CheckWithin(const BundleEntry& entry, const RandomAccessFile& file);
  StatusOr<const RandomAccessFile*> DataFile(int shard) const CKFLOW_EXCLUDES(mu_);
  // Reads the entry's bytes into dst and checks their CRC.
  // With a window [keep_begin, keep_end) of the entry's bytes, only those
  // land in dst (at dst[0]); the rest are read into a small scratch buffer,
  // only to be checksummed.
  Status ReadChecked(const BundleEntry& entry, const RandomAccessFile& file, char* dst,
                     uint64_t keep_begin = 0, uint64_t keep_end = UINT64_MAX) const;
  // ReadChecked, then checks bools and swaps bytes if needed (of the window).
  Status ReadNumeric(const BundleEntry& entry, const RandomAccessFile& file, char* dst,
                     uint64_t keep_begin = 0, uint64_t keep_end = UINT64_MAX) const;
  StatusOr<std::string> ReadBytes(const BundleEntry& entry, const RandomAccessFile& file) const;
  Status DecodeStrings(const BundleEntry& entry, const RandomAccessFile& file,
                       std::string_view bytes, std::span<std::string> dst) const;
  Status CheckCrc(const BundleEntry& entry, const RandomAccessFile& file, uint32_t crc) const;
  Status ReadValidated(const BundleEntry& entry, const RandomAccessFile& file, Tensor* dest) const;

  // Constant after construction.
  const std::string prefix_;
  const std::string index_path_;
  FileSystem* const fs_;
  const int num_shards_;
  const bool big_endian_;
  const std::vector<BundleEntry> entries_;

  // Data files, opened on first use; never closed before the reader dies,
  // so pointers handed out stay valid.
  mutable Mutex mu_;
  mutable std::map<int, std::unique_ptr<RandomAccessFile>> data_files_ CKFLOW_GUARDED_BY(mu_);
};

}  // namespace ckflow

#endif  // CKFLOW_BUNDLE_BUNDLE_READER_H_
