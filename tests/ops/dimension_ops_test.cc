// Transpose, InvertPermutation, ExpandDims, Squeeze and MatrixBandPart
// against naive
// references (explicit multi-indices) over dtypes and every permutation of
// ranks up to 4; bit-identical under 1, 2 and 4 threads; the buffer shared
// where no element moves; their build- and run-time errors. (Their
// gradients are checked against finite differences in gradients_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ops/array_ops.h"
#include "tests/ops/op_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::Count;
using testing::Evaluate;
using testing::ExpectNear;
using testing::Flatten;
using testing::RandomTensor;
using testing::ToDoubles;
using testing::Unflatten;

using Dims = std::vector<int64_t>;

// out[i_0, ..., i_r] = x[j] with j[perm[d]] = i_d.
std::vector<double> NaiveTranspose(const std::vector<double>& x, const Dims& shape,
                                   const Dims& perm, Dims* out) {
  out->resize(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) (*out)[d] = shape[perm[d]];
  std::vector<double> want(Count(*out));
  for (int64_t i = 0; i < Count(*out); ++i) {
    const Dims index = Unflatten(i, *out);
    Dims from(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) from[perm[d]] = index[d];
    want[i] = x[Flatten(from, shape)];
  }
  return want;
}

const DataType kDtypes[] = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL};

TEST(Transpose, EveryPermutationMatchesNaiveReference) {
  // Shapes with dimensions of 1 (dropped before the copy), neighbours that
  // stay neighbours (merged), an empty one, and rank 0.
  const Dims shapes[] = {{},           {5},          {3, 4},    {2, 3, 4}, {3, 1, 4},
                         {2, 3, 1, 5}, {4, 3, 2, 5}, {1, 1, 6}, {2, 0, 3}};
  std::mt19937 rng(71);
  for (DataType dtype : kDtypes) {
    for (const Dims& shape : shapes) {
      Tensor x = RandomTensor(dtype, TensorShape(shape), rng, -100, 100);
      Dims perm(shape.size());
      std::iota(perm.begin(), perm.end(), 0);
      do {
        SCOPED_TRACE(TensorShape(shape).ToString() + " perm " + TensorShape(perm).ToString() + " " +
                     std::string(DataTypeName(dtype)));
        Dims out;
        std::vector<double> want = NaiveTranspose(ToDoubles(x), shape, perm, &out);
        Scope root = Scope::NewRootScope();
        Output y = ops::Transpose(root, ops::Const(root, x), Tensor::FromVector(perm));
        ASSERT_TRUE(root.ok()) << root.status();
        EXPECT_EQ(y.shape(), PartialShape(out));
        CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
        EXPECT_EQ(got.dtype(), dtype);
        ExpectNear(got, TensorShape(out), want, 0, 0, "Transpose");
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
  }
}

TEST(Transpose, OneAndTwoByteElements) {
  for (DataType dtype : {DT_UINT8, DT_HALF, DT_INT16}) {
    SCOPED_TRACE(DataTypeName(dtype));
    Scope root = Scope::NewRootScope();
    Output x = ops::Cast(root, ops::Const<float>(root, {1, 2, 3, 4, 5, 6}, {2, 3}), dtype);
    Output y = ops::Transpose(root, x, {1, 0});
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
    EXPECT_EQ(got.dtype(), dtype);
    ExpectNear(got, TensorShape({3, 2}), {1, 4, 2, 5, 3, 6}, 0, 0, "Transpose");
  }
}

TEST(Transpose, MovingOnlySizeOneDimensionsSharesTheBuffer) {
  std::mt19937 rng(72);
  Tensor x = RandomTensor(DT_FLOAT, TensorShape({1, 4, 1, 3}), rng);
  Scope root = Scope::NewRootScope();
  Output y = ops::Transpose(root, ops::Const(root, x), {2, 1, 0, 3});
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
  EXPECT_EQ(got.shape(), TensorShape({1, 4, 1, 3}));
  EXPECT_EQ(got.raw_data(), x.raw_data());
}

TEST(Transpose, BitIdenticalUnderOneTwoAndFourThreads) {
  std::mt19937 rng(73);
  // The attention shuffle [batch, time, heads, depth] -> [batch, heads,
  // time, depth] (runs of depth copied whole), and a strided 2-D one.
  const std::pair<Dims, Dims> cases[] = {{{8, 64, 4, 32}, {0, 2, 1, 3}}, {{300, 500}, {1, 0}}};
  for (const auto& [shape, perm] : cases) {
    Scope root = Scope::NewRootScope();
    Output y =
        ops::Transpose(root, ops::Const(root, RandomTensor(DT_FLOAT, TensorShape(shape), rng)),
                       Tensor::FromVector(perm));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, testing::EvaluateWithThreads(y, 1));
    for (int threads : {2, 4}) {
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor many, testing::EvaluateWithThreads(y, threads));
      testing::ExpectIdentical(one, many, "Transpose on " + std::to_string(threads) + " threads");
    }
  }
}

