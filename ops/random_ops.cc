// Random ops on Philox4x32-10: RandomUniform, RandomStandardNormal,
// TruncatedNormal.
//
// Element i of run r of a kernel seeded (seed, seed2) is computed from
// block i / kValuesPerBlock of PhiloxStream(seed, seed2, r), or for
// TruncatedNormal from blocks i * kTruncatedBlocks + 0, 1, ..., so neither
// the thread count nor the split of the work changes any value.

#include "ops/random_ops.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <utility>

#include "base/parallel.h"
#include "ops/ops_internal.h"
#include "ops/philox_internal.h"
#include "ops/standard_ops.h"

namespace ckflow {
namespace internal {
namespace {

// TensorFlow's DEFAULT_GRAPH_SEED, for ops with an op seed only.
constexpr int64_t kDefaultGraphSeed = 87654321;
// Blocks each TruncatedNormal element may draw from: at least 32 candidates,
// all beyond two standard deviations with probability 0.0455^32 < 1e-42
// (the element is then 0).
constexpr uint64_t kTruncatedBlocks = 16;
// Cycles per value, roughly: Philox plus log/sin/cos for normals.
constexpr int64_t kRandomCost = 60;

enum class Distribution { kUniform, kNormal, kTruncatedNormal };

struct RandomState {
  uint64_t seed;
  uint64_t seed2;
  std::atomic<uint64_t> runs{0};
};

template <typename T, Distribution kDist>
void Generate(const PhiloxStream& stream, T* out, int64_t n) {
  constexpr int kPer = kValuesPerBlock<T>;
  if constexpr (kDist == Distribution::kTruncatedNormal) {
    ParallelRange(n, kRandomCost, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        T value = T(0);
        bool found = false;
        for (uint64_t a = 0; a < kTruncatedBlocks && !found; ++a) {
          for (T z :
               NormalValues<T>(stream.Block(static_cast<uint64_t>(i) * kTruncatedBlocks + a))) {
            if (std::abs(z) < T(2)) {
              value = z;
              found = true;
              break;
            }
          }
        }
        out[i] = value;
      }
    });
  } else {
    const int64_t blocks = (n + kPer - 1) / kPer;
    auto put = [&](int64_t block, const PhiloxBlock& bits) {
      auto values =
          kDist == Distribution::kUniform ? UniformValues<T>(bits) : NormalValues<T>(bits);
      for (int j = 0; j < kPer && block * kPer + j < n; ++j) out[block * kPer + j] = values[j];
    };
    constexpr int kLanes = PhiloxStream::kLanes;
    ParallelRange(blocks, kPer * kRandomCost, [&](int64_t b, int64_t e) {
      int64_t block = b;
      for (; block + kLanes <= e; block += kLanes) {
        uint32_t words[4][kLanes];
        stream.Blocks(static_cast<uint64_t>(block), words);
        for (int i = 0; i < kLanes; ++i) {
          put(block + i, {words[0][i], words[1][i], words[2][i], words[3][i]});
        }
      }
      for (; block < e; ++block) put(block, stream.Block(static_cast<uint64_t>(block)));
    });
  }
}

// Seeds for an op that has none: fresh per kernel, as TensorFlow's.
uint64_t FreshSeed() {
  try {
    std::random_device device;
    return (uint64_t{device()} << 32) | device();
  } catch (...) {  // no entropy source: the clock will do
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) *
           0x9E3779B97F4A7C15ull;
  }
}

Status RandomShapeFn(InferenceContext& c) {
  CKFLOW_RETURN_IF_ERROR(CheckDtype(c, 0, "shape", kIndexTypes));
  CKFLOW_RETURN_IF_ERROR(CheckRank(c, 0, "shape", 1, 1));
  CKFLOW_ASSIGN_OR_RETURN(DataType dtype, c.attrs->Get<DataType>("dtype"));
  if (dtype != DT_FLOAT && dtype != DT_DOUBLE) {
    return InvalidArgumentError("dtype must be float32 or float64, got ", DataTypeName(dtype));
  }
  CKFLOW_ASSIGN_OR_RETURN(PartialShape shape, ShapeFromShapeInput(c, 0, "shape"));
  c.AddOutput(dtype, std::move(shape));
  return OkStatus();
}

