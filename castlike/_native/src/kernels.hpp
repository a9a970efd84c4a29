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

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>  // sysconf: the second-level cache (glibc names it)
#endif

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
//: documented at the family.  `variant` picks a family's compile-time Variant (the profile
//: knobs), outside the loop, so that every loop body is free of run-time switches.
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
  // The small float targets' arithmetic kernel (SmallFloat in small_float.hpp): the format's
  // mantissa bits and smallest normal exponent, the code that NaN is capped at, the sign bit,
  // and the results of the codes 0 and `cap_code` for a positive and a negative input.
  int mantissa_bits = 0;
  int min_exponent = 0;
  int cap_code = -1;
  int sign_mask = -1;
  int zero_results[2] = {-1, -1};
  int cap_results[2] = {-1, -1};
  // What a family works out once, when the kernel is made, instead of on every call
  // (Prepare<Op> in module.cpp): byte_float.hpp's arithmetic for a table and whether it gives
  // it.  Bytes, because what is prepared differs between the builds; `prepared` says whether
  // they hold anything.
  bool prepared = false;
  alignas(16) unsigned char preparation[192] = {};
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

//: The DOUBLE of a 32-bit half of a 64-bit lane, exactly, without a conversion instruction:
//: the half (its sign bit flipped where signed) placed in the mantissa of 2**52, minus 2**52
//: (and 2**31).  Integer and floating-point steps on 64-bit lanes only, which vectorise where
//: the CPU has no 64-bit integer conversion (AVX2; AVX-512DQ has one).
inline double float64_of_u32(uint64_t low_bits) {
  return bit_cast<double>(0x4330000000000000ull | (low_bits & 0xFFFFFFFFu)) - 0x1p52;
}
inline double float64_of_i32(uint64_t low_bits) {
  return bit_cast<double>(0x4330000000000000ull | ((low_bits ^ 0x80000000u) & 0xFFFFFFFFu)) -
         (0x1p52 + 0x1p31);
}

//: A 64-bit integer as two exact DOUBLEs whose sum is its value: its upper half (signed for a
//: signed I) times 2**32, and its lower half.
struct ExactHalves {
  double high, low;
};
template <class I>
inline ExactHalves exact_halves(I v) {
  static_assert(sizeof(I) == 8, "64-bit integers");
  const uint64_t high = uint64_t(v) >> 32;
  return {(std::is_signed_v<I> ? float64_of_i32(high) : float64_of_u32(high)) * 4294967296.0,
          float64_of_u32(uint64_t(v))};
}

//: A 64-bit integer rounded to the nearest DOUBLE (ties to even, under FpEnvGuard), as the
//: conversion rounds it: the sum of its exact halves rounds once.  No 64-bit conversion, so
//: that the loop vectorises.
template <class I>
inline double float64_of_int64(I v) {
  const ExactHalves h = exact_halves(v);
  return h.high + h.low;
}

//: DOUBLE bits of a 64-bit integer rounded to odd: its two 32-bit halves are exact in DOUBLE,
//: their sum is rounded to nearest, and TwoSum gives that sum's exact error, which says which
//: way to step to truncate and whether the result is inexact.  No 64-bit conversion, so that
//: the loop vectorises; exact under FpEnvGuard.  32-bit integers are exact in DOUBLE.
template <class I>
inline uint64_t float64_odd_bits_of(I v) {
  if constexpr (sizeof(I) <= 4) {
    return bit_cast<uint64_t>(static_cast<double>(v));
  } else {
    const ExactHalves h = exact_halves(v);
    const double a = h.high, b = h.low;
    const double sum = a + b;
    const double bb = sum - a;
    const double err = (a - (sum - bb)) + (b - bb);
    uint64_t bits = bit_cast<uint64_t>(sum);
    const bool inexact = err != 0.0;
    const bool overshoot = (err < 0.0) == (sum > 0.0);
    bits -= (inexact && overshoot) ? 1 : 0;
    return bits | (inexact ? 1 : 0);
  }
}

//: FLOAT bits of an integer clamped to [lo, hi], a range within +-2**24 where FLOAT holds every
//: integer: through int32, which holds every clamped value (one vector conversion for every
//: source width).
template <class I>
inline uint32_t clamped_float32_bits(I x, I lo, I hi) {
  const I clamped = x < lo ? lo : (x > hi ? hi : x);
  return bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(clamped)));
}

