// Restore's fast paths (small tensors read in batches, large ones in
// parallel chunks straight into the variable) must give exactly the bytes
// the simple path gives: a plain read of the entry's bytes from the data
// file. For every dtype, at sizes on both sides of the batch limit and of
// the 1 MiB chunk boundaries, and with corruption in the middle of a chunk.

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/resource.h"
#include "bundle/bundle_format.h"
#include "bundle/bundle_reader.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/restore_planner_internal.h"
#include "ops/array_ops.h"
#include "ops/checkpoint_ops.h"
#include "ops/variable_ops.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/observed_file_system.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::SameTensor;
using testing::ValueOf;

constexpr int64_t kMiB = int64_t{1} << 20;

// Byte sizes around the edges the restore paths switch at: the batch limit
// (64 KiB) and the chunk size (1 MiB).
std::vector<int64_t> ByteSizes(bool large) {
  std::vector<int64_t> sizes = {8, 1000, 64 << 10, (64 << 10) + 8};
  if (large) {
    sizes.insert(sizes.end(), {kMiB - 8, kMiB + 8, 5 * kMiB / 2 + 24});
  }
  return sizes;
}

Tensor RandomTensor(DataType dtype, int64_t bytes, std::mt19937_64& rng) {
  const auto element = static_cast<int64_t>(DataTypeSize(dtype));
  Tensor t = Tensor::Allocate(dtype, TensorShape({std::max<int64_t>(1, bytes / element)})).value();
  auto* p = static_cast<unsigned char*>(t.raw_data());
  for (size_t i = 0; i < t.TotalBytes(); ++i) {
    p[i] = static_cast<unsigned char>(dtype == DT_BOOL ? rng() & 1 : rng());
  }
  return t;
}

struct Case {
  std::string name;
  Tensor value;
};

// A program with one variable per case, holding the case's value or zeros.
struct Program : testing::ModelProgram {
  Program(const std::vector<Case>& cases, bool zeros) {
    for (const Case& c : cases) {
      Tensor init = c.value;
      if (zeros) {
        init = Tensor::Allocate(c.value.dtype(), c.value.shape()).value();
        std::memset(init.raw_data(), 0, init.TotalBytes());
      }
      Add(c.name, Variable::Create(scope, c.name, ops::Const(scope, init)));
    }
    CKFLOW_EXPECT_OK(Finish());
  }
};

std::string ReadPlain(const std::string& path, int64_t offset, int64_t size) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(offset);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), size);
  EXPECT_EQ(in.gcount(), size) << path;
  return bytes;
}

class RestorePathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::NewTempDir();
    std::mt19937_64 rng(7);
    const DataType dtypes[] = {DT_FLOAT, DT_DOUBLE, DT_INT32,  DT_UINT8,     DT_INT16,
                               DT_INT8,  DT_INT64,  DT_BOOL,   DT_BFLOAT16,  DT_UINT16,
                               DT_HALF,  DT_UINT32, DT_UINT64, DT_COMPLEX64, DT_COMPLEX128};
    for (DataType dtype : dtypes) {
      // Every element size gets the large sizes; the rest only the small.
      const bool large = dtype == DT_FLOAT || dtype == DT_DOUBLE || dtype == DT_INT8 ||
                         dtype == DT_HALF || dtype == DT_BOOL;
      for (int64_t bytes : ByteSizes(large)) {
        cases_.push_back({std::string(DataTypeName(dtype)) + "_" + std::to_string(bytes),
                          RandomTensor(dtype, bytes, rng)});
      }
    }
    Program writer(cases_, /*zeros=*/false);
    prefix_ = writer.checkpoint->Write(dir_ + "/ckpt", *writer.session).value();
  }

  std::string KeyOf(const std::string& name) const {
    return "model/" + name + "/.ATTRIBUTES/VARIABLE_VALUE";
  }

  std::string dir_;
  std::vector<Case> cases_;
  std::string prefix_;
};

TEST_F(RestorePathsTest, EveryDtypeAndSizeRestoresTheFileBytesExactly) {
  std::unique_ptr<BundleReader> reader = BundleReader::Open(prefix_).value();
  Program p(cases_, /*zeros=*/true);
  // Twice: into fresh buffers, then over the values just restored (the
  // in-place path).
  for (int round = 0; round < 2; ++round) {
    LoadStatus status = p.checkpoint->Restore(prefix_).value();
    CKFLOW_ASSERT_OK(status.InitializeOrRestore(*p.session));
    for (size_t i = 0; i < cases_.size(); ++i) {
      Tensor restored = ValueOf(*p.session, *p.vars[i]);
      EXPECT_TRUE(SameTensor(restored, cases_[i].value)) << cases_[i].name;
      const BundleEntry* e = reader->FindEntry(KeyOf(cases_[i].name));
      ASSERT_NE(e, nullptr) << cases_[i].name;
      const std::string plain = ReadPlain(reader->DataPath(e->shard_id), e->offset, e->size);
      ASSERT_EQ(restored.TotalBytes(), plain.size()) << cases_[i].name;
      EXPECT_EQ(std::memcmp(restored.raw_data(), plain.data(), plain.size()), 0) << cases_[i].name;
    }
  }
}

