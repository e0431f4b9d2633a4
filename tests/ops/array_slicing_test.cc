// Slice, Pad, PadV2, ConcatV2 and ConcatOffset against naive references
// (explicit multi-indices), over dtypes; bit-identical under 1, 2 and 4
// threads; their build- and run-time errors. (Their gradients are checked
// against finite differences in gradients_test.cc.)
#include <gtest/gtest.h>

#include <functional>
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

const DataType kDtypes[] = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL};

TEST(Slice, MatchesNaiveReference) {
  struct Case {
    Dims shape, begin, size;
  };
  const Case cases[] = {
      {{5}, {1}, {3}},
      {{4, 6}, {1, 2}, {2, -1}},
      {{3, 4, 5}, {0, 1, 0}, {3, 2, 5}},   // the inner dimensions whole
      {{3, 4, 5}, {2, 0, 4}, {1, -1, 1}},  // one column
      {{2, 3, 4, 5}, {1, 1, 1, 1}, {1, 2, 3, 4}},
      {{3, 4}, {3, 0}, {0, 4}},          // empty
      {{300, 200}, {7, 3}, {250, 190}},  // parallel
      {{}, {}, {}},                      // a scalar
  };
  std::mt19937 rng(61);
  for (DataType dtype : kDtypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(TensorShape(c.shape).ToString() + " " + std::string(DataTypeName(dtype)));
      Tensor x = RandomTensor(dtype, TensorShape(c.shape), rng, -100, 100);
      Dims out(c.shape.size());
      for (size_t d = 0; d < out.size(); ++d) {
        out[d] = c.size[d] == -1 ? c.shape[d] - c.begin[d] : c.size[d];
      }
      std::vector<double> xv = ToDoubles(x), want(Count(out));
      for (int64_t i = 0; i < Count(out); ++i) {
        Dims index = Unflatten(i, out);
        for (size_t d = 0; d < index.size(); ++d) index[d] += c.begin[d];
        want[i] = xv[Flatten(index, c.shape)];
      }
      Scope root = Scope::NewRootScope();
      Output y = ops::Slice(root, ops::Const(root, x), Tensor::FromVector(c.begin),
                            Tensor::FromVector(c.size));
      ASSERT_TRUE(root.ok()) << root.status();
      EXPECT_EQ(y.shape(), PartialShape(out));
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
      ExpectNear(got, TensorShape(out), want, 0, 0, "Slice");
    }
  }
}

// Pad's reference: every output element is the input's or the constant.
std::vector<double> NaivePad(const std::vector<double>& x, const Dims& shape,
                             const std::vector<int64_t>& paddings, double constant, Dims* out) {
  out->resize(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    (*out)[d] = shape[d] + paddings[2 * d] + paddings[2 * d + 1];
  }
  std::vector<double> want(Count(*out));
  for (int64_t i = 0; i < Count(*out); ++i) {
    Dims index = Unflatten(i, *out);
    bool inside = true;
    for (size_t d = 0; d < index.size(); ++d) {
      index[d] -= paddings[2 * d];
      inside = inside && index[d] >= 0 && index[d] < shape[d];
    }
    want[i] = inside ? x[Flatten(index, shape)] : constant;
  }
  return want;
}

