// FLOAT (and DOUBLE, through FLOAT; FLOAT16 and BFLOAT16 through FLOAT, or on AVX-512 in their
// own 16-bit lanes) -> the small float formats by arithmetic, exactly: the float8 types,
// FLOAT6E2M3, FLOAT6E3M2, FLOAT4E2M1 (SmallFloat) and FLOAT8E8M0 (E8M0).
//
// One template per family, for every format: the format (its mantissa bits, smallest normal
// exponent, largest value, sign bit) and every result that a rule decides (what NaN, Inf, an
// overflow and a zero become) arrive at run time in Params, from castlike._native.routes,
// which reads them off the spec's FLOAT class table.  What is written here is rounding to
// nearest even at a format's precision, which is the same for every format.
#pragma once

#include "kernels.hpp"
#include "simd_pack.hpp"

namespace castlike {

// -- SmallFloat ----------------------------------------------------------------------------------
//
// The technique, per element, on the magnitude a = |x| (FLOAT):
//
// 1. Clamp: a = min(clamp, a), NaN kept.  `clamp` is the format's largest value where an
//    overflow gives the largest value (saturating before rounding is exact: everything between
//    the largest value and the next midpoint rounds to it anyway), else the value one code
//    above it (E5M2's Inf, E4M3FN's NaN, FNUZ's 0x80), which every larger value then reaches.
// 2. Round once: add P = 2**(max(e, min_exponent) + 23 - M) for a's exponent e.  The sum lies
//    in [P, 2P], where FLOAT's quantum is 2**(max(e, min_exponent) - M): the format's quantum
//    at a, subnormals included.  The hardware's round to nearest even (FpEnvGuard) rounds a
//    there, once.
// 3. Read the code: the sum's bits are P's exponent field above a / quantum (M + 1 bits, or
//    M + 2 where a rounded up to the next binade), and the format's code is that integer plus
//    the exponent's distance from min_exponent, times 2**M:
//        code = (sum >> (23 - M)) + (sum & (2**(23 - M) - 1)) - ((min_exponent + 150 - M) << M)
//    which is the next binade's code by itself when the rounding carried.  A NaN's sum is a NaN
//    whose code lies far above every finite one.
// 4. Cap: min(code, cap_code) makes every NaN the cap code (packing to bytes has already
//    saturated it to 255).  Then the sign bit of the format is set for negative inputs.
// 5. Specials: with kFixedSpecials, the codes 0 and cap_code take their results from Params,
//    by sign (FNUZ's unsigned zero, the finite-only formats' NaN); otherwise routes checked
//    that they are the code with the sign bit, as every other code is.
//
// With kInfIsNan, +-Inf become NaN before the clamp (FNUZ with saturate, opset 19-23, R2).

//: Variant flags of SmallFloat (the kernel's `variant` is their sum; routes.py mirrors them).
enum SmallFloatFlag : int {
  kFixedSpecials = 1,      // the codes 0 and cap_code take their results from Params
  kInfIsNan = 2,           // +-Inf -> NaN before the clamp
  kNearestFloatFirst = 4,  // DOUBLE: to the nearest FLOAT first (else rounded to odd: once)
};

//: The run-time constants of one format and mode.
struct SmallFloatCodes {
  float clamp;
  uint32_t floor_bits;   // FLOAT bits of 2**min_exponent: P's exponent is at least this one's
  uint32_t p_offset;     // (23 - M) << 23: P's exponent field over a's
  uint32_t shift;        // 23 - M
  uint32_t low;          // 2**(23 - M) - 1
  uint32_t code_offset;  // (min_exponent + 150 - M) << M
  uint32_t cap;
  uint8_t sign;
  uint8_t zero[2], capped[2];  // the results of code 0 and of cap_code, positive and negative

  explicit SmallFloatCodes(const Params& p)
      : clamp(float(p.hi)),
        floor_bits(uint32_t(p.min_exponent + 127) << 23),
        p_offset(uint32_t(23 - p.mantissa_bits) << 23),
        shift(uint32_t(23 - p.mantissa_bits)),
        low((uint32_t{1} << (23 - p.mantissa_bits)) - 1),
        code_offset(uint32_t(p.min_exponent + 150 - p.mantissa_bits) << p.mantissa_bits),
        cap(uint32_t(p.cap_code)),
        sign(uint8_t(p.sign_mask)),
        zero{uint8_t(p.zero_results[0]), uint8_t(p.zero_results[1])},
        capped{uint8_t(p.cap_results[0]), uint8_t(p.cap_results[1])} {}

  //: Steps 1-3 on a magnitude's FLOAT bits (at most 0x7FFFFFFF); beyond the cap for NaN.
  uint32_t magnitude_code(uint32_t a_bits) const {
    const float a = bit_cast<float>(a_bits);
    const float clamped = clamp < a ? clamp : a;  // a NaN compares false and stays
    const uint32_t c_bits = bit_cast<uint32_t>(clamped);
    const uint32_t p = (std::max(c_bits, floor_bits) & Float32::INF) + p_offset;  // NaN: wraps
    const uint32_t sum = bit_cast<uint32_t>(clamped + bit_cast<float>(p));
    return (sum >> shift) + (sum & low) - code_offset;
  }