//: FLOAT -> FLOAT16 bits, round to nearest even, without branches: the float's magnitude is
//: scaled so that the hardware's own rounding at FLOAT precision lands on FLOAT16's quantum
//: (the classic bias trick), then the FLOAT16 fields are read off.  NaN follows narrow_nan.
inline uint16_t float16_rne_bits(uint32_t w) {
  const float magnitude = bit_cast<float>(w & 0x7FFFFFFFu);
  float base = (magnitude * 0x1.0p+112f) * 0x1.0p-110f;  // overflow to Inf beyond FLOAT16
  const uint32_t shl1 = w + w;
  uint32_t bias = shl1 & 0xFF000000u;
  bias = bias < 0x71000000u ? 0x71000000u : bias;  // subnormals share the smallest quantum
  base = bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t b = bit_cast<uint32_t>(base);
  const uint16_t magnitude16 = uint16_t(((b >> 13) & 0x7C00u) + (b & 0x0FFFu));
  const uint16_t sign = uint16_t((w >> 16) & 0x8000u);
  return shl1 > 0xFF000000u ? narrow_nan<Float32, Float16>(w) : uint16_t(sign | magnitude16);
}

//: FLOAT -> BFLOAT16 bits, round to nearest even: add half a BFLOAT16 quantum less one, plus
//: the kept part's last bit (ties to even), and keep the upper half; overflow carries into Inf.
inline uint16_t bfloat16_rne_bits(uint32_t bits) {
  const uint32_t rounded = (bits + (0x7FFFu + ((bits >> 16) & 1u))) >> 16;
  return (bits & 0x7FFFFFFFu) > 0x7F800000u ? narrow_nan<Float32, BFloat16>(bits)
                                            : uint16_t(rounded);
}