TEST(Pad, MatchesNaiveReference) {
  struct Case {
    Dims shape;
    std::vector<int64_t> paddings;  // row-major [rank, 2]
  };
  const Case cases[] = {
      {{3}, {1, 2}},
      {{2, 3}, {0, 0, 1, 1}},
      {{2, 4, 4, 3}, {0, 0, 1, 1, 2, 0, 0, 0}},  // spatial padding of NHWC
      {{2, 3, 4}, {1, 0, 0, 2, 3, 1}},
      {{0, 3}, {1, 1, 0, 0}},                       // empty input, non-empty output
      {{64, 30, 30, 8}, {0, 0, 2, 2, 2, 2, 0, 0}},  // parallel
      {{}, {}},
  };
  std::mt19937 rng(62);
  for (DataType dtype : kDtypes) {
    for (const Case& c : cases) {
      for (bool v2 : {false, true}) {
        SCOPED_TRACE(TensorShape(c.shape).ToString() + (v2 ? " PadV2 " : " Pad ") +
                     std::string(DataTypeName(dtype)));
        Tensor x = RandomTensor(dtype, TensorShape(c.shape), rng, -100, 100);
        const double constant = v2 ? 1 : 0;
        Dims out;
        std::vector<double> want = NaivePad(ToDoubles(x), c.shape, c.paddings, constant, &out);
        Scope root = Scope::NewRootScope();
        Tensor paddings =
            Tensor::FromVector(c.paddings, TensorShape({static_cast<int64_t>(c.shape.size()), 2}));
        Output in = ops::Const(root, x);
        Output y = v2 ? ops::PadV2(root, in, paddings,
                                   ops::Const(root, testing::MakeTensor(dtype, {}, {constant})))
                      : ops::Pad(root, in, paddings);
        ASSERT_TRUE(root.ok()) << root.status();
        EXPECT_EQ(y.shape(), PartialShape(out));
        CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
        ExpectNear(got, TensorShape(out), want, 0, 0, "Pad");
      }
    }
  }
}

TEST(Concat, MatchesNaiveReference) {
  struct Case {
    std::vector<Dims> shapes;
    int64_t axis;
  };
  const Case cases[] = {
      {{{2}, {3}}, 0},
      {{{2, 3}, {4, 3}}, 0},
      {{{2, 3}, {2, 1}, {2, 4}}, 1},
      {{{2, 3}, {2, 1}, {2, 4}}, -1},
      {{{2, 3, 4}, {2, 0, 4}, {2, 2, 4}}, -2},  // an empty piece
      {{{2, 2, 2, 3}, {2, 2, 2, 5}}, 3},        // channels
      {{{200, 50}, {200, 70}}, 1},              // parallel
  };
  std::mt19937 rng(63);
  for (DataType dtype : kDtypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE("axis " + std::to_string(c.axis) + " " + std::string(DataTypeName(dtype)));
      const int rank = static_cast<int>(c.shapes[0].size());
      const int axis = static_cast<int>(c.axis < 0 ? c.axis + rank : c.axis);
      Scope root = Scope::NewRootScope();
      std::vector<Output> values;
      std::vector<std::vector<double>> xs;
      Dims out = c.shapes[0];
      out[axis] = 0;
      for (const Dims& shape : c.shapes) {
        Tensor x = RandomTensor(dtype, TensorShape(shape), rng, -100, 100);
        xs.push_back(ToDoubles(x));
        values.push_back(ops::Const(root, x));
        out[axis] += shape[axis];
      }
      std::vector<double> want(Count(out));
      for (int64_t i = 0; i < Count(out); ++i) {
        Dims index = Unflatten(i, out);
        size_t k = 0;
        while (index[axis] >= c.shapes[k][axis]) index[axis] -= c.shapes[k++][axis];
        want[i] = xs[k][Flatten(index, c.shapes[k])];
      }
      Output y = ops::Concat(root, values, ops::Const(root, c.axis));
      ASSERT_TRUE(root.ok()) << root.status();
      EXPECT_EQ(y.shape(), PartialShape(out));
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
      ExpectNear(got, TensorShape(out), want, 0, 0, "Concat");
    }
  }
}

TEST(Concat, OneValueIsItsIdentity) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const<float>(root, {1, 2, 3});
  Output y = ops::Concat(root, {x}, 0);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.node()->type(), "Identity");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
  EXPECT_EQ(ToDoubles(got), (std::vector<double>{1, 2, 3}));
}

