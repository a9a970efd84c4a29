// FLOAT/DOUBLE -> integers with SIMD: the families FloatToInt (R7's truncation with saturation)
// and FloatToSubByte (INT4/UINT4/INT2/UINT2: round, keep the low bits) of kernels.hpp run
// their loops here, with the same Params and the same results as their portable forms.
//
// Per element (32-bit lanes; DOUBLE lanes are narrowed to 32 bits as they convert):
//
// * FloatToInt: clamp to [lo, hi] (bounds exact in the source format, within the target's
//   range), truncate with the hardware's conversion (exact in range), x >= limit -> hi_result
//   where the target's maximum is not a value of the source format, NaN -> nan_result on the
//   integer lanes (an ordered comparison's mask); then the frame packs 32 -> 16 -> 8 bits, which
//   keeps every value here (they are in the target's range already).  Used where [lo, hi] lies
//   within the target's range (always, for routes' bounds); otherwise the portable loop, whose
//   narrowing then wraps.  Where lo is the target's minimum, the steps leave the clamp to lo
//   out (kClampLow false): below it the conversion gives INT32's minimum or a smaller integer,
//   and the saturating packs take that to the target's minimum (INT32 has no pack, and its
//   minimum is the conversion's out-of-range value).  Not for UINT32, whose AVX2 steps convert
//   signed and whose AVX-512 conversion gives 0xFFFFFFFF below -1.  One vector operation fewer:
//   FLOAT -> INT8/UINT8 with the input in the cache 1.13-1.16x faster with AVX2 (Zen 3),
//   1.03-1.05x with AVX-512 (Zen 4); the same where memory bounds the loop.
// * FloatToSubByte: the optional clamp to [pre_lo, pre_hi] with Inf passing (the legacy range
//   rule), rounding half to even by the rounding instruction's own mode (not MXCSR's) or
//   toward zero by the conversion, the clamp to +-hi, the conversion, the low bits, NaN ->
//   nan_result.
//
// 64-bit targets: with AVX2 (no conversion to 64-bit integers) the integer is read off the
// clamped value's bits (Int64Lanes); with AVX-512 the clamp, AVX-512DQ's conversion and two
// masked moves (int64_steps); in the baseline build the portable loop.
#pragma once

#include "kernels.hpp"
#include "simd_pack.hpp"