//: Round to the nearest integer, ties to even, by the hardware's own rounding: adding and
//: removing 2**mantissa leaves no fraction bits (values that large are integers already).
template <class F>
inline F round_half_even(F v) {
  constexpr F kBig = F(1) / std::numeric_limits<F>::epsilon();
  const F a = std::fabs(v);
  const F rounded = (a + kBig) - kBig;  // computed for every lane, kept where a < kBig
  return std::copysign(a < kBig ? rounded : a, v);
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
  static constexpr bool kIndexed = true;
  const Out* table;
  In mask;
  explicit Gather(const Params& p)
      : table(static_cast<const Out*>(p.table)), mask(static_cast<In>(p.mask)) {}
  uint32_t index(In x) const { return uint32_t(x & mask); }
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

//: Source value -> FLOAT bits that carry the single rounding (rounded to odd).  DOUBLE, Variant
//: 1: the nearest FLOAT instead (the profiles that round wide sources through FLOAT first).
//: Integers, Variant 1: clamped to [`lo`, `hi`] first (the route's clip, +-2**24 within the
//: source's range), which keeps every result of a target whose largest value is below the bound
//: and makes the integer exact in FLOAT.
template <class Source, int Variant>
inline uint32_t float32_bits_for_class(typename Source::T x,
                                       [[maybe_unused]] typename Source::T lo,
                                       [[maybe_unused]] typename Source::T hi) {
  if constexpr (std::is_same_v<Source, FloatBits>) {
    return x;
  } else if constexpr (std::is_same_v<Source, DoubleBits>) {
    const double d = bit_cast<double>(x);
    return Variant == 1 ? bit_cast<uint32_t>(static_cast<float>(d)) : float32_odd_bits(d);
  } else if constexpr (Variant == 1) {
    const auto clamped = x < lo ? lo : (x > hi ? hi : x);
    return bit_cast<uint32_t>(static_cast<float>(clamped));
  } else {  // rounded to odd into DOUBLE (exact for 32 bits), then into FLOAT
    return float32_odd_bits(bit_cast<double>(float64_odd_bits_of(x)));
  }
}

//: Wide source -> 8-bit float target through the spec's FLOAT class table.
//: Reads `table` (uint8) and `class_bits`; Variant as float32_bits_for_class.
template <class Source, int Variant = 0>
struct FloatClass {
  using InT = typename Source::T;
  using OutT = uint8_t;
  static constexpr bool kIndexed = true;
  //: FLOAT bits need no work before the gather; every other source is worth a vector pass.
  static constexpr bool kBlocked = !std::is_same_v<Source, FloatBits>;
  const uint8_t* table;
  int class_bits;
  InT lo, hi;  // an integer's clip (Variant 1)
  explicit FloatClass(const Params& p)
      : table(static_cast<const uint8_t*>(p.table)),
        class_bits(p.class_bits),
        lo(InT(p.ilo)),
        hi(InT(p.ihi)) {}
  uint32_t index(InT x) const {
    return float32_class(float32_bits_for_class<Source, Variant>(x, lo, hi), class_bits);
  }
};

//: DOUBLE -> 8-bit float target through the spec's DOUBLE class table (same classes as FLOAT,
//: with DOUBLE's exponent).  Reads `table` (uint8) and `class_bits`.
struct DoubleClass {
  using InT = uint64_t;
  using OutT = uint8_t;
  static constexpr bool kIndexed = true;
  const uint8_t* table;
  int class_bits;
  explicit DoubleClass(const Params& p)
      : table(static_cast<const uint8_t*>(p.table)), class_bits(p.class_bits) {}
  uint32_t index(uint64_t bits) const {
    const uint64_t sticky = (bits & ((uint64_t{1} << class_bits) - 1)) != 0 ? 1 : 0;
    return uint32_t(((bits >> class_bits) << 1) | sticky);
  }
};

//: FLOAT -> FLOAT16, round to nearest even (portable integer form; F16C below).
struct Float32ToFloat16 {
  using InT = uint32_t;
  using OutT = uint16_t;
  explicit Float32ToFloat16(const Params&) {}
  uint16_t operator()(uint32_t bits) const { return float16_rne_bits(bits); }
  //: FLOAT bits from a step source (simd_pack.hpp; BFLOAT16 -> FLOAT16): narrow_float.hpp.
  template <class Src>
  void run(Src src, uint16_t* dst, size_t n) const;
};

//: How a source becomes BFLOAT16 (the kernel's variant; routes.py mirrors the values):
//: rounded once from the exact value (the spec), to the nearest FLOAT first and then to nearest
//: even (the reference profiles before ml_dtypes 0.7, wide sources), or to the nearest FLOAT
//: and then truncated (the legacy profile: FLOAT's upper half).
enum class BFloat16Rounding : int { kOnce = 0, kNearestFloatFirst = 1, kTruncate = 2 };

//: BFLOAT16 bits of FLOAT bits that already carry the source's first rounding (to odd, to
//: nearest, or none for FLOAT itself).
template <BFloat16Rounding R>
inline uint16_t bfloat16_from_float_bits(uint32_t f) {
  return R == BFloat16Rounding::kTruncate ? narrow_truncate<Float32, BFloat16>(f)
                                          : bfloat16_rne_bits(f);
}

//: DOUBLE -> FLOAT16 (rounded once: through FLOAT rounded to odd, which keeps the information
//: for one correct rounding to 22 bits or fewer) or BFLOAT16 (as R says).  `block` runs a range
//: with SIMD where the build has it (narrow_float.hpp).
template <class D, BFloat16Rounding R = BFloat16Rounding::kOnce>
struct DoubleToHalf {
  using InT = uint64_t;
  using OutT = uint16_t;
  static constexpr int kVariant = int(R);
  explicit DoubleToHalf(const Params&) {}
  //: The FLOAT bits that carry the first rounding.
  static uint32_t float_bits(uint64_t bits) {
    const double d = bit_cast<double>(bits);
    return R == BFloat16Rounding::kOnce ? float32_odd_bits(d)
                                        : bit_cast<uint32_t>(static_cast<float>(d));
  }
  uint16_t operator()(uint64_t bits) const {
    if constexpr (std::is_same_v<D, Float16>) {
      static_assert(R == BFloat16Rounding::kOnce, "FLOAT16 is rounded once in every profile");
      return float16_rne_bits(float_bits(bits));
    } else {
      return bfloat16_from_float_bits<R>(float_bits(bits));
    }
  }
  void block(const uint64_t* src, uint16_t* dst, size_t n) const;
};

//: FLOAT16 -> FLOAT bits, exactly.  The portable form scales the subnormals by an exact
//: multiplication; NaN comes out quiet, with its sign and payload, as F16C's `vcvtph2ps` gives
//: it (the IEEE types leave NaN payloads open, R3, but the CPU levels must agree).
inline uint32_t float16_to_float32_bits(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  const uint32_t normal = ((uint32_t(h & 0x7FFFu) << 13) + 0x38000000u);
  const uint32_t subnormal = bit_cast<uint32_t>(float(mantissa) * 0x1.0p-24f);
  const uint32_t special = 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);
  const uint32_t magnitude = exponent == 0 ? subnormal : (exponent == 0x1F ? special : normal);
  return sign | magnitude;
}

//: FLOAT16 or BFLOAT16 bits -> FLOAT bits, exactly, NaN quieted (as F16C does for FLOAT16).
template <class H>
inline uint32_t half_to_float32_bits(uint16_t h) {
  if constexpr (std::is_same_v<H, BFloat16>) {
    // BFLOAT16 is FLOAT's upper half; a signalling NaN is quieted as the hardware does.
    return (uint32_t(h) << 16) | ((h & 0x7FFFu) > 0x7F80u ? 0x00400000u : 0u);
  } else {
    return float16_to_float32_bits(h);
  }
}

//: FLOAT16 or BFLOAT16 -> FLOAT or DOUBLE: exact widening (F16C for FLOAT16 where the CPU has
//: it).  `D` is float or double.
template <class H, class D>
struct Widen {
  using InT = uint16_t;
  using OutT = D;
  explicit Widen(const Params&) {}
  D operator()(uint16_t h) const {
    return static_cast<D>(bit_cast<float>(half_to_float32_bits<H>(h)));
  }
};