TEST(ConcatOffset, GivesWhereEachValueStarts) {
  for (DataType dtype : {DT_INT32, DT_INT64}) {
    Scope root = Scope::NewRootScope();
    auto shape = [&](std::vector<double> dims) {
      return ops::Const(root, testing::MakeTensor(dtype, {3}, dims));
    };
    std::vector<Output> offsets =
        ops::ConcatOffset(root, -2, {shape({2, 3, 5}), shape({2, 4, 5}), shape({2, 1, 5})});
    ASSERT_TRUE(root.ok()) << root.status();
    testing::Evaluator eval(root.graph());
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> got, eval.Run({}, offsets));
    EXPECT_EQ(got[0].dtype(), dtype);
    EXPECT_EQ(ToDoubles(got[0]), (std::vector<double>{0, 0, 0}));
    EXPECT_EQ(ToDoubles(got[1]), (std::vector<double>{0, 3, 0}));
    EXPECT_EQ(ToDoubles(got[2]), (std::vector<double>{0, 7, 0}));
  }
}

TEST(SlicingAndJoining, BitIdenticalUnderOneTwoAndFourThreads) {
  std::mt19937 rng(64);
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, RandomTensor(DT_FLOAT, {32, 28, 28, 16}, rng));
  const Output outputs[] = {
      ops::Pad(root, x, ops::Const<int32_t>(root, {0, 0, 1, 1, 1, 1, 0, 0}, {4, 2})),
      ops::Slice(root, x, {0, 1, 2, 0}, {-1, 26, 20, 8}),
      ops::Concat(root, {x, x, x}, 3),
  };
  ASSERT_TRUE(root.ok()) << root.status();
  for (const Output& y : outputs) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor one, testing::EvaluateWithThreads(y, 1));
    for (int threads : {2, 4}) {
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor many, testing::EvaluateWithThreads(y, threads));
      testing::ExpectIdentical(many, one, y.name());
    }
  }
}

// ----------------------------------------------------------------- errors

struct ErrorCase {
  std::string name;
  std::function<Output(const Scope&)> build;  // builds the op named "op"
  std::string message;
};

