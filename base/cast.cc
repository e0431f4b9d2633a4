#include "base/cast.h"

#include <bit>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "base/denormal_internal.h"

namespace ckflow {

namespace {

// What decides whether a conversion is exact: for an integer, its value
// bits and sign; for a float (or each half of a complex), its significand
// digits and the exponents it reaches, subnormals included.
struct Kind {
  enum Class { kOther, kBool, kInteger, kFloat, kComplex } klass = kOther;
  int digits = 0;
  bool is_signed = false;
  int max_exponent = 0;
  int min_exponent = 0;
};

Kind KindOf(DataType dtype) {
  switch (dtype) {
    case DT_BOOL:
      return {Kind::kBool};
    case DT_INT8:
      return {Kind::kInteger, 7, true};
    case DT_UINT8:
      return {Kind::kInteger, 8, false};
    case DT_INT16:
      return {Kind::kInteger, 15, true};
    case DT_UINT16:
      return {Kind::kInteger, 16, false};
    case DT_INT32:
      return {Kind::kInteger, 31, true};
    case DT_UINT32:
      return {Kind::kInteger, 32, false};
    case DT_INT64:
      return {Kind::kInteger, 63, true};
    case DT_UINT64:
      return {Kind::kInteger, 64, false};
    case DT_HALF:
      return {Kind::kFloat, 11, true, 16, -24};
    case DT_BFLOAT16:
      return {Kind::kFloat, 8, true, 128, -133};
    case DT_FLOAT:
      return {Kind::kFloat, 24, true, 128, -149};
    case DT_DOUBLE:
      return {Kind::kFloat, 53, true, 1024, -1074};
    case DT_COMPLEX64:
      return {Kind::kComplex, 24, true, 128, -149};
    case DT_COMPLEX128:
      return {Kind::kComplex, 53, true, 1024, -1074};
    default:
      return {};
  }
}

bool IsNumber(const Kind& k) { return k.klass != Kind::kOther; }

// kWidening: every value of `from` is a value of `to`.
bool Exact(const Kind& from, const Kind& to) {
  if (from.klass == Kind::kBool) return true;
  if (to.klass == Kind::kBool) return false;
  if (from.klass == Kind::kInteger) {
    if (to.klass == Kind::kInteger)
      return (to.is_signed || !from.is_signed) && to.digits >= from.digits;
    return to.digits >= from.digits;  // a float or complex significand
  }
  if (to.klass == Kind::kInteger) return false;
  if (from.klass == Kind::kComplex && to.klass != Kind::kComplex) return false;
  return to.digits >= from.digits && to.max_exponent >= from.max_exponent &&
         to.min_exponent <= from.min_exponent;
}

}  // namespace

std::string_view CastRuleName(CastRule rule) {
  switch (rule) {
    case CastRule::kNone:
      return "none";
    case CastRule::kWidening:
      return "widening";
    case CastRule::kAny:
      return "any";
  }
  return "unknown";
}

bool CastAllowed(DataType from, DataType to, CastRule rule) {
  return CastRefusal(from, to, rule).empty();
}

std::string CastRefusal(DataType from, DataType to, CastRule rule) {
  if (from == to) return {};
  const Kind f = KindOf(from);
  const Kind t = KindOf(to);
  const std::string a(DataTypeName(from));
  const std::string b(DataTypeName(to));
  if (!IsNumber(f) || !IsNumber(t)) return "no rule converts " + a + " to " + b;
  if (f.klass == Kind::kComplex && t.klass != Kind::kComplex) {
    return "converting " + a + " to " + b + " would drop the imaginary part";
  }
  switch (rule) {
    case CastRule::kNone:
      return "RestoreOptions::cast is CastRule::kNone (kWidening or kAny converts " + a + " to " +
             b + ")";
    case CastRule::kWidening:
      if (Exact(f, t)) return {};
      return "a " + a + " value does not always fit a " + b +
             " exactly, and RestoreOptions::cast is CastRule::kWidening (kAny converts it)";
    case CastRule::kAny:
      return {};
  }
  return "unknown cast rule";
}

namespace {

template <typename T>
struct IsComplex : std::false_type {};
template <typename T>
struct IsComplex<std::complex<T>> : std::true_type {};

template <typename T>
constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
constexpr bool kIsHalfFloat = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

// A real value as a double (exact for every real type but the 64-bit
// integers, which only a bool or an integer target reads without this).
template <typename T>
double AsDouble(T x) {
  if constexpr (kIsHalfFloat<T>) {
    return static_cast<float>(x);
  } else {
    return static_cast<double>(x);
  }
}

// The largest double that float32 rounds to its largest finite value; from
// here on IEEE rounds to infinity, where C++ leaves the conversion undefined.
constexpr double kFloatOverflow = 0x1.fffffep127 + 0x1p103;

float NarrowToFloat(double x) {
  if (x >= kFloatOverflow) return std::numeric_limits<float>::infinity();
  if (x <= -kFloatOverflow) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(x);
}

// Truncates toward zero and saturates; NaN gives 0 (a float's NaN has no
// integer, and 0 is what a reader least mistakes for data).
template <typename To>
To FloatToInteger(double x) {
  using Limits = std::numeric_limits<To>;
  if (std::isnan(x)) return 0;
  // Both bounds are powers of two (or 0), so exact as doubles.
  constexpr double kLow = static_cast<double>(Limits::min());
  const double high = std::ldexp(1.0, Limits::digits);  // max + 1
  if (x <= kLow) return Limits::min();
  if (x >= high) return Limits::max();
  return static_cast<To>(x);
}

template <typename To, typename From>
To SaturateInteger(From x) {
  using Limits = std::numeric_limits<To>;
  if constexpr (std::is_signed_v<From>) {
    if (x < 0) {
      if constexpr (!std::is_signed_v<To>) {
        return 0;
      } else {
        return static_cast<int64_t>(x) < static_cast<int64_t>(Limits::min()) ? Limits::min()
                                                                             : static_cast<To>(x);
      }
    }
  }
  return static_cast<uint64_t>(x) > static_cast<uint64_t>(Limits::max()) ? Limits::max()
                                                                         : static_cast<To>(x);
}

template <typename To, typename From>
To CastOne(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (IsComplex<To>::value) {
    using Part = typename To::value_type;
    if constexpr (IsComplex<From>::value) {
      return To(CastOne<Part>(x.real()), CastOne<Part>(x.imag()));
    } else {
      return To(CastOne<Part>(x), Part(0));
    }
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (kIsInteger<From>) {
      return x != 0;
    } else {
      return AsDouble(x) != 0;  // NaN too is true, as everywhere in C++ and NumPy
    }
  } else if constexpr (kIsInteger<To>) {
    if constexpr (std::is_same_v<From, bool>) {
      return x ? 1 : 0;
    } else if constexpr (kIsInteger<From>) {
      return SaturateInteger<To>(x);
    } else {
      return FloatToInteger<To>(AsDouble(x));
    }
  } else if constexpr (kIsHalfFloat<To>) {
    return To(CastOne<float>(x));
  } else if constexpr (std::is_same_v<To, float>) {
    if constexpr (std::is_same_v<From, double>) {
      return NarrowToFloat(x);
    } else if constexpr (kIsHalfFloat<From>) {
      return static_cast<float>(x);
    } else {
      return static_cast<float>(x);  // an integer rounds to nearest even; a bool is 0 or 1
    }
  } else {
    static_assert(std::is_same_v<To, double>);
    return AsDouble(x);
  }
}

// IEEE binary16 to float, exactly (Fabian Giesen's method): branch-light
// and inline, where float16's own conversion is a call per element and the
// widening restore of a float16 checkpoint would run at a third of a plain
// restore's speed.
inline float HalfBitsToFloat(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7C00u << 13;  // exponent mask after the shift
  uint32_t bits = (static_cast<uint32_t>(h) & 0x7FFFu) << 13;
  const uint32_t exp = bits & kShiftedExp;
  bits += (127u - 15u) << 23;  // rebias the exponent
  if (exp == kShiftedExp) {
    bits += (128u - 16u) << 23;  // infinity or NaN
  } else if (exp == 0) {         // zero or subnormal: renormalize
    bits += 1u << 23;
    bits = std::bit_cast<uint32_t>(std::bit_cast<float>(bits) - std::bit_cast<float>(113u << 23));
  }
  return std::bit_cast<float>(bits | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

template <typename From, typename To>
void CastLoop(const void* src, void* dst, int64_t n) {
  const auto* in = static_cast<const char*>(src);
  To* out = static_cast<To*>(dst);
  // The widenings a restore of a half-precision export makes, as plain bit
  // operations the compiler vectorizes: bfloat16 is a float's upper half.
  if constexpr ((std::is_same_v<From, bfloat16> || std::is_same_v<From, float16>)&&(
                    std::is_same_v<To, float> || std::is_same_v<To, double>)) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, in + 2 * i, 2);
      float f;
      if constexpr (std::is_same_v<From, bfloat16>) {
        f = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
      } else {
        f = HalfBitsToFloat(h);
      }
      out[i] = static_cast<To>(f);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    // Checkpoint bytes need not be aligned for From: memcpy loads them (one
    // unaligned load once compiled).
    From x;
    std::memcpy(&x, in + i * static_cast<int64_t>(sizeof(From)), sizeof(From));
    out[i] = CastOne<To>(x);
  }
}

template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>()) for the C++ type T of `dtype`; false if it is not a number.
template <typename F>
bool VisitNumber(DataType dtype, F&& f) {
  switch (dtype) {
    case DT_BOOL:
      f(Tag<bool>());
      return true;
    case DT_INT8:
      f(Tag<int8_t>());
      return true;
    case DT_UINT8:
      f(Tag<uint8_t>());
      return true;
    case DT_INT16:
      f(Tag<int16_t>());
      return true;
    case DT_UINT16:
      f(Tag<uint16_t>());
      return true;
    case DT_INT32:
      f(Tag<int32_t>());
      return true;
    case DT_UINT32:
      f(Tag<uint32_t>());
      return true;
    case DT_INT64:
      f(Tag<int64_t>());
      return true;
    case DT_UINT64:
      f(Tag<uint64_t>());
      return true;
    case DT_HALF:
      f(Tag<float16>());
      return true;
    case DT_BFLOAT16:
      f(Tag<bfloat16>());
      return true;
    case DT_FLOAT:
      f(Tag<float>());
      return true;
    case DT_DOUBLE:
      f(Tag<double>());
      return true;
    case DT_COMPLEX64:
      f(Tag<std::complex<float>>());
      return true;
    case DT_COMPLEX128:
      f(Tag<std::complex<double>>());
      return true;
    default:
      return false;
  }
}

}  // namespace

void CastElements(DataType from, const void* src, DataType to, void* dst, int64_t n) {
  const internal::ScopedDenormals ieee(false);
  VisitNumber(from, [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    VisitNumber(to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      if constexpr (IsComplex<From>::value && !IsComplex<To>::value) {
        // CastAllowed refuses it; nothing is written.
      } else {
        CastLoop<From, To>(src, dst, n);
      }
    });
  });
}

}  // namespace ckflow