TEST(Transpose, InfersWhatItCanFromUnknownShapes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 3, 5}});
  EXPECT_EQ(ops::Transpose(root, x, {2, 0, 1}).shape().ToString(), "[5,?,3]");
  Output perm = ops::Placeholder(root, DT_INT32, {.shape = {3}});
  EXPECT_EQ(ops::Transpose(root, x, perm).shape().ToString(), "[?,?,?]");
  EXPECT_EQ(ops::Transpose(root, ops::Placeholder(root, DT_FLOAT), perm).shape().ToString(),
            "[?,?,?]");
  EXPECT_EQ(ops::Transpose(root, ops::Placeholder(root, DT_FLOAT), {1, 0}).shape().ToString(),
            "[?,?]");
  ASSERT_TRUE(root.ok()) << root.status();
}

TEST(Transpose, BuildErrorsNameTheNodeAndPerm) {
  struct Case {
    Dims perm;
    std::string message;
  };
  const Case cases[] = {
      {{0, 0, 1}, "t (Transpose): x is [2,3,4] (x:0): perm [0,0,1] is not a permutation of 0..2"},
      {{0, 1},
       "t (Transpose): x is [2,3,4] (x:0): perm [0,1] must have one element per dimension of "
       "x, which has rank 3"},
      {{0, 3, 1}, "t (Transpose): x is [2,3,4] (x:0): perm [0,3,1] is not a permutation of 0..2"},
  };
  for (const Case& c : cases) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {2, 3, 4}});
    Output y = ops::Transpose(root.WithOpName("t"), x, Tensor::FromVector(c.perm));
    EXPECT_FALSE(y.valid());
    EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(root.status().message(), c.message);
  }
}

TEST(Transpose, RunTimeErrorsNameTheNodeAndPerm) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output perm = ops::Placeholder(root.WithOpName("perm"), DT_INT64);
  Output y = ops::Transpose(root.WithOpName("t"), x, perm);
  ASSERT_TRUE(root.ok()) << root.status();
  Tensor value = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
  Status s = Evaluate(y, {{x, value}, {perm, Tensor::FromVector<int64_t>({1, 1})}}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "t (Transpose): x is [2,3]: perm [1,1] is not a permutation of 0..1");
  s = Evaluate(y, {{x, value}, {perm, Tensor::FromVector<int64_t>({1, 0, 2})}}).status();
  EXPECT_EQ(s.message(),
            "t (Transpose): x is [2,3]: perm [1,0,2] must have one element per dimension of x, "
            "which has rank 2");
}

TEST(InvertPermutation, GivesTheInverse) {
  Scope root = Scope::NewRootScope();
  Output p = ops::Placeholder(root.WithOpName("p"), DT_INT32);
  Output y = ops::InvertPermutation(root.WithOpName("inv"), p);
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got,
                              Evaluate(y, {{p, Tensor::FromVector<int32_t>({2, 0, 3, 1})}}));
  EXPECT_EQ(got.dtype(), DT_INT32);
  ExpectNear(got, TensorShape({4}), {1, 3, 0, 2}, 0, 0, "InvertPermutation");
  Status s = Evaluate(y, {{p, Tensor::FromVector<int32_t>({0, 5})}}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "inv (InvertPermutation): perm [0,5] is not a permutation of 0..1");
}

TEST(ExpandDims, InsertsADimensionOfOneAndSharesTheBuffer) {
  std::mt19937 rng(74);
  Tensor x = RandomTensor(DT_FLOAT, TensorShape({2, 3}), rng);
  const std::pair<int64_t, Dims> cases[] = {{0, {1, 2, 3}},  {1, {2, 1, 3}},  {2, {2, 3, 1}},
                                            {-1, {2, 3, 1}}, {-2, {2, 1, 3}}, {-3, {1, 2, 3}}};
  for (const auto& [axis, want] : cases) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Scope root = Scope::NewRootScope();
    Output y = ops::ExpandDims(root, ops::Const(root, x), axis);
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(y.shape(), PartialShape(want));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
    EXPECT_EQ(got.shape(), TensorShape(want));
    EXPECT_EQ(got.raw_data(), x.raw_data());
  }
}

TEST(ExpandDims, AxisOutOfRangeFailsAtBuildAndRunTime) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {2, 3}});
  EXPECT_FALSE(ops::ExpandDims(root.WithOpName("e"), x, 3).valid());
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "e (ExpandDims): input is [2,3] (x:0): axis 3 is out of range [-3, 2] for an input "
            "of rank 2");

  Scope run = Scope::NewRootScope();
  Output u = ops::Placeholder(run.WithOpName("u"), DT_FLOAT);
  Output axis = ops::Placeholder(run.WithOpName("axis"), DT_INT32);
  Output y = ops::ExpandDims(run.WithOpName("e"), u, axis);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(y.shape().ToString(), "<unknown>");
  Status s =
      Evaluate(y, {{u, Tensor::FromVector<float>({1, 2})}, {axis, Tensor::Scalar<int32_t>(-3)}})
          .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "e (ExpandDims): input is [2]: axis -3 is out of range [-2, 1] for an input of rank 1");
}

