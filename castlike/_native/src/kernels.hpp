// The element-wise kernels of castlike's native path, one readable template per family.
//
// No rule is restated here.  Every constant that a rule decides (what NaN becomes, the
// saturation bounds, the float8/float4/float6/E8M0 results) arrives at run time in `Params`,
// computed by castlike._native.routes from castlike.spec: the lookup tables are the spec's own
// tables, the bounds and special results come from the spec's types and oracle.  What is
// written here is arithmetic that is the same for every format: IEEE round to nearest even
// between binary formats, rounding to odd, class indices, low-bit wrapping, clamping.
//
// Exactness: every kernel runs inside FpEnvGuard (round to nearest, no FTZ/DAZ), so the
// hardware conversions used below are correctly rounded whatever the caller's environment.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace castlike {

using std::int16_t;
using std::int32_t;
using std::int64_t;
using std::int8_t;
using std::size_t;
using std::uint16_t;
using std::uint32_t;
using std::uint64_t;
using std::uint8_t;

//: Everything a kernel needs besides its input and output.  Which fields a family reads is
//: documented at the family.
struct Params {
  const void* table = nullptr;
  uint64_t mask = ~uint64_t{0};
  int class_bits = 0;
  int variant = 0;
  double lo = 0.0;
  double hi = 0.0;
  double limit = 0.0;
  double pre_lo = -std::numeric_limits<double>::infinity();
  double pre_hi = std::numeric_limits<double>::infinity();
  int64_t ilo = 0;
  int64_t ihi = 0;
  uint64_t nan_result = 0;
  uint64_t hi_result = 0;
};

template <class To, class From>
inline To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of one size");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

// -- binary IEEE formats -----------------------------------------------------------------------

template <class Storage, int ExponentBits, int MantissaBits>
struct IeeeFormat {
  using U = Storage;
  static constexpr int E = ExponentBits;
  static constexpr int M = MantissaBits;
  static constexpr int BIAS = (1 << (E - 1)) - 1;
  static constexpr U SIGN = U(U(1) << (E + M));
  static constexpr U MANTISSA = U((U(1) << M) - 1);
  static constexpr U INF = U(U((U(1) << E) - 1) << M);
};
using Float64 = IeeeFormat<uint64_t, 11, 52>;
using Float32 = IeeeFormat<uint32_t, 8, 23>;
using Float16 = IeeeFormat<uint16_t, 5, 10>;
using BFloat16 = IeeeFormat<uint16_t, 8, 7>;

//: The NaN that narrowing produces: quiet, with the input's sign and the top payload bits (as
//: the hardware conversions do, so that SIMD and portable code give the same bits).
template <class S, class D>
inline typename D::U narrow_nan(typename S::U bits) {
  using DU = typename D::U;
  const DU sign = (bits & S::SIGN) ? D::SIGN : DU(0);
  const DU payload = DU((bits & S::MANTISSA) >> (S::M - D::M));
  return DU(sign | D::INF | DU(DU(1) << (D::M - 1)) | payload);
}

//: IEEE round to nearest, ties to even, from the exact value of `bits` (format S) to the
//: narrower format D; overflow gives Inf.  Integer arithmetic only.
template <class S, class D>
inline typename D::U narrow_rne(typename S::U bits) {
  using SU = typename S::U;
  using DU = typename D::U;
  static_assert(S::M > D::M && S::E >= D::E, "narrowing only");
  const SU magnitude = SU(bits & ~S::SIGN);
  const DU sign = (bits & S::SIGN) ? D::SIGN : DU(0);
  if (magnitude >= S::INF) {
    return magnitude == S::INF ? DU(sign | D::INF) : narrow_nan<S, D>(bits);
  }
  const int field = int(magnitude >> S::M);
  const SU significand = field == 0 ? magnitude : SU((magnitude & S::MANTISSA) | (SU(1) << S::M));
  // Biased target exponent of the value's leading position (a subnormal source is below every
  // target's normal range, so its exact leading position does not matter).
  const int64_t exponent = int64_t(field == 0 ? 1 : field) - S::BIAS + D::BIAS;
  const int64_t shift = (S::M - D::M) + (exponent < 1 ? 1 - exponent : 0);
  uint64_t rounded = 0;
  if (shift <= S::M + 1) {
    const uint64_t sig = significand;
    const uint64_t kept = sig >> shift;
    const uint64_t rest = sig & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    rounded = kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
  }
  // The carry of a rounded-up mantissa runs into the exponent field, as the encoding wants.
  const uint64_t encoded = (exponent < 1 ? 0 : uint64_t(exponent - 1) << D::M) + rounded;
  return DU(sign | (encoded >= D::INF ? D::INF : DU(encoded)));
}

