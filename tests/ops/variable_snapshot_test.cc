// VariableResource's snapshot by blocks: what an asynchronous save reads of
// a large table the loop updates by rows. The snapshot reads as the value
// was when it was taken, whatever the variable does after; row updates set
// aside only the blocks not read yet and stay in place; any other write, a
// reader sharing the value, or the variable's end hands the buffer over.
// And the versions every write moves: never reused, whichever thread
// writes.

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/tensor_source_internal.h"
#include "ops/variable_resource_internal.h"
#include "tests/test_util.h"

namespace ckflow::internal {
namespace {

constexpr uint64_t kBlock = RowBlockSnapshot::kBlockBytes;
constexpr int64_t kCols = 256;  // 1 KiB rows
constexpr int64_t kRowsPerBlock = static_cast<int64_t>(kBlock) / (kCols * 4);

// A [rows, kCols] float variable holding 0, 1, 2, ...
std::shared_ptr<VariableResource> Counting(int64_t rows) {
  auto v = std::make_shared<VariableResource>("table", DT_FLOAT, PartialShape({rows, kCols}));
  Tensor value(DT_FLOAT, TensorShape({rows, kCols}));
  float next = 0;
  for (float& x : value.flat<float>()) x = next++;
  CKFLOW_EXPECT_OK(v->Assign(value.Clone()));
  return v;
}

Tensor Copy(VariableResource& v) {
  MutexLock lock(&v.mu());
  return (*v.PeekLocked())->Clone();
}

// Adds `delta` to `rows` as a sparse kernel does.
void AddToRows(VariableResource& v, const std::vector<int64_t>& rows, float delta) {
  MutexLock lock(&v.mu());
  CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor * value, v.PrepareToUpdateRowsLocked(rows));
  float* data = value->flat<float>().data();
  for (int64_t r : rows) {
    for (int64_t j = 0; j < kCols; ++j) data[r * kCols + j] += delta;
  }
}

Tensor Snapshot(VariableResource& v) {
  MutexLock lock(&v.mu());
  StatusOr<Tensor> snapshot = v.SnapshotByBlocksLocked();
  CKFLOW_EXPECT_OK(snapshot.status());
  return *std::move(snapshot);
}

const void* BufferOf(VariableResource& v) {
  MutexLock lock(&v.mu());
  return (*v.PeekLocked())->raw_data();
}

// Everything the snapshot gives, read in pieces of `piece` bytes.
std::string ReadAll(const Tensor& snapshot, uint64_t piece = 4 * kBlock) {
  const TensorSource* source = SourceOf(snapshot);
  EXPECT_NE(source, nullptr);
  std::string bytes;
  const uint64_t size = snapshot.TotalBytes();
  for (uint64_t at = 0; at < size; at += piece) {
    CKFLOW_EXPECT_OK(source->Read(at, std::min(piece, size - at), [&](std::string_view p) {
      bytes.append(p);
      return OkStatus();
    }));
  }
  return bytes;
}

std::string BytesOf(const Tensor& t) {
  return std::string(static_cast<const char*>(t.raw_data()), t.TotalBytes());
}

const RowBlockSnapshot& BlocksOf(const Tensor& snapshot) {
  return *dynamic_cast<const RowBlockSnapshot*>(SourceOf(snapshot));
}

TEST(RowBlockSnapshotTest, ReadsTheValueOfItsMomentWhileRowsChangeInPlace) {
  auto v = Counting(10 * kRowsPerBlock + 3);  // a short last block
  const Tensor before = Copy(*v);
  const void* buffer = BufferOf(*v);
  Tensor snapshot = Snapshot(*v);
  EXPECT_EQ(snapshot.shape(), before.shape());
  EXPECT_EQ(snapshot.raw_data(), nullptr);
  // Rows in blocks 0, 2 (twice) and the last.
  AddToRows(*v, {1, 2 * kRowsPerBlock, 3 * kRowsPerBlock - 1, 10 * kRowsPerBlock + 2}, 0.5f);
  EXPECT_EQ(BufferOf(*v), buffer);  // in place: no copy of the table
  EXPECT_EQ(BlocksOf(snapshot).bytes_set_aside(), 2 * kBlock + 3 * kCols * 4);
  EXPECT_EQ(ReadAll(snapshot), BytesOf(before));
  const Tensor after = Copy(*v);
  EXPECT_EQ(after.flat<float>()[2 * kRowsPerBlock * kCols],
            before.flat<float>()[2 * kRowsPerBlock * kCols] + 0.5f);
}

TEST(RowBlockSnapshotTest, BlocksAlreadyReadAreNotSetAside) {
  auto v = Counting(4 * kRowsPerBlock);
  const Tensor before = Copy(*v);
  Tensor snapshot = Snapshot(*v);
  const TensorSource* source = SourceOf(snapshot);
  std::string bytes;
  auto append = [&](std::string_view p) {
    bytes.append(p);
    return OkStatus();
  };
  CKFLOW_ASSERT_OK(source->Read(0, 2 * kBlock, append));
  AddToRows(*v, {0, kRowsPerBlock + 1}, 1.0f);  // both read already
  EXPECT_EQ(BlocksOf(snapshot).bytes_set_aside(), 0u);
  AddToRows(*v, {3 * kRowsPerBlock}, 1.0f);
  EXPECT_EQ(BlocksOf(snapshot).bytes_set_aside(), kBlock);
  CKFLOW_ASSERT_OK(source->Read(2 * kBlock, 2 * kBlock, append));
  EXPECT_EQ(bytes, BytesOf(before));
  // A block is read once; a read must be in whole blocks.
  EXPECT_THAT(source->Read(0, kBlock, append), testing::StatusIs(StatusCode::kInternal, "twice"));
  EXPECT_THAT(source->Read(kBlock / 2, kBlock, append),
              testing::StatusIs(StatusCode::kInternal, "whole blocks"));
}

TEST(RowBlockSnapshotTest, AnyOtherWriteHandsTheBufferOver) {
  auto v = Counting(3 * kRowsPerBlock);
  const Tensor before = Copy(*v);
  const void* buffer = BufferOf(*v);
  Tensor snapshot = Snapshot(*v);
  {
    MutexLock lock(&v->mu());
    CKFLOW_ASSERT_OK_AND_ASSIGN(Tensor * value, v->PrepareToUpdateLocked());
    for (float& x : value->flat<float>()) x = -1;
  }
  EXPECT_NE(BufferOf(*v), buffer);  // the snapshot kept the old one
  AddToRows(*v, {0}, 1.0f);         // the snapshot no longer sees the variable
  EXPECT_EQ(BlocksOf(snapshot).bytes_set_aside(), 0u);
  EXPECT_EQ(ReadAll(snapshot), BytesOf(before));
  EXPECT_EQ(Copy(*v).flat<float>()[0], 0.0f);
}

TEST(RowBlockSnapshotTest, AnAssignmentHandsTheBufferOver) {
  auto v = Counting(3 * kRowsPerBlock);
  const Tensor before = Copy(*v);
  Tensor snapshot = Snapshot(*v);
  Tensor fresh(DT_FLOAT, before.shape());
  for (float& x : fresh.flat<float>()) x = 2;
  CKFLOW_ASSERT_OK(v->Assign(fresh));  // adopted: the old buffer would go
  fresh = Tensor();
  EXPECT_EQ(ReadAll(snapshot), BytesOf(before));
}

TEST(RowBlockSnapshotTest, AReaderSharingTheValueMakesRowUpdatesCopy) {
  auto v = Counting(2 * kRowsPerBlock);
  const Tensor before = Copy(*v);
  const void* buffer = BufferOf(*v);
  Tensor snapshot = Snapshot(*v);
  Tensor read;
  {
    MutexLock lock(&v->mu());
    read = *v->ReadLocked();
  }
  AddToRows(*v, {0}, 1.0f);
  EXPECT_NE(BufferOf(*v), buffer);
  EXPECT_EQ(BytesOf(read), BytesOf(before));  // the reader's value never changed
  EXPECT_EQ(ReadAll(snapshot), BytesOf(before));
}

TEST(RowBlockSnapshotTest, OutlivesItsVariable) {
  auto v = Counting(2 * kRowsPerBlock);
  const Tensor before = Copy(*v);
  Tensor snapshot = Snapshot(*v);
  v.reset();  // the session closed while the save was writing
  EXPECT_EQ(ReadAll(snapshot), BytesOf(before));
}

TEST(RowBlockSnapshotTest, AReadLargerThanItsStagingComesInPieces) {
  const int64_t rows = 2 * static_cast<int64_t>(RowBlockSnapshot::kStagingBytes) / (kCols * 4) + 1;
  auto v = Counting(rows);
  const Tensor before = Copy(*v);
  Tensor snapshot = Snapshot(*v);
  int pieces = 0;
  std::string bytes;
  CKFLOW_ASSERT_OK(SourceOf(snapshot)->Read(0, before.TotalBytes(), [&](std::string_view p) {
    ++pieces;
    bytes.append(p);
    return OkStatus();
  }));
  EXPECT_EQ(pieces, 3);
  EXPECT_EQ(bytes, BytesOf(before));
}

TEST(RowBlockSnapshotTest, ANewSnapshotLeavesTheOldOneItsBlocks) {
  auto v = Counting(2 * kRowsPerBlock);
  const Tensor before = Copy(*v);
  Tensor first = Snapshot(*v);
  Tensor second = Snapshot(*v);
  AddToRows(*v, {0}, 1.0f);  // the old one holds the buffer now: a copy
  EXPECT_EQ(ReadAll(first), BytesOf(before));
  EXPECT_EQ(ReadAll(second), BytesOf(before));
}

TEST(RowBlockSnapshotTest, UninitializedOrStringVariablesAreRefused) {
  VariableResource empty("e", DT_FLOAT, PartialShape({4}));
  VariableResource strings("s", DT_STRING, PartialShape({1}));
  CKFLOW_ASSERT_OK(strings.Assign(Tensor::FromVector<std::string>({"x"})));
  MutexLock lock1(&empty.mu());
  EXPECT_THAT(empty.SnapshotByBlocksLocked(),
              testing::StatusIs(StatusCode::kFailedPrecondition, "'e'"));
  MutexLock lock2(&strings.mu());
  EXPECT_THAT(strings.SnapshotByBlocksLocked(),
              testing::StatusIs(StatusCode::kUnimplemented, "'s'"));
}

// The save's threads read while the loop updates rows: every byte read is
// the value of the snapshot's moment (a ThreadSanitizer run checks the
// hand-over of each block too).
TEST(RowBlockSnapshotConcurrencyTest, ReadersAndRowUpdatesRace) {
  constexpr int64_t kBlocks = 512;
  auto v = Counting(kBlocks * kRowsPerBlock);
  const Tensor before = Copy(*v);
  for (int round = 0; round < 4; ++round) {
    Tensor snapshot = Snapshot(*v);
    const Tensor expected = Copy(*v);
    const TensorSource* source = SourceOf(snapshot);
    std::vector<std::string> halves(2);
    std::vector<std::thread> readers;
    for (int t = 0; t < 2; ++t) {
      readers.emplace_back([&, t] {
        for (int64_t b = t; b < kBlocks; b += 2) {
          std::string& out = halves[t];
          CKFLOW_EXPECT_OK(
              source->Read(static_cast<uint64_t>(b) * kBlock, kBlock, [&](std::string_view p) {
                out.append(p);
                return OkStatus();
              }));
        }
      });
    }
    for (int64_t step = 0; step < 200; ++step) {
      AddToRows(
          *v,
          {(step * 37) % (kBlocks * kRowsPerBlock), (step * 101 + 5) % (kBlocks * kRowsPerBlock)},
          1.0f);
    }
    for (std::thread& r : readers) r.join();
    const std::string want = BytesOf(expected);
    for (int t = 0; t < 2; ++t) {
      for (int64_t b = t, k = 0; b < kBlocks; b += 2, ++k) {
        EXPECT_EQ(halves[t].compare(static_cast<size_t>(k) * kBlock, kBlock, want,
                                    static_cast<size_t>(b) * kBlock, kBlock),
                  0)
            << "round " << round << " block " << b;
      }
    }
  }
  EXPECT_NE(BytesOf(Copy(*v)), BytesOf(before));
}

// Versions are drawn a block per thread: writes on four threads at once,
// thousands each (several blocks), and the variables created meanwhile,
// never see one version twice, nor 0.
TEST(VariableVersionTest, WritesOnManyThreadsNeverShareAVersion) {
  constexpr int kThreads = 4;
  constexpr int kWrites = 3000;
  std::vector<std::vector<uint64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&seen, t] {
      auto v =
          std::make_shared<VariableResource>("v" + std::to_string(t), DT_FLOAT, PartialShape({2}));
      for (int i = 0; i < kWrites; ++i) {
        MutexLock lock(&v->mu());
        seen[t].push_back(v->version_locked());
        CKFLOW_ASSERT_OK(v->PrepareToOverwriteLocked(TensorShape({2})).status());
      }
      MutexLock lock(&v->mu());
      seen[t].push_back(v->version_locked());
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::set<uint64_t> all;
  for (const std::vector<uint64_t>& versions : seen) {
    for (uint64_t version : versions) {
      EXPECT_NE(version, 0u);
      EXPECT_TRUE(all.insert(version).second) << "version " << version << " seen twice";
    }
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * (kWrites + 1)));
}

}  // namespace
}  // namespace ckflow::internal