TEST(SlicingAndJoining, BuildErrorsNameTheInputAndDimension) {
  auto x = [](const Scope& s, PartialShape shape) {
    return ops::Placeholder(s.WithOpName("x"), DT_FLOAT, {.shape = shape});
  };
  const ErrorCase cases[] = {
      {"SliceBeginLength",
       [&](const Scope& s) {
         return ops::Slice(s.WithOpName("op"), x(s, {2, 3}), {0}, {1, 1});
       },
       "op (Slice): begin is [1] (Const:0), but must have one element per dimension of "
       "input, [2,3] (x:0)"},
      {"SliceOutOfRange",
       [&](const Scope& s) {
         return ops::Slice(s.WithOpName("op"), x(s, {2, 3}), {1, 2}, {1, 2});
       },
       "op (Slice): input (x:0): begin[1] = 2 and size[1] = 2 do not fit dimension 1 of the "
       "input, [2,3]: need 0 <= begin <= 3 and 0 <= begin + size <= 3 (size -1: to the end)"},
      {"SliceNegativeBegin",
       [&](const Scope& s) {
         return ops::Slice(s.WithOpName("op"), x(s, {2, 3}), {-1, 0}, {1, 1});
       },
       "op (Slice): input (x:0): begin[0] = -1 and size[0] = 1 do not fit dimension 0 of the "
       "input, [2,3]: need 0 <= begin <= 2 and 0 <= begin + size <= 2 (size -1: to the end)"},
      {"SliceSizeBelowMinusOne",
       [&](const Scope& s) {
         return ops::Slice(s.WithOpName("op"), x(s, {2, -1}), {0, 0}, {1, -2});
       },
       "op (Slice): size[1] = -2 (Const_1:0) is negative (only -1, to the end, is allowed)"},
      {"SliceMixedIndexTypes",
       [&](const Scope& s) {
         return ops::Slice(s.WithOpName("op"), x(s, {2, 3}), {0, 0},
                           ops::Const<int64_t>(s, {1, 1}));
       },
       "op (Slice): dtype mismatch: begin is int32 (Const_1:0), size is int64 (Const:0)"},
      {"PadShape",
       [&](const Scope& s) {
         return ops::Pad(s.WithOpName("op"), x(s, {2, 3}),
                         ops::Const<int32_t>(s, {1, 1, 1}, {3, 1}));
       },
       "op (Pad): paddings is [3,1] (Const:0), but must be [rank, 2] for input [2,3] (x:0)"},
      {"PadRows",
       [&](const Scope& s) {
         return ops::Pad(s.WithOpName("op"), x(s, {2, 3}), ops::Const<int32_t>(s, {1, 1}, {1, 2}));
       },
       "op (Pad): paddings is [1,2] (Const:0), but must be [rank, 2] for input [2,3] (x:0)"},
      {"PadNegative",
       [&](const Scope& s) {
         return ops::Pad(s.WithOpName("op"), x(s, {2, 3}),
                         ops::Const<int32_t>(s, {0, 0, 1, -1}, {2, 2}));
       },
       "op (Pad): paddings (Const:0) row 1 is [1,-1], but paddings must not be negative"},
      {"PadV2ConstantDtype",
       [&](const Scope& s) {
         return ops::PadV2(s.WithOpName("op"), x(s, {2, 3}),
                           ops::Const<int32_t>(s, {0, 0, 1, 1}, {2, 2}), 1.0);
       },
       "op (PadV2): dtype mismatch: input is float32 (x:0), constant_values is float64 "
       "(Const_1:0)"},
      {"ConcatRanks",
       [&](const Scope& s) {
         return ops::Concat(s.WithOpName("op"), {x(s, {2, 3}), ops::Const<float>(s, {1, 2})}, 0);
       },
       "op (ConcatV2): ranks differ: values[0] is [2,3] (x:0), values[1] is [2] (Const:0)"},
      {"ConcatOffAxis",
       [&](const Scope& s) {
         return ops::Concat(
             s.WithOpName("op"),
             {x(s, {2, 3}), ops::Placeholder(s.WithOpName("y"), DT_FLOAT, {.shape = {3, 4}})}, 1);
       },
       "op (ConcatV2): values[1] is [3,4] (y:0), but values[0] is [2,3] (x:0): dimension 0 "
       "differs off the concatenation axis 1"},
      {"ConcatAxisOutOfRange",
       [&](const Scope& s) {
         Output y = ops::Placeholder(s.WithOpName("y"), DT_FLOAT, {.shape = {2, 3}});
         return ops::Concat(s.WithOpName("op"), {x(s, {2, 3}), y}, 2);
       },
       "op (ConcatV2): axis (Const:0) 2 is out of range for rank 2 (must be in [-2, 2))"},
      {"ConcatScalars",
       [&](const Scope& s) {
         return ops::Concat(s.WithOpName("op"), {ops::Const(s, 1.0f), ops::Const(s, 2.0f)}, 0);
       },
       "op (ConcatV2): cannot concatenate scalars: values[0] is [] (Const:0)"},
      {"ConcatDtypes",
       [&](const Scope& s) {
         return ops::Concat(s.WithOpName("op"), {x(s, {2}), ops::Const<int32_t>(s, {1})}, 0);
       },
       "op (ConcatV2): dtype mismatch: values[0] is float32 (x:0), values[1] is int32 "
       "(Const:0)"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    Scope root = Scope::NewRootScope();
    Output y = c.build(root);
    EXPECT_FALSE(y.valid());
    EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(root.status().message(), c.message);
  }
}

struct RunErrorCase {
  std::string name;
  std::function<Output(const Scope&, Output)> build;  // on a placeholder of unknown shape
  TensorShape fed;
  std::string message;
};

TEST(SlicingAndJoining, RunTimeErrorsNameTheInputAndDimension) {
  const RunErrorCase cases[] = {
      {"Slice",
       [](const Scope& s, Output x) {
         return ops::Slice(s, x, {0, 1}, {2, -1});
       },
       {1, 3},
       "op (Slice): begin[0] = 0 and size[0] = 2 do not fit dimension 0 of the input, [1,3]: "
       "need 0 <= begin <= 1 and 0 <= begin + size <= 1 (size -1: to the end)"},
      {"SliceRank",
       [](const Scope& s, Output x) {
         return ops::Slice(s, x, {0, 1}, {1, 1});
       },
       {4},
       "op (Slice): begin [0,1] and size [1,1] must have one element per dimension of the "
       "input, [4]"},
      {"Pad",
       [&](const Scope& s, Output x) {
         return ops::Pad(s, x, Tensor::FromVector<int32_t>({0, 0, 1, 1}, TensorShape({2, 2})));
       },
       {2, 3, 4},
       "op (Pad): paddings is [2,2], but must be [rank, 2] for input [2,3,4]"},
      {"Concat",
       [](const Scope& s, Output x) {
         return ops::Concat(s, {x, ops::Const<float>(s.NewSubScope(""), {1, 2}, {1, 2})}, 0);
       },
       {1, 3},
       "op (ConcatV2): values[1] is [1,2], but values[0] is [1,3]: shapes must be equal but for "
       "axis 0"},
      {"ConcatAxis",
       [](const Scope& s, Output x) {
         return ops::Concat(s, {x, x}, -3);
       },
       {1, 3},
       "op (ConcatV2): axis -3 is out of range for rank 2 (must be in [-2, 2))"},
  };
  for (const RunErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_FLOAT);
    Output y = c.build(root.WithOpName("op"), x);
    ASSERT_TRUE(root.ok()) << root.status();
    Status s = Evaluate(y, {{x, Tensor(DT_FLOAT, c.fed)}}).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), c.message);
  }
}

