#include "base/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/tensor_cache_internal.h"

namespace ckflow {
namespace {

// Up to kInlineRank dims live in the shape itself, more on the heap: copies,
// moves, AddDim and equality behave alike on both sides of that line.
TEST(TensorShape, InlineAndHeapDimsBehaveAlike) {
  for (int rank = 0; rank <= TensorShape::kInlineRank + 3; ++rank) {
    SCOPED_TRACE(rank);
    std::vector<int64_t> dims;
    TensorShape grown;
    for (int i = 0; i < rank; ++i) {
      dims.push_back(i + 2);
      grown.AddDim(i + 2);
    }
    const TensorShape made(dims);
    EXPECT_EQ(grown, made);
    EXPECT_EQ(made.rank(), rank);
    EXPECT_EQ(std::vector<int64_t>(made.dims().begin(), made.dims().end()), dims);
    EXPECT_EQ(made.dim_sizes(), dims);
    EXPECT_EQ(grown.num_elements(), made.num_elements());

    TensorShape copy = made;
    EXPECT_EQ(copy, made);
    if (rank > 0) {
      EXPECT_NE(copy.dims().data(), made.dims().data());  // not shared
    }
    TensorShape assigned({9});
    assigned = copy;
    EXPECT_EQ(assigned, made);
    TensorShape moved = std::move(copy);
    EXPECT_EQ(moved, made);
    EXPECT_EQ(copy.rank(), 0);  // NOLINT(bugprone-use-after-move): moved-from is a scalar
    EXPECT_EQ(copy.num_elements(), 1);
    assigned = std::move(moved);
    EXPECT_EQ(assigned, made);

    if (rank > 0) {
      std::vector<int64_t> other = dims;
      other.back() += 1;
      EXPECT_FALSE(TensorShape(other) == made);
    }
    const Tensor t(DT_INT8, made);
    const Tensor shared = t;  // shares the buffer, copies the shape
    EXPECT_EQ(shared.shape(), made);
    EXPECT_EQ(shared.raw_data(), t.raw_data());
  }
  EXPECT_FALSE(TensorShape({2, 3}) == TensorShape({2, 3, 1}));
}

TEST(TensorShape, CountsElementsAndRejectsOverflow) {
  TensorShape s({2, 3, 4});
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_EQ(s.ToString(), "[2,3,4]");
  EXPECT_EQ(TensorShape().num_elements(), 1);
  EXPECT_EQ(TensorShape().ToString(), "[]");
  std::vector<int64_t> huge = {int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(TensorShape::Make(huge).status().code(), StatusCode::kInvalidArgument);
  std::vector<int64_t> negative = {2, -1};
  EXPECT_EQ(TensorShape::Make(negative).status().code(), StatusCode::kInvalidArgument);
}

TEST(Tensor, BufferIsAlignedAndSharedByCopies) {
  Tensor a(DT_FLOAT, TensorShape({3, 5}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw_data()) % Tensor::kAlignment, 0u);
  Tensor b = a;
  EXPECT_TRUE(b.SharesBufferWith(a));
  b.flat<float>()[7] = 2.5f;
  EXPECT_EQ(a.flat<float>()[7], 2.5f);
  Tensor c = a.Clone();
  EXPECT_FALSE(c.SharesBufferWith(a));
  c.flat<float>()[7] = 1.0f;
  EXPECT_EQ(a.flat<float>()[7], 2.5f);
}

// Buffers come from malloc rounded up by hand, so every size (empty, odd,
// just past a malloc size class, large enough to be mmapped) must still
// start on the boundary and hold every byte it claims.
TEST(Tensor, EveryBufferSizeIsAlignedAndWritableToItsEnd) {
  std::vector<Tensor> live;  // held, so malloc cannot hand back one block
  for (int64_t n : {0, 1, 3, 15, 16, 17, 255, 256, 257, 1000, 4097, 300000}) {
    for (DataType dtype : {DT_UINT8, DT_FLOAT, DT_DOUBLE, DT_STRING}) {
      Tensor t(dtype, TensorShape({n}));
      ASSERT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % Tensor::kAlignment, 0u)
          << DataTypeName(dtype) << "[" << n << "]";
      if (dtype == DT_STRING) {
        for (int64_t i = 0; i < n; ++i) t.flat<std::string>()[i] = "value " + std::to_string(i);
        if (n > 0) {
          EXPECT_EQ(t.flat<std::string>()[n - 1], "value " + std::to_string(n - 1));
        }
      } else {
        // Under ASan a write past the block fails here.
        std::memset(t.raw_data(), 0xab, t.TotalBytes());
      }
      live.push_back(std::move(t));
    }
  }
}

TEST(Tensor, RefCountTellsWhenWritingInPlaceIsSafe) {
  Tensor a(DT_INT32, TensorShape({4}));
  EXPECT_TRUE(a.RefCountIsOne());
  {
    Tensor b = a;
    EXPECT_FALSE(a.RefCountIsOne());
  }
  EXPECT_TRUE(a.RefCountIsOne());
}

TEST(Tensor, StringsAreConstructedAndCopied) {
  Tensor s = Tensor::FromVector<std::string>({"", "hello", std::string(1000, 'x')});
  EXPECT_EQ(s.dtype(), DT_STRING);
  Tensor t = s.Clone();
  EXPECT_EQ(t.flat<std::string>()[1], "hello");
  EXPECT_EQ(t.flat<std::string>()[2].size(), 1000u);
}

TEST(Tensor, ReshapeKeepsBufferAndChecksCount) {
  Tensor a = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
  StatusOr<Tensor> b = a.Reshaped(TensorShape({3, 2}));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->SharesBufferWith(a));
  EXPECT_EQ(a.Reshaped(TensorShape({4})).status().code(), StatusCode::kInvalidArgument);
}

TEST(Tensor, HugeAllocationIsAnErrorNotACrash) {
  StatusOr<TensorShape> shape = TensorShape::Make(std::vector<int64_t>{int64_t{1} << 50});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(Tensor::Allocate(DT_FLOAT, *shape).status().code(), StatusCode::kResourceExhausted);
}

TEST(Tensor, CopyFromChecksDtypeAndCount) {
  Tensor a(DT_FLOAT, TensorShape({2}));
  Tensor b = Tensor::FromVector<double>({1, 2});
  EXPECT_EQ(a.CopyFrom(b).code(), StatusCode::kInvalidArgument);
  Tensor c = Tensor::FromVector<float>({1, 2});
  EXPECT_TRUE(a.CopyFrom(c).ok());
  EXPECT_EQ(a.flat<float>()[1], 2.0f);
}

TEST(Types, NamesRoundTrip) {
  for (DataType t :
       {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_INT8, DT_INT16, DT_UINT8, DT_UINT16, DT_BOOL,
        DT_STRING, DT_BFLOAT16, DT_HALF, DT_COMPLEX64, DT_COMPLEX128}) {
    auto back = DataTypeFromName(DataTypeName(t));
    ASSERT_TRUE(back.has_value()) << DataTypeName(t);
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(DataTypeName(DT_HALF), "float16");
  EXPECT_EQ(DataTypeName(DT_FLOAT), "float32");
}

TEST(Tensor, ComplexValuesArePairsOfFloats) {
  Tensor c64(DT_COMPLEX64, TensorShape({2}));
  const float parts[] = {1.5f, -2.0f, 0.0f, INFINITY};
  std::memcpy(c64.raw_data(), parts, sizeof(parts));
  EXPECT_EQ(c64.TotalBytes(), 16u);
  EXPECT_EQ(c64.ComplexElement(0), std::make_pair(1.5, -2.0));
  EXPECT_EQ(c64.DebugString(), "complex64[2] {(1.5,-2), (0,inf)}");
  Tensor c128(DT_COMPLEX128, TensorShape({1}));
  const double pair[] = {0.25, 1e300};
  std::memcpy(c128.raw_data(), pair, sizeof(pair));
  EXPECT_EQ(c128.TotalBytes(), 16u);
  EXPECT_EQ(c128.ComplexElement(0), std::make_pair(0.25, 1e300));
  EXPECT_EQ(DataTypeSize(DT_COMPLEX128), 16u);
  EXPECT_FALSE(IsNumericType(DT_COMPLEX64));  // held, not computed with
}

TEST(Types, HalfAndBfloat16ConvertWithRounding) {
  const float values[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.1f};
  for (float v : values) {
    EXPECT_NEAR(static_cast<float>(float16(v)), v, std::abs(v) * 1e-3 + 1e-8) << v;
    EXPECT_NEAR(static_cast<float>(bfloat16(v)), v, std::abs(v) * 1e-2 + 1e-30) << v;
  }
  EXPECT_EQ(float16(1.0f).bits, 0x3C00);
  EXPECT_EQ(float16(65504.0f).bits, 0x7BFF);
  EXPECT_EQ(float16(1e6f).bits, 0x7C00);  // overflow to +inf
  EXPECT_EQ(bfloat16(1.0f).bits, 0x3F80);
  EXPECT_TRUE(std::isnan(static_cast<float>(float16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(std::nanf("")))));
}

}  // namespace
}  // namespace ckflow

