// Eigen views of Tensor buffers, for kernels. Internal: public headers stay
// free of Eigen. The maps alias the tensor's buffer; no copy is made.

#ifndef CKFLOW_BASE_TENSOR_EIGEN_INTERNAL_H_
#define CKFLOW_BASE_TENSOR_EIGEN_INTERNAL_H_

#include <Eigen/Core>

#include "base/tensor.h"

namespace ckflow::internal {

template <typename T>
using RowMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatrixMap = Eigen::Map<RowMajorMatrix<T>, Eigen::Aligned64>;
template <typename T>
using ConstMatrixMap = Eigen::Map<const RowMajorMatrix<T>, Eigen::Aligned64>;
template <typename T>
using VectorMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>, Eigen::Aligned64>;
template <typename T>
using ConstVectorMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>, Eigen::Aligned64>;

// All elements as a 1-D array.
template <typename T>
VectorMap<T> AsArray(Tensor& t) {
  return VectorMap<T>(t.flat<T>().data(), t.NumElements());
}
template <typename T>
ConstVectorMap<T> AsArray(const Tensor& t) {
  return ConstVectorMap<T>(t.flat<T>().data(), t.NumElements());
}

// A rank-2 tensor as a row-major matrix. REQUIRES: t.shape().rank() == 2.
template <typename T>
MatrixMap<T> AsMatrix(Tensor& t) {
  return MatrixMap<T>(t.flat<T>().data(), t.shape().dim(0), t.shape().dim(1));
}
template <typename T>
ConstMatrixMap<T> AsMatrix(const Tensor& t) {
  return ConstMatrixMap<T>(t.flat<T>().data(), t.shape().dim(0), t.shape().dim(1));
}

}  // namespace ckflow::internal

#endif  // CKFLOW_BASE_TENSOR_EIGEN_INTERNAL_H_