namespace castlike {

//: Whether FloatToInt<F, Out> has SIMD steps on this build.
template <class F, class Out>
constexpr bool kFloatToIntSimd =
#if defined(CASTLIKE_PACK_SIMD)
    sizeof(Out) <= 4;
#else
    false;
#endif

#if defined(CASTLIKE_PACK_AVX512)
inline __m512 round_even_ps(__m512 v) {
  return _mm512_maskz_roundscale_ps(kAll16, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline __m512d round_even_pd(__m512d v) {
  return _mm512_maskz_roundscale_pd(__mmask8(0xFF), v,
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#endif

//: The vector of F's lanes (a specialisation: vector types lose their attributes as template
//: arguments).
template <size_t Bytes>
struct FloatVector;
#if defined(CASTLIKE_PACK_AVX512)
template <>
struct FloatVector<4> {
  using V = __m512;
};
template <>
struct FloatVector<8> {
  using V = __m512d;
};
#elif defined(CASTLIKE_PACK_AVX2)
template <>
struct FloatVector<4> {
  using V = __m256;
};
template <>
struct FloatVector<8> {
  using V = __m256d;
};
#endif

//: An integer of Out as a 32-bit lane (sign- or zero-extended): what the packs keep.
template <class Out, class W>
inline int lane_of(W value) {
  return static_cast<int>(static_cast<int64_t>(static_cast<Out>(value)));
}

#if defined(CASTLIKE_PACK_SIMD)
//: FloatToInt's lanes.  kLimit: whether x >= limit gives hi_result (a finite limit).
//: kClampLow: whether the lanes clamp to lo (see the top).
template <class F, class Out, bool kLimit, bool kClampLow = true>
struct FloatToIntLanes {
  //: A few operations an element: into 1 byte or 2, streaming pays only past the last-level
  //: cache (pack_range; 4-byte results never stream).  Into 2 bytes, one thread, Zen 5, 40
  //: casts back to back in each mode, the modes' blocks in turn (streamed / stored as usual):
  //: FLOAT -> INT16 1.43-1.48x at 10**6 when each output is dropped (the next output is the
  //: same memory, still in the cache) and 1.15-1.19x when every output is kept (new memory);
  //: 2**19 1.43x / 1.17x, 4e6 1.13x / 1.06x, two threads at 4e6 1.18x / 1.05x; UINT16 1.37x /
  //: 1.15x; DOUBLE -> INT16 1.05-1.38x / 1.12-1.19x.  Casts alternating between the modes call
  //: by call had shown the opposite (streaming 1.19x at 10**6): there each output was the
  //: memory the other mode had just written around the cache.
  static constexpr bool kStreamPastLastLevel = true;
  using V = typename FloatVector<sizeof(F)>::V;
  using In = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  V lo, hi, limit, two31;
  VecI nan, high;
#if defined(CASTLIKE_PACK_AVX512)
  __m256i nan8, high8;  // for 8 DOUBLE lanes
#else
  __m256d nan_d;
#endif

  template <class Op>
  explicit FloatToIntLanes(const Op& op) {
    const auto all = [](F value) {
      if constexpr (sizeof(F) == 4) {
#if defined(CASTLIKE_PACK_AVX512)
        return _mm512_set1_ps(value);
#else
        return _mm256_set1_ps(value);
#endif
      } else {
#if defined(CASTLIKE_PACK_AVX512)
        return _mm512_set1_pd(value);
#else
        return _mm256_set1_pd(value);
#endif
      }
    };
    lo = all(op.lo);
    hi = all(op.hi);
    limit = all(op.limit);
    two31 = all(F(2147483648.0));
#if defined(CASTLIKE_PACK_AVX512)
    nan = _mm512_set1_epi32(lane_of<Out>(op.nan_result));
    high = _mm512_set1_epi32(lane_of<Out>(op.hi_result));
    nan8 = _mm256_set1_epi32(lane_of<Out>(op.nan_result));
    high8 = _mm256_set1_epi32(lane_of<Out>(op.hi_result));
#else
    nan = _mm256_set1_epi32(lane_of<Out>(op.nan_result));
    high = _mm256_set1_epi32(lane_of<Out>(op.hi_result));
    nan_d = _mm256_set1_pd(double(static_cast<Out>(op.nan_result)));
#endif
  }

#if defined(CASTLIKE_PACK_AVX512)
  VecI codes(const uint32_t* p) const {
    const __m512 x = _mm512_loadu_ps(p);
    const __mmask16 ordered = _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);
    const __m512 v = min_ps(kClampLow ? max_ps(x, lo) : x, hi);  // NaN: masked below
    __m512i w;
    if constexpr (std::is_same_v<Out, uint32_t>) {
      w = _mm512_mask_cvttps_epu32(nan, ordered, v);
    } else {
      w = _mm512_mask_cvttps_epi32(nan, ordered, v);
    }
    if constexpr (kLimit) {
      w = _mm512_mask_mov_epi32(w, _mm512_cmp_ps_mask(x, limit, _CMP_GE_OQ), high);
    }
    return w;
  }
  __m256i half(const uint64_t* p) const {
    const __m512d x = _mm512_loadu_pd(p);
    const __mmask8 ordered = _mm512_cmp_pd_mask(x, x, _CMP_ORD_Q);
    const __m512d v = min_pd(kClampLow ? max_pd(x, lo) : x, hi);
    __m256i w;
    if constexpr (std::is_same_v<Out, uint32_t>) {
      w = _mm512_mask_cvttpd_epu32(nan8, ordered, v);
    } else {
      w = _mm512_mask_cvttpd_epi32(nan8, ordered, v);
    }
    if constexpr (kLimit) {
      w = _mm256_mask_mov_epi32(w, _mm512_cmp_pd_mask(x, limit, _CMP_GE_OQ), high8);
    }
    return w;
  }
  VecI codes(const uint64_t* p) const { return join(half(p), half(p + 8)); }
#else
  VecI codes(const uint32_t* p) const {
    const __m256 x = _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    const __m256 v = _mm256_min_ps(kClampLow ? _mm256_max_ps(x, lo) : x, hi);
    __m256i w;
    if constexpr (std::is_same_v<Out, uint32_t>) {
      // No unsigned conversion: from 2**31 on, convert v - 2**31 (exact) and set the top bit.
      const __m256 big = _mm256_cmp_ps(v, two31, _CMP_GE_OQ);
      w = _mm256_cvttps_epi32(_mm256_sub_ps(v, _mm256_and_ps(big, two31)));
      w = _mm256_xor_si256(w, _mm256_slli_epi32(_mm256_castps_si256(big), 31));
    } else {
      w = _mm256_cvttps_epi32(v);
    }
    if constexpr (kLimit) {
      w = _mm256_blendv_epi8(w, high, _mm256_castps_si256(_mm256_cmp_ps(x, limit, _CMP_GE_OQ)));
    }
    return _mm256_blendv_epi8(nan, w, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_ORD_Q)));
  }
  //: DOUBLE lanes (no finite limit: every target of 32 bits or fewer is exact in DOUBLE).
  __m128i half(const uint64_t* p) const {
    static_assert(!kLimit, "DOUBLE reaches every maximum of 32 bits or fewer");
    const __m256d x = _mm256_loadu_pd(reinterpret_cast<const double*>(p));
    __m256d v = _mm256_min_pd(kClampLow ? _mm256_max_pd(x, lo) : x, hi);
    v = _mm256_blendv_pd(nan_d, v, _mm256_cmp_pd(x, x, _CMP_ORD_Q));  // NaN's result, exact
    if constexpr (std::is_same_v<Out, uint32_t>) {
      // Truncate first, then convert v - 2**31 (an exact integer) and flip the top bit back.
      v = _mm256_round_pd(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m128i w = _mm256_cvttpd_epi32(_mm256_sub_pd(v, two31));
      return _mm_xor_si128(w, _mm_set1_epi32(INT32_MIN));
    } else {
      return _mm256_cvttpd_epi32(v);
    }
  }
  VecI codes(const uint64_t* p) const { return join(half(p), half(p + 4)); }
#endif
  VecI finish(VecI packed, const In*) const { return packed; }
};

#if defined(CASTLIKE_PACK_AVX2)
//: FloatToInt into 64-bit integers on AVX2, which has no conversion to them (AVX-512DQ has:
//: see the other int64_steps).  Per 64-bit lane, after the clamp to [lo, hi]
//: (within the target's range, so |v| < 2**64): the magnitude's integer part is the
//: significand with its implicit bit, shifted left by (exponent - mantissa bits) or right by
//: the opposite (a variable shift by 64 or more, which a negative count is as unsigned, gives
//: 0, so one of the two is 0 and their OR is the value; zero and subnormals shift out
//: entirely); then the sign applied as two's complement.  NaN and x >= limit take their results
//: by blends, as in FloatToIntLanes.  FLOAT lanes are widened to 64 bits first.
template <class F, class Out>
struct Int64Lanes {
  static_assert(sizeof(Out) == 8, "64-bit targets");
  static constexpr int kMantissa = sizeof(F) == 4 ? 23 : 52;
  static constexpr int kExponentMask = sizeof(F) == 4 ? 0xFF : 0x7FF;
  static constexpr int kUnbias = (sizeof(F) == 4 ? 127 : 1023) + kMantissa;  // value = m << (e - kUnbias)
  static constexpr int kSignBit = 8 * int(sizeof(F)) - 1;
  const __m256i fraction = _mm256_set1_epi64x((int64_t{1} << kMantissa) - 1);
  const __m256i implicit = _mm256_set1_epi64x(int64_t{1} << kMantissa);
  const __m256i exponent_mask = _mm256_set1_epi64x(kExponentMask);
  const __m256i unbias = _mm256_set1_epi64x(kUnbias);
  __m256i nan, high;

  template <class Op>
  explicit Int64Lanes(const Op& op)
      : nan(_mm256_set1_epi64x(int64_t(op.nan_result))),
        high(_mm256_set1_epi64x(int64_t(op.hi_result))) {}

  //: 4 clamped values' bits (in 64-bit lanes, FLOAT's zero-extended) -> their integers.
  __m256i integers(__m256i b) const {
    const __m256i e = _mm256_and_si256(_mm256_srli_epi64(b, kMantissa), exponent_mask);
    const __m256i m = _mm256_or_si256(_mm256_and_si256(b, fraction), implicit);
    const __m256i magnitude = _mm256_or_si256(_mm256_sllv_epi64(m, _mm256_sub_epi64(e, unbias)),
                                              _mm256_srlv_epi64(m, _mm256_sub_epi64(unbias, e)));
    const __m256i negative = _mm256_sub_epi64(_mm256_setzero_si256(),
                                              _mm256_srli_epi64(b, kSignBit));  // 0 or -1
    return _mm256_sub_epi64(_mm256_xor_si256(magnitude, negative), negative);
  }
  //: The NaN and limit results over 4 integers; `ordered` and `at_limit` are 64-bit masks.
  __m256i finish(__m256i w, __m256i ordered, __m256i at_limit) const {
    return _mm256_blendv_epi8(nan, _mm256_blendv_epi8(w, high, at_limit), ordered);
  }
};

//: The steps of FloatToInt<F, Out> into 64-bit integers: 8 elements a step (FLOAT) or 4
//: (DOUBLE); returns how many it did.
template <class F, class Out, class Src>
inline size_t int64_steps(const FloatToInt<F, Out>& op, Src src, Out* dst, size_t n) {
  const Int64Lanes<F, Out> lanes(op);
  size_t i = 0;
  if constexpr (sizeof(F) == 4) {
    const __m256 lo = _mm256_set1_ps(op.lo), hi = _mm256_set1_ps(op.hi);
    const __m256 limit = _mm256_set1_ps(op.limit);
    for (; i + 8 <= n; i += 8) {
      const __m256 x = _mm256_loadu_ps(reinterpret_cast<const float*>(src + i));
      const __m256i v = _mm256_castps_si256(_mm256_min_ps(_mm256_max_ps(x, lo), hi));
      const __m256i ordered = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_ORD_Q));
      const __m256i at_limit = _mm256_castps_si256(_mm256_cmp_ps(x, limit, _CMP_GE_OQ));
      for (int h = 0; h < 2; ++h) {
        const auto half = [h](__m256i a) {
          return h == 0 ? _mm256_castsi256_si128(a) : _mm256_extracti128_si256(a, 1);
        };
        const __m256i w = lanes.integers(_mm256_cvtepu32_epi64(half(v)));
        const __m256i r = lanes.finish(w, _mm256_cvtepi32_epi64(half(ordered)),
                                       _mm256_cvtepi32_epi64(half(at_limit)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 4 * size_t(h)), r);
      }
    }
  } else {
    const __m256d lo = _mm256_set1_pd(op.lo), hi = _mm256_set1_pd(op.hi);
    const __m256d limit = _mm256_set1_pd(op.limit);
    for (; i + 4 <= n; i += 4) {
      const __m256d x = _mm256_loadu_pd(reinterpret_cast<const double*>(src + i));
      const __m256i v = _mm256_castpd_si256(_mm256_min_pd(_mm256_max_pd(x, lo), hi));
      const __m256i ordered = _mm256_castpd_si256(_mm256_cmp_pd(x, x, _CMP_ORD_Q));
      const __m256i at_limit = _mm256_castpd_si256(_mm256_cmp_pd(x, limit, _CMP_GE_OQ));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                          lanes.finish(lanes.integers(v), ordered, at_limit));
    }
  }
  return i;
}
#elif defined(CASTLIKE_PACK_AVX512)
//: FloatToInt into 64-bit integers with AVX-512DQ's truncating conversions, 8 elements a step:
//: clamp to [lo, hi] (within the target's range, so the conversion is exact), convert with
//: NaN's lanes taking nan_result (an ordered comparison's mask), then x >= limit's lanes
//: hi_result.  The compiler's vectorised loop of the portable form took 1.5x a copy of the
//: same bytes at 10**6 (DOUBLE -> INT64 0.37 ms, copy 0.235) and 2.4x DOUBLE -> INT32's time
//: with the input in the cache; these steps take 1.1x the copy (0.26 ms) and 1.2x.
template <class F, class Out, class Src>
inline size_t int64_steps(const FloatToInt<F, Out>& op, Src src, Out* dst, size_t n) {
  constexpr bool kUnsigned = std::is_unsigned_v<Out>;
  const __m512i nan = _mm512_set1_epi64(int64_t(op.nan_result));
  const __m512i high = _mm512_set1_epi64(int64_t(op.hi_result));
  // The portable form up to dst's first vector boundary: a store across two cache lines
  // costs two (NumPy aligns its arrays to 16 bytes).
  size_t i = elements_to_boundary(dst, n);
  for (size_t k = 0; k < i; ++k) dst[k] = op(bit_cast<F>(bits_at(src, k)));
  for (; i + 8 <= n; i += 8) {
    __mmask8 ordered, at_limit;
    __m512i w;
    if constexpr (sizeof(F) == 4) {
      const __m256 x = _mm256_loadu_ps(reinterpret_cast<const float*>(src + i));
      const __m256 v = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(op.lo)),
                                     _mm256_set1_ps(op.hi));  // NaN: masked below
      ordered = _mm256_cmp_ps_mask(x, x, _CMP_ORD_Q);
      at_limit = _mm256_cmp_ps_mask(x, _mm256_set1_ps(op.limit), _CMP_GE_OQ);
      w = kUnsigned ? _mm512_mask_cvttps_epu64(nan, ordered, v)
                    : _mm512_mask_cvttps_epi64(nan, ordered, v);
    } else {
      const __m512d x = _mm512_loadu_pd(reinterpret_cast<const double*>(src + i));
      const __m512d v = min_pd(max_pd(x, _mm512_set1_pd(op.lo)), _mm512_set1_pd(op.hi));
      ordered = _mm512_cmp_pd_mask(x, x, _CMP_ORD_Q);
      at_limit = _mm512_cmp_pd_mask(x, _mm512_set1_pd(op.limit), _CMP_GE_OQ);
      w = kUnsigned ? _mm512_mask_cvttpd_epu64(nan, ordered, v)
                    : _mm512_mask_cvttpd_epi64(nan, ordered, v);
    }
    _mm512_storeu_si512(dst + i, _mm512_mask_mov_epi64(w, at_limit, high));
  }
  return i;
}
#endif

