// Reading real TensorFlow checkpoints (../shared/fixtures), checked against
// their DESCRIPTION.txt (the output of the independent describe.py), and
// writing them back byte for byte.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "bundle/bundle_format.h"
#include "bundle/bundle_index_internal.h"
#include "bundle/bundle_reader.h"
#include "bundle/bundle_writer.h"
#include "bundle/merge.h"
#include "tests/bundle/bundle_test_util.h"
#include "tests/test_util.h"

namespace ckflow {
namespace {

using testing::AllFixtures;
using testing::Fixture;

// One entry as DESCRIPTION.txt lists it.
struct DescribedEntry {
  std::string dtype;  // "DT_FLOAT"
  std::string shape;  // "[2, 3]"
  int shard = -1;
  int64_t offset = -1, size = -1;
  uint32_t crc = 0;
  std::vector<std::string> values;  // the first values, as printed
};

// Parses the "tensors:" section of a DESCRIPTION.txt: a key at column 0,
// then indented "dtype=... shape=[..] shard=.. offset=.. size=..",
// "crc32c stored=xxxxxxxx ..." and "values (first k of n): a, b" lines.
std::map<std::string, DescribedEntry> ParseDescription(const std::string& text) {
  std::map<std::string, DescribedEntry> entries;
  std::istringstream in(text);
  std::string line, key;
  bool in_tensors = false;
  while (std::getline(in, line)) {
    if (line.rfind("tensors: ", 0) == 0) {
      in_tensors = true;
      continue;
    }
    if (!in_tensors) continue;
    if (line.rfind("shard ", 0) == 0) break;  // the coverage summary ends the list
    if (line.empty()) continue;
    if (line[0] != ' ') {
      key = line;
      continue;
    }
    DescribedEntry& e = entries[key];
    char dtype[32], shape[128];
    long long offset, size;
    int shard;
    unsigned crc;
    if (std::sscanf(line.c_str(), " dtype=%31s shape=%127[^]]] shard=%d offset=%lld size=%lld",
                    dtype, shape, &shard, &offset, &size) == 5) {
      e.dtype = dtype;
      e.shape = std::string(shape) + "]";
      e.shard = shard;
      e.offset = offset;
      e.size = size;
    } else if (std::sscanf(line.c_str(), " crc32c stored=%x", &crc) == 1) {
      e.crc = crc;
    } else if (line.find("values (first") != std::string::npos) {
      std::string list = line.substr(line.find("): ") + 3);
      for (size_t pos = 0; pos <= list.size();) {
        size_t comma = list.find(", ", pos);
        if (comma == std::string::npos) comma = list.size();
        e.values.push_back(list.substr(pos, comma - pos));
        pos = comma + 2;
      }
    }
  }
  return entries;
}

// Value i as describe.py prints numbers and bools ("%.7g", True/False).
std::string AsDescribed(const Tensor& t, int64_t i) {
  if (t.dtype() == DT_BOOL) return t.flat<bool>()[i] ? "True" : "False";
  if (t.dtype() == DT_INT64) return std::to_string(t.flat<int64_t>()[i]);
  char buf[32];
  std::snprintf(buf, sizeof(buf), IsFloatingType(t.dtype()) ? "%.7g" : "%.0f",
                t.ElementAsDouble(i));
  return buf;
}

std::string TfDtypeName(int dtype) {
  std::string name = StoredDataTypeName(dtype);
  static const std::map<std::string, std::string> kTf = {
      {"float32", "DT_FLOAT"}, {"float64", "DT_DOUBLE"}, {"int32", "DT_INT32"},
      {"int64", "DT_INT64"},   {"bool", "DT_BOOL"},      {"string", "DT_STRING"}};
  return kTf.count(name) ? kTf.at(name) : name;
}

std::string DescribedShape(const TensorShape& shape) {
  std::string out = "[";
  for (int i = 0; i < shape.rank(); ++i) out += (i ? ", " : "") + std::to_string(shape.dim(i));
  return out + "]";
}

class FixtureTest : public ::testing::TestWithParam<Fixture> {};

TEST_P(FixtureTest, EveryEntryMatchesItsDescription) {
  const Fixture& f = GetParam();
  const auto described = ParseDescription(
      testing::ReadFileOrDie(testing::FixturesDir() + "/" + f.dir + "/DESCRIPTION.txt"));
  ASSERT_FALSE(described.empty());
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(f.Prefix()));
  EXPECT_EQ(reader->num_shards(), f.num_shards);
  ASSERT_EQ(reader->entries().size(), described.size());
  size_t values_compared = 0;
  for (const BundleEntry& e : reader->entries()) {
    SCOPED_TRACE(e.key);
    ASSERT_TRUE(described.count(e.key));
    const DescribedEntry& d = described.at(e.key);
    EXPECT_EQ(TfDtypeName(e.dtype), d.dtype);
    EXPECT_EQ(DescribedShape(e.shape), d.shape);
    EXPECT_EQ(e.shard_id, d.shard);
    EXPECT_EQ(e.offset, d.offset);
    EXPECT_EQ(e.size, d.size);
    EXPECT_EQ(e.masked_crc32c, d.crc);
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, reader->Lookup(e.key));
    if (e.dtype == DT_STRING) continue;  // strings: see the table below
    ASSERT_LE(d.values.size(), static_cast<size_t>(t.NumElements()));
    for (size_t i = 0; i < d.values.size(); ++i) EXPECT_EQ(AsDescribed(t, i), d.values[i]);
    values_compared += d.values.size();
  }
  EXPECT_GT(values_compared, 0u);
}