//: Keep the upper bits of `bits` (truncation at D's precision; D has S's exponent range).
template <class S, class D>
inline typename D::U narrow_truncate(typename S::U bits) {
  static_assert(S::E == D::E, "truncation keeps the exponent field");
  if (typename S::U(bits & ~S::SIGN) > S::INF) return narrow_nan<S, D>(bits);
  return typename D::U(bits >> (S::M - D::M));
}

//: FLOAT bits of a DOUBLE rounded to odd: truncate, then set the last bit if inexact (rounding
//: a value to odd at p + 2 or more bits, then to nearest at p bits, rounds it once).  NaN stays
//: NaN; beyond FLOAT's range it gives FLOAT's largest value, which is odd.
inline uint32_t float32_odd_bits(double x) {
  const float nearest = static_cast<float>(x);
  const double back = static_cast<double>(nearest);
  uint32_t bits = bit_cast<uint32_t>(nearest);
  bits -= (std::fabs(back) > std::fabs(x)) ? 1u : 0u;
  return bits | ((back != x) ? 1u : 0u);
}

//: DOUBLE bits of an integer of magnitude `m`, rounded to odd (exact up to 2**53).
inline uint64_t float64_odd_bits(bool negative, uint64_t m) {
  if (m == 0) return 0;
  const int width = 64 - __builtin_clzll(m);
  uint64_t significand;
  if (width <= 53) {
    significand = m << (53 - width);
  } else {
    const int drop = width - 53;
    significand = (m >> drop) | ((m & ((uint64_t{1} << drop) - 1)) != 0 ? 1 : 0);
  }
  const uint64_t sign = negative ? Float64::SIGN : 0;
  return sign | (uint64_t(width - 1 + Float64::BIAS) << 52) | (significand & Float64::MANTISSA);
}

template <class I>
inline uint64_t float64_odd_bits_of(I v) {
  if constexpr (std::is_signed_v<I>) {
    const bool negative = v < 0;
    const uint64_t m = negative ? uint64_t(0) - uint64_t(int64_t(v)) : uint64_t(v);
    return float64_odd_bits(negative, m);
  } else {
    return float64_odd_bits(false, uint64_t(v));
  }
}

// -- families -------------------------------------------------------------------------------
// Each family is a functor `Out operator()(In) const` over raw storage (floats arrive as their
// bits), so that one loop template runs them all and the compiler can vectorise it.

//: Sources of 16 bits or fewer: one gather from the spec's table of every source pattern.
//: Reads `table` (Out entries) and `mask` (the source's significant bits).
template <class In, class Out>
struct Gather {
  using InT = In;
  using OutT = Out;
  const Out* table;
  In mask;
  explicit Gather(const Params& p)
      : table(static_cast<const Out*>(p.table)), mask(static_cast<In>(p.mask)) {}
  Out operator()(In x) const { return table[x & mask]; }
};

//: A FLOAT's class: sign, exponent, the mantissa bits above `class_bits`, and a sticky bit for
//: the rest.  Every class member has the same result in a small float target.
inline uint32_t float32_class(uint32_t bits, int class_bits) {
  const uint32_t sticky = (bits & ((uint32_t{1} << class_bits) - 1)) != 0 ? 1u : 0u;
  return ((bits >> class_bits) << 1) | sticky;
}