  //: The whole of one element, the portable form (also the SIMD kernels' head and tail).
  template <int Flags>
  uint8_t one(uint32_t bits) const {
    uint32_t a = bits & ~Float32::SIGN;
    if constexpr ((Flags & kInfIsNan) != 0) a = a == Float32::INF ? 0x7FC00000u : a;
    const uint32_t code = std::min(magnitude_code(a), cap);
    const int negative = (bits & Float32::SIGN) != 0 ? 1 : 0;
    if constexpr ((Flags & kFixedSpecials) != 0) {
      if (code == 0) return zero[negative];
      if (code == cap) return capped[negative];
    }
    return uint8_t(code | (negative != 0 ? sign : 0u));
  }
};

#if defined(CASTLIKE_PACK_AVX512)
template <int Flags>
struct SmallFloatLanes {
  __m512 clamp;
  __m512i magnitude, exponent, floor, p_offset, shift, low, code_offset, inf, one;
  __m512i cap, sign, zero_pos, zero_neg, cap_pos, cap_neg;  // bytes
  explicit SmallFloatLanes(const SmallFloatCodes& k)
      : clamp(_mm512_set1_ps(k.clamp)),
        magnitude(_mm512_set1_epi32(0x7FFFFFFF)),
        exponent(_mm512_set1_epi32(int(Float32::INF))),
        floor(_mm512_set1_epi32(int(k.floor_bits))),
        p_offset(_mm512_set1_epi32(int(k.p_offset))),
        shift(_mm512_set1_epi32(int(k.shift))),
        low(_mm512_set1_epi32(int(k.low))),
        code_offset(_mm512_set1_epi32(int(k.code_offset))),
        inf(_mm512_set1_epi32(int(Float32::INF))),
        one(_mm512_set1_epi32(1)),
        cap(_mm512_set1_epi8(char(k.cap))),
        sign(_mm512_set1_epi8(char(k.sign))),
        zero_pos(_mm512_set1_epi8(char(k.zero[0]))),
        zero_neg(_mm512_set1_epi8(char(k.zero[1]))),
        cap_pos(_mm512_set1_epi8(char(k.capped[0]))),
        cap_neg(_mm512_set1_epi8(char(k.capped[1]))) {}

  __m512i codes(const uint32_t* p) const {
    __m512i a = _mm512_and_si512(_mm512_loadu_si512(p), magnitude);
    if constexpr ((Flags & kInfIsNan) != 0) {
      // Inf + 1 is a signalling NaN, which the addition below quiets.
      a = _mm512_mask_add_epi32(a, _mm512_cmpeq_epi32_mask(a, inf), a, one);
    }
    // minps returns its second operand when either is NaN: a NaN stays.
    const __m512 clamped = min_ps(clamp, _mm512_castsi512_ps(a));
    const __m512i c = _mm512_castps_si512(clamped);
    const __m512i power =
        _mm512_add_epi32(_mm512_and_si512(max_epu32(c, floor), exponent), p_offset);
    const __m512i sum = _mm512_castps_si512(_mm512_add_ps(clamped, _mm512_castsi512_ps(power)));
    return _mm512_sub_epi32(
        _mm512_add_epi32(srlv_epi32(sum, shift), _mm512_and_si512(sum, low)),
        code_offset);
  }

  //: The step's 64 codes (packed as Pack<uint8_t> packs) with the sign, capped, specials.
  __m512i finish(__m512i bytes, const uint32_t* p) const {
    const __m512i code = _mm512_min_epu8(bytes, cap);
    // The inputs again (from the first-level cache), packed the same way with signed
    // saturation, which keeps each one's sign in the top bit of its byte.
    const auto at = [p](size_t k) { return _mm512_loadu_si512(p + k * kLanes); };
    const __m512i signs = _mm512_packs_epi16(_mm512_packs_epi32(at(0), at(1)),
                                             _mm512_packs_epi32(at(2), at(3)));
    return with_sign(code, _mm512_movepi8_mask(signs));
  }

  //: Capped codes (bytes) -> results: the sign bit set where `negative`, then the specials.
  __m512i with_sign(__m512i code, __mmask64 negative) const {
    __m512i out = _mm512_or_si512(code, _mm512_maskz_mov_epi8(negative, sign));
    if constexpr ((Flags & kFixedSpecials) != 0) {
      const __m512i zero = _mm512_mask_blend_epi8(negative, zero_pos, zero_neg);
      out = _mm512_mask_mov_epi8(out, _mm512_testn_epi8_mask(code, code), zero);
      const __m512i capped = _mm512_mask_blend_epi8(negative, cap_pos, cap_neg);
      out = _mm512_mask_mov_epi8(out, _mm512_cmpeq_epi8_mask(code, cap), capped);
    }
    return out;
  }
};
#elif defined(CASTLIKE_PACK_AVX2)
template <int Flags>
struct SmallFloatLanes {
  __m256 clamp;
  __m256i magnitude, exponent, floor, p_offset, shift, low, code_offset, inf;
  __m256i cap, sign, zero_pos, zero_neg, cap_pos, cap_neg;  // bytes
  explicit SmallFloatLanes(const SmallFloatCodes& k)
      : clamp(_mm256_set1_ps(k.clamp)),
        magnitude(_mm256_set1_epi32(0x7FFFFFFF)),
        exponent(_mm256_set1_epi32(int(Float32::INF))),
        floor(_mm256_set1_epi32(int(k.floor_bits))),
        p_offset(_mm256_set1_epi32(int(k.p_offset))),
        shift(_mm256_set1_epi32(int(k.shift))),
        low(_mm256_set1_epi32(int(k.low))),
        code_offset(_mm256_set1_epi32(int(k.code_offset))),
        inf(_mm256_set1_epi32(int(Float32::INF))),
        cap(_mm256_set1_epi8(char(k.cap))),
        sign(_mm256_set1_epi8(char(k.sign))),
        zero_pos(_mm256_set1_epi8(char(k.zero[0]))),
        zero_neg(_mm256_set1_epi8(char(k.zero[1]))),
        cap_pos(_mm256_set1_epi8(char(k.capped[0]))),
        cap_neg(_mm256_set1_epi8(char(k.capped[1]))) {}