//: FloatToSubByte's lanes.  kPreClamp: the legacy clamp to [pre_lo, pre_hi] (Inf passing).
template <class F, SubByteRounding R, bool kPreClamp>
struct SubByteLanes {
  //: A few operations a byte: streams only past the last-level cache (pack_range).  One
  //: thread, Zen 5: FLOAT -> INT4 and UINT4 1.12-1.14x faster at 2**21, 1.30-1.33x at 4e6
  //: (INT2 too), DOUBLE -> INT4 1.52x at 2**21; unchanged from 10**7 on.
  static constexpr bool kStreamPastLastLevel = true;
  using V = typename FloatVector<sizeof(F)>::V;
  using In = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  V pre_lo, pre_hi, bound, minus_bound;
  VecI mask, nan;
#if defined(CASTLIKE_PACK_AVX512)
  __m512i mask64;
  __m256i nan8;
#else
  __m256d modulus, inverse, nan_d;  // 2**bits, 2**-bits, NaN's result (DOUBLE lanes)
#endif

  template <class Op>
  explicit SubByteLanes(const Op& op) {
    const auto all = [](F value) {
#if defined(CASTLIKE_PACK_AVX512)
      if constexpr (sizeof(F) == 4) {
        return _mm512_set1_ps(value);
      } else {
        return _mm512_set1_pd(value);
      }
#else
      if constexpr (sizeof(F) == 4) {
        return _mm256_set1_ps(value);
      } else {
        return _mm256_set1_pd(value);
      }
#endif
    };
    pre_lo = all(op.pre_lo);
    pre_hi = all(op.pre_hi);
    bound = all(op.bound);
    minus_bound = all(-op.bound);
#if defined(CASTLIKE_PACK_AVX512)
    mask = _mm512_set1_epi32(op.mask);
    mask64 = _mm512_set1_epi64(op.mask);
    nan8 = _mm256_set1_epi32(op.nan_result);
    nan = _mm512_set1_epi32(op.nan_result);
#else
    mask = _mm256_set1_epi32(op.mask);
    nan = _mm256_set1_epi32(op.nan_result);
    modulus = _mm256_set1_pd(double(op.mask) + 1.0);
    inverse = _mm256_set1_pd(1.0 / (double(op.mask) + 1.0));
    nan_d = _mm256_set1_pd(double(op.nan_result));
#endif
  }

#if defined(CASTLIKE_PACK_AVX512)
  VecI codes(const uint32_t* p) const {
    const __m512 x = _mm512_loadu_ps(p);
    __m512 v = x;
    if constexpr (kPreClamp) {
      const __mmask16 inf = _mm512_fpclass_ps_mask(x, 0x18);  // +-Inf
      v = _mm512_mask_mov_ps(min_ps(max_ps(x, pre_lo), pre_hi), inf, x);
    }
    if constexpr (R == SubByteRounding::kHalfEven) v = round_even_ps(v);  // else: truncation
    v = min_ps(max_ps(v, minus_bound), bound);
    const __m512i w = _mm512_maskz_cvttps_epi32(kAll16, v);
    return _mm512_mask_and_epi32(nan, _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q), w, mask);
  }
  //: DOUBLE: the bound (2**58 for 4 bits) needs 64-bit integers, narrowed after the mask.
  __m256i half(const uint64_t* p) const {
    const __m512d x = _mm512_loadu_pd(p);
    __m512d v = x;
    if constexpr (kPreClamp) {
      const __mmask8 inf = _mm512_fpclass_pd_mask(x, 0x18);
      v = _mm512_mask_mov_pd(min_pd(max_pd(x, pre_lo), pre_hi), inf, x);
    }
    if constexpr (R == SubByteRounding::kHalfEven) v = round_even_pd(v);
    v = min_pd(max_pd(v, minus_bound), bound);
    const __m512i w = _mm512_and_si512(_mm512_maskz_cvttpd_epi64(__mmask8(0xFF), v), mask64);
    const __m256i low = _mm512_maskz_cvtepi64_epi32(__mmask8(0xFF), w);
    return _mm256_mask_mov_epi32(nan8, _mm512_cmp_pd_mask(x, x, _CMP_ORD_Q), low);
  }
  VecI codes(const uint64_t* p) const { return join(half(p), half(p + 8)); }