TEST_P(FixtureTest, EveryChecksumVerifies) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(GetParam().Prefix()));
  for (const BundleEntry& e : reader->entries()) CKFLOW_EXPECT_OK(reader->Verify(e));
}

TEST_P(FixtureTest, ReadIntoFillsACallersTensor) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                              BundleReader::Open(GetParam().Prefix()));
  for (const BundleEntry& e : reader->entries()) {
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor looked_up, reader->Lookup(e.key));
    Tensor dest(static_cast<DataType>(e.dtype), e.shape);
    CKFLOW_ASSERT_OK(reader->ReadInto(e.key, &dest));
    if (e.dtype == DT_STRING) {
      EXPECT_TRUE(std::equal(dest.flat<std::string>().begin(), dest.flat<std::string>().end(),
                             looked_up.flat<std::string>().begin()));
    } else {
      EXPECT_EQ(std::memcmp(dest.raw_data(), looked_up.raw_data(), dest.TotalBytes()), 0);
    }
  }
}

// Writes the fixture's tensors back, each shard's in its original data
// order, and compares every file with the original byte for byte. A
// multi-shard fixture is rebuilt as TensorFlow saves one: a bundle per
// shard, then MergeBundles. The Snappy fixture's index was not written by a
// TensorFlow BundleWriter (which never compresses), so only its table
// contents must match.
TEST_P(FixtureTest, RewriteIsByteIdentical) {
  const Fixture& f = GetParam();
  CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader, BundleReader::Open(f.Prefix()));
  std::vector<const BundleEntry*> order;
  for (const BundleEntry& e : reader->entries()) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const BundleEntry* a, const BundleEntry* b) {
    return std::tie(a->shard_id, a->offset) < std::tie(b->shard_id, b->offset);
  });
  const std::string dir = testing::NewTempDir("rewrite");
  const std::string prefix = dir + "/" + f.name;
  std::vector<std::string> parts;
  for (int shard = 0; shard < f.num_shards; ++shard) {
    const std::string part =
        f.num_shards == 1 ? prefix : DataFilename(prefix + "_temp/part", shard, f.num_shards);
    testing::NamedTensors tensors;
    for (const BundleEntry* e : order) {
      if (e->shard_id != shard) continue;
      CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, reader->Lookup(e->key));
      tensors.emplace_back(e->key, t);
    }
    CKFLOW_ASSERT_OK(testing::WriteBundle(part, tensors));
    parts.push_back(part);
  }
  if (f.num_shards > 1) CKFLOW_ASSERT_OK(MergeBundles(parts, prefix));
  for (int shard = 0; shard < f.num_shards; ++shard) {
    EXPECT_TRUE(testing::ReadFileOrDie(DataFilename(prefix, shard, f.num_shards)) ==
                testing::ReadFileOrDie(DataFilename(f.Prefix(), shard, f.num_shards)))
        << "data shard " << shard << " differs";
  }
  const std::string ours = testing::ReadFileOrDie(IndexFilename(prefix));
  const std::string theirs = testing::ReadFileOrDie(IndexFilename(f.Prefix()));
  if (!f.snappy) {
    EXPECT_TRUE(ours == theirs) << "index differs";
  } else {
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto our_table, internal::ReadTable("ours", ours));
    CKFLOW_ASSERT_OK_AND_ASSIGN(auto their_table, internal::ReadTable("theirs", theirs));
    EXPECT_EQ(our_table, their_table);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest, ::testing::ValuesIn(AllFixtures()),
                         [](const ::testing::TestParamInfo<Fixture>& p) { return p.param.dir; });