TEST(Squeeze, RemovesListedOrAllDimensionsOfOne) {
  std::mt19937 rng(75);
  Tensor x = RandomTensor(DT_INT32, TensorShape({1, 2, 1, 3, 1}), rng);
  const std::pair<Dims, Dims> cases[] = {
      {{}, {2, 3}}, {{0}, {2, 1, 3, 1}}, {{2, -1}, {1, 2, 3}}, {{0, 2, 4}, {2, 3}}};
  for (const auto& [axes, want] : cases) {
    SCOPED_TRACE("axes " + PartialShape(axes).ToString());
    Scope root = Scope::NewRootScope();
    Output y = ops::Squeeze(root, ops::Const(root, x), axes);
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(y.shape(), PartialShape(want));
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
    EXPECT_EQ(got.shape(), TensorShape(want));
    EXPECT_EQ(got.raw_data(), x.raw_data());
  }
}

TEST(Squeeze, UnknownDimensionsLeaveWhatIsNotKnownUnknown) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, {.shape = {-1, 1, 4}});
  EXPECT_EQ(ops::Squeeze(root, x, {1}).shape().ToString(), "[?,4]");
  // Which dimensions go depends on the unknown one.
  EXPECT_EQ(ops::Squeeze(root, x).shape().ToString(), "<unknown>");
  ASSERT_TRUE(root.ok()) << root.status();
}

TEST(Squeeze, ADimensionNotOfOneFailsAtBuildAndRunTime) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {.shape = {2, 1, 3}});
  EXPECT_FALSE(ops::Squeeze(root.WithOpName("sq"), x, {2}).valid());
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(),
            "sq (Squeeze): input is [2,1,3] (x:0): cannot squeeze dimension 2 of size 3: it must "
            "have size 1");

  Scope run = Scope::NewRootScope();
  Output u = ops::Placeholder(run.WithOpName("u"), DT_FLOAT);
  Output y = ops::Squeeze(run.WithOpName("sq"), u, {3});
  ASSERT_TRUE(run.ok()) << run.status();
  Status s =
      Evaluate(y, {{u, Tensor::FromVector<float>({1, 2, 3}, TensorShape({1, 3, 1}))}}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "sq (Squeeze): input is [1,3,1]: squeeze_dims 3 is out of range for rank 3 (must be "
            "in [-3, 3))");
}

TEST(MatrixBandPart, KeepsTheBandOfEveryMatrixAndZeroesTheRest) {
  std::mt19937 rng(17);
  for (DataType dtype : kDtypes) {
    for (const Dims& shape : {Dims{4, 4}, Dims{2, 3, 5}, Dims{2, 6, 3}, Dims{0, 3, 3}}) {
      for (auto [lower, upper] : {std::pair{-1, 0}, std::pair{1, 2}, std::pair{0, -1},
                                  std::pair{-1, -1}, std::pair{0, 0}}) {
        Scope root = Scope::NewRootScope();
        Tensor x = RandomTensor(dtype, TensorShape(shape), rng);
        Output y = ops::MatrixBandPart(root, ops::Const(root, x), ops::Const<int64_t>(root, lower),
                                       ops::Const<int64_t>(root, upper));
        CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
        const std::vector<double> in = ToDoubles(x);
        std::vector<double> want(in.size());
        const int64_t rows = shape[shape.size() - 2], cols = shape.back();
        for (int64_t i = 0; i < static_cast<int64_t>(in.size()); ++i) {
          const int64_t r = i / cols % rows, c = i % cols;
          const bool keep = (lower < 0 || r - c <= lower) && (upper < 0 || c - r <= upper);
          want[i] = keep ? in[i] : 0;
        }
        ExpectNear(got, x.shape(), want, 0, 0,
                   "band " + std::to_string(lower) + "," + std::to_string(upper));
      }
    }
  }
}

TEST(MatrixBandPart, RejectsVectorsAndBandsWiderThanTheMatrix) {
  Scope root = Scope::NewRootScope();
  ops::MatrixBandPart(root.WithOpName("band"), ops::Const<float>(root, {1, 2}),
                      ops::Const<int64_t>(root, 0), ops::Const<int64_t>(root, 0));
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(root.status().message().find("band (MatrixBandPart): input is [2]"), std::string::npos)
      << root.status();
  Scope other = Scope::NewRootScope();
  Output y =
      ops::MatrixBandPart(other.WithOpName("band"), ops::Const<float>(other, {1, 2, 3, 4}, {2, 2}),
                          ops::Const<int64_t>(other, 3), ops::Const<int64_t>(other, 0));
  StatusOr<Tensor> bad = Evaluate(y);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("num_lower is 3, more than the 2 rows"), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace ckflow