TEST(Pad, NegativeFedPaddingsFailAtRunTime) {
  Scope root = Scope::NewRootScope();
  Output p = ops::Placeholder(root, DT_INT64);
  Output y = ops::Pad(root.WithOpName("op"), ops::Const<float>(root, {1, 2}), p);
  ASSERT_TRUE(root.ok()) << root.status();
  Status s = Evaluate(y, {{p, Tensor::FromVector<int64_t>({0, -3}, TensorShape({1, 2}))}}).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "op (Pad): paddings row 0 is [0,-3], but paddings must not be negative");
}

// ------------------------------------------------ Split, SplitV, Tile, OneHot

TEST(Split, CutsEqualAndGivenPiecesAlongAnyAxis) {
  std::mt19937 rng(31);
  for (DataType dtype : {DT_FLOAT, DT_INT64, DT_BOOL}) {
    Scope root = Scope::NewRootScope();
    Tensor x = RandomTensor(dtype, TensorShape({3, 4, 6}), rng);
    std::vector<Output> equal = ops::Split(root, -1, ops::Const(root, x), 3);
    std::vector<Output> sized =
        ops::SplitV(root, ops::Const(root, x), ops::Const<int32_t>(root, {1, -1, 0}), 1, 3);
    ASSERT_TRUE(root.ok()) << root.status();
    ASSERT_EQ(equal.size(), 3u);
    EXPECT_EQ(equal[1].shape().ToString(), "[3,4,2]");
    EXPECT_EQ(sized[1].shape().ToString(), "[3,3,6]");
    EXPECT_EQ(sized[2].shape().ToString(), "[3,0,6]");
    const std::vector<double> in = ToDoubles(x);
    for (int piece = 0; piece < 3; ++piece) {
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(equal[piece]));
      std::vector<double> want;
      for (int64_t i = 0; i < 3 * 4; ++i) {
        for (int64_t j = 0; j < 2; ++j) want.push_back(in[i * 6 + piece * 2 + j]);
      }
      ExpectNear(got, TensorShape({3, 4, 2}), want, 0, 0, "equal piece");
    }
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor middle, Evaluate(sized[1]));
    std::vector<double> want;
    for (int64_t a = 0; a < 3; ++a) {
      for (int64_t b = 1; b < 4; ++b) {
        for (int64_t c = 0; c < 6; ++c) want.push_back(in[(a * 4 + b) * 6 + c]);
      }
    }
    ExpectNear(middle, TensorShape({3, 3, 6}), want, 0, 0, "sized piece");
  }
}

