// Element conversions between dtypes, as a restore makes them when a
// checkpoint holds a variable in another dtype than the program's
// (RestoreOptions::cast).
//
// TensorFlow converts nothing on restore: a dtype mismatch is an error, and
// that stays the default (CastRule::kNone). The two other rules say how
// much a caller lets a restore change:
//   kWidening  only conversions that keep every value exactly: bfloat16 and
//              float16 to float32 to float64, a narrower integer to a wider
//              one (unsigned to a wider signed one too), an integer to a
//              float type whose significand holds all of its values, a real
//              type to complex, bool to any number. The rule is NumPy's
//              "safe" casting.
//   kAny       any conversion between bool and the real and complex number
//              types but complex to real (that would drop the imaginary part
//              without a word). Floats narrow with rounding to nearest even,
//              keeping NaN and infinity and overflowing to infinity, as
//              TensorFlow's tf.cast does; to an integer, a float truncates
//              toward zero and saturates at the integer's bounds, NaN gives 0,
//              and a wider integer saturates too (tf.dtypes.saturate_cast).
//              float64 becomes float16 or bfloat16 through float32, as
//              Eigen's (and so TensorFlow's) conversions do.
// Strings convert to nothing but strings.
//
// Thread safety: pure functions.

#ifndef CKFLOW_BASE_CAST_H_
#define CKFLOW_BASE_CAST_H_

#include <cstdint>
#include <string_view>

#include "base/types.h"

namespace ckflow {

enum class CastRule {
  kNone,
  kWidening,
  kAny,
};

// "none", "widening", "any".
std::string_view CastRuleName(CastRule rule);

// True if `rule` lets a `from` value become a `to` (a dtype to itself
// always: that is no conversion).
bool CastAllowed(DataType from, DataType to, CastRule rule);

// Why `rule` does not convert `from` to `to`, for an error message: "a
// float64 value does not always fit a float32 exactly (CastRule::kAny
// rounds it)". Empty if it does.
std::string CastRefusal(DataType from, DataType to, CastRule rule);

// Converts `n` elements at `src` (of dtype `from`, in memory order, not
// necessarily aligned) to `to` at `dst`, with kAny's arithmetic (kWidening's
// conversions are exact under it). Both must be types CastAllowed(from, to,
// kAny) admits, and neither a string. Subnormals are kept, as IEEE
// arithmetic and NumPy keep them, even on a thread that flushes them (a
// kernel's).
void CastElements(DataType from, const void* src, DataType to, void* dst, int64_t n);

}  // namespace ckflow

#endif  // CKFLOW_BASE_CAST_H_