  __m256i codes(const uint32_t* p) const {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    __m256i a = _mm256_and_si256(x, magnitude);
    if constexpr ((Flags & kInfIsNan) != 0) {
      a = _mm256_sub_epi32(a, _mm256_cmpeq_epi32(a, inf));  // Inf + 1: a signalling NaN
    }
    const __m256 clamped = _mm256_min_ps(clamp, _mm256_castsi256_ps(a));  // a NaN stays
    const __m256i c = _mm256_castps_si256(clamped);
    const __m256i power =
        _mm256_add_epi32(_mm256_and_si256(_mm256_max_epu32(c, floor), exponent), p_offset);
    const __m256i sum = _mm256_castps_si256(_mm256_add_ps(clamped, _mm256_castsi256_ps(power)));
    return _mm256_sub_epi32(
        _mm256_add_epi32(_mm256_srlv_epi32(sum, shift), _mm256_and_si256(sum, low)),
        code_offset);
  }

  __m256i finish(__m256i bytes, const uint32_t* p) const {
    const __m256i code = _mm256_min_epu8(bytes, cap);
    const auto at = [p](size_t k) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + k * kLanes));
    };
    const __m256i signs = _mm256_packs_epi16(_mm256_packs_epi32(at(0), at(1)),
                                             _mm256_packs_epi32(at(2), at(3)));
    return with_sign(code, _mm256_cmpgt_epi8(_mm256_setzero_si256(), signs));
  }

  //: Capped codes (bytes) -> results: the sign bit set where `negative` (bytes of all ones),
  //: then the specials.
  __m256i with_sign(__m256i code, __m256i negative) const {
    __m256i out = _mm256_or_si256(code, _mm256_and_si256(negative, sign));
    if constexpr ((Flags & kFixedSpecials) != 0) {
      const __m256i zero = _mm256_blendv_epi8(zero_pos, zero_neg, negative);
      out = _mm256_blendv_epi8(out, zero, _mm256_cmpeq_epi8(code, _mm256_setzero_si256()));
      const __m256i capped = _mm256_blendv_epi8(cap_pos, cap_neg, negative);
      out = _mm256_blendv_epi8(out, capped, _mm256_cmpeq_epi8(code, cap));
    }
    return out;
  }
};
#else
template <int Flags>
struct SmallFloatLanes {
  explicit SmallFloatLanes(const SmallFloatCodes&) {}
};
#endif

// -- SmallFloat from FLOAT16 and BFLOAT16 in 16-bit lanes (AVX-512; AVX2 for T = 1) -----------
//
// A half H (M_h mantissa bits, bias B_h) is rounded to the format (M bits, smallest normal
// exponent e_min) by integer arithmetic on its own bits, 32 lanes to a register, instead of
// being widened to FLOAT for the steps above (16 lanes).  On the magnitude a = |h|, clamped as
// in step 1 (a NaN set aside by a mask and given the cap code):
//
// * E, the half's exponent field; T = B_h + e_min, the field of the format's smallest normal
//   exponent; d = max(T - E, 0) (one saturating subtraction), the binades below it;
// * x = a - ((T - 1 - d) << M_h): from E = T on (d = 0), the format's exponent field E - T + 1
//   above the half's mantissa; below, the half's significand (its implicit bit included),
//   whose quantum is 2**(E - B_h - M_h);
// * s = M_h - M + d: the shift to the format's quantum (that of its subnormals below
//   2**e_min);
// * code = (x + 2**(s - 1) - 1 + ((x >> s) & 1)) >> s rounds to nearest even, once; a carry
//   gives the next binade's code, as in step 3.  2**(s - 1) - 1 comes from a table by d
//   (vpermw, which reads d's 5 low bits).  AVX-512BW's variable shifts give 0 for a count of 16
//   or more, which is right: such halves lie below a quarter of the smallest subnormal (the
//   table's entry does not matter there; it holds 0).
// * A subnormal half (E = 0, whose quantum is E = 1's) gets one d too many and an implicit bit
//   it lacks; both still give code 0, the right one, where every subnormal half lies below half
//   the format's smallest subnormal: T >= M + 2 (x < 2**(M_h + 1), s >= M_h + 2).
//
// A register with no lane below the format's smallest normal (every field >= T) has d = 0 in
// every lane: a branch skips the per-lane d and s there (Zen 4: 1.65-1.7x the FLOAT steps for
// FLOAT8E4M3FN on values mostly above 2**-6, 1.22-1.27x where every register takes the
// per-lane arithmetic, docs/performance.rst).
//
// Steps 4 and 5 follow as above, the signs read from the halves by a saturating pack.  This
// needs T >= M + 2 or T = 1, and a clamp that H holds exactly.  With T = 1 (FLOAT16 ->
// FLOAT8E5M2, which has FLOAT16's exponent range) d = 0 in every lane, subnormal halves
// included, and the shift is one constant, which the AVX2 build can do too (it has no variable
// 16-bit shifts, and keeps the FLOAT steps for every other T).  Below 1 (FLOAT16 ->
// FLOAT8E5M2FNUZ) a subnormal half can be a normal of the format, with a finer quantum than
// E = 1's: that cast keeps the FLOAT steps.