TEST_F(RestorePathsTest, BatchedReadsAgreeWithOneByOneReads) {
  std::unique_ptr<BundleReader> reader = BundleReader::Open(prefix_).value();
  std::vector<const BundleEntry*> entries;
  // Every other entry, in reverse: gaps between ranges and an unsorted ask.
  for (size_t i = reader->entries().size(); i-- > 0;) {
    const BundleEntry& e = reader->entries()[i];
    if (e.dtype != DT_STRING && i % 2 == 0) entries.push_back(&e);
  }
  std::vector<bool> seen(entries.size(), false);
  CKFLOW_ASSERT_OK(reader->ReadBatch(entries, [&](size_t i, std::string_view bytes) -> Status {
    seen[i] = true;
    Tensor one = reader->Lookup(entries[i]->key).value();
    EXPECT_EQ(bytes.size(), one.TotalBytes()) << entries[i]->key;
    EXPECT_EQ(std::memcmp(bytes.data(), one.raw_data(), bytes.size()), 0) << entries[i]->key;
    return OkStatus();
  }));
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_TRUE(seen[i]) << entries[i]->key;
}

// Flips one byte `into` bytes into the entry of `name` and returns the key.
std::string Corrupt(const std::string& prefix, const std::string& key, int64_t into) {
  std::unique_ptr<BundleReader> reader = BundleReader::Open(prefix).value();
  const BundleEntry* e = reader->FindEntry(key);
  EXPECT_NE(e, nullptr) << key;
  std::fstream f(reader->DataPath(e->shard_id), std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(e->offset + into);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x40);
  f.seekp(e->offset + into);
  f.write(&c, 1);
  return key;
}

TEST_F(RestorePathsTest, CorruptionInTheMiddleOfALargeTensorsChunkIsDataLoss) {
  const std::string name = "float32_" + std::to_string(5 * kMiB / 2 + 24);
  // The middle of the second 1 MiB chunk.
  const std::string key = Corrupt(prefix_, KeyOf(name), kMiB + kMiB / 2 + 3);
  Program p(cases_, /*zeros=*/true);
  LoadStatus status = p.checkpoint->Restore(prefix_).value();
  Status s = status.InitializeOrRestore(*p.session);
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kDataLoss, key));
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kDataLoss, ".data-00000-of-00001"));
  // The torn variable is not readable as if it were whole.
  for (size_t i = 0; i < cases_.size(); ++i) {
    if (cases_[i].name != name) continue;
    StatusOr<std::vector<Tensor>> read = p.session->Run({}, {p.vars[i]->value()});
    EXPECT_EQ(read.status().code(), StatusCode::kFailedPrecondition) << read.status();
  }
}

TEST_F(RestorePathsTest, CorruptionInsideABatchedSmallTensorIsDataLoss) {
  const std::string key = Corrupt(prefix_, KeyOf("int16_1000"), 500);
  Program p(cases_, /*zeros=*/true);
  LoadStatus status = p.checkpoint->Restore(prefix_).value();
  Status s = status.InitializeOrRestore(*p.session);
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kDataLoss, key));
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kDataLoss, "checksum mismatch"));
}