//: How a wide source arrives: FLOAT or DOUBLE as their bits, integers as themselves.
struct FloatBits {
  using T = uint32_t;
};
struct DoubleBits {
  using T = uint64_t;
};
template <class I>
struct Integer {
  using T = I;
};

//: Source value -> FLOAT bits that carry the single rounding (rounded to odd), or the nearest
//: FLOAT (variant 1, the profiles that round wide sources through FLOAT first).
template <class Source>
inline uint32_t float32_bits_for_class(typename Source::T x, int variant) {
  if constexpr (std::is_same_v<Source, FloatBits>) {
    (void)variant;
    return x;
  } else if constexpr (std::is_same_v<Source, DoubleBits>) {
    const double d = bit_cast<double>(x);
    return variant == 1 ? bit_cast<uint32_t>(static_cast<float>(d)) : float32_odd_bits(d);
  } else if constexpr (sizeof(typename Source::T) == 4) {  // INT32 / UINT32: exact in DOUBLE
    (void)variant;
    return float32_odd_bits(static_cast<double>(x));
  } else {  // INT64 / UINT64
    (void)variant;
    return float32_odd_bits(bit_cast<double>(float64_odd_bits_of(x)));
  }
}

//: Wide source -> 8-bit float target through the spec's FLOAT class table.
//: Reads `table` (uint8), `class_bits`, `variant` (see float32_bits_for_class).
template <class Source>
struct FloatClass {
  using InT = typename Source::T;
  using OutT = uint8_t;
  const uint8_t* table;
  int class_bits;
  int variant;
  explicit FloatClass(const Params& p)
      : table(static_cast<const uint8_t*>(p.table)), class_bits(p.class_bits), variant(p.variant) {}
  uint8_t operator()(InT x) const {
    return table[float32_class(float32_bits_for_class<Source>(x, variant), class_bits)];
  }
};

//: DOUBLE -> 8-bit float target through the spec's DOUBLE class table (same classes as FLOAT,
//: with DOUBLE's exponent).  Reads `table` (uint8) and `class_bits`.
struct DoubleClass {
  using InT = uint64_t;
  using OutT = uint8_t;
  const uint8_t* table;
  int class_bits;
  explicit DoubleClass(const Params& p)
      : table(static_cast<const uint8_t*>(p.table)), class_bits(p.class_bits) {}
  uint8_t operator()(uint64_t bits) const {
    const uint64_t sticky = (bits & ((uint64_t{1} << class_bits) - 1)) != 0 ? 1 : 0;
    return table[((bits >> class_bits) << 1) | sticky];
  }
};

//: FLOAT -> FLOAT16, round to nearest even (portable integer form; F16C below).
struct Float32ToFloat16 {
  using InT = uint32_t;
  using OutT = uint16_t;
  explicit Float32ToFloat16(const Params&) {}
  uint16_t operator()(uint32_t bits) const { return narrow_rne<Float32, Float16>(bits); }
};

//: DOUBLE -> FLOAT16 or BFLOAT16, rounded once from the exact value.  For BFLOAT16, variant 1
//: rounds to the nearest FLOAT first and variant 2 then truncates (the reference and legacy
//: profiles).
template <class D>
struct DoubleToHalf {
  using InT = uint64_t;
  using OutT = uint16_t;
  int variant;
  explicit DoubleToHalf(const Params& p) : variant(p.variant) {}
  uint16_t operator()(uint64_t bits) const {
    if constexpr (std::is_same_v<D, BFloat16>) {
      if (variant != 0) {
        const uint32_t f = bit_cast<uint32_t>(static_cast<float>(bit_cast<double>(bits)));
        return variant == 1 ? narrow_rne<Float32, D>(f) : narrow_truncate<Float32, D>(f);
      }
    }
    return narrow_rne<Float64, D>(bits);
  }
};