//: The bits of H holding the FLOAT value `bits` (positive), or 0 where H does not hold it.
template <class H>
inline uint16_t exact_half_bits(uint32_t bits) {
  if (bits == Float32::INF) return H::INF;
  const int e = int(bits >> 23) - Float32::BIAS;
  const uint32_t dropped = (uint32_t{1} << (Float32::M - H::M)) - 1;
  if (e < 1 - H::BIAS || e > H::BIAS || (bits & dropped) != 0) return 0;
  return uint16_t((uint32_t(e + H::BIAS) << H::M) | ((bits & Float32::MANTISSA) >> (23 - H::M)));
}

//: A format and mode as the 16-bit steps see them from half H: T, M_h - M, the clamp's bits,
//: and whether the technique serves (both SIMD levels).
template <class H>
struct HalfSmallFloatShape {
  int top;          // T
  int dropped;      // M_h - M, the half's mantissa bits below the format's
  uint16_t clamp;   // the clamp in H's bits (0: H does not hold it)
  explicit HalfSmallFloatShape(const SmallFloatCodes& k)
      : top(H::BIAS + int(k.floor_bits >> 23) - Float32::BIAS),
        dropped(H::M - (23 - int(k.shift))),
        clamp(exact_half_bits<H>(bit_cast<uint32_t>(k.clamp))) {}
  //: T >= M + 2 (or T = 1: one constant shift), a clamp that H holds, a bit to round away.
  bool fits() const {
    return (top == 1 || top >= H::M - dropped + 2) && clamp != 0 && dropped > 0;
  }
  //: The lanes' 2**(s - 1) - 1 for s = dropped + d (0 where s > 16, where it does not matter).
  int16_t half(int d) const {
    const int s = dropped + d;
    return int16_t(s <= 16 ? (1 << (s - 1)) - 1 : 0);
  }
};

#if defined(CASTLIKE_PACK_AVX512)
template <class H, int Flags>
struct HalfSmallFloatLanes {
  static constexpr __mmask32 kAll32 = 0xFFFFFFFF;
  int top;    // T
  bool fits;  // HalfSmallFloatShape::fits
  __m512i magnitude, inf, clamp, one, cap, top_field, half_table;  // 16-bit lanes
  __m512i fixed_shift, fixed_half;     // from field T on (d = 0): s and 2**(s - 1) - 1
  __m512i normal_bits, normal_offset;  // T << M_h, (T - 1) << M_h
  const SmallFloatLanes<Flags> bytes;

  explicit HalfSmallFloatLanes(const SmallFloatCodes& k) : bytes(k) {
    const HalfSmallFloatShape<H> shape(k);
    top = shape.top;
    fits = shape.fits();
    magnitude = _mm512_set1_epi16(short(~H::SIGN));
    inf = _mm512_set1_epi16(short(H::INF));
    clamp = _mm512_set1_epi16(short(shape.clamp));
    one = _mm512_set1_epi16(1);
    cap = _mm512_set1_epi16(short(k.cap));
    top_field = _mm512_set1_epi16(short(top));
    alignas(64) int16_t halves[32] = {};
    for (int d = 0; d < 32 && fits; ++d) halves[d] = shape.half(d);
    half_table = _mm512_load_si512(halves);
    fixed_shift = _mm512_set1_epi16(short(shape.dropped));
    fixed_half = _mm512_set1_epi16(halves[0]);
    normal_bits = _mm512_set1_epi16(short(fits ? top << H::M : 0));
    normal_offset = _mm512_set1_epi16(short(fits ? (top - 1) << H::M : 0));
  }

  //: 32 halves -> their magnitude codes, capped (NaN: the cap), in 16-bit lanes.
  template <bool kOneField>
  __m512i codes(__m512i h) const {
    const __m512i a = _mm512_and_si512(h, magnitude);
    const __mmask32 nan = (Flags & kInfIsNan) != 0 ? _mm512_cmpge_epu16_mask(a, inf)
                                                   : _mm512_cmpgt_epu16_mask(a, inf);
    const __m512i clamped = _mm512_maskz_min_epu16(kAll32, a, clamp);
    __m512i x = clamped, s = fixed_shift, half = fixed_half;
    if constexpr (!kOneField) {
      x = _mm512_sub_epi16(clamped, normal_offset);
      // A branch on the data: a register with no lane below the format's smallest normal has
      // d = 0 in every lane; where small values are common, it mostly goes the other way.
      if (_mm512_cmplt_epu16_mask(clamped, normal_bits) != 0) {
        const __m512i d =
            _mm512_subs_epu16(top_field, _mm512_maskz_srli_epi16(kAll32, clamped, H::M));
        x = _mm512_add_epi16(x, _mm512_maskz_slli_epi16(kAll32, d, H::M));
        s = _mm512_add_epi16(fixed_shift, d);
        half = _mm512_maskz_permutexvar_epi16(kAll32, d, half_table);
      }
    }
    const __m512i odd = _mm512_and_si512(_mm512_maskz_srlv_epi16(kAll32, x, s), one);
    const __m512i code = _mm512_maskz_srlv_epi16(
        kAll32, _mm512_add_epi16(_mm512_add_epi16(x, half), odd), s);
    return _mm512_mask_mov_epi16(_mm512_maskz_min_epu16(kAll32, code, cap), nan, cap);
  }