TEST(Split, RejectsAnAxisThatDoesNotDivideAndSizesThatDoNotAddUp) {
  Scope root = Scope::NewRootScope();
  ops::Split(root.WithOpName("split"), 1, ops::Const<float>(root, {1, 2, 3, 4, 5, 6}, {2, 3}), 2);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(root.status().message().find("does not split into 2 equal pieces"), std::string::npos)
      << root.status();
  Scope other = Scope::NewRootScope();
  Output sizes = ops::Placeholder(other, DT_INT32);
  std::vector<Output> pieces =
      ops::SplitV(other.WithOpName("split"), ops::Const<float>(other, {1, 2, 3, 4}), sizes, 0, 2);
  StatusOr<Tensor> bad = Evaluate(pieces[0], {{sizes, Tensor::FromVector<int32_t>({1, 2})}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("size_splits [1,2] add up to 3, but the axis has 4"),
            std::string::npos)
      << bad.status();
}

TEST(Tile, RepeatsAlongEachDimension) {
  std::mt19937 rng(32);
  for (DataType dtype : {DT_DOUBLE, DT_INT32}) {
    Scope root = Scope::NewRootScope();
    Tensor x = RandomTensor(dtype, TensorShape({2, 1, 3}), rng);
    Output y = ops::Tile(root, ops::Const(root, x), ops::Const<int64_t>(root, {2, 4, 1}));
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(y.shape().ToString(), "[4,4,3]");
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(y));
    const std::vector<double> in = ToDoubles(x);
    std::vector<double> want;
    for (int64_t a = 0; a < 4; ++a) {
      for (int64_t b = 0; b < 4; ++b) {
        for (int64_t c = 0; c < 3; ++c) want.push_back(in[(a % 2) * 3 + c]);
      }
    }
    ExpectNear(got, TensorShape({4, 4, 3}), want, 0, 0, "tiled");
  }
  Scope root = Scope::NewRootScope();
  ops::Tile(root.WithOpName("tile"), ops::Const<float>(root, {1, 2}),
            ops::Const<int32_t>(root, {2, 2}));
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
}

TEST(OneHot, PutsOnValueAtEachIndexAlongTheNewAxis) {
  Scope root = Scope::NewRootScope();
  Output ids = ops::Const<int64_t>(root, {2, 0, -1, 9}, {2, 2});
  Output last = ops::OneHot(root, ids, 3, 1.0f, 0.0f);
  Output first = ops::OneHot(root, ids, 3, 5.0, -1.0, 0);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(last.shape().ToString(), "[2,2,3]");
  EXPECT_EQ(first.shape().ToString(), "[3,2,2]");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor got, Evaluate(last));
  ExpectNear(got, TensorShape({2, 2, 3}), {0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}, 0, 0, "last");
  CKFLOW_ASSERT_OK_AND_ASSIGN(got, Evaluate(first));
  ExpectNear(got, TensorShape({3, 2, 2}), {-1, 5, -1, -1, -1, -1, -1, -1, 5, -1, -1, -1}, 0, 0,
             "first");
  ops::OneHot(root.WithOpName("hot"), ids, 3, 1.0f, 0.0, 0);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ckflow