#else
  VecI codes(const uint32_t* p) const {
    const __m256 x = _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    __m256 v = x;
    if constexpr (kPreClamp) {
      const __m256 magnitude = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)));
      const __m256 inf = _mm256_cmp_ps(magnitude, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _CMP_EQ_OQ);
      v = _mm256_blendv_ps(_mm256_min_ps(_mm256_max_ps(x, pre_lo), pre_hi), x, inf);
    }
    if constexpr (R == SubByteRounding::kHalfEven) {
      v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    v = _mm256_min_ps(_mm256_max_ps(v, minus_bound), bound);
    const __m256i w = _mm256_and_si256(_mm256_cvttps_epi32(v), mask);
    return _mm256_blendv_epi8(nan, w, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_ORD_Q)));
  }
  //: DOUBLE without 64-bit conversions: the low bits as v - 2**bits * floor(v / 2**bits), exact
  //: (powers of two scale exactly, and the difference is a small integer), where mask + 1 is
  //: that power of two (the caller checks).
  __m128i half(const uint64_t* p) const {
    const __m256d x = _mm256_loadu_pd(reinterpret_cast<const double*>(p));
    __m256d v = x;
    if constexpr (kPreClamp) {
      const __m256d magnitude =
          _mm256_and_pd(x, _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFF)));
      const __m256d inf = _mm256_cmp_pd(
          magnitude, _mm256_set1_pd(std::numeric_limits<double>::infinity()), _CMP_EQ_OQ);
      v = _mm256_blendv_pd(_mm256_min_pd(_mm256_max_pd(x, pre_lo), pre_hi), x, inf);
    }
    constexpr int kRound = R == SubByteRounding::kHalfEven ? _MM_FROUND_TO_NEAREST_INT
                                                           : _MM_FROUND_TO_ZERO;
    v = _mm256_round_pd(v, kRound | _MM_FROUND_NO_EXC);
    v = _mm256_min_pd(_mm256_max_pd(v, minus_bound), bound);
    const __m256d quotient =
        _mm256_round_pd(_mm256_mul_pd(v, inverse), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m256d low = _mm256_sub_pd(v, _mm256_mul_pd(quotient, modulus));
    low = _mm256_blendv_pd(nan_d, low, _mm256_cmp_pd(x, x, _CMP_ORD_Q));
    return _mm256_cvttpd_epi32(low);
  }
  VecI codes(const uint64_t* p) const { return join(half(p), half(p + 4)); }