//: FLOAT -> BFLOAT16: round to nearest even (variant 0) or truncate (variant 2, legacy).
struct Float32ToBFloat16 {
  using InT = uint32_t;
  using OutT = uint16_t;
  int variant;
  explicit Float32ToBFloat16(const Params& p) : variant(p.variant) {}
  uint16_t operator()(uint32_t bits) const {
    if (variant == 2) return narrow_truncate<Float32, BFloat16>(bits);
    // The usual branch-free form of narrow_rne for equal exponent ranges.
    const uint32_t rounded = (bits + (0x7FFFu + ((bits >> 16) & 1u))) >> 16;
    return (bits & 0x7FFFFFFFu) > 0x7F800000u ? narrow_nan<Float32, BFloat16>(bits)
                                              : uint16_t(rounded);
  }
};

//: Integer -> FLOAT16: beyond +-2**17 every integer overflows FLOAT16 to Inf, so clamping there
//: keeps the result and makes the value exact in FLOAT.
template <class I>
struct IntToFloat16 {
  using InT = I;
  using OutT = uint16_t;
  explicit IntToFloat16(const Params&) {}
  uint16_t operator()(I x) const {
    constexpr I kBound = I(1) << 17;
    I clamped = x > kBound ? kBound : x;
    if constexpr (std::is_signed_v<I>) clamped = clamped < -kBound ? I(-kBound) : clamped;
    return narrow_rne<Float32, Float16>(bit_cast<uint32_t>(static_cast<float>(clamped)));
  }
};

//: Integer -> BFLOAT16: the integer rounded to odd into DOUBLE, then once to BFLOAT16; variant 1
//: rounds to the nearest FLOAT first, variant 2 then truncates (reference and legacy profiles).
template <class I>
struct IntToBFloat16 {
  using InT = I;
  using OutT = uint16_t;
  int variant;
  explicit IntToBFloat16(const Params& p) : variant(p.variant) {}
  uint16_t operator()(I x) const {
    if (variant == 0) return narrow_rne<Float64, BFloat16>(float64_odd_bits_of(x));
    const uint32_t f = bit_cast<uint32_t>(static_cast<float>(x));
    return variant == 1 ? narrow_rne<Float32, BFloat16>(f) : narrow_truncate<Float32, BFloat16>(f);
  }
};

//: The hardware conversion where it is the rule: integers and DOUBLE -> FLOAT, integers and
//: FLOAT -> DOUBLE (correctly rounded under FpEnvGuard).  `In`/`Out` are value types.
template <class In, class Out>
struct Convert {
  using InT = In;
  using OutT = Out;
  explicit Convert(const Params&) {}
  Out operator()(In x) const { return static_cast<Out>(x); }
};

//: FLOAT/DOUBLE -> integer, truncating toward zero and saturating.  Reads `lo`/`hi` (bounds
//: exact in F, the first the target's minimum), `limit` and `hi_result` (x >= limit gives
//: hi_result, for maxima F cannot hold), `nan_result`.
template <class F, class Out>
struct FloatToInt {
  using InT = F;
  using OutT = Out;
  F lo, hi, limit;
  Out nan_result, hi_result;
  explicit FloatToInt(const Params& p)
      : lo(F(p.lo)),
        hi(F(p.hi)),
        limit(F(p.limit)),
        nan_result(Out(p.nan_result)),
        hi_result(Out(p.hi_result)) {}
  Out operator()(F x) const {
    F clamped = x < lo ? lo : x;
    clamped = clamped > hi ? hi : clamped;
    using Wide = std::conditional_t<(sizeof(Out) < 4), int32_t, Out>;
    Out out = Out(static_cast<Wide>(x != x ? F(0) : clamped));
    out = x >= limit ? hi_result : out;
    return x != x ? nan_result : out;
  }
};