// Values picked by hand from the DESCRIPTION.txt files.
struct PickedValue {
  std::string fixture;
  std::string key;
  DataType dtype;
  TensorShape shape;
  int shard;
  std::vector<double> first_values;
};

TEST(Fixtures, HandPickedValuesMatchTheirDescriptions) {
  const PickedValue picks[] = {
      {"tf1_onnx_regression/model", "W", DT_FLOAT, {}, 0, {0.2139618}},
      {"tf1_onnx_regression/model", "b", DT_FLOAT, {}, 0, {1.049525}},
      {"tf1_t2t_transformer_two_shards/model.ckpt-1", "global_step", DT_INT64, {}, 0, {1}},
      {"tf1_t2t_transformer_two_shards/model.ckpt-1",
       "train_stats/problem_0_steps",
       DT_INT32,
       {},
       0,
       {0}},
      {"tf1_t2t_transformer_two_shards/model.ckpt-1",
       "training/beta1_power",
       DT_FLOAT,
       {},
       1,
       {0.8099999}},
      {"tf1_t2t_transformer_two_shards/model.ckpt-1",
       "training/transformer/body/decoder/layer_0/ffn/conv1/bias/Adam",
       DT_FLOAT,
       {8},
       1,
       {-0.0003186256, -0.0004191156, 0.0005502066, -0.0008179109}},
      {"tf2_half_plus_two_snappy/variables",
       "a/.ATTRIBUTES/VARIABLE_VALUE",
       DT_FLOAT,
       {},
       0,
       {0.5}},
      {"tf2_half_plus_two_snappy/variables", "c/.ATTRIBUTES/VARIABLE_VALUE", DT_FLOAT, {}, 0, {3}},
      {"tf2_cyclic_module/variables",
       "child/my_variable/.ATTRIBUTES/VARIABLE_VALUE",
       DT_FLOAT,
       {},
       0,
       {3}},
      {"tf2_tftrt_two_shards/variables",
       "v/.ATTRIBUTES/VARIABLE_VALUE",
       DT_FLOAT,
       {1, 1, 1},
       1,
       {1}},
      {"tf2_uninitialized_variable/variables",
       "initialized_variable/.ATTRIBUTES/VARIABLE_VALUE",
       DT_FLOAT,
       {},
       0,
       {1}},
      {"tf2_tensorforce_ppo_adam_slots/ppo-checkpoint-1",
       "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
       DT_INT64,
       {},
       0,
       {1}},
      {"tf2_tensorforce_ppo_adam_slots/ppo-checkpoint-1",
       "agent/actions_buffer/SINGLETON/.ATTRIBUTES/VARIABLE_VALUE",
       DT_INT64,
       {1, 500},
       0,
       {1, 0, 1, 0, 1, 1, 0, 0}},
      {"tf2_tensorforce_ppo_adam_slots/ppo-checkpoint-1",
       "agent/auxiliaries_buffer/SINGLETON/mask/.ATTRIBUTES/VARIABLE_VALUE",
       DT_BOOL,
       {1, 500, 2},
       0,
       {1, 1, 1, 1}},
      {"tf2_tensorforce_ppo_adam_slots/ppo-checkpoint-1",
       "agent/baseline/network/layers/0/bias/.OPTIMIZER_SLOT/agent/baseline_optimizer/"
       "optimizer/optimizer/tf_optimizer/v/.ATTRIBUTES/VARIABLE_VALUE",
       DT_FLOAT,
       {64},
       0,
       {3.61843, 1.660314, 1.230475}},
      {"tf_old_string_tensors/foo",
       "floats",
       DT_FLOAT,
       {2, 3},
       0,
       {16.18, 16.18, 16.18, 16.18, 16.18, 16.18}},
  };
  for (const PickedValue& p : picks) {
    SCOPED_TRACE(p.fixture + " " + p.key);
    CKFLOW_ASSERT_OK_AND_ASSIGN(std::unique_ptr<BundleReader> reader,
                                BundleReader::Open(testing::FixturesDir() + "/" + p.fixture));
    const BundleEntry* e = reader->FindEntry(p.key);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->shard_id, p.shard);
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor t, reader->Lookup(p.key));
    EXPECT_EQ(t.dtype(), p.dtype);
    EXPECT_EQ(t.shape(), p.shape);
    for (size_t i = 0; i < p.first_values.size(); ++i) {
      EXPECT_NEAR(t.ElementAsDouble(i), p.first_values[i], 1e-6 * std::fabs(p.first_values[i]));
    }
  }
}