template <Distribution kDist>
StatusOr<Kernel> RandomKernel(const Node& node) {
  auto state = std::make_shared<RandomState>();
  state->seed = static_cast<uint64_t>(node.attrs().GetOr<int64_t>("seed", 0));
  state->seed2 = static_cast<uint64_t>(node.attrs().GetOr<int64_t>("seed2", 0));
  if (state->seed == 0 && state->seed2 == 0) {
    state->seed = FreshSeed();
    state->seed2 = FreshSeed();
  }
  return DispatchFloat(node.output_type(0), [state](auto tag) -> StatusOr<Kernel> {
    using T = typename decltype(tag)::type;
    return Kernel([state](KernelContext& ctx) -> Status {
      CKFLOW_ASSIGN_OR_RETURN(TensorShape shape, ShapeFromTensor(ctx.input(0), "shape"));
      CKFLOW_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DataTypeOf<T>(), shape));
      const uint64_t run = state->runs.fetch_add(1, std::memory_order_relaxed);
      Generate<T, kDist>(PhiloxStream(state->seed, state->seed2, run), out->flat<T>().data(),
                         out->NumElements());
      return OkStatus();
    });
  });
}

}  // namespace
}  // namespace internal

Status RegisterRandomOps(OpRegistry& r) {
  using internal::Distribution;
  const std::pair<const char*, KernelFactory> ops[] = {
      {"RandomUniform", internal::RandomKernel<Distribution::kUniform>},
      {"RandomStandardNormal", internal::RandomKernel<Distribution::kNormal>},
      {"TruncatedNormal", internal::RandomKernel<Distribution::kTruncatedNormal>},
  };
  for (const auto& [type, factory] : ops) {
    CKFLOW_RETURN_IF_ERROR(internal::RegisterOp(r, {.type = type,
                                                    .inputs = {"shape"},
                                                    .stateful = true,
                                                    .shape_fn = internal::RandomShapeFn,
                                                    .kernel_factory = factory}));
  }
  return OkStatus();
}

// ---------------------------------------------------------------- builders

namespace ops {
namespace {

Output RandomOp(const Scope& scope, const char* type, Input shape, DataType dtype,
                const RandomAttrs& attrs) {
  if (!scope.ok()) return Output();
  Output shape_out = shape.ToOutput(scope);
  // TensorFlow's get_seed. The op's node takes the next id, so the default
  // op seed is the node's own id.
  const std::optional<int64_t> graph_seed = scope.graph().seed();
  int64_t seed = 0, seed2 = 0;
  if (graph_seed) {
    seed = *graph_seed;
    seed2 = attrs.seed ? *attrs.seed : scope.graph().num_nodes();
  } else if (attrs.seed) {
    seed = internal::kDefaultGraphSeed;
    seed2 = *attrs.seed;
  }
  if ((graph_seed || attrs.seed) && seed == 0 && seed2 == 0) {
    seed2 = std::numeric_limits<int32_t>::max();  // (0, 0) would mean "unseeded"
  }
  AttrMap a;
  a.Set("dtype", dtype);
  a.Set("seed", seed);
  a.Set("seed2", seed2);
  return internal::BuildOp(scope, type, {shape_out}, std::move(a));
}

}  // namespace

Output RandomUniform(const Scope& scope, Input shape, DataType dtype, const RandomAttrs& attrs) {
  return RandomOp(scope, "RandomUniform", shape, dtype, attrs);
}

Output RandomNormal(const Scope& scope, Input shape, DataType dtype, const RandomAttrs& attrs) {
  return RandomOp(scope, "RandomStandardNormal", shape, dtype, attrs);
}

Output TruncatedNormal(const Scope& scope, Input shape, DataType dtype, const RandomAttrs& attrs) {
  return RandomOp(scope, "TruncatedNormal", shape, dtype, attrs);
}

}  // namespace ops
}  // namespace ckflow