//: FLOAT/DOUBLE -> a sub-byte integer: optional clamp to `pre_lo`/`pre_hi` (Inf passes: the
//: legacy range rule), round half to even (variant 0) or toward zero (variant 1), clamp to
//: +-`hi` (a multiple of 2**bits beyond which every float is one), keep the bits in `mask`;
//: NaN gives `nan_result`.
template <class F>
struct FloatToSubByte {
  using InT = F;
  using OutT = uint8_t;
  F pre_lo, pre_hi, bound;
  int variant;
  uint8_t mask, nan_result;
  explicit FloatToSubByte(const Params& p)
      : pre_lo(F(p.pre_lo)),
        pre_hi(F(p.pre_hi)),
        bound(F(p.hi)),
        variant(p.variant),
        mask(uint8_t(p.mask)),
        nan_result(uint8_t(p.nan_result)) {}
  uint8_t operator()(F x) const {
    F v = x;
    if (!std::isinf(v)) v = v < pre_lo ? pre_lo : (v > pre_hi ? pre_hi : v);
    v = variant == 0 ? std::nearbyint(v) : std::trunc(v);
    v = v < -bound ? -bound : (v > bound ? bound : v);
    v = x != x ? F(0) : v;  // no conversion of a NaN (undefined behaviour)
    return x != x ? nan_result : uint8_t(static_cast<int64_t>(v) & mask);
  }
};

//: Integer -> integer: two's complement, keep the low bits (`mask`); variant 1 first clamps to
//: [`ilo`, `ihi`] (the legacy range rule for sub-byte targets).
template <class In, class Out>
struct IntToInt {
  using InT = In;
  using OutT = Out;
  In lo, hi;
  int variant;
  Out mask;
  explicit IntToInt(const Params& p)
      : lo(In(p.ilo)), hi(In(p.ihi)), variant(p.variant), mask(Out(p.mask)) {}
  Out operator()(In x) const {
    const In v = variant == 1 ? (x < lo ? lo : (x > hi ? hi : x)) : x;
    return Out(Out(v) & mask);
  }
};

//: -> BOOL: 1 where the bits in `mask` are not all zero (a float's magnitude bits: -0 is zero,
//: NaN is not).
template <class In>
struct NonZero {
  using InT = In;
  using OutT = uint8_t;
  In mask;
  explicit NonZero(const Params& p) : mask(In(p.mask)) {}
  uint8_t operator()(In x) const { return (x & mask) != 0 ? 1 : 0; }
};

// -- loops ------------------------------------------------------------------------------------

template <class Op>
void map_elements(const void* in, void* out, size_t begin, size_t end, const Params& p) {
  using In = typename Op::InT;
  using Out = typename Op::OutT;
  const Op op(p);
  const In* __restrict src = static_cast<const In*>(in);
  Out* __restrict dst = static_cast<Out*>(out);
  for (size_t i = begin; i < end; ++i) dst[i] = op(src[i]);
}

//: FLOAT -> FLOAT16 with F16C: `vcvtps2ph` with an explicit round-to-nearest-even immediate
//: (never MXCSR's mode); the tail goes through the portable functor.
template <>
inline void map_elements<Float32ToFloat16>(const void* in, void* out, size_t begin, size_t end,
                                           const Params& p) {
  const uint32_t* src = static_cast<const uint32_t*>(in);
  uint16_t* dst = static_cast<uint16_t*>(out);
  size_t i = begin;
#if defined(__AVX512F__)
  for (; i + 16 <= end; i += 16) {
    const __m512 v = _mm512_castsi512_ps(_mm512_loadu_si512(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        // The masked form: the plain one reads an undefined register (GCC 12).
                        _mm512_mask_cvtps_ph(_mm256_setzero_si256(), __mmask16(0xFFFF), v,
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#elif defined(__F16C__)
  for (; i + 8 <= end; i += 8) {
    const __m256 v = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
  const Float32ToFloat16 op(p);
  for (; i < end; ++i) dst[i] = op(src[i]);
}

}  // namespace castlike
