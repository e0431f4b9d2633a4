// Graph building with fake ops: naming, scopes, sticky errors, shape checks.
// (The standard ops' own shape checks are tested in tests/ops.)
#include "graph/graph.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace ckflow {
namespace {

// A fake elementwise op: two inputs of one dtype and equal shape.
OpDef FakeAddDef() {
  return OpDef{.type = "FakeAdd", .shape_fn = [](InferenceContext& c) -> Status {
                 if (c.input_types[0] != c.input_types[1]) {
                   return InvalidArgumentError("dtypes differ: ", DataTypeName(c.input_types[0]),
                                               " vs ", DataTypeName(c.input_types[1]));
                 }
                 CKFLOW_ASSIGN_OR_RETURN(PartialShape s,
                                         c.input_shapes[0].Merge(c.input_shapes[1]));
                 c.AddOutput(c.input_types[0], s);
                 return OkStatus();
               }};
}

OpDef FakeSourceDef() {
  return OpDef{.type = "FakeSource", .shape_fn = [](InferenceContext& c) -> Status {
                 c.AddOutput(c.attrs->GetOr<DataType>("dtype", DT_FLOAT),
                             c.attrs->GetOr<PartialShape>("shape", PartialShape({2, 3})));
                 return OkStatus();
               }};
}

class GraphTest : public ::testing::Test {
 protected:
  Output Source(const Scope& s, DataType dtype = DT_FLOAT, PartialShape shape = {2, 3}) {
    AttrMap attrs;
    attrs.Set("dtype", dtype);
    attrs.Set("shape", shape);
    return s.AddNode(source_, {}, attrs);
  }
  OpDef add_ = FakeAddDef();
  OpDef source_ = FakeSourceDef();
};

// A node's attributes: set in any order, found by name, replaced by a
// second Set, listed in name order (as GraphDef writes them).
TEST(AttrMapTest, FindsReplacesAndListsByName) {
  AttrMap attrs;
  attrs.Set("shape", PartialShape({2}));
  attrs.Set("dtype", DT_INT32);
  attrs.Set("shared_name", std::string("v"));
  attrs.Set("container", std::string());
  attrs.Set("dtype", DT_FLOAT);
  std::vector<std::string> names;
  for (const auto& [name, value] : attrs.all()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"container", "dtype", "shape", "shared_name"}));
  EXPECT_EQ(attrs.GetOr<DataType>("dtype", DT_INVALID), DT_FLOAT);
  ASSERT_NE(attrs.GetIf<std::string>("shared_name"), nullptr);
  EXPECT_EQ(*attrs.GetIf<std::string>("shared_name"), "v");
  EXPECT_TRUE(attrs.Has("container"));
  for (const char* absent : {"", "a", "dtypes", "shape_", "z"}) {
    EXPECT_FALSE(attrs.Has(absent)) << absent;
    EXPECT_EQ(attrs.Find(absent), nullptr) << absent;
  }
  EXPECT_EQ(attrs.GetIf<DataType>("shape"), nullptr);  // another type
  EXPECT_EQ(attrs.Get<int64_t>("dtype").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(attrs.Get<int64_t>("missing").status().code(), StatusCode::kInvalidArgument);
}

// Shapes up to PartialShape::kInlineRank dimensions are held inline, longer
// ones on the heap: both copy, compare and merge alike.
TEST(PartialShapeTest, InlineAndHeapDimensionsBehaveAlike) {
  for (int rank : {0, 1, PartialShape::kInlineRank, PartialShape::kInlineRank + 1, 7}) {
    SCOPED_TRACE(rank);
    std::vector<int64_t> dims, half;
    for (int i = 0; i < rank; ++i) {
      dims.push_back(i + 2);
      half.push_back(i % 2 ? -1 : i + 2);
    }
    const PartialShape full(dims), partial(half);
    PartialShape copy = full;
    EXPECT_EQ(copy, full);
    EXPECT_EQ(copy.rank(), rank);
    EXPECT_EQ(std::vector<int64_t>(copy.dims().begin(), copy.dims().end()), dims);
    EXPECT_EQ(copy.dim_sizes(), dims);
    PartialShape moved = std::move(copy);
    EXPECT_EQ(moved, full);
    EXPECT_TRUE(full.IsFullyDefined());
    EXPECT_EQ(partial.IsFullyDefined(), rank < 2);
    EXPECT_TRUE(partial.IsCompatibleWith(full));
    EXPECT_TRUE(partial.IsCompatibleWith(full.ToTensorShape()));
    EXPECT_EQ(partial.Merge(full).value(), full);
    EXPECT_EQ(PartialShape(full.ToTensorShape()), full);
    if (rank > 0) {
      std::vector<int64_t> other = dims;
      other.back() += 1;
      EXPECT_FALSE(PartialShape(other) == full);
      EXPECT_FALSE(full.IsCompatibleWith(PartialShape(other)));
      EXPECT_FALSE(full.IsCompatibleWith(PartialShape(other).ToTensorShape()));
      EXPECT_FALSE(full.Merge(PartialShape(other)).ok());
    }
    dims.push_back(1);
    EXPECT_FALSE(PartialShape(dims) == full);  // another rank
    EXPECT_FALSE(PartialShape(dims).IsCompatibleWith(full));
  }
  const PartialShape unknown;
  EXPECT_FALSE(unknown.known_rank());
  EXPECT_EQ(unknown.rank(), -1);
  EXPECT_TRUE(unknown.dims().empty());
  EXPECT_FALSE(unknown == PartialShape::Scalar());
  EXPECT_EQ(unknown.ToString(), "<unknown>");
  EXPECT_EQ(PartialShape({2, -1, 3, 4, 5, -1}).ToString(), "[2,?,3,4,5,?]");
  EXPECT_EQ(unknown.Merge(PartialShape({1, 2, 3, 4, 5})).value(), PartialShape({1, 2, 3, 4, 5}));
}