//: FLOAT -> BFLOAT16: round to nearest even, or truncate (BFloat16Rounding::kTruncate,
//: legacy); kNearestFloatFirst is kOnce for FLOAT.  `block`: narrow_float.hpp.
template <BFloat16Rounding R = BFloat16Rounding::kOnce>
struct Float32ToBFloat16 {
  using InT = uint32_t;
  using OutT = uint16_t;
  static constexpr int kVariant = int(R);
  explicit Float32ToBFloat16(const Params&) {}
  uint16_t operator()(uint32_t bits) const { return bfloat16_from_float_bits<R>(bits); }
  void block(const uint32_t* src, uint16_t* dst, size_t n) const;
  //: FLOAT bits from `src`: a pointer to them, or a step source (simd_pack.hpp).
  template <class Src>
  void run(Src src, uint16_t* dst, size_t n) const;
};

//: Integer -> FLOAT16: clamped to [`ilo`, `ihi`] first (from the spec: FLOAT16's overflow
//: threshold, where every integer beyond becomes Inf, within the source's range), which keeps the
//: result and makes the value exact in FLOAT.
template <class I>
struct IntToFloat16 {
  using InT = I;
  using OutT = uint16_t;
  I lo, hi;
  explicit IntToFloat16(const Params& p) : lo(I(p.ilo)), hi(I(p.ihi)) {}
  uint16_t operator()(I x) const {
    const I clamped = x < lo ? lo : (x > hi ? hi : x);
    return float16_rne_bits(bit_cast<uint32_t>(static_cast<float>(clamped)));
  }
  //: narrow_float.hpp: the clamped integers through FLOAT16's steps (64-bit ones by blocks).
  void block(const I* src, uint16_t* dst, size_t n) const;
};

//: Integer -> BFLOAT16 as BFloat16Rounding says: rounded once (to odd into DOUBLE, then into
//: FLOAT), or through the nearest FLOAT (the reference and legacy profiles).
template <class I, BFloat16Rounding R = BFloat16Rounding::kOnce>
struct IntToBFloat16 {
  using InT = I;
  using OutT = uint16_t;
  static constexpr int kVariant = int(R);
  explicit IntToBFloat16(const Params&) {}
  uint16_t operator()(I x) const {
    if constexpr (R == BFloat16Rounding::kOnce) {
      return bfloat16_rne_bits(float32_odd_bits(bit_cast<double>(float64_odd_bits_of(x))));
    } else {
      return bfloat16_from_float_bits<R>(bit_cast<uint32_t>(static_cast<float>(x)));
    }
  }
  //: narrow_float.hpp: through BFLOAT16's steps (the integers of 8 and 16 bits in them).
  void block(const I* src, uint16_t* dst, size_t n) const;
};

//: The hardware conversion where it is the rule: integers and DOUBLE -> FLOAT, integers and
//: FLOAT -> DOUBLE (correctly rounded under FpEnvGuard).  `In`/`Out` are value types.
template <class In, class Out>
struct Convert {
  using InT = In;
  using OutT = Out;
  explicit Convert(const Params&) {}
  Out operator()(In x) const {
#if !defined(__AVX512DQ__)
    // Without AVX-512DQ the CPU has no vector conversion from 64-bit integers: the compiler's
    // loop converts one element at a time, UINT64 with a branch on the top bit, which random
    // data mispredicts.  The exact 32-bit halves vectorise instead: into DOUBLE their sum
    // (float64_of_int64); UINT64 into FLOAT rounded to odd into DOUBLE first (once in all).
    // INT64 -> FLOAT keeps the scalar conversion, which measured faster than the rounding to
    // odd in vectors (0.87 against 0.99 ms at 10**6 on Zen 3).
    constexpr bool kWide = std::is_integral_v<In> && sizeof(In) == 8;
    if constexpr (kWide && std::is_same_v<Out, double>) {
      return float64_of_int64(x);
    } else if constexpr (kWide && std::is_unsigned_v<In> && std::is_same_v<Out, float>) {
      return static_cast<float>(bit_cast<double>(float64_odd_bits_of(x)));
    }
#endif
    return static_cast<Out>(x);
  }
};

//: DOUBLE -> FLOAT, the hardware's conversion; `block` (narrow_float.hpp) streams the stores of
//: large outputs.
template <>
struct Convert<double, float> {
  using InT = double;
  using OutT = float;
  explicit Convert(const Params&) {}
  float operator()(double x) const { return static_cast<float>(x); }
  void block(const double* src, float* dst, size_t n) const;
};