  //: Elements [0, m) of `src` -> `dst`, m a multiple of 64.
  template <bool kOneField>
  void steps(const uint16_t* src, uint8_t* dst, size_t m, bool stream) const {
    for (size_t i = 0; i < m; i += 64) {
      const __m512i h0 = _mm512_loadu_si512(src + i), h1 = _mm512_loadu_si512(src + i + 32);
      const __m512i code = _mm512_packus_epi16(codes<kOneField>(h0), codes<kOneField>(h1));
      // Signed saturation keeps each half's sign in the top bit of its byte.
      const __mmask64 negative = _mm512_movepi8_mask(_mm512_packs_epi16(h0, h1));
      store(dst + i, order_halves(bytes.with_sign(code, negative)), stream);
    }
  }
};
#elif defined(CASTLIKE_PACK_AVX2)
//: AVX2 has no variable 16-bit shifts: only T = 1 (FLOAT16 -> FLOAT8E5M2), whose shift is one
//: constant, takes the 16-bit lanes, 16 to a register.
template <class H, int Flags>
struct HalfSmallFloatLanes {
  int top;
  bool fits;
  __m256i magnitude, nan_from, clamp, one, cap, fixed_half;
  __m128i fixed_shift;
  const SmallFloatLanes<Flags> bytes;

  explicit HalfSmallFloatLanes(const SmallFloatCodes& k) : bytes(k) {
    const HalfSmallFloatShape<H> shape(k);
    top = shape.top;
    fits = top == 1 && shape.fits();
    magnitude = _mm256_set1_epi16(short(~H::SIGN));
    // The smallest NaN magnitude: Inf + 1, or Inf itself with kInfIsNan.
    nan_from = _mm256_set1_epi16(short((Flags & kInfIsNan) != 0 ? H::INF : H::INF + 1));
    clamp = _mm256_set1_epi16(short(shape.clamp));
    one = _mm256_set1_epi16(1);
    cap = _mm256_set1_epi16(short(k.cap));
    fixed_shift = _mm_cvtsi32_si128(shape.dropped);
    fixed_half = _mm256_set1_epi16(fits ? shape.half(0) : 0);
  }

  template <bool kOneField>
  __m256i codes(__m256i h) const {
    static_assert(kOneField, "T = 1 only");
    const __m256i a = _mm256_and_si256(h, magnitude);
    // Unsigned a >= nan_from: max(a, nan_from) == a (AVX2 compares 16-bit lanes signed only).
    const __m256i nan = _mm256_cmpeq_epi16(_mm256_max_epu16(a, nan_from), a);
    const __m256i x = _mm256_min_epu16(a, clamp);
    const __m256i odd = _mm256_and_si256(_mm256_srl_epi16(x, fixed_shift), one);
    const __m256i code = _mm256_srl_epi16(
        _mm256_add_epi16(_mm256_add_epi16(x, fixed_half), odd), fixed_shift);
    return _mm256_blendv_epi8(_mm256_min_epu16(code, cap), cap, nan);
  }

  template <bool kOneField>
  void steps(const uint16_t* src, uint8_t* dst, size_t m, bool stream) const {
    for (size_t i = 0; i < m; i += 32) {
      const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
      const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 16));
      const __m256i code = _mm256_packus_epi16(codes<kOneField>(h0), codes<kOneField>(h1));
      const __m256i negative =
          _mm256_cmpgt_epi8(_mm256_setzero_si256(), _mm256_packs_epi16(h0, h1));
      store(dst + i, order_halves(bytes.with_sign(code, negative)), stream);
    }
  }
};
#endif

//: FLOAT (FloatBits) or DOUBLE (DoubleBits) -> a small float with a sign bit, by arithmetic.
//: Reads `hi` (the clamp), `mantissa_bits`, `min_exponent`, `cap_code`, `sign_mask`,
//: `zero_results`, `cap_results`; Flags as SmallFloatFlag.
template <class Source, int Flags>
struct SmallFloat {
  using InT = typename Source::T;
  using OutT = uint8_t;
  static constexpr int kVariant = Flags;
  SmallFloatCodes k;
  explicit SmallFloat(const Params& p) : k(p) {}
  void block(const InT* src, uint8_t* dst, size_t n) const {
    if constexpr (std::is_same_v<Source, FloatBits>) {
      run(src, dst, n);
#if defined(CASTLIKE_PACK_AVX2)
    } else if constexpr ((Flags & (kNearestFloatFirst | kInfIsNan)) == 0) {
      // Rounded to odd in the steps (DoubleOddSource): no block of FLOAT bits, no second
      // conversion.  kInfIsNan must tell a finite DOUBLE beyond FLOAT's range from Inf, which
      // that source does not.  (With AVX-512 these integer steps measured 0.92-0.93x the
      // block's speed on Zen 4; the conversion's own rounding toward zero, below, is faster.)
      run(DoubleOddSource{src}, dst, n);
#elif defined(CASTLIKE_PACK_AVX512)
    } else if constexpr ((Flags & kNearestFloatFirst) == 0) {
      // The block's bits, made in registers (DoubleOdd16Source); every small float gives +-0
      // below 2**-126, so the cheaper rounding to odd serves.
      run(DoubleOdd16Source<true>{src}, dst, n);
#endif
    } else {
      const auto one = [this](uint32_t bits) { return k.template one<Flags>(bits); };
      // Every small float gives +-0 below 2**-126: the cheaper rounding to odd serves.
      run_packed_from_double<true>(src, dst, n, (Flags & kNearestFloatFirst) != 0,
                                   SmallFloatLanes<Flags>(k), one);
    }
  }
  //: FLOAT bits from `src`: a pointer to them, or a step source (simd_pack.hpp).
  template <class Src>
  void run(Src src, uint8_t* dst, size_t n) const {
    const auto one = [this](uint32_t bits) { return k.template one<Flags>(bits); };
#if defined(CASTLIKE_PACK_SIMD)
    if constexpr (IsHalfSource<Src>::value) {
      // In the halves' own 16-bit lanes where the technique serves (above).
      const HalfSmallFloatLanes<typename Src::Format, Flags> halves(k);
      if (halves.fits) {
        const PackRange r = pack_range(dst, n);
        for (size_t i = 0; i < r.head; ++i) dst[i] = one(src.bits(i));
        if (halves.top == 1) {
          halves.template steps<true>(src.p + r.head, dst + r.head, r.steps, r.stream);
        } else {
#if defined(CASTLIKE_PACK_AVX512)
          halves.template steps<false>(src.p + r.head, dst + r.head, r.steps, r.stream);
#endif
        }
        for (size_t i = r.head + r.steps; i < n; ++i) dst[i] = one(src.bits(i));
        end_stream(r.stream);
        return;
      }
    }
#endif
    run_packed(src, dst, n, SmallFloatLanes<Flags>(k), one);
  }
};

