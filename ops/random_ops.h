// Random op builders, seeded as in TensorFlow 1.
//
//   root.graph().set_seed(42);                    // tf.set_random_seed(42)
//   Output w = ops::RandomNormal(root, {784, 256});
//   Output n = ops::TruncatedNormal(root, {256}, DT_FLOAT, {.seed = 7});
//
// Seeds (TensorFlow's get_seed rule, applied when the op is built): with a
// graph seed, the op uses (graph seed, op seed), the op seed defaulting to
// the node's id in the graph; with only an op seed, (87654321, op seed);
// with neither, each session's kernel draws a fresh seed. The same seeds
// give the same numbers in every program run and under every thread count.
// Each Run of the op gives the next numbers of its sequence (the ops are
// stateful, as TensorFlow's), and each session starts its own sequence.
//
// Builders follow array_ops.h: one node through `scope`, errors sticky.
// `shape` is an int32/int64 vector; dtype float32 or float64.
//
// Thread safety: graph building is single-threaded (see graph/graph.h).

#ifndef CKFLOW_OPS_RANDOM_OPS_H_
#define CKFLOW_OPS_RANDOM_OPS_H_

#include <cstdint>
#include <optional>

#include "graph/graph.h"
#include "ops/input.h"

namespace ckflow::ops {

struct RandomAttrs {
  std::optional<int64_t> seed;  // the op-level seed
};

// Uniform in [0, 1).
Output RandomUniform(const Scope& scope, Input shape, DataType dtype = DT_FLOAT,
                     const RandomAttrs& attrs = {});
// Standard normal (op type RandomStandardNormal).
Output RandomNormal(const Scope& scope, Input shape, DataType dtype = DT_FLOAT,
                    const RandomAttrs& attrs = {});
// Standard normal, redrawn until within two standard deviations.
Output TruncatedNormal(const Scope& scope, Input shape, DataType dtype = DT_FLOAT,
                       const RandomAttrs& attrs = {});

}  // namespace ckflow::ops

#endif  // CKFLOW_OPS_RANDOM_OPS_H_