//: A BOOL source for an `Op` that reads its uint8 as a number: the byte as 0 or 1 first (R8:
//: any nonzero byte is True, as NumPy, PyTorch and JAX read a bool; foreign memory may hold 2
//: or 255).  As min(byte, 1): one unsigned minimum in the same loop, which vectorises.
template <class Op>
struct FromBool : Op {
  using Op::Op;
  auto operator()(uint8_t x) const { return Op::operator()(std::min(x, uint8_t{1})); }
  //: Element by element, hiding Op's own block (which map_elements would run otherwise, see
  //: HasBlock): that would read a byte beyond 1 as that integer.
  void block(const uint8_t* src, typename Op::OutT* dst, size_t n) const {
    for (size_t i = 0; i < n; ++i) dst[i] = (*this)(src[i]);
  }
};

//: FLOAT/DOUBLE -> integer, truncating toward zero and saturating.  Reads `lo`/`hi` (bounds
//: exact in F, the first the target's minimum), `limit` and `hi_result` (x >= limit gives
//: hi_result, for maxima F cannot hold), `nan_result`.
template <class F, class Out>
struct FloatToInt {
  using InT = F;
  using OutT = Out;
  //: The integer the lanes work in: as wide as F where Out is narrower, so that every select
  //: runs on lanes of one width (which vectorises), then narrowed once at the store.
  using Work = std::conditional_t<(sizeof(Out) < sizeof(F)),
                                  std::conditional_t<sizeof(F) == 4, int32_t, int64_t>, Out>;
  F lo, hi, limit;
  Work nan_result, hi_result;
  explicit FloatToInt(const Params& p)
      : lo(F(p.lo)),
        hi(F(p.hi)),
        limit(F(p.limit)),
        nan_result(Work(p.nan_result)),
        hi_result(Work(p.hi_result)) {}
  //: The whole range: SIMD steps where the build has them (float_to_int.hpp).
  void block(const F* src, Out* dst, size_t n) const;
  //: The same on F's bits from `bits`: a pointer to them, or a step source (simd_pack.hpp).
  template <class Src>
  void run(Src bits, Out* dst, size_t n) const;
  Out operator()(F x) const {
    const bool nan = x != x;
    F clamped = x < lo ? lo : x;
    clamped = clamped > hi ? hi : clamped;
    Work w = static_cast<Work>(nan ? F(0) : clamped);  // in range: defined
    w = x >= limit ? hi_result : w;
    return Out(nan ? nan_result : w);
  }
};

//: How FloatToSubByte rounds to an integer (its variant; routes.py mirrors the values): half
//: to even (the int4/int2 notes) or toward zero (ml_dtypes, the reference profiles).
enum class SubByteRounding : int { kHalfEven = 0, kTowardZero = 1 };

//: FLOAT/DOUBLE -> a sub-byte integer: optional clamp to `pre_lo`/`pre_hi` (Inf passes: the
//: legacy range rule), round as R says, clamp to +-`hi` (a multiple of 2**bits beyond which
//: every float is one), keep the bits in `mask`; NaN gives `nan_result`.
template <class F, SubByteRounding R = SubByteRounding::kHalfEven>
struct FloatToSubByte {
  using InT = F;
  using OutT = uint8_t;
  static constexpr int kVariant = int(R);
  F pre_lo, pre_hi, bound;
  uint8_t mask, nan_result;
  explicit FloatToSubByte(const Params& p)
      : pre_lo(F(p.pre_lo)),
        pre_hi(F(p.pre_hi)),
        bound(F(p.hi)),
        mask(uint8_t(p.mask)),
        nan_result(uint8_t(p.nan_result)) {}
  //: The whole range: SIMD steps where the build has them (float_to_int.hpp).
  void block(const F* src, uint8_t* dst, size_t n) const;
  //: The same on F's bits from `bits`: a pointer to them, or a step source (simd_pack.hpp).
  template <class Src>
  void run(Src bits, uint8_t* dst, size_t n) const;
  uint8_t operator()(F x) const {
    const F clamped = x < pre_lo ? pre_lo : (x > pre_hi ? pre_hi : x);
    F v = std::fabs(x) == std::numeric_limits<F>::infinity() ? x : clamped;
    v = R == SubByteRounding::kHalfEven ? round_half_even(v) : std::trunc(v);
    v = v < -bound ? -bound : (v > bound ? bound : v);
    v = x != x ? F(0) : v;  // no conversion of a NaN (undefined behaviour)
    // FLOAT's bound (2**28) fits int32, which keeps the lanes FLOAT's width; DOUBLE's needs 64.
    using Work = std::conditional_t<sizeof(F) == 4, int32_t, int64_t>;
    return x != x ? nan_result : uint8_t(static_cast<Work>(v) & Work(mask));
  }
};