TEST_F(GraphTest, DefaultNamesAreUniqueWithSuffixes) {
  Scope root = Scope::NewRootScope();
  Output a = Source(root);
  Output b = Source(root);
  Output c = Source(root);
  EXPECT_EQ(a.node()->name(), "FakeSource");
  EXPECT_EQ(b.node()->name(), "FakeSource_1");
  EXPECT_EQ(c.node()->name(), "FakeSource_2");
  EXPECT_EQ(b.name(), "FakeSource_1:0");
}

TEST_F(GraphTest, SubScopesNestAndAreMadeUnique) {
  Scope root = Scope::NewRootScope();
  Scope a = root.NewSubScope("a");
  Scope ab = a.NewSubScope("b");
  Scope a2 = root.NewSubScope("a");
  Output x = Source(ab);
  Output y = Source(a2.WithOpName("y"));
  EXPECT_EQ(x.node()->name(), "a/b/FakeSource");
  EXPECT_EQ(y.node()->name(), "a_1/y");
  EXPECT_TRUE(root.ok());
}

TEST_F(GraphTest, TakenUserNameIsAnErrorAndSticks) {
  Scope root = Scope::NewRootScope();
  Source(root.WithOpName("x"));
  Output again = Source(root.WithOpName("x"));
  EXPECT_FALSE(again.valid());
  EXPECT_THAT(root.status(), testing::StatusIs(StatusCode::kAlreadyExists, "'x'"));
  // Later steps fail quietly; the first error is kept.
  Output later = Source(root);
  EXPECT_FALSE(later.valid());
  EXPECT_EQ(root.status().code(), StatusCode::kAlreadyExists);
}

TEST_F(GraphTest, ShapeFunctionErrorsNameTheNode) {
  Scope root = Scope::NewRootScope();
  Output f = Source(root, DT_FLOAT);
  Output i = Source(root, DT_INT32);
  Output bad = root.WithOpName("sum").AddNode(add_, {f, i});
  EXPECT_EQ(bad.node(), nullptr);
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(root.status().message(), "sum (FakeAdd): dtypes differ: float32 vs int32");
}

TEST_F(GraphTest, UnknownDimensionsMergeAtBuildTime) {
  Scope root = Scope::NewRootScope();
  Output a = Source(root, DT_FLOAT, PartialShape({-1, 3}));
  Output b = Source(root, DT_FLOAT, PartialShape({4, -1}));
  Output c = root.AddNode(add_, {a, b});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(c.shape().ToString(), "[4,3]");
  Output d = Source(root, DT_FLOAT, PartialShape({5, 3}));
  root.AddNode(add_, {c, d});
  EXPECT_EQ(root.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(GraphTest, ControlDependenciesAreRecordedOnce) {
  Scope root = Scope::NewRootScope();
  Output a = Source(root);
  Output b = Source(root.WithControlDependencies({a, a}));
  ASSERT_EQ(b.node()->control_inputs().size(), 1u);
  EXPECT_EQ(b.node()->control_inputs()[0], a.node());
  Output c = Source(root.WithControlDependencies({a}).WithNoControlDependencies());
  EXPECT_TRUE(c.node()->control_inputs().empty());
}

TEST_F(GraphTest, InputsFromAnotherGraphAreRejected) {
  Scope g1 = Scope::NewRootScope();
  Scope g2 = Scope::NewRootScope();
  Output a = Source(g1);
  Output b = Source(g2);
  g2.AddNode(add_, {a, b});
  EXPECT_THAT(g2.status(), testing::StatusIs(StatusCode::kInvalidArgument, "another graph"));
}

TEST_F(GraphTest, DotRendersScopesAsClustersAndEdges) {
  Scope root = Scope::NewRootScope();
  Scope dense = root.NewSubScope("dense");
  Output a = Source(dense.WithOpName("x"));
  Output b = Source(root.WithOpName("y").WithControlDependencies({a}));
  root.WithOpName("z").AddNode(add_, {a, b});
  std::string dot = root.graph().ToDot();
  EXPECT_NE(dot.find("subgraph \"cluster_dense\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"dense/x\" -> \"z\" [label=\"float32[2,3]\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"dense/x\" -> \"y\" [style=dashed]"), std::string::npos) << dot;
}

}  // namespace
}  // namespace ckflow