// -- E8M0 ----------------------------------------------------------------------------------------
//
// FLOAT8E8M0's code is a FLOAT exponent field: 2**(code - 127).  For x > 0:
//
// * up: ceil(log2 x) + 127.  Double x first, exactly (an FMA with +0, which also turns -0 into
//   +0; x >= 2**127 overflows to Inf, which then gives 254, the largest code, as saturation
//   wants); then (bits - 1) >> 23 is ceil(log2 2x) - 1 + 127, subnormal x included;
// * nearest (ties up, at 1.5 * 2**k): (bits(2x) - 2**22) >> 23, the mantissa's top bit
//   carrying into the exponent;
// * down: floor(log2 x) + 127 = the exponent field of x itself (0 for FLOAT's subnormals,
//   which all lie below 2**-126), with Inf clamped to FLOAT's largest value first.
//
// NaN and every negative x (R6's castlike choice) are merged by an unsigned minimum with a
// bit pattern just above Inf's, whose code is 255, the NaN; zero and x < 2**-127 give -1,
// which the saturating pack makes 0, the smallest code.  That is saturate on.  With saturate
// off, every x outside [2**-127, 2**127] (zero and Inf included, judged on x itself) becomes
// that NaN pattern instead.  routes checks these results against the spec's table before it
// picks this kernel.

//: E8M0's round modes (routes.py mirrors them); the kernel's variant is 2 * round + (saturate
//: ? 0 : 1).
enum class E8M0Round : int { kUp = 0, kDown = 1, kNearest = 2 };

template <int Variant>
struct E8M0Codes {
  static constexpr E8M0Round kRound = E8M0Round(Variant / 2);
  static constexpr bool kSaturate = Variant % 2 == 0;
  //: A pattern whose code is 255 (NaN); at or above Inf's, so that the minimum keeps Inf.
  static constexpr uint32_t kNanPattern = kRound == E8M0Round::kNearest ? 0x7FC00000u : 0x7F800001u;
  //: What is subtracted before the shift (see above).
  static constexpr uint32_t kOffset =
      kRound == E8M0Round::kUp ? 1u : (kRound == E8M0Round::kNearest ? 0x00400000u : 0u);
  //: FLOAT bits of 2**-127 and 2**127: the range, judged on x.
  static constexpr uint32_t kLowest = 0x00400000u;
  static constexpr uint32_t kHighest = 0x7F000000u;

  static uint8_t one(uint32_t bits) {
    const float x = bit_cast<float>(bits);
    float y;
    if constexpr (kRound == E8M0Round::kDown) {
      y = x + 0.0f;  // -0 -> +0
      y = std::numeric_limits<float>::max() < y ? std::numeric_limits<float>::max() : y;
    } else {
      y = x * 2.0f + 0.0f;  // exact; -0 -> +0
    }
    uint32_t w = bit_cast<uint32_t>(y);
    if constexpr (kSaturate) {
      w = std::min(w, kNanPattern);
    } else {
      w = bits - kLowest <= kHighest - kLowest ? w : kNanPattern;
    }
    return w < kOffset ? uint8_t{0} : uint8_t((w - kOffset) >> 23);
  }
};

#if defined(CASTLIKE_PACK_AVX512)
template <int Variant>
struct E8M0Lanes {
  static constexpr bool kStreamPastLastLevel = true;  // a few operations a byte (pack_range)
  using C = E8M0Codes<Variant>;
  __m512 two, zero, largest;
  __m512i nan_pattern, offset, lowest, range;
  E8M0Lanes()
      : two(_mm512_set1_ps(2.0f)),
        zero(_mm512_setzero_ps()),
        largest(_mm512_set1_ps(std::numeric_limits<float>::max())),
        nan_pattern(_mm512_set1_epi32(int(C::kNanPattern))),
        offset(_mm512_set1_epi32(int(C::kOffset))),
        lowest(_mm512_set1_epi32(int(C::kLowest))),
        range(_mm512_set1_epi32(int(C::kHighest - C::kLowest))) {}