//: Integer -> integer: two's complement, keep the low bits (`mask`); variant 1 first clamps to
//: [`ilo`, `ihi`] (the legacy range rule for sub-byte targets).
template <class In, class Out, int Variant = 0>
struct IntToInt {
  using InT = In;
  using OutT = Out;
  In lo, hi;
  Out mask;
  explicit IntToInt(const Params& p) : lo(In(p.ilo)), hi(In(p.ihi)), mask(Out(p.mask)) {}
  Out operator()(In x) const {
    const In v = Variant == 1 ? (x < lo ? lo : (x > hi ? hi : x)) : x;
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
void map_elements(const void* in, void* out, size_t begin, size_t end, const Params& p);

//: The loop of the Op whose position in `Ops` is `p.variant` (chosen once, outside the loop).
template <class... Ops>
void map_variant(const void* in, void* out, size_t begin, size_t end, const Params& p) {
  int index = 0;
  ((p.variant == index++ ? map_elements<Ops>(in, out, begin, end, p) : void()), ...);
}

template <class Op, class = void>
struct IsIndexed : std::false_type {};
template <class Op>
struct IsIndexed<Op, std::void_t<decltype(Op::kIndexed)>> : std::true_type {};
//: Families that run a whole range themselves (`void block(const InT*, OutT*, size_t) const`):
//: the SIMD kernels, which take many elements per step and finish with the portable form.
template <class Op, class = void>
struct HasBlock : std::false_type {};
template <class Op>
struct HasBlock<Op, std::void_t<decltype(&Op::block)>> : std::true_type {};
template <class Op, class = void>
struct IsBlocked : std::false_type {};
template <class Op>
struct IsBlocked<Op, std::void_t<decltype(Op::kBlocked)>> : std::bool_constant<Op::kBlocked> {};

//: `dst[j] = table[index[j]]`.  Scalar on purpose: the CPUs' vector gathers measured no faster
//: (AVX2 slower, AVX-512 within 5% on the machines this was tuned on).
template <class T>
inline void gather_block(const T* table, const uint32_t* index, T* dst, size_t m) {
  for (size_t j = 0; j < m; ++j) dst[j] = table[index[j]];
}

//: The loop of a table family.  Where the index costs real arithmetic (kBlocked), the indices of
//: a block come first, in a loop the compiler vectorises, then the gather; the block stays in
//: the first-level cache, so memory is still crossed once.  Otherwise one fused loop.
template <class Op>
void map_indexed(const void* in, void* out, size_t begin, size_t end, const Params& p) {
  using In = typename Op::InT;
  using Out = typename Op::OutT;
  const Op op(p);
  const In* __restrict src = static_cast<const In*>(in);
  Out* __restrict dst = static_cast<Out*>(out);
  if constexpr (IsBlocked<Op>::value) {
    constexpr size_t kBlock = 1024;
    alignas(64) uint32_t index[kBlock];
    for (size_t i = begin; i < end; i += kBlock) {
      const size_t m = std::min(kBlock, end - i);
      for (size_t j = 0; j < m; ++j) index[j] = op.index(src[i + j]);
      gather_block(op.table, index, dst + i, m);
    }
  } else {
    for (size_t i = begin; i < end; ++i) dst[i] = op.table[op.index(src[i])];
  }
}

template <class Op>
void map_elements(const void* in, void* out, size_t begin, size_t end, const Params& p) {
  if constexpr (HasBlock<Op>::value) {
    const Op op(p);
    op.block(static_cast<const typename Op::InT*>(in) + begin,
             static_cast<typename Op::OutT*>(out) + begin, end - begin);
  } else if constexpr (IsIndexed<Op>::value) {
    map_indexed<Op>(in, out, begin, end, p);
  } else {
    using In = typename Op::InT;
    using Out = typename Op::OutT;
    const Op op(p);
    const In* __restrict src = static_cast<const In*>(in);
    Out* __restrict dst = static_cast<Out*>(out);
    for (size_t i = begin; i < end; ++i) dst[i] = op(src[i]);
  }
}

//: Output bytes of one call (one piece of a thread's work) from which the stores are streaming
//: (non-temporal), for outputs of 1 or 2 bytes an element: an output beyond a core's
//: second-level cache is written back to memory anyway, and writing it around the caches saves
//: reading every line in first.  The bound is this CPU's second-level cache (at least 1 MiB).
//: Measured on a machine with 1 MiB of L2 a core, one thread, a new output each call: 10**7
//: FLOAT -> FLOAT8E4M3FN 1.54 -> 1.35 ms, FLOAT -> BFLOAT16 2.45 -> 2.20 ms, DOUBLE -> BFLOAT16
//: 3.08 -> 2.66 ms; on one with 2 MiB, a fixed 1 MiB made 10**6 FLOAT -> INT16 (2 MB out)
//: slower than NumPy's astype, 0.31 against 0.26 ms (bound at the cache: 0.21 and 0.21).  4-byte
//: outputs (FLOAT -> INT32, DOUBLE -> FLOAT) gained nothing at 10**7 and lost up to 30% at
//: 10**6 where the output's memory was fresh from the system, so they store as usual.
constexpr size_t kMinStreamBytes = size_t{1} << 20;
inline size_t stream_bytes() {
  static const size_t bytes = [] {
#if defined(_SC_LEVEL2_CACHE_SIZE)
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);  // glibc: 0 or -1 where unknown
    if (l2 > 0) return std::max(size_t(l2), kMinStreamBytes);
#endif
    return kMinStreamBytes;
  }();
  return bytes;
}

//: The bytes of this machine's last-level cache as Linux reports it (the highest level under
//: /sys/devices/system/cpu/cpu0/cache), 0 where unknown.  Not sysconf: on a KVM guest of a
//: Zen 5, whose third-level cache is 32 MiB, glibc's _SC_LEVEL3_CACHE_SIZE said 384 MiB.
inline size_t system_last_level_cache_bytes() {
  size_t found = 0;
  int found_level = 0;
  for (int index = 0; index < 16; ++index) {
    char path[96];
    const auto read = [&](const char* file, const char* format, auto* value) {
      std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index,
                    file);
      std::FILE* f = std::fopen(path, "r");
      if (f == nullptr) return false;
      const bool ok = std::fscanf(f, format, value) == 1;
      std::fclose(f);
      return ok;
    };
    int level = 0;
    unsigned long kib = 0;
    if (!read("level", "%d", &level)) break;  // no more caches (or no such file system)
    if (read("size", "%luK", &kib) && level > found_level) {
      found_level = level;
      found = size_t(kib) << 10;
    }
  }
  return found;
}