TEST_F(RestorePathsTest, ManySmallVariablesRestoreExactlyThroughBatches) {
  // Thousands of neighbours: several 4 MiB batch ranges and restore ops,
  // and more values than the walk hands on at once (a batch and a part).
  std::mt19937_64 rng(11);
  std::vector<Case> many;
  for (int i = 0; i < static_cast<int>(internal::kRestoreItemsPerBatch) + 1000; ++i) {
    many.push_back({"v" + std::to_string(i),
                    RandomTensor(i % 3 ? DT_FLOAT : DT_INT8, 1024 + 4 * (i % 7), rng)});
  }
  Program writer(many, /*zeros=*/false);
  const std::string prefix = writer.checkpoint->Write(dir_ + "/many", *writer.session).value();
  Program p(many, /*zeros=*/true);
  // Into the program's initialized variables, then into a new session,
  // where the restore ops create every variable.
  std::unique_ptr<Session> fresh = Session::Create(p.scope.graph()).value();
  int nodes = -1;
  for (Session* session : {p.session.get(), fresh.get()}) {
    LoadStatus status = p.checkpoint->Restore(prefix).value();
    CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
    for (size_t i = 0; i < many.size(); ++i) {
      ASSERT_TRUE(SameTensor(ValueOf(*session, *p.vars[i]), many[i].value)) << many[i].name;
    }
    // The second restore finds every one of its restore ops built.
    if (nodes >= 0) {
      EXPECT_EQ(p.scope.graph().num_nodes(), nodes);
    }
    nodes = p.scope.graph().num_nodes();
  }
  // The new session made room for them before they were created: its
  // table did not grow (and rehash) on the way.
  ResourceMgr reserved;
  reserved.Reserve(many.size());
  EXPECT_GE(fresh->resources().size(), many.size());
  EXPECT_EQ(fresh->resources().capacity(), reserved.capacity());
}

// From a cold page cache, a restore of thousands of small values would wait
// on the device for each batch after matching them all; Restore starts the
// reads of the data file first, so they overlap the matching. A checkpoint
// of a few values is left to the restore's own reads.
TEST_F(RestorePathsTest, RestorePrefetchesTheDataFileOfManySmallValuesBeforeMatching) {
  std::mt19937_64 rng(13);
  std::vector<Case> many;
  for (int i = 0; i < 1500; ++i) {
    many.push_back({"v" + std::to_string(i), RandomTensor(DT_FLOAT, 256, rng)});
  }
  Program writer(many, /*zeros=*/false);
  const std::string prefix = writer.checkpoint->Write(dir_ + "/many", *writer.session).value();
  for (const std::string& checkpoint : {prefix, prefix_}) {
    const bool small = checkpoint == prefix;
    Program p(small ? many : cases_, /*zeros=*/true);
    testing::ObservedFileSystem fs;
    Checkpoint reading(p.scope, {{"model", p.model}}, {.file_system = &fs});
    LoadStatus status = reading.Restore(checkpoint).value();
    const std::string data = DataFilename(checkpoint, 0, 1);
    EXPECT_EQ(fs.of(data).prefetched, small ? std::filesystem::file_size(data) : 0u) << checkpoint;
    CKFLOW_ASSERT_OK(status.InitializeOrRestore(*p.session));
    ASSERT_TRUE(SameTensor(ValueOf(*p.session, *p.vars.back()),
                           small ? many.back().value : cases_.back().value));
  }
}

// Restore ops name their variables instead of taking handle inputs: a
// fresh session restores without running a handle op per variable, and the
// variable the op creates is the one the program's handles then see.
TEST_F(RestorePathsTest, RestoreOpsTakeNoHandleInputsAndFeedTheProgramsHandles) {
  Program p(cases_, /*zeros=*/true);
  Output op = ops::RestoreVariables(p.scope, ops::Const(p.scope, prefix_), {KeyOf(cases_[0].name)},
                                    {p.vars[0]->handle()});
  ASSERT_TRUE(p.scope.ok()) << p.scope.status();
  EXPECT_EQ(op.node()->inputs().size(), 1u);  // just the prefix
  testing::RunOrFail(*p.session, {op});
  EXPECT_TRUE(SameTensor(ValueOf(*p.session, *p.vars[0]), cases_[0].value));
}

// A restore op names each variable by the shared name its attribute gives,
// or by the one on its handle's node where the attribute gives none; one op
// mixes both, each value going to its own variable.
TEST_F(RestorePathsTest, AttributesWithoutASharedNameAreNamedByTheirHandles) {
  Scope scope = Scope::NewRootScope();
  auto model = std::make_shared<testing::Module>();
  std::vector<std::shared_ptr<Variable>> vars;
  for (size_t i = 0; i < cases_.size(); ++i) {
    const Case& c = cases_[i];
    Tensor zeros = Tensor::Allocate(c.value.dtype(), c.value.shape()).value();
    std::memset(zeros.raw_data(), 0, zeros.TotalBytes());
    vars.push_back(Variable::Create(scope, c.name, ops::Const(scope, zeros)));
    if (i % 2 == 1) {
      model->Track(c.name, std::make_shared<testing::EditedAttribute>(
                               vars.back(), [](SaveableAttribute& a) { a.shared_name.clear(); }));
    } else {
      model->Track(c.name, vars.back());
    }
  }
  Checkpoint checkpoint(scope, {{"model", model}});
  std::unique_ptr<Session> session = Session::Create(scope.graph()).value();
  LoadStatus status = checkpoint.Restore(prefix_).value();
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*session));
  ASSERT_GE(cases_.size(), 4u);
  for (size_t i = 0; i < cases_.size(); ++i) {
    EXPECT_TRUE(SameTensor(ValueOf(*session, *vars[i]), cases_[i].value)) << cases_[i].name;
  }
}

