// The conversions a restore makes under RestoreOptions::cast (base/cast.h):
// kWidening is exactly the set of conversions that lose nothing, checked on
// every pair of real types against probe values of the source type; kAny's
// arithmetic at the edges (rounding ties, overflow, NaN, saturation).

#include "base/cast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/tensor.h"

namespace ckflow {
namespace {

using ::testing::HasSubstr;

const std::vector<DataType> kRealTypes = {DT_BOOL,     DT_INT8,   DT_UINT8, DT_INT16,  DT_UINT16,
                                          DT_INT32,    DT_UINT32, DT_INT64, DT_UINT64, DT_HALF,
                                          DT_BFLOAT16, DT_FLOAT,  DT_DOUBLE};

template <typename T>
void AppendValue(std::string& bytes, T value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
void AppendIntegerProbes(std::string& bytes) {
  using Limits = std::numeric_limits<T>;
  for (T v : {Limits::min(), static_cast<T>(Limits::min() + 1), T(0), T(1), T(2),
              static_cast<T>(Limits::max() - 1), Limits::max()}) {
    AppendValue(bytes, v);
  }
  if constexpr (std::is_signed_v<T>) AppendValue(bytes, T(-1));
  // 2^k - 1, 2^k + 1 and their negatives: where a float's significand runs out.
  for (int k = 1; k < Limits::digits; ++k) {
    const auto p = static_cast<uint64_t>(1) << k;
    AppendValue(bytes, static_cast<T>(p - 1));
    AppendValue(bytes, static_cast<T>(p + 1));
    if constexpr (std::is_signed_v<T>) AppendValue(bytes, static_cast<T>(-static_cast<T>(p + 1)));
  }
}

template <typename T>
void AppendFloatProbes(std::string& bytes) {
  // Through float (exact for half and bfloat16), plus random bit patterns of T.
  using Limits = std::numeric_limits<T>;
  for (double v : {0.0,
                   -0.0,
                   1.0,
                   -1.0,
                   0.5,
                   2.5,
                   0.1,
                   1e-3,
                   3.0e4,
                   65504.0,
                   65520.0,
                   1e10,
                   1e30,
                   1e-30,
                   1e300,
                   -1e300,
                   4e-320,
                   std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity(),
                   std::nan("")}) {
    if constexpr (std::is_same_v<T, double>) {
      AppendValue(bytes, v);
    } else if constexpr (std::is_same_v<T, float>) {
      AppendValue(bytes, static_cast<float>(std::fmax(std::fmin(v, 1e38), -1e38)));
    } else {
      AppendValue(bytes, T(static_cast<float>(std::fmax(std::fmin(v, 1e38), -1e38))));
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    for (T v : {Limits::max(), Limits::lowest(), Limits::min(), Limits::denorm_min(),
                std::nextafter(T(1), T(2))}) {
      AppendValue(bytes, v);
    }
  }
  std::mt19937_64 random(7);
  for (int i = 0; i < 200; ++i) {
    const uint64_t bits = random();
    bytes.append(reinterpret_cast<const char*>(&bits), sizeof(T));
  }
}

// Probe values of `dtype`, as its bytes.
std::string Probes(DataType dtype) {
  std::string bytes;
  switch (dtype) {
    case DT_BOOL:
      AppendValue(bytes, false);
      AppendValue(bytes, true);
      break;
    case DT_INT8:
      AppendIntegerProbes<int8_t>(bytes);
      break;
    case DT_UINT8:
      AppendIntegerProbes<uint8_t>(bytes);
      break;
    case DT_INT16:
      AppendIntegerProbes<int16_t>(bytes);
      break;
    case DT_UINT16:
      AppendIntegerProbes<uint16_t>(bytes);
      break;
    case DT_INT32:
      AppendIntegerProbes<int32_t>(bytes);
      break;
    case DT_UINT32:
      AppendIntegerProbes<uint32_t>(bytes);
      break;
    case DT_INT64:
      AppendIntegerProbes<int64_t>(bytes);
      break;
    case DT_UINT64:
      AppendIntegerProbes<uint64_t>(bytes);
      break;
    case DT_HALF:
      AppendFloatProbes<float16>(bytes);
      break;
    case DT_BFLOAT16:
      AppendFloatProbes<bfloat16>(bytes);
      break;
    case DT_FLOAT:
      AppendFloatProbes<float>(bytes);
      break;
    case DT_DOUBLE:
      AppendFloatProbes<double>(bytes);
      break;
    default:
      ADD_FAILURE() << "no probes for " << DataTypeName(dtype);
  }
  return bytes;
}

bool IsNan(DataType dtype, const char* p) {
  switch (dtype) {
    case DT_HALF: {
      float16 h;
      std::memcpy(&h, p, 2);
      return std::isnan(static_cast<float>(h));
    }
    case DT_BFLOAT16: {
      bfloat16 b;
      std::memcpy(&b, p, 2);
      return std::isnan(static_cast<float>(b));
    }
    case DT_FLOAT: {
      float f;
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    }
    case DT_DOUBLE: {
      double d;
      std::memcpy(&d, p, 8);
      return std::isnan(d);
    }
    default:
      return false;
  }
}

// The index of the first probe that from -> to -> from changes (NaN stays
// NaN, whatever its payload), or -1.
int64_t FirstLossy(DataType from, DataType to) {
  const std::string probes = Probes(from);
  const size_t in = DataTypeSize(from);
  const auto n = static_cast<int64_t>(probes.size() / in);
  std::string there(static_cast<size_t>(n) * DataTypeSize(to), '\0');
  std::string back(probes.size(), '\0');
  CastElements(from, probes.data(), to, there.data(), n);
  CastElements(to, there.data(), from, back.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const char* a = probes.data() + i * in;
    const char* b = back.data() + i * in;
    if (IsNan(from, a) && IsNan(from, b)) continue;
    if (std::memcmp(a, b, in) != 0) return i;
  }
  return -1;
}

// kWidening admits a pair exactly when no probe value changes on the way
// there and back: never one that loses a value, and none that it could
// have admitted.
TEST(CastRule, WideningIsExactlyTheConversionsThatLoseNothing) {
  int widening = 0;
  for (DataType from : kRealTypes) {
    for (DataType to : kRealTypes) {
      SCOPED_TRACE(std::string(DataTypeName(from)) + " -> " + std::string(DataTypeName(to)));
      ASSERT_TRUE(CastAllowed(from, to, CastRule::kAny));
      EXPECT_EQ(CastAllowed(from, to, CastRule::kNone), from == to);
      const int64_t lossy = FirstLossy(from, to);
      if (CastAllowed(from, to, CastRule::kWidening)) {
        ++widening;
        EXPECT_EQ(lossy, -1) << "probe " << lossy << " changed";
      } else {
        EXPECT_GE(lossy, 0) << "every probe survived, yet kWidening refuses it";
      }
    }
  }
  // The pairs above the diagonal that NumPy's safe casting also allows.
  EXPECT_GT(widening, static_cast<int>(kRealTypes.size()));
}

template <typename To, typename From>
To Cast(From x) {
  To out;
  CastElements(DataTypeOf<From>(), &x, DataTypeOf<To>(), &out, 1);
  return out;
}

TEST(CastElements, FloatsNarrowToNearestEvenKeepingNanAndInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  // double -> float: the tie just past the largest float goes to infinity.
  const double max = std::numeric_limits<float>::max();
  EXPECT_EQ(Cast<float>(max + 0x1p102), std::numeric_limits<float>::max());
  EXPECT_EQ(Cast<float>(max + 0x1p103), inf);
  EXPECT_EQ(Cast<float>(-1e300), -inf);
  EXPECT_EQ(Cast<float>(1.0 + 0x1p-24), 1.0f);                       // tie: to even
  EXPECT_EQ(Cast<float>(1.0 + 0x1p-23 + 0x1p-24), 1.0f + 0x1p-22f);  // tie: to even
  EXPECT_TRUE(std::isnan(Cast<float>(std::nan(""))));
  EXPECT_EQ(Cast<float>(-std::numeric_limits<double>::infinity()), -inf);
  // float -> float16: 65520 is the first value that overflows.
  EXPECT_EQ(static_cast<float>(Cast<float16>(65519.0f)), 65504.0f);
  EXPECT_EQ(static_cast<float>(Cast<float16>(65520.0f)), inf);
  EXPECT_EQ(static_cast<float>(Cast<float16>(1.0f + 0x1p-11f)), 1.0f);  // tie: to even
  EXPECT_TRUE(std::isnan(static_cast<float>(Cast<float16>(std::nanf("")))));
  // float -> bfloat16.
  EXPECT_EQ(static_cast<float>(Cast<bfloat16>(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(static_cast<float>(Cast<bfloat16>(1.0f + 0x1p-8f + 0x1p-9f)), 1.0f + 0x1p-7f);
  EXPECT_EQ(static_cast<float>(Cast<bfloat16>(-inf)), -inf);
}

// As Eigen's (and so TensorFlow's) double -> bfloat16: through float, so a
// value just above a bfloat16 tie that float rounds onto the tie goes to
// even, where one rounding would go up.
TEST(CastElements, DoubleToBfloat16RoundsThroughFloat32AsEigenDoes) {
  const double just_above_tie = 1.0 + 0x1p-8 + 0x1p-30;
  EXPECT_EQ(static_cast<float>(Cast<bfloat16>(just_above_tie)), 1.0f);
  EXPECT_EQ(static_cast<float>(Cast<float16>(1.0 + 0x1p-11 + 0x1p-40)), 1.0f);
}

TEST(CastElements, FloatsToIntegersTruncateAndSaturate) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Cast<int8_t>(2.5f), 2);
  EXPECT_EQ(Cast<int8_t>(-2.5f), -2);
  EXPECT_EQ(Cast<int8_t>(-0.7f), 0);
  EXPECT_EQ(Cast<int8_t>(127.9f), 127);
  EXPECT_EQ(Cast<int8_t>(128.0f), 127);
  EXPECT_EQ(Cast<int8_t>(-128.9f), -128);
  EXPECT_EQ(Cast<int8_t>(-1e30f), -128);
  EXPECT_EQ(Cast<int8_t>(inf), 127);
  EXPECT_EQ(Cast<int8_t>(-inf), -128);
  EXPECT_EQ(Cast<int8_t>(std::nanf("")), 0);
  EXPECT_EQ(Cast<uint8_t>(-1.0f), 0);
  EXPECT_EQ(Cast<uint8_t>(255.5f), 255);
  EXPECT_EQ(Cast<uint8_t>(256.0f), 255);
  EXPECT_EQ(Cast<int64_t>(9.3e18), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Cast<int64_t>(-9.3e18), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Cast<int64_t>(0x1p62), int64_t{1} << 62);
  EXPECT_EQ(Cast<uint64_t>(1.9e19f), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(Cast<int32_t>(static_cast<float>(Cast<bfloat16>(-3.75f))), -3);
}

TEST(CastElements, IntegersSaturateAndRoundIntoFloats) {
  EXPECT_EQ(Cast<int32_t>(int64_t{1} << 40), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(Cast<int32_t>(-(int64_t{1} << 40)), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(Cast<int64_t>(uint64_t{1} << 63), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Cast<uint32_t>(int64_t{-5}), 0u);
  EXPECT_EQ(Cast<uint8_t>(int8_t{-1}), 0);
  EXPECT_EQ(Cast<int8_t>(uint8_t{200}), 127);
  EXPECT_EQ(Cast<int16_t>(int8_t{-128}), -128);
  EXPECT_EQ(Cast<float>((int64_t{1} << 24) + 1), 0x1p24f);  // tie: to even
  EXPECT_EQ(Cast<float>((int64_t{1} << 24) + 3), 0x1p24f + 4);
  EXPECT_EQ(Cast<double>(std::numeric_limits<uint64_t>::max()), 0x1p64);
}

TEST(CastElements, BoolsAreZeroAndOneAndAnyNonzeroIsTrue) {
  EXPECT_EQ(Cast<float>(true), 1.0f);
  EXPECT_EQ(Cast<int64_t>(false), 0);
  EXPECT_FALSE(Cast<bool>(0.0f));
  EXPECT_FALSE(Cast<bool>(-0.0));
  EXPECT_TRUE(Cast<bool>(std::nanf("")));
  EXPECT_TRUE(Cast<bool>(1e-45f));
  EXPECT_TRUE(Cast<bool>(int64_t{-7}));
}

TEST(CastElements, ComplexWidensAndRealsBecomeComplex) {
  const std::complex<float> c(1.5f, -2.25f);
  const std::complex<double> wide(1.5, -2.25);
  std::complex<double> out;
  CastElements(DT_COMPLEX64, &c, DT_COMPLEX128, &out, 1);
  EXPECT_EQ(out, wide);
  EXPECT_TRUE(CastAllowed(DT_COMPLEX64, DT_COMPLEX128, CastRule::kWidening));
  EXPECT_FALSE(CastAllowed(DT_COMPLEX128, DT_COMPLEX64, CastRule::kWidening));
  EXPECT_TRUE(CastAllowed(DT_FLOAT, DT_COMPLEX64, CastRule::kWidening));
  EXPECT_FALSE(CastAllowed(DT_DOUBLE, DT_COMPLEX64, CastRule::kWidening));
  const double x = -0.5;
  std::complex<float> z;
  CastElements(DT_DOUBLE, &x, DT_COMPLEX64, &z, 1);
  EXPECT_EQ(z, std::complex<float>(-0.5f, 0.0f));
}

// Checkpoint bytes need not be aligned for their type.
TEST(CastElements, ReadsUnalignedSources) {
  std::vector<char> bytes(1 + 3 * sizeof(double));
  const double values[] = {1.25, -3.5, 1e300};
  std::memcpy(bytes.data() + 1, values, sizeof(values));
  float out[3];
  CastElements(DT_DOUBLE, bytes.data() + 1, DT_FLOAT, out, 3);
  EXPECT_EQ(out[0], 1.25f);
  EXPECT_EQ(out[1], -3.5f);
  EXPECT_EQ(out[2], std::numeric_limits<float>::infinity());
}

TEST(CastRule, RefusalsSayWhyAndWhatWouldConvert) {
  EXPECT_THAT(CastRefusal(DT_BFLOAT16, DT_FLOAT, CastRule::kNone),
              HasSubstr("kWidening or kAny converts bfloat16 to float32"));
  EXPECT_THAT(CastRefusal(DT_DOUBLE, DT_FLOAT, CastRule::kWidening),
              HasSubstr("a float64 value does not always fit a float32 exactly"));
  EXPECT_THAT(CastRefusal(DT_DOUBLE, DT_FLOAT, CastRule::kWidening), HasSubstr("kAny"));
  EXPECT_THAT(CastRefusal(DT_COMPLEX64, DT_FLOAT, CastRule::kAny),
              HasSubstr("would drop the imaginary part"));
  EXPECT_THAT(CastRefusal(DT_STRING, DT_FLOAT, CastRule::kAny),
              HasSubstr("no rule converts string to float32"));
  EXPECT_THAT(CastRefusal(DT_FLOAT, DT_STRING, CastRule::kAny), HasSubstr("no rule"));
  EXPECT_EQ(CastRefusal(DT_STRING, DT_STRING, CastRule::kNone), "");
  EXPECT_EQ(CastRefusal(DT_HALF, DT_DOUBLE, CastRule::kWidening), "");
}

}  // namespace
}  // namespace ckflow