TEST(Fixtures, OldStringTensorsHoldEmptyAndLongStrings) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<BundleReader> reader,
      BundleReader::Open(testing::FixturesDir() + "/tf_old_string_tensors/foo"));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor strs, reader->Lookup("strs"));
  ASSERT_EQ(strs.shape(), TensorShape({4}));
  EXPECT_EQ(strs.flat<std::string>()[0], "hello");
  EXPECT_EQ(strs.flat<std::string>()[1], "");
  EXPECT_EQ(strs.flat<std::string>()[2], "x01");
  EXPECT_EQ(strs.flat<std::string>()[3], std::string(1024, 'c'));
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor scalar, reader->Lookup("scalar"));
  EXPECT_EQ(scalar.shape(), TensorShape({1}));
  EXPECT_EQ(scalar.flat<std::string>()[0], "hello");
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor empty, reader->Lookup("string_tensor"));
  EXPECT_EQ(empty.flat<std::string>()[0], "");
  // Data order differs from key order (DESCRIPTION: floats at 1056, strs at 15).
  EXPECT_EQ(reader->FindEntry("floats")->offset, 1056);
  EXPECT_EQ(reader->FindEntry("string_tensor")->offset, 0);
}

TEST(Fixtures, SnappyIndexDecodes) {
  CKFLOW_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<BundleReader> reader,
      BundleReader::Open(testing::FixturesDir() + "/tf2_half_plus_two_snappy/variables"));
  std::vector<std::string> keys;
  for (const BundleEntry& e : reader->entries()) keys.push_back(e.key);
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "_CHECKPOINTABLE_OBJECT_GRAPH", "a/.ATTRIBUTES/VARIABLE_VALUE",
                      "b/.ATTRIBUTES/VARIABLE_VALUE", "c/.ATTRIBUTES/VARIABLE_VALUE"}));
}

}  // namespace
}  // namespace ckflow