//: The last-level cache's bytes that pack_range measures a whole cast against (0: unknown, and
//: then every kernel streams by stream_bytes alone).  A testing aid sets it
//: (_set_last_level_cache_bytes), to run both sides of the bound at any size.
inline std::atomic<size_t>& last_level_cache_bytes() {
  static std::atomic<size_t> bytes{system_last_level_cache_bytes()};
  return bytes;
}

//: The input and output bytes of the whole cast whose piece the calling thread runs, 0 where
//: unknown: the module sets it around each piece (CastBytesScope), and pack_range reads it.
//: Per thread, because one kernel (and its Params) serves every cast of its conversion at once.
inline size_t& cast_bytes() {
  thread_local size_t bytes = 0;
  return bytes;
}

class CastBytesScope {
 public:
  explicit CastBytesScope(size_t bytes) : saved_(cast_bytes()) { cast_bytes() = bytes; }
  ~CastBytesScope() { cast_bytes() = saved_; }
  CastBytesScope(const CastBytesScope&) = delete;
  CastBytesScope& operator=(const CastBytesScope&) = delete;

 private:
  size_t saved_;
};

//: Whether the whole cast that the calling thread works on fits in `1 / parts` of the
//: last-level cache (false where either is unknown).
inline bool cast_fits_last_level_cache(size_t parts = 1) {
  const size_t cache = last_level_cache_bytes().load(std::memory_order_relaxed);
  const size_t bytes = cast_bytes();
  return cache > 0 && bytes > 0 && bytes < cache / parts;
}

//: Whether a call (a piece of a cast) that writes `out_bytes` of 1- or 2-byte results streams
//: them: from stream_bytes() on, unless the whole cast fits in the last-level cache; all of it
//: for a light kernel (`light`: a few operations an element, see pack_range), a quarter of it
//: for the others.  Measured as programs run them, 40 casts back to back under each rule, one
//: thread, Zen 5 (32 MiB of L3), streamed / stored as usual, each output dropped / kept: light
//: kernels up to 30 MB gained 1.09-1.66x / 1.09-1.25x by storing as usual (FLOAT -> INT8 at
//: 4e6 0.41 / 0.26 ms); the others gained 1.0-1.15x / 1.07-1.15x up to 12 MB (FLOAT -> FLOAT16
//: and BFLOAT16 at 10**6, FLOAT16 -> INT8 at 2e6 and 4e6), and from 18 MB on lost up to 1.35x
//: where outputs were dropped (FLOAT -> BFLOAT16 at 4e6 0.34 / 0.46 ms, DOUBLE -> BFLOAT16 and
//: FLOAT8E4M3FN at 2e6, FLOAT16 -> INT8 at 10**7: 0.40 / 0.54 ms).  On two threads at 2e6
//: elements the quarter costs the others 0.91-0.99x where outputs are dropped, nothing kept.
//: Out of line (it runs once a call): inlined with the static initialisers it reaches (the
//: sysfs reads), it made GCC 12 keep the SIMD constants of the FLOAT -> float8 steps on the
//: stack and load 8 of them every step, which took 10**7 FLOAT -> FLOAT8E4M3FN, streamed, one
//: thread, from 1.05 to 1.7 ms.
constexpr size_t kHeavyCacheParts = 4;
[[gnu::noinline]] inline bool streams(size_t out_bytes, bool light) {
  return out_bytes >= stream_bytes() &&
         !cast_fits_last_level_cache(light ? 1 : kHeavyCacheParts);
}

