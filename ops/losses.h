// Loss functions, as tf.losses / tf.keras.losses compute them: each returns
// a scalar, the mean of the per-example (or per-element) losses, ready for
// Optimizer::Minimize.
//
//   Output loss = losses::SoftmaxCrossEntropyWithLogits(root, labels, logits);
//
// `labels` has the dtype and shape of the predictions or logits (one-hot or
// probability rows for the softmax loss; class indices for the sparse
// one). A mismatch is a build error, sticky in the scope like every
// builder's.
//
// Thread safety: graph building is single-threaded.

#ifndef CKFLOW_OPS_LOSSES_H_
#define CKFLOW_OPS_LOSSES_H_

#include "graph/graph.h"

namespace ckflow::losses {

// mean((predictions - labels)^2) over all elements.
Output MeanSquaredError(const Scope& scope, Output labels, Output predictions);

// For logits and labels [batch, classes]: the mean over the batch of
// -sum_j labels[i,j] * log_softmax(logits)[i,j], computed without overflow
// for large logits.
Output SoftmaxCrossEntropyWithLogits(const Scope& scope, Output labels, Output logits);

// For labels [batch] of class indices (int32 or int64, each in [0,
// classes): a label out of range fails the run naming it) and logits
// [batch, classes]: the mean over the batch of -log_softmax(logits)[i,
// labels[i]] (Keras' sparse categorical cross-entropy from logits).
Output SparseSoftmaxCrossEntropyWithLogits(const Scope& scope, Output labels, Output logits);

// mean over all elements of
// max(x, 0) - x * z + log(1 + exp(-|x|)) for logits x and labels z,
// TensorFlow's overflow-free form of -z*log(sigmoid(x)) - (1-z)*log(1-sigmoid(x)).
Output SigmoidCrossEntropyWithLogits(const Scope& scope, Output labels, Output logits);

}  // namespace ckflow::losses

#endif  // CKFLOW_OPS_LOSSES_H_
