// Fashion-MNIST for the example and the programs that check it: the four
// IDX files of a directory (Debian's dataset-fashion-mnist installs them in
// /usr/share/datasets/fashion-mnist) read with ReadIdx, and batches of
// them as the model takes them: pixels scaled to [0, 1] by / 255 and
// nothing else, [n, 28, 28, 1] float32, with int32 labels [n]; and the
// accuracy of a model's predictions on them.

#ifndef CKFLOW_EXAMPLES_FASHION_MNIST_DATA_H_
#define CKFLOW_EXAMPLES_FASHION_MNIST_DATA_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "data/idx.h"
#include "graph/graph.h"
#include "runtime/session.h"

namespace ckflow::examples {

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
inline constexpr int64_t kImageSide = 28;
inline constexpr int64_t kClasses = 10;

// Images uint8 [n, 28, 28] and labels uint8 [n], labels in [0, 10).
struct LabeledImages {
  Tensor images;
  Tensor labels;
  int64_t size() const { return labels.NumElements(); }
};

// `prefix`-images-idx3-ubyte.gz and `prefix`-labels-idx1-ubyte.gz of `dir`
// ("train" or "t10k"); DataLoss if they are not images and labels of equal
// count.
inline StatusOr<LabeledImages> ReadLabeledImages(const std::string& dir,
                                                 const std::string& prefix) {
  LabeledImages out;
  const std::string images = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string labels = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  CKFLOW_ASSIGN_OR_RETURN(out.images, ReadIdx(images));
  CKFLOW_ASSIGN_OR_RETURN(out.labels, ReadIdx(labels));
  const TensorShape& shape = out.images.shape();
  if (out.images.dtype() != DT_UINT8 || shape.rank() != 3 || shape.dim(1) != kImageSide ||
      shape.dim(2) != kImageSide) {
    return DataLossError(images, ": expected uint8 images [n, 28, 28], got ",
                         DataTypeName(out.images.dtype()), shape.ToString());
  }
  if (out.labels.dtype() != DT_UINT8 || out.labels.shape() != TensorShape({shape.dim(0)})) {
    return DataLossError(labels, ": expected ", shape.dim(0), " uint8 labels, got ",
                         DataTypeName(out.labels.dtype()), out.labels.shape().ToString());
  }
  for (uint8_t label : out.labels.flat<uint8_t>()) {
    if (label >= kClasses) return DataLossError(labels, ": label ", int{label}, " is not a class");
  }
  return out;
}

struct Batch {
  Tensor images;  // float32 [n, 28, 28, 1], pixel / 255
  Tensor labels;  // int32 [n]
};

// The examples `indices` of `data`, in that order.
inline Batch Gather(const LabeledImages& data, std::span<const int64_t> indices) {
  const int64_t n = static_cast<int64_t>(indices.size());
  constexpr int64_t kPixels = kImageSide * kImageSide;
  Batch batch{Tensor(DT_FLOAT, TensorShape({n, kImageSide, kImageSide, 1})),
              Tensor(DT_INT32, TensorShape({n}))};
  const uint8_t* pixels = data.images.flat<uint8_t>().data();
  float* out = batch.images.flat<float>().data();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* image = pixels + indices[i] * kPixels;
    for (int64_t p = 0; p < kPixels; ++p)
      out[i * kPixels + p] = static_cast<float>(image[p]) / 255.0f;
    batch.labels.flat<int32_t>()[i] = data.labels.flat<uint8_t>()[indices[i]];
  }
  return batch;
}

// The fraction of `data` whose label `predictions` (int32 [n], computed from
// `images`) gives, run 1,000 images at a time.
inline StatusOr<double> Accuracy(Session& session, const Output& images, const Output& predictions,
                                 const LabeledImages& data) {
  constexpr int64_t kChunk = 1000;
  std::vector<int64_t> indices(static_cast<size_t>(data.size()));
  for (int64_t i = 0; i < data.size(); ++i) indices[i] = i;
  int64_t correct = 0;
  for (int64_t start = 0; start < data.size(); start += kChunk) {
    const int64_t n = std::min(kChunk, data.size() - start);
    Batch batch = Gather(data, std::span(indices).subspan(start, n));
    CKFLOW_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                            session.Run({{images, batch.images}}, {predictions}));
    for (int64_t i = 0; i < n; ++i) {
      correct += out[0].flat<int32_t>()[i] == batch.labels.flat<int32_t>()[i];
    }
  }
  return data.size() > 0 ? static_cast<double>(correct) / static_cast<double>(data.size()) : 0.0;
}

}  // namespace ckflow::examples

#endif  // CKFLOW_EXAMPLES_FASHION_MNIST_DATA_H_