#endif
  VecI finish(VecI packed, const In*) const { return packed; }
};
#endif

//: Whether FloatToSubByte<F> has SIMD steps on this build.
template <class F>
constexpr bool kSubByteSimd =
#if defined(CASTLIKE_PACK_SIMD)
    true;
#else
    false;
#endif

template <class F, class Out>
void FloatToInt<F, Out>::block(const F* src, Out* dst, size_t n) const {
  using In = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  run(reinterpret_cast<const In*>(src), dst, n);
}

template <class F, class Out>
template <class Src>
void FloatToInt<F, Out>::run(Src bits, Out* dst, size_t n) const {
  using In = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  const auto portable = [this](In x) { return (*this)(bit_cast<F>(x)); };
#if defined(CASTLIKE_PACK_SIMD)
  if constexpr (sizeof(Out) == 8 && std::is_pointer_v<Src>) {
    // The steps need [lo, hi] within Out's range; F(max) is 2**63 or 2**64, beyond it.
    if (lo >= F(std::numeric_limits<Out>::min()) && hi < F(std::numeric_limits<Out>::max())) {
      for (size_t i = int64_steps(*this, bits, dst, n); i < n; ++i) dst[i] = portable(bits[i]);
      return;
    }
  }
#endif
  if constexpr (kFloatToIntSimd<F, Out>) {
#if defined(CASTLIKE_PACK_SIMD)
    // The SIMD steps keep the lanes in Out's range: [lo, hi] must lie within it (and hi_result
    // and nan_result are Out's by construction).  Routes' bounds always do.
    const bool in_range = lo >= F(std::numeric_limits<Out>::min()) &&
                          hi <= F(std::numeric_limits<Out>::max());
    const bool limited = limit != std::numeric_limits<F>::infinity();
    // The steps, with the clamp to lo or without it (see the top); false where there are none
    // (DOUBLE with a finite limit).
    const auto steps = [&](auto clamp_low) {
      constexpr bool kClampLow = decltype(clamp_low)::value;
      if (!limited) {
        run_packed(bits, dst, n, FloatToIntLanes<F, Out, false, kClampLow>(*this), portable);
        return true;
      }
      if constexpr (sizeof(F) == 4) {
        run_packed(bits, dst, n, FloatToIntLanes<F, Out, true, kClampLow>(*this), portable);
        return true;
      }
      return false;
    };
    // UINT32's steps convert signed (AVX2) or unsigned (AVX-512: a negative lane gives
    // 0xFFFFFFFF): it needs the clamp.
    constexpr bool kPacksGiveLow = !std::is_same_v<Out, uint32_t>;
    if (in_range) {
      if constexpr (kPacksGiveLow) {
        if (lo == F(std::numeric_limits<Out>::min()) && steps(std::false_type{})) return;
      }
      if (steps(std::true_type{})) return;
    }
#endif
  }
  for (size_t i = 0; i < n; ++i) dst[i] = portable(bits_at(bits, i));
}