namespace ckflow {
namespace {

// x[i, j, k] = 15 i + 3 j + k: every value names its place.
Output Iota(const Scope& s) {
  std::vector<double> v(60);
  for (int i = 0; i < 60; ++i) v[i] = i;
  return ops::Const<double>(s, v, {4, 5, 3});
}

struct SliceCase {
  std::string python;
  std::vector<int64_t> begin, end, strides;
  ops::StridedSliceAttrs attrs;
  Dims shape;
  std::vector<double> values;  // empty: only the shape is checked
};

TEST(StridedSlice, FollowsPythonsIndexingWithEveryMask) {
  const SliceCase cases[] = {
      {"x[1:3, ::2, -1]",
       {1, 0, -1},
       {3, 0, 0},
       {1, 2, 1},
       {.begin_mask = 2, .end_mask = 2, .shrink_axis_mask = 4},
       {2, 3},
       {17, 23, 29, 32, 38, 44}},
      {"x[newaxis, 2, -2:, ::-2]",
       {0, 2, -2, 0},
       {0, 0, 0, 0},
       {1, 1, 1, -2},
       {.begin_mask = 8, .end_mask = 12, .new_axis_mask = 1, .shrink_axis_mask = 2},
       {1, 2, 2},
       {41, 39, 44, 42}},
      {"x[-1, ..., 0]",
       {-1, 0, 0},
       {0, 0, 1},
       {1, 1, 1},
       {.ellipsis_mask = 2, .shrink_axis_mask = 5},
       {5},
       {45, 48, 51, 54, 57}},
      {"x[..., newaxis]",
       {0, 0},
       {0, 0},
       {1, 1},
       {.ellipsis_mask = 1, .new_axis_mask = 2},
       {4, 5, 3, 1},
       {}},
      {"x[-10:10, 7:9]", {-10, 7}, {10, 9}, {1, 1}, {}, {4, 0, 3}, {}},
      {"x[3:1:-1, 4:-6:-3]",
       {3, 4},
       {1, -6},
       {-1, -3},
       {},
       {2, 2, 3},
       {57, 58, 59, 48, 49, 50, 42, 43, 44, 33, 34, 35}},
      {"x[1]", {1}, {2}, {1}, {.shrink_axis_mask = 1}, {5, 3}, {}},
  };
  Scope root = Scope::NewRootScope();
  Output x = Iota(root);
  for (const SliceCase& c : cases) {
    SCOPED_TRACE(c.python);
    Output y = ops::StridedSlice(root, x, ops::Const<int64_t>(root, c.begin),
                                 ops::Const<int64_t>(root, c.end),
                                 ops::Const<int64_t>(root, c.strides), c.attrs);
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(y.shape().ToString(), TensorShape(c.shape).ToString());
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor out, Evaluate(y));
    EXPECT_EQ(out.shape(), TensorShape(c.shape));
    if (!c.values.empty()) {
      EXPECT_EQ(ToDoubles(out), c.values);
    }
  }
  // A vector, backwards from the end: v[8:2:-3] and v[-1::-4].
  Output v = ops::Const<int32_t>(root, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      Tensor a,
      Evaluate(ops::StridedSlice(root, v, ops::Const(root, Tensor::FromVector<int32_t>({8})),
                                 ops::Const(root, Tensor::FromVector<int32_t>({2})),
                                 ops::Const(root, Tensor::FromVector<int32_t>({-3})))));
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      Tensor b, Evaluate(ops::StridedSlice(
                    root, v, ops::Const(root, Tensor::FromVector<int32_t>({-1})),
                    ops::Const(root, Tensor::FromVector<int32_t>({0})),
                    ops::Const(root, Tensor::FromVector<int32_t>({-4})), {.end_mask = 1})));
  EXPECT_EQ(ToDoubles(a), (std::vector<double>{8, 5}));
  EXPECT_EQ(ToDoubles(b), (std::vector<double>{9, 5, 1}));
}

TEST(StridedSlice, MatchesNestedLoopsOnALargeInputAndFedIndices) {
  std::mt19937 rng(3);
  const Tensor data = RandomTensor(DT_FLOAT, {64, 300, 8}, rng);
  Scope root = Scope::NewRootScope();
  Output begin = ops::Placeholder(root, DT_INT32);
  // x[::3, 5:290:7, ::-1], begin fed: the shape is known only at run time.
  Output y =
      ops::StridedSlice(root, ops::Const(root, data), begin, ops::Const<int32_t>(root, {0, 290, 0}),
                        ops::Const<int32_t>(root, {3, 7, -1}), {.begin_mask = 5, .end_mask = 5});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.shape().ToString(), "[?,?,?]");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor result,
                              Evaluate(y, {{begin, Tensor::FromVector<int32_t>({0, 5, 0})}}));
  const std::vector<Tensor> out = {result};
  std::vector<double> want;
  const std::vector<double> in = ToDoubles(data);
  for (int i = 0; i < 64; i += 3) {
    for (int j = 5; j < 290; j += 7) {
      for (int k = 7; k >= 0; --k) want.push_back(in[(i * 300 + j) * 8 + k]);
    }
  }
  EXPECT_EQ(out[0].shape(), TensorShape({22, 41, 8}));
  EXPECT_EQ(ToDoubles(out[0]), want);
}