//: Streaming stores are weakly ordered: fence them once, after the last of a call's, before the
//: call returns (and before the thread pool reports the piece done).  (A fence per block of
//: 1024 elements made DOUBLE -> FLOAT16 at 10**6 1.2-1.4x slower with AVX-512, Zen 4.)
inline void end_stream(bool stream) {
#if defined(__F16C__) || defined(__AVX512F__)
  if (stream) _mm_sfence();
#else
  (void)stream;
#endif
}

//: FLOAT bits -> FLOAT16 bits for [begin, end): with F16C, `vcvtps2ph` with an explicit
//: round-to-nearest-even immediate (never MXCSR's mode); the tail through the portable form.
//: `stream`: non-temporal stores (see stream_bytes), after a head that aligns the output; the
//: caller ends them (end_stream).
inline void float32_to_float16(const uint32_t* src, uint16_t* dst, size_t begin, size_t end,
                               bool stream) {
  size_t i = begin;
#if defined(__AVX512F__) || defined(__F16C__)
#if defined(__AVX512F__)
  constexpr size_t kHalves = 16;  // a step's results: 32 bytes
#else
  constexpr size_t kHalves = 8;  // 16 bytes
#endif
  if (stream) {
    for (; i < end && reinterpret_cast<uintptr_t>(dst + i) % (2 * kHalves) != 0; ++i) {
      dst[i] = float16_rne_bits(src[i]);
    }
  }
  for (; i + kHalves <= end; i += kHalves) {
#if defined(__AVX512F__)
    const __m512 v = _mm512_castsi512_ps(_mm512_loadu_si512(src + i));
    // The masked form: the plain one reads an undefined register (GCC 12).
    const __m256i h = _mm512_mask_cvtps_ph(_mm256_setzero_si256(), __mmask16(0xFFFF), v,
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i* out = reinterpret_cast<__m256i*>(dst + i);
    if (stream) {
      _mm256_stream_si256(out, h);
    } else {
      _mm256_storeu_si256(out, h);
    }
#else
    const __m256 v = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m128i* out = reinterpret_cast<__m128i*>(dst + i);
    if (stream) {
      _mm_stream_si128(out, h);
    } else {
      _mm_storeu_si128(out, h);
    }
#endif
  }
#else
  (void)stream;
#endif
  for (; i < end; ++i) dst[i] = float16_rne_bits(src[i]);
}

template <>
void map_elements<Float32ToFloat16>(const void* in, void* out, size_t begin, size_t end,
                                    const Params&) {
  const bool stream = streams((end - begin) * sizeof(uint16_t), false);
  float32_to_float16(static_cast<const uint32_t*>(in), static_cast<uint16_t*>(out), begin, end,
                     stream);
  end_stream(stream);
}

//: `m` FLOAT16 or BFLOAT16 (H) bits -> their FLOAT bits, exactly, stored as T (float, or
//: uint32_t for the families that read FLOAT bits): FLOAT16 with F16C's `vcvtph2ps` where the
//: CPU has it, BFLOAT16 by a shift (a loop the compiler vectorises); the tail through the
//: portable form.
template <class H, class T>
inline void widen_block(const uint16_t* src, T* dst, size_t m) {
  static_assert(sizeof(T) == 4, "FLOAT bits");
  size_t j = 0;
  if constexpr (std::is_same_v<H, Float16>) {
    // The vector stores may alias T; the masked form: the plain one reads an undefined register
    // (GCC 12).
#if defined(__AVX512F__)
    for (; j + 16 <= m; j += 16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + j));
      _mm512_storeu_ps(dst + j, _mm512_mask_cvtph_ps(_mm512_setzero_ps(), __mmask16(0xFFFF), h));
    }
#elif defined(__F16C__)
    for (; j + 8 <= m; j += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j));
      _mm256_storeu_ps(reinterpret_cast<float*>(dst + j), _mm256_cvtph_ps(h));
    }
#endif
  }
  for (; j < m; ++j) {
    const uint32_t bits = half_to_float32_bits<H>(src[j]);
    std::memcpy(dst + j, &bits, sizeof bits);
  }
}

//: FLOAT16 -> FLOAT with F16C's `vcvtph2ps` (exact).
template <>
inline void map_elements<Widen<Float16, float>>(const void* in, void* out, size_t begin,
                                                size_t end, const Params&) {
  widen_block<Float16>(static_cast<const uint16_t*>(in) + begin, static_cast<float*>(out) + begin,
                       end - begin);
}

}  // namespace castlike