  __m512i codes(const uint32_t* p) const {
    const __m512i x = _mm512_loadu_si512(p);
    const __m512 v = _mm512_castsi512_ps(x);
    __m512 y;
    if constexpr (C::kRound == E8M0Round::kDown) {
      y = min_ps(largest, _mm512_add_ps(v, zero));
    } else {
      y = _mm512_fmadd_ps(v, two, zero);
    }
    __m512i w = _mm512_castps_si512(y);
    if constexpr (C::kSaturate) {
      w = min_epu32(w, nan_pattern);
    } else {
      const __mmask16 in_range =
          _mm512_cmple_epu32_mask(_mm512_sub_epi32(x, lowest), range);
      w = _mm512_mask_mov_epi32(nan_pattern, in_range, w);
    }
    if constexpr (C::kOffset != 0) w = _mm512_sub_epi32(w, offset);
    return srai_epi32<23>(w);  // -1 below the range: packed to 0
  }
  __m512i finish(__m512i bytes, const uint32_t*) const { return bytes; }
};
#elif defined(CASTLIKE_PACK_AVX2)
template <int Variant>
struct E8M0Lanes {
  static constexpr bool kStreamPastLastLevel = true;  // a few operations a byte (pack_range)
  using C = E8M0Codes<Variant>;
  __m256 two, zero, largest;
  __m256i nan_pattern, offset, lowest, range;
  E8M0Lanes()
      : two(_mm256_set1_ps(2.0f)),
        zero(_mm256_setzero_ps()),
        largest(_mm256_set1_ps(std::numeric_limits<float>::max())),
        nan_pattern(_mm256_set1_epi32(int(C::kNanPattern))),
        offset(_mm256_set1_epi32(int(C::kOffset))),
        lowest(_mm256_set1_epi32(int(C::kLowest))),
        range(_mm256_set1_epi32(int(C::kHighest - C::kLowest))) {}

  __m256i codes(const uint32_t* p) const {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256 v = _mm256_castsi256_ps(x);
    __m256 y;
    if constexpr (C::kRound == E8M0Round::kDown) {
      y = _mm256_min_ps(largest, _mm256_add_ps(v, zero));
    } else {
      y = _mm256_fmadd_ps(v, two, zero);
    }
    __m256i w = _mm256_castps_si256(y);
    if constexpr (C::kSaturate) {
      w = _mm256_min_epu32(w, nan_pattern);
    } else {
      const __m256i shifted = _mm256_sub_epi32(x, lowest);
      const __m256i in_range = _mm256_cmpeq_epi32(_mm256_min_epu32(shifted, range), shifted);
      w = _mm256_blendv_epi8(nan_pattern, w, in_range);
    }
    if constexpr (C::kOffset != 0) w = _mm256_sub_epi32(w, offset);
    return _mm256_srai_epi32(w, 23);
  }
  __m256i finish(__m256i bytes, const uint32_t*) const { return bytes; }
};
#else
template <int Variant>
struct E8M0Lanes {};
#endif

// DOUBLE x, in its own 64-bit lanes (no FLOAT bits first): the same steps on DOUBLE's fields.
// R6's thresholds (powers of two, and 1.5 times them) and its range's ends are exact in both
// formats, so the code of x equals the code of x rounded to odd into FLOAT (the portable form,
// head and tail).  Per lane, y is 2x (up, nearest) or x (down), exact; with saturate, y is
// clamped to the DOUBLE whose code is 254 (2**128, or FLOAT's largest value for down), which
// keeps NaN (a minimum returns its second operand when either is NaN); the unsigned minimum
// with Inf's bits then merges NaN and every negative x into a pattern whose code is above 254,
// which the saturating pack makes 255.  The code, (bits(y) - offset) >> 52 - (1023 - 127), is
// the arithmetic shift of the high 32 bits of bits(y) - (offset + 896 * 2**52) by 20.
// Against FLOAT bits rounded to odd a block at a time and then E8M0Lanes (Zen 4, one thread,
// 10**6 in the cache, every mode): 0.59-0.62x the time with saturate and 0.69-0.75x without
// (AVX-512), 0.57-0.60x and 0.65-0.71x (AVX2); 0.81-0.83x at 10**7 (AVX-512).
template <int Variant>
struct DoubleE8M0Codes {
  using C = E8M0Codes<Variant>;
  //: 1023 - 127: DOUBLE's exponent bias less FLOAT8E8M0's.
  static constexpr uint64_t kRebias = uint64_t{1023 - 127} << 52;
  static constexpr uint64_t kOffset =
      kRebias + (C::kRound == E8M0Round::kUp
                     ? 1u
                     : (C::kRound == E8M0Round::kNearest ? uint64_t{1} << 51 : 0u));
  //: The clamp with saturate: the largest y whose code is 254.
  static constexpr double kClamp = C::kRound == E8M0Round::kDown
                                       ? double(std::numeric_limits<float>::max())
                                       : 0x1p128;
  static constexpr uint64_t kInfBits = 0x7FF0000000000000u;
  //: DOUBLE bits of 2**-127 and 2**127: the range without saturate, judged on x.
  static constexpr uint64_t kLowest = uint64_t{1023 - 127} << 52;
  static constexpr uint64_t kHighest = uint64_t{1023 + 127} << 52;
};