TEST_F(RestorePathsTest, RestoreIntoAVariableDeclaredOtherwiseIsInvalidArgument) {
  Program p(cases_, /*zeros=*/true);
  // In a new session, another handle creates the variable first, as int32.
  const std::string name =
      p.vars[0]->handle().node()->attrs().Get<std::string>("shared_name").value();
  Output other =
      ops::VarHandleOp(p.scope.WithOpName("other"), DT_INT32, PartialShape::Unknown(), name);
  std::unique_ptr<Session> session = Session::Create(p.scope.graph()).value();
  testing::RunOrFail(*session, {other});
  LoadStatus status = p.checkpoint->Restore(prefix_).value();
  Status s = status.InitializeOrRestore(*session);
  EXPECT_THAT(s, testing::StatusIs(StatusCode::kInvalidArgument,
                                   "variable '" + name + "' exists as int32"));
}

TEST_F(RestorePathsTest, RestoreOpsRefuseHandlesThatAreNotVarHandleOps) {
  Scope scope = Scope::NewRootScope();
  Output handle = ops::Placeholder(scope.WithOpName("fed_handle"), DT_RESOURCE);
  Output op = ops::RestoreVariables(scope, ops::Const(scope, prefix_), {"k"}, {handle});
  EXPECT_FALSE(op.valid());
  EXPECT_THAT(scope.status(), testing::StatusIs(StatusCode::kInvalidArgument, "fed_handle"));
  EXPECT_THAT(scope.status(), testing::StatusIs(StatusCode::kInvalidArgument, "not a VarHandleOp"));
}

// The key, name, dtype and shape lists must agree entry for entry: the op
// is refused when it is added, before any kernel reads the lists.
TEST_F(RestorePathsTest, RestoreOpsRefuseListsOfDifferentLengths) {
  Scope scope = Scope::NewRootScope();
  ops::VariableDeclarations one{{"v"}, {DT_FLOAT}, {PartialShape({2})}};
  Output op = ops::RestoreVariables(scope.WithOpName("restore"), ops::Const(scope, prefix_),
                                    {"k0", "k1"}, one);
  EXPECT_FALSE(op.valid());
  EXPECT_THAT(scope.status(), testing::StatusIs(StatusCode::kInvalidArgument, "restore"));
  EXPECT_THAT(scope.status(),
              testing::StatusIs(StatusCode::kInvalidArgument, "2 keys for 1 variables"));
}

TEST_F(RestorePathsTest, RestoreOpsRefusePositionsOfAnotherLength) {
  Scope scope = Scope::NewRootScope();
  ops::VariableDeclarations one{{"v"}, {DT_FLOAT}, {PartialShape({2})}};
  Output op = ops::RestoreVariables(scope.WithOpName("restore"), ops::Const(scope, prefix_), {"k0"},
                                    one, {0, 1});
  EXPECT_FALSE(op.valid());
  EXPECT_THAT(scope.status(),
              testing::StatusIs(StatusCode::kInvalidArgument, "1 keys for 2 positions"));
}

// Positions are hints: wrong ones (another key's, negative, past the end)
// cost a search, never a wrong value.
TEST_F(RestorePathsTest, WrongPositionsStillRestoreEachKeysOwnValue) {
  std::unique_ptr<BundleReader> reader = BundleReader::Open(prefix_).value();
  Program p(cases_, /*zeros=*/true);
  std::vector<std::string> keys;
  std::vector<Output> handles;
  std::vector<int64_t> positions;
  const auto n = static_cast<int64_t>(reader->entries().size());
  for (size_t i = 0; i < cases_.size(); ++i) {
    keys.push_back(KeyOf(cases_[i].name));
    handles.push_back(p.vars[i]->handle());
    const int64_t right = reader->FindEntry(keys.back()) - reader->entries().data();
    const int64_t wrong[] = {right, (right + 1) % n, -1, n, int64_t{1} << 40};
    positions.push_back(wrong[i % 5]);
  }
  Output op = ops::RestoreVariables(p.scope, ops::Const(p.scope, prefix_), keys,
                                    ops::DeclarationsOf(handles).value(), positions);
  ASSERT_TRUE(p.scope.ok()) << p.scope.status();
  testing::RunOrFail(*p.session, {op});
  for (size_t i = 0; i < cases_.size(); ++i) {
    EXPECT_TRUE(SameTensor(ValueOf(*p.session, *p.vars[i]), cases_[i].value)) << cases_[i].name;
  }
}