namespace ckflow {
namespace {

// float32 elements that make a buffer of about `bytes`.
TensorShape FloatsOf(size_t bytes) { return TensorShape({static_cast<int64_t>(bytes / 4)}); }

TEST(TensorCache, AFreedLargeBufferServesTheNextAllocationOfItsSize) {
  internal::ReleaseTensorCache();
  const void* first;
  {
    Tensor t(DT_FLOAT, FloatsOf(256 << 10));
    first = t.raw_data();
    t.flat<float>()[0] = 7.0f;
  }
  const size_t held = internal::TensorCacheBytes();
  EXPECT_GE(held, size_t{256} << 10);
#ifdef CKFLOW_ASAN
  // A dangling read of the cached buffer is still caught.
  EXPECT_TRUE(__asan_address_is_poisoned(first));
#endif
  Tensor other_size(DT_FLOAT, FloatsOf(512 << 10));
  EXPECT_NE(other_size.raw_data(), first);
  EXPECT_EQ(internal::TensorCacheBytes(), held);
  Tensor again(DT_FLOAT, FloatsOf(256 << 10));
  EXPECT_EQ(again.raw_data(), first);
  EXPECT_LT(internal::TensorCacheBytes(), held);
}

TEST(TensorCache, KeepsNeitherSmallNorHugeBuffers) {
  internal::ReleaseTensorCache();
  { Tensor small(DT_FLOAT, FloatsOf(16 << 10)); }
  EXPECT_EQ(internal::TensorCacheBytes(), 0u);
  { Tensor huge(DT_FLOAT, FloatsOf(internal::kTensorCacheMaxBlock + (1 << 20))); }
  EXPECT_EQ(internal::TensorCacheBytes(), 0u);
}

TEST(TensorCache, HoldsAtMostItsCapacity) {
  internal::ReleaseTensorCache();
  const size_t block = internal::kTensorCacheMaxBlock;
  {
    std::vector<Tensor> many;
    for (size_t allocated = 0; allocated <= 2 * internal::kTensorCacheCapacity;
         allocated += block) {
      many.emplace_back(DT_FLOAT, FloatsOf(block));
    }
  }
  EXPECT_GT(internal::TensorCacheBytes(), 0u);
  EXPECT_LE(internal::TensorCacheBytes(), internal::kTensorCacheCapacity);
  internal::ReleaseTensorCache();
  EXPECT_EQ(internal::TensorCacheBytes(), 0u);
}

// A full cache makes room by evicting blocks of the size that holds the
// most, not by emptying itself: the blocks of another size stay.
TEST(TensorCache, AFullCacheEvictsOnlyWhatItMust) {
  internal::ReleaseTensorCache();
  const size_t big = internal::kTensorCacheMaxBlock;
  const size_t small = internal::kTensorCacheMinBlock * 4;
  {
    std::vector<Tensor> blocks;
    for (int i = 0; i < 3; ++i) blocks.emplace_back(DT_FLOAT, FloatsOf(small));
  }
  const size_t smalls = internal::TensorCacheBytes();
  EXPECT_GE(smalls, 3 * small);
  {
    std::vector<Tensor> many;
    for (size_t allocated = 0; allocated <= internal::kTensorCacheCapacity; allocated += big) {
      many.emplace_back(DT_FLOAT, FloatsOf(big));
    }
  }
  // Full of big blocks, with the small ones still there.
  EXPECT_GT(internal::TensorCacheBytes(), internal::kTensorCacheCapacity - big - smalls);
  EXPECT_LE(internal::TensorCacheBytes(), internal::kTensorCacheCapacity);
  { Tensor again(DT_FLOAT, FloatsOf(small)); }  // taken from the cache and put back
  std::vector<Tensor> reuse;
  for (int i = 0; i < 3; ++i) reuse.emplace_back(DT_FLOAT, FloatsOf(small));
  EXPECT_LE(internal::TensorCacheBytes(), internal::kTensorCacheCapacity - smalls);
  internal::ReleaseTensorCache();
}

TEST(TensorCache, AReusedBufferHoldsFreshStrings) {
  internal::ReleaseTensorCache();
  const int64_t n = (128 << 10) / sizeof(std::string) + 1;
  {
    Tensor t(DT_STRING, TensorShape({n}));
    for (int64_t i = 0; i < n; ++i) t.flat<std::string>()[i] = std::string(40, 'x');
  }
  ASSERT_GT(internal::TensorCacheBytes(), 0u);
  Tensor again(DT_STRING, TensorShape({n}));
  EXPECT_EQ(internal::TensorCacheBytes(), 0u);
  for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(again.flat<std::string>()[i].empty()) << i;
}

}  // namespace
}  // namespace ckflow