#if defined(CASTLIKE_PACK_AVX512)
template <int Variant>
struct DoubleE8M0Lanes {
  static constexpr bool kStreamPastLastLevel = true;  // a few operations a byte (pack_range)
  using C = E8M0Codes<Variant>;
  using D = DoubleE8M0Codes<Variant>;
  static constexpr __mmask8 kAll8 = 0xFF;
  __m512d two, zero, clamp;
  __m512i inf_bits, offset, lowest, range, high_halves;
  DoubleE8M0Lanes()
      : two(_mm512_set1_pd(2.0)),
        zero(_mm512_setzero_pd()),
        clamp(_mm512_set1_pd(D::kClamp)),
        inf_bits(_mm512_set1_epi64(int64_t(D::kInfBits))),
        offset(_mm512_set1_epi64(int64_t(D::kOffset))),
        lowest(_mm512_set1_epi64(int64_t(D::kLowest))),
        range(_mm512_set1_epi64(int64_t(D::kHighest - D::kLowest))),
        // The odd 32-bit halves of two vectors, in element order.
        high_halves(_mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)) {}

  //: bits(y) - offset for 8 DOUBLEs (see above).
  __m512i shifted(const uint64_t* p) const {
    const __m512i b = _mm512_loadu_si512(p);
    const __m512d x = _mm512_castsi512_pd(b);
    __m512d y;
    if constexpr (C::kRound == E8M0Round::kDown) {
      y = _mm512_add_pd(x, zero);  // -0 -> +0
    } else {
      y = _mm512_fmadd_pd(x, two, zero);
    }
    __m512i w;
    if constexpr (C::kSaturate) {
      w = _mm512_maskz_min_epu64(kAll8, _mm512_castpd_si512(min_pd(clamp, y)), inf_bits);
    } else {
      const __mmask8 in_range = _mm512_cmple_epu64_mask(_mm512_sub_epi64(b, lowest), range);
      w = _mm512_mask_mov_epi64(inf_bits, in_range, _mm512_castpd_si512(y));
    }
    return _mm512_sub_epi64(w, offset);
  }
  VecI codes(const uint64_t* p) const {
    const __m512i high =
        _mm512_maskz_permutex2var_epi32(kAll16, shifted(p), high_halves, shifted(p + 8));
    return srai_epi32<20>(high);  // negative below the range (to -897): packed to 0
  }
  VecI finish(VecI bytes, const uint64_t*) const { return bytes; }
};
#elif defined(CASTLIKE_PACK_AVX2)
template <int Variant>
struct DoubleE8M0Lanes {
  static constexpr bool kStreamPastLastLevel = true;  // a few operations a byte (pack_range)
  using C = E8M0Codes<Variant>;
  using D = DoubleE8M0Codes<Variant>;
  __m256d two, zero, clamp, inf;
  __m256i offset, lowest, highest;
  DoubleE8M0Lanes()
      : two(_mm256_set1_pd(2.0)),
        zero(_mm256_setzero_pd()),
        clamp(_mm256_set1_pd(D::kClamp)),
        inf(_mm256_set1_pd(std::numeric_limits<double>::infinity())),
        offset(_mm256_set1_epi64x(int64_t(D::kOffset))),
        lowest(_mm256_set1_epi64x(int64_t(D::kLowest))),
        highest(_mm256_set1_epi64x(int64_t(D::kHighest))) {}

  //: bits(y) - offset for 4 DOUBLEs.  AVX2 has no unsigned 64-bit minimum or comparison: NaN
  //: and the negative x (or, without saturate, every x outside the range: as signed integers,
  //: the negative ones lie below it and NaN above) become Inf, whose code is above 254.
  __m256i shifted(const uint64_t* p) const {
    const __m256d x = _mm256_loadu_pd(reinterpret_cast<const double*>(p));
    __m256d y;
    if constexpr (C::kRound == E8M0Round::kDown) {
      y = _mm256_add_pd(x, zero);  // -0 -> +0
    } else {
      y = _mm256_fmadd_pd(x, two, zero);
    }
    __m256d outside;
    if constexpr (C::kSaturate) {
      y = _mm256_min_pd(clamp, y);
      outside = _mm256_cmp_pd(y, zero, _CMP_NGE_UQ);  // NaN, or y < 0
    } else {
      const __m256i b = _mm256_castpd_si256(x);
      outside = _mm256_castsi256_pd(_mm256_or_si256(_mm256_cmpgt_epi64(b, highest),
                                                    _mm256_cmpgt_epi64(lowest, b)));
    }
    return _mm256_sub_epi64(_mm256_castpd_si256(_mm256_blendv_pd(y, inf, outside)), offset);
  }
  VecI codes(const uint64_t* p) const {
    // The odd 32-bit halves, within 128-bit lanes (p's two, then p + 4's two), then the 64-bit
    // groups put in element order.
    const __m256 high = _mm256_shuffle_ps(_mm256_castsi256_ps(shifted(p)),
                                          _mm256_castsi256_ps(shifted(p + 4)),
                                          _MM_SHUFFLE(3, 1, 3, 1));
    return _mm256_srai_epi32(_mm256_permute4x64_epi64(_mm256_castps_si256(high), 0xD8), 20);
  }
  VecI finish(VecI bytes, const uint64_t*) const { return bytes; }
};
#else
template <int Variant>
struct DoubleE8M0Lanes {};
#endif

//: FLOAT or DOUBLE (rounded to odd into FLOAT: R6's thresholds are FLOAT values with an even
//: last bit, which rounding to odd never reaches from elsewhere) -> FLOAT8E8M0 by R6.
template <class Source, int Variant>
struct E8M0 {
  using InT = typename Source::T;
  using OutT = uint8_t;
  static constexpr int kVariant = Variant;
  explicit E8M0(const Params&) {}
  void block(const InT* src, uint8_t* dst, size_t n) const {
    if constexpr (std::is_same_v<Source, FloatBits>) {
      run(src, dst, n);
    } else {
      // The steps in DOUBLE's lanes; head and tail rounded to odd into FLOAT.
      const auto one = [](uint64_t bits) {
        return E8M0Codes<Variant>::one(float32_odd_bits(bit_cast<double>(bits)));
      };
      run_packed(src, dst, n, DoubleE8M0Lanes<Variant>(), one);
    }
  }
  //: FLOAT bits from `src`: a pointer to them, or a step source (simd_pack.hpp).
  template <class Src>
  void run(Src src, uint8_t* dst, size_t n) const {
    const auto one = [](uint32_t bits) { return E8M0Codes<Variant>::one(bits); };
    run_packed(src, dst, n, E8M0Lanes<Variant>(), one);
  }
};

}  // namespace castlike