// A repeated restore finds its cached ops by a digest of their (key,
// variable) lists; whether a found op is reused rests on this check, which
// must refuse every way two lists can differ.
TEST(RestoreOpRestoresTest, ConfirmsOnlyTheSameKeysIntoTheSameVariablesInOrder) {
  Scope scope = Scope::NewRootScope();
  const Output prefix = ops::Placeholder(scope, DT_STRING);
  auto handle = [&](const std::string& name) {
    return ops::VarHandleOp(scope.WithOpName(name), DT_FLOAT, {2}, name);
  };
  const Output a = handle("a"), b = handle("b"), c = handle("c");
  auto item = [](std::string key, Output variable, std::string shared_name) {
    internal::RestoreItem made;
    made.key = std::move(key);
    made.attribute.handle = variable;
    made.attribute.dtype = DT_FLOAT;
    made.attribute.shape = PartialShape({2});
    made.attribute.shared_name = std::move(shared_name);
    return made;
  };
  const Output op = ops::RestoreVariables(scope, prefix, {"a/key", "b/key"}, {a, b});
  CKFLOW_ASSERT_OK(scope.status());
  auto restores = [&](const std::vector<internal::RestoreItem>& items, size_t begin,
                      CastRule cast = CastRule::kNone) {
    return internal::RestoreOpRestores(op, items, begin, items.size(), cast);
  };

  EXPECT_TRUE(restores({item("a/key", a, "a"), item("b/key", b, "b")}, 0));
  // Where an attribute has no shared name, its handle's node names the variable.
  EXPECT_TRUE(restores({item("a/key", a, "a"), item("b/key", b, "")}, 0));
  EXPECT_TRUE(restores({item("x/key", c, "c"), item("a/key", a, "a"), item("b/key", b, "b")}, 1));

  EXPECT_FALSE(restores({item("a/key", a, "a"), item("b/key", b, "b")}, 0, CastRule::kWidening));
  EXPECT_FALSE(restores({item("a/key", a, "a")}, 0));
  EXPECT_FALSE(restores({item("a/key", a, "a"), item("b/key", b, "b"), item("c/key", c, "c")}, 0));
  EXPECT_FALSE(restores({item("b/key", b, "b"), item("a/key", a, "a")}, 0));
  EXPECT_FALSE(restores({item("a/key", a, "a"), item("c/key", b, "b")}, 0));
  EXPECT_FALSE(restores({item("a/key", a, "a"), item("b/key", c, "c")}, 0));
  EXPECT_FALSE(restores({item("a/key", a, "a"), item("b/key", c, "")}, 0));
}

// A restore op keeps the positions of the checkpoint it was built for and
// is reused for later checkpoints of the same variables, which may hold
// the keys elsewhere: here one more variable sorts before all of them.
TEST_F(RestorePathsTest, CachedRestoreOpsFindShiftedKeysInALaterCheckpoint) {
  std::mt19937_64 rng(11);
  std::vector<Case> shifted = {{"0extra", RandomTensor(DT_FLOAT, 64, rng)}};
  for (const Case& c : cases_) {
    shifted.push_back({c.name, RandomTensor(c.value.dtype(), c.value.TotalBytes(), rng)});
  }
  Program writer(shifted, /*zeros=*/false);
  const std::string later = writer.checkpoint->Write(dir_ + "/shifted", *writer.session).value();
  ASSERT_LT(KeyOf("0extra"), KeyOf(cases_[0].name));

  Program p(cases_, /*zeros=*/true);
  CKFLOW_ASSERT_OK(p.checkpoint->Restore(prefix_).value().InitializeOrRestore(*p.session));
  const int ops_before = p.scope.graph().num_nodes();
  LoadStatus status = p.checkpoint->Restore(later).value();
  status.ExpectPartial();  // 0extra has no variable here
  CKFLOW_ASSERT_OK(status.InitializeOrRestore(*p.session));
  EXPECT_EQ(p.scope.graph().num_nodes(), ops_before);  // the same restore ops ran
  for (size_t i = 0; i < cases_.size(); ++i) {
    EXPECT_TRUE(SameTensor(ValueOf(*p.session, *p.vars[i]), shifted[i + 1].value))
        << cases_[i].name;
  }
}

}  // namespace
}  // namespace ckflow