template <class F, SubByteRounding R>
void FloatToSubByte<F, R>::block(const F* src, uint8_t* dst, size_t n) const {
  using In = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  run(reinterpret_cast<const In*>(src), dst, n);
}

template <class F, SubByteRounding R>
template <class Src>
void FloatToSubByte<F, R>::run(Src bits, uint8_t* dst, size_t n) const {
  using In = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  const auto portable = [this](In x) { return (*this)(bit_cast<F>(x)); };
  if constexpr (kSubByteSimd<F>) {
#if defined(CASTLIKE_PACK_SIMD)
    const bool pre_clamp = pre_lo != -std::numeric_limits<F>::infinity() ||
                           pre_hi != std::numeric_limits<F>::infinity();
#if defined(CASTLIKE_PACK_AVX2)
    const bool power_of_two = ((unsigned(mask) + 1) & mask) == 0;
    if (sizeof(F) == 8 && !power_of_two) {  // the AVX2 DOUBLE steps need mask + 1 = 2**bits
      for (size_t i = 0; i < n; ++i) dst[i] = portable(bits_at(bits, i));
      return;
    }
#endif
    if (pre_clamp) {
      run_packed(bits, dst, n, SubByteLanes<F, R, true>(*this), portable);
    } else {
      run_packed(bits, dst, n, SubByteLanes<F, R, false>(*this), portable);
    }
    return;
#endif
  }
  for (size_t i = 0; i < n; ++i) dst[i] = portable(bits_at(bits, i));
}

}  // namespace castlike