TEST(StridedSlice, BadSlicesAreNamed) {
  Scope root = Scope::NewRootScope();
  Output x = Iota(root);
  auto message = [&](const std::vector<int64_t>& begin, const std::vector<int64_t>& strides,
                     ops::StridedSliceAttrs attrs) {
    Scope s = Scope::NewRootScope();
    ops::StridedSlice(s.WithOpName("ss"), Iota(s), ops::Const<int64_t>(s, begin),
                      ops::Const<int64_t>(s, std::vector<int64_t>(begin.size(), 0)),
                      ops::Const<int64_t>(s, strides), attrs);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << s.status();
    return std::string(s.status().message());
  };
  EXPECT_NE(message({0, 0}, {1, 0}, {}).find("strides[1] is 0"), std::string::npos);
  EXPECT_NE(message({7}, {1}, {.shrink_axis_mask = 1}).find("index 7 of dimension 0 is out"),
            std::string::npos);
  EXPECT_NE(message({0, 0}, {1, 1}, {.ellipsis_mask = 3}).find("only one index"),
            std::string::npos);
  EXPECT_NE(message({0, 0, 0, 0}, {1, 1, 1, 1}, {}).find("input has rank 3"), std::string::npos);
  EXPECT_NE(message(std::vector<int64_t>(70, 0), std::vector<int64_t>(70, 1), {.new_axis_mask = -1})
                .find("at most 63 indices"),
            std::string::npos);
  EXPECT_EQ(message({0, 0}, {1, 0}, {}).find("ss (StridedSlice): "), 0u);
  // The same checks at run time, on fed indices.
  Output strides = ops::Placeholder(root, DT_INT32);
  Output y = ops::StridedSlice(root, x, ops::Const<int32_t>(root, {0, 0}),
                               ops::Const<int32_t>(root, {1, 1}), strides);
  Status status = Evaluate(y, {{strides, Tensor::FromVector<int32_t>({0, 1})}}).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("strides[0] is 0"), std::string::npos) << status;
  status = Evaluate(y, {{strides, Tensor::FromVector<int32_t>({1, 1, 1})}}).status();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("strides must be a vector of 2"), std::string::npos) << status;
}

TEST(StridedSliceGrad, PutsDyWhereTheSliceTookIt) {
  Scope root = Scope::NewRootScope();
  // x[3:1:-1, ::2] of a [4, 3] x: rows 3 and 2, columns 0 and 2.
  Output dx = ops::StridedSliceGrad(
      root, ops::Const<int32_t>(root, {4, 3}), ops::Const<int32_t>(root, {3, 0}),
      ops::Const<int32_t>(root, {1, 0}), ops::Const<int32_t>(root, {-1, 2}),
      ops::Const<float>(root, {1, 2, 3, 4}, {2, 2}), {.end_mask = 2});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(dx.shape().ToString(), "[4,3]");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor out, Evaluate(dx));
  EXPECT_EQ(ToDoubles(out), (std::vector<double>{0, 0, 0, 0, 0, 0, 3, 0, 4, 1, 0, 2}));
  ops::StridedSliceGrad(root.WithOpName("g"), ops::Const<int32_t>(root, {4, 3}),
                        ops::Const(root, Tensor::FromVector<int32_t>({0})),
                        ops::Const(root, Tensor::FromVector<int32_t>({2})),
                        ops::Const(root, Tensor::FromVector<int32_t>({1})),
                        ops::Const<float>(root, {1, 2}));
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(root.status().message().find("but the slice of [4,3] is [2,3]"), std::string::npos)
      << root.status();
}

}  // namespace
}  // namespace ckflow
