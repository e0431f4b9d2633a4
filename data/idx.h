// The IDX format of the MNIST and Fashion-MNIST data sets, read into a
// Tensor.
//
//   StatusOr<Tensor> images = ReadIdx("/usr/share/datasets/fashion-mnist/"
//                                     "train-images-idx3-ubyte.gz");
//   // uint8 [60000, 28, 28]
//
// An IDX file, all integers big-endian:
//
//   +------+------+------+------+----------------------+--------------------+
//   | 0x00 | 0x00 | type | rank | rank x uint32: dims  | the elements       |
//   +------+------+------+------+----------------------+--------------------+
//   0      1      2      3      4                      4 + 4 * rank
//
//   type  0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
//         0x0E float64 (the magic number 0x00000803 is uint8 of rank 3)
//   the elements: dims[0] * ... * dims[rank - 1] of them, row-major, each
//         big-endian in its type's width
//
// The file may be gzip-compressed as a whole (it starts with gzip's 0x1f
// 0x8b; several gzip members in a row are read as one stream, as zcat does),
// whatever its name.
//
// A file that is not exactly that is DataLoss naming the file and what is
// wrong: a bad magic (the first two bytes not zero), an unknown type code, a
// header or data shorter than the dims say, bytes after the data, dims whose
// byte count overflows, a corrupt gzip stream (zlib checks each member's
// CRC-32 and length). Nothing is allocated beyond what the file holds: a
// plain file's size is checked against the dims before the tensor is
// allocated, and a gzip file's data is kept only as far as it actually
// decompresses (at most the dims' byte count, plus one read's worth). Errors
// of the file system keep their code (NotFound for a missing file).
//
// Thread safety: ReadIdx may be called from several threads at once.

#ifndef CKFLOW_DATA_IDX_H_
#define CKFLOW_DATA_IDX_H_

#include <string>

#include "base/file_system.h"
#include "base/status.h"
#include "base/tensor.h"

namespace ckflow {

// The tensor held by the IDX file `path`: the dtype of its type code
// (DT_UINT8, DT_INT8, DT_INT16, DT_INT32, DT_FLOAT, DT_DOUBLE) and its dims
// as the shape. Every read goes through `file_system` (null:
// FileSystem::Default()).
StatusOr<Tensor> ReadIdx(const std::string& path, FileSystem* file_system = nullptr);

}  // namespace ckflow

#endif  // CKFLOW_DATA_IDX_H_
