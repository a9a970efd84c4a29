// AVX2: a one-byte float source's FLOAT, FLOAT16, BFLOAT16 or DOUBLE results computed instead of
// read from the table (Gather<uint8_t, Out> for 16-, 32- and 64-bit Out).
//
// AVX-512 reads those tables from registers (byte_table.hpp).  AVX2 cannot: its one permutation
// of 32-bit entries (vpermd) reads 8, so a table of 256 would take 32 permutations and 31 blends
// an 8-lane step, and its gather instruction is no faster than scalar loads on the CPUs whose
// microcode guards it.  The scalar gather takes about 1 ns an element.  What a float source's
// codes hold, though, is arithmetic:
//
// * a normal code (exponent field above 0): its magnitude bits shifted to the result's exponent
//   and mantissa places, and the exponent rebiased by an integer addition;
// * a subnormal code: through FLOAT, its mantissa converted and multiplied by its unit,
//   2**(min_exponent - mantissa_bits), exact (both factors and the product are normal FLOATs);
//   straight to FLOAT16 or BFLOAT16, its result read by a byte shuffle from the 2**mantissa_bits
//   results of those codes (at most 8);
// * the NaNs at the top of the magnitudes, where the table gives them one value: one comparison
//   of the magnitude; then the sign bit moved to the result's.
//
// FLOAT16 and BFLOAT16 results are computed in 16-bit lanes, 16 a step, where the result's
// range holds the format's normal numbers; else through FLOAT (8 a step), then FLOAT16 by the
// CPU's conversion (to nearest: every value of a one-byte format is a FLOAT16), BFLOAT16 as the
// upper half of the FLOAT bits.  DOUBLE results are the FLOATs widened by the CPU's exact
// conversion, 8 a step (10**6 codes on an AMD EPYC, Zen 3: 0.80-0.89 ms gathered -> 0.54-0.75,
// where writing the 8 MB alone takes about 0.55).  At most two codes take the table's entry
// instead: FLOAT8E5M2's Infs, the FNUZ formats' NaN at 0x80, FLOAT8E8M0's 2**-127.
// FLOAT8E5M2 -> FLOAT (its NaNs and both Infs: three comparisons an 8-lane step) measured level
// with the gather on an Intel Xeon and 0.48x its time on an AMD EPYC (Zen 3), whose scalar
// gather is slower.
//
// Two shorter ways measured slower than the gather on random bytes: reading the magnitude as a
// FLOAT and scaling it (the FLOAT is subnormal for a subnormal code, and Intel's cores take a
// microcode assist on a subnormal operand: 5x slower), and FLOAT8E5M2 as FLOAT16's upper byte
// widened by vcvtph2ps (slow on FLOAT16's subnormals and NaNs).
//
// The constants come from the spec's format (castlike._native.routes passes mantissa_bits,
// min_exponent and sign_mask), and the table stays the rule: when the kernel is made,
// `find_byte_float` evaluates the scalar model of these steps (the same operations on one lane)
// for every code, and the kernel takes the arithmetic only where it gives every entry but at
// most two, which the steps then copy from the table.  Any other table (an integer target, a
// random one in the tests) keeps the scalar gather.
#pragma once

#include "kernels.hpp"
#include "simd_pack.hpp"

namespace castlike {

#if defined(CASTLIKE_PACK_AVX2)
//: Which results the FLOAT becomes: the FLOAT bits, FLOAT16, BFLOAT16 (the upper half), or
//: DOUBLE (the exact conversion).
enum class ByteFloatOut { kFloat, kFloat16, kBFloat16, kDouble };

//: One of the steps' rounding immediates, for the vector and the scalar conversion alike.
constexpr int kToNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

//: The codes of a one-byte float source computed: the constants and the (at most two) codes
//: whose entry the table gives.
struct ByteFloat {
  ByteFloatOut out = ByteFloatOut::kFloat;
  uint32_t mask = 0xFF;
  uint32_t sign = 0;        // the source's sign bit (0: FLOAT8E8M0)
  int sign_shift = 0;       // from the sign bit to FLOAT's
  int shift = 0;            // from the magnitude to FLOAT's places: 23 - mantissa_bits
  uint32_t normal_from = 1; // the smallest normal magnitude: 1 << mantissa_bits
  uint32_t rebias = 0;      // added to a normal code's shifted bits: (min_exponent + 126) << 23
  float step = 1.0f;        // a subnormal code's unit: 2**(min_exponent - mantissa_bits)
  int exceptions = 0;
  uint32_t code[2] = {0, 0};
  uint64_t value[2] = {0, 0};
  // The NaNs at the top of the magnitudes (FLOAT8E4M3FN's 0x7F, FLOAT8E5M2's 0x7D to 0x7F),
  // where the table gives them one value (and its sign): one comparison of the magnitude
  // instead of one of the code for each.  `top_bits` are their FLOAT bits before the sign (a
  // 16-bit result's in the upper half).
  bool top = false;
  uint32_t top_from = 0;
  uint32_t top_bits = 0;
  // FLOAT16 and BFLOAT16 results straight in 16-bit lanes (HalfLanes), where that gives the
  // table: a normal code's bits shifted to the result's places and rebiased, a subnormal code's
  // result read by a byte shuffle from `subnormal` (2**mantissa_bits entries, at most 8).
  bool direct = false;
  int shift16 = 0;
  uint32_t rebias16 = 0;
  int sign_shift16 = 0;
  alignas(16) uint16_t subnormal[8] = {};

  //: The FLOAT of code c, as one lane of the vector steps computes it.
  float decode(uint32_t c) const {
    c &= mask;
    const uint32_t m = c & ~sign;
    uint32_t magnitude = m < normal_from ? bit_cast<uint32_t>(static_cast<float>(m) * step)
                                         : (m << shift) + rebias;
    if (top && m >= top_from) magnitude = top_bits;
    return bit_cast<float>(magnitude | ((c & sign) << sign_shift));
  }

  //: The result of code c by the arithmetic alone.
  uint64_t result(uint32_t c) const {
    if (direct) return result16(c);
    const float f = decode(c);
    switch (out) {
      case ByteFloatOut::kFloat16:
        return _cvtss_sh(f, kToNearest);
      case ByteFloatOut::kBFloat16:
        return bit_cast<uint32_t>(f) >> 16;
      case ByteFloatOut::kDouble:
        return bit_cast<uint64_t>(static_cast<double>(f));
      case ByteFloatOut::kFloat:
        break;
    }
    return bit_cast<uint32_t>(f);
  }

  //: The result of code c in 16-bit lanes, as one lane of the direct steps computes it.
  uint32_t result16(uint32_t c) const {
    c &= mask;
    const uint32_t m = c & ~sign;
    uint32_t bits = m < normal_from ? subnormal[m] : ((m << shift16) + rebias16) & 0xFFFF;
    if (top && m >= top_from) bits = top_bits >> 16;
    return bits | ((c & sign) << sign_shift16);
  }
};

//: ByteFloat::top for `f`, where its arithmetic does not give the table's entry of the highest
//: magnitude: the run of magnitudes below it with the same entry (the sign is the arithmetic's,
//: checked with the rest by `fits`).
template <class Out>
void find_top(const Out* table, ByteFloat* f) {
  f->top = false;
  const uint32_t highest = f->mask & ~f->sign;
  if (f->result(highest) == table[highest]) return;
  const uint64_t value = table[highest];
  uint32_t from = highest;
  while (from > 0 && table[from - 1] == value) --from;
  f->top = true;
  f->top_from = from;
  if (f->direct || f->out == ByteFloatOut::kBFloat16) {
    f->top_bits = static_cast<uint32_t>(value) << 16;
  } else if (f->out == ByteFloatOut::kFloat16) {
    f->top_bits = bit_cast<uint32_t>(_cvtsh_ss(static_cast<unsigned short>(value)));
  } else if (f->out == ByteFloatOut::kDouble) {
    // The FLOAT whose conversion is the entry, if there is one (`fits` checks that it is).
    f->top_bits = bit_cast<uint32_t>(static_cast<float>(bit_cast<double>(value)));
  } else {
    f->top_bits = static_cast<uint32_t>(value);
  }
}

//: Whether `f`'s arithmetic (with ByteFloat::top) gives `table` but for at most two codes,
//: which become its exceptions.
template <class Out>
bool fits(const Out* table, ByteFloat* f) {
  find_top(table, f);
  f->exceptions = 0;
  for (uint32_t c = 0; c <= f->mask; ++c) {
    if (f->result(c) == table[c]) continue;
    if (f->exceptions == 2) return false;
    f->code[f->exceptions] = c;
    f->value[f->exceptions] = table[c];
    ++f->exceptions;
  }
  return true;
}

//: `f` (FLOAT16 or BFLOAT16 results) in 16-bit lanes: ByteFloat::direct, with the subnormal
//: codes' results from f's arithmetic; false where the shuffle or the shifts cannot hold it.
inline bool direct_form(const ByteFloat& f, ByteFloat* direct) {
  if (f.normal_from > 8) return false;  // the shuffle reads 8 entries of 16 bits
  *direct = f;
  for (uint32_t m = 0; m < f.normal_from; ++m) {
    direct->subnormal[m] = static_cast<uint16_t>(f.result(m));
  }
  // The FLOAT rebias moves the exponent to FLOAT's bias (127); FLOAT16's is 15, BFLOAT16's 127.
  const int mantissa_bits = 23 - f.shift;
  const int float_rebias = static_cast<int>(f.rebias) >> 23;
  const bool half = f.out == ByteFloatOut::kFloat16;
  direct->shift16 = (half ? 10 : 7) - mantissa_bits;
  direct->rebias16 = static_cast<uint32_t>(float_rebias - (half ? 112 : 0)) << (half ? 10 : 7);
  direct->sign_shift16 = f.sign == 0 ? 0 : f.sign_shift - 16;
  direct->direct = true;
  return direct->shift16 >= 0 && direct->sign_shift16 >= 0;
}

//: The arithmetic that gives `table` (mask + 1 entries of Out), with its exceptions, if one
//: does; false for every other table and for constants outside the ranges the steps define.
//: 16-bit results are tried in 16-bit lanes first (the shorter steps), then through FLOAT.
template <class Out>
bool find_byte_float(const Out* table, const Params& p, ByteFloat* found) {
  const uint64_t sign = static_cast<uint64_t>(p.sign_mask);
  if (p.sign_mask < 0 || p.mask > 0xFF || (sign & (sign - 1)) != 0 || sign > p.mask) {
    return false;  // not a one-byte float source (routes gives sign_mask to those only)
  }
  if (p.mantissa_bits < 0 || p.mantissa_bits > 7) return false;
  // A normal code's exponent moves by min_exponent + 126 (to FLOAT's field, 1 to 254 for every
  // normal code whose exponent field is below 2**(8 - mantissa_bits)); a subnormal code's unit
  // is a normal FLOAT.
  const int rebias = p.min_exponent + 126;
  const int step_exponent = p.min_exponent - p.mantissa_bits;
  if (rebias < -126 || rebias > 126 || step_exponent < -126) return false;
  ByteFloat f;
  f.mask = static_cast<uint32_t>(p.mask);
  f.sign = static_cast<uint32_t>(sign);
  f.sign_shift = sign == 0 ? 0 : 31 - std::ilogb(static_cast<double>(sign));
  f.shift = 23 - p.mantissa_bits;
  f.normal_from = uint32_t{1} << p.mantissa_bits;
  f.rebias = static_cast<uint32_t>(rebias) << 23;  // two's complement: a negative one subtracts
  f.step = std::ldexp(1.0f, step_exponent);
  if constexpr (sizeof(Out) == 2) {
    for (const ByteFloatOut out : {ByteFloatOut::kFloat16, ByteFloatOut::kBFloat16}) {
      f.out = out;
      f.top = false;  // (a previous try's)
      f.exceptions = 0;
      ByteFloat direct;
      if (direct_form(f, &direct) && fits(table, &direct)) {
        *found = direct;
        return true;
      }
      if (fits(table, &f)) {
        *found = f;
        return true;
      }
    }
    return false;
  } else {
    f.out = sizeof(Out) == 8 ? ByteFloatOut::kDouble : ByteFloatOut::kFloat;
    *found = f;
    return fits(table, found);
  }
}

//: The steps' constants in registers, and their FLOATs of 8 codes (the low 8 bytes of `bytes`,
//: already masked).  kSigned: whether the format has a sign bit (FLOAT8E8M0 has none); kTop:
//: whether ByteFloat::top holds.
template <bool kSigned, bool kTop>
struct ByteFloatLanes {
  __m256i magnitude_mask, sign_bit, subnormal_below, rebias, top_from, top_bits;
  __m128i shift, sign_shift;
  __m256 step;

  explicit ByteFloatLanes(const ByteFloat& f)
      : magnitude_mask(_mm256_set1_epi32(int(f.mask & ~f.sign))),
        sign_bit(_mm256_set1_epi32(int(f.sign))),
        subnormal_below(_mm256_set1_epi32(int(f.normal_from))),
        rebias(_mm256_set1_epi32(int(f.rebias))),
        top_from(_mm256_set1_epi32(int(f.top_from) - 1)),
        top_bits(_mm256_set1_epi32(int(f.top_bits))),
        shift(_mm_cvtsi32_si128(f.shift)),
        sign_shift(_mm_cvtsi32_si128(f.sign_shift)),
        step(_mm256_set1_ps(f.step)) {}

  __m256 operator()(__m128i bytes) const {
    const __m256i c = _mm256_cvtepu8_epi32(bytes);
    const __m256i m = kSigned ? _mm256_and_si256(c, magnitude_mask) : c;
    const __m256i normal = _mm256_add_epi32(_mm256_sll_epi32(m, shift), rebias);
    const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(m), step);
    const __m256i is_subnormal = _mm256_cmpgt_epi32(subnormal_below, m);
    __m256i bits = _mm256_blendv_epi8(normal, _mm256_castps_si256(subnormal), is_subnormal);
    if constexpr (kTop) {
      bits = _mm256_blendv_epi8(bits, top_bits, _mm256_cmpgt_epi32(m, top_from));
    }
    if constexpr (kSigned) {
      bits = _mm256_or_si256(bits, _mm256_sll_epi32(_mm256_and_si256(c, sign_bit), sign_shift));
    }
    return _mm256_castsi256_ps(bits);
  }
};

//: The table's entries for the exceptional codes, over `result` (lanes of `lanes` codes).
template <class Out>
inline __m256i with_exceptions(const ByteFloat& f, __m256i result, __m256i codes) {
  for (int k = 0; k < f.exceptions; ++k) {
    if constexpr (sizeof(Out) == 2) {
      const __m256i hit = _mm256_cmpeq_epi16(codes, _mm256_set1_epi16(short(f.code[k])));
      result = _mm256_blendv_epi8(result, _mm256_set1_epi16(short(f.value[k])), hit);
    } else if constexpr (sizeof(Out) == 8) {
      const __m256i hit = _mm256_cmpeq_epi64(codes, _mm256_set1_epi64x(int64_t(f.code[k])));
      result = _mm256_blendv_epi8(result, _mm256_set1_epi64x(int64_t(f.value[k])), hit);
    } else {
      const __m256i hit = _mm256_cmpeq_epi32(codes, _mm256_set1_epi32(int(f.code[k])));
      result = _mm256_blendv_epi8(result, _mm256_set1_epi32(int(f.value[k])), hit);
    }
  }
  return result;
}

//: Elements [0, n) by the arithmetic: 8 FLOAT results a step, or 16 FLOAT16/BFLOAT16 ones
//: (streamed stores for a large output, as the SIMD frame does).
template <class Out, bool kSigned, bool kTop>
void byte_float_steps(const ByteFloat& f, const Out* table, const uint8_t* src, Out* dst,
                      size_t n) {
  static_assert(kStep<Out> == 32 / sizeof(Out), "one vector of results a step");
  const ByteFloatLanes<kSigned, kTop> lanes(f);
  const __m128i mask = _mm_set1_epi8(static_cast<char>(f.mask));
  const PackRange r = pack_range(dst, n);
  for (size_t i = 0; i < r.head; ++i) dst[i] = table[src[i] & f.mask];
  for (size_t i = r.head; i < r.head + r.steps; i += kStep<Out>) {
    __m256i result;
    if constexpr (sizeof(Out) == 4) {
      const __m128i bytes =
          _mm_and_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i)), mask);
      result = with_exceptions<Out>(f, _mm256_castps_si256(lanes(bytes)),
                                    _mm256_cvtepu8_epi32(bytes));
    } else {
      const __m128i bytes =
          _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)), mask);
      const __m256 low = lanes(bytes);
      const __m256 high = lanes(_mm_srli_si128(bytes, 8));
      if (f.out == ByteFloatOut::kFloat16) {  // (the same every step: predicted)
        result = _mm256_set_m128i(_mm256_cvtps_ph(high, kToNearest),
                                  _mm256_cvtps_ph(low, kToNearest));
      } else {
        // The in-lane pack interleaves the halves' 4-element groups; one permutation of 64-bit
        // groups restores their order.
        const __m256i low_halves = _mm256_srli_epi32(_mm256_castps_si256(low), 16);
        const __m256i high_halves = _mm256_srli_epi32(_mm256_castps_si256(high), 16);
        const __m256i packed = _mm256_packus_epi32(low_halves, high_halves);
        result = _mm256_permute4x64_epi64(packed, 0xD8);
      }
      result = with_exceptions<Out>(f, result, _mm256_cvtepu8_epi16(bytes));
    }
    store(dst + i, result, r.stream);
  }
  for (size_t i = r.head + r.steps; i < n; ++i) dst[i] = table[src[i] & f.mask];
  end_stream(r.stream);
}

//: Elements [0, n) of DOUBLE results: the FLOATs of 8 codes a step, each half widened by the
//: conversion (exact: every value of a one-byte format is a FLOAT; a NaN's payload as the
//: preparation's scalar model saw it).  64-bit outputs do not stream (as in the SIMD frame).
template <bool kSigned, bool kTop>
void byte_double_steps(const ByteFloat& f, const uint64_t* table, const uint8_t* src,
                       uint64_t* dst, size_t n) {
  const ByteFloatLanes<kSigned, kTop> lanes(f);
  const __m128i mask = _mm_set1_epi8(static_cast<char>(f.mask));
  const size_t steps = n / 8 * 8;
  for (size_t i = 0; i < steps; i += 8) {
    const __m128i bytes =
        _mm_and_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i)), mask);
    const __m256 floats = lanes(bytes);
    const __m256i low = _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_castps256_ps128(floats)));
    const __m256i high = _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_extractf128_ps(floats, 1)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        with_exceptions<uint64_t>(f, low, _mm256_cvtepu8_epi64(bytes)));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(dst + i + 4),
        with_exceptions<uint64_t>(f, high, _mm256_cvtepu8_epi64(_mm_srli_si128(bytes, 4))));
  }
  for (size_t i = steps; i < n; ++i) dst[i] = table[src[i] & f.mask];
}

//: The FLOAT16 or BFLOAT16 results of 16 codes (16-bit lanes, masked) in 16-bit lanes: the
//: direct form of ByteFloatLanes (ByteFloat::direct).
template <bool kSigned, bool kTop>
struct HalfLanes {
  __m256i magnitude_mask, sign_bit, subnormal_below, rebias, top_from, top_bits;
  __m256i subnormal, spread, second_byte;
  __m128i shift, sign_shift;

  explicit HalfLanes(const ByteFloat& f)
      : magnitude_mask(_mm256_set1_epi16(short(f.mask & ~f.sign))),
        sign_bit(_mm256_set1_epi16(short(f.sign))),
        subnormal_below(_mm256_set1_epi16(short(f.normal_from))),
        rebias(_mm256_set1_epi16(short(f.rebias16))),
        top_from(_mm256_set1_epi16(short(f.top_from - 1))),
        top_bits(_mm256_set1_epi16(short(f.top_bits >> 16))),
        subnormal(_mm256_broadcastsi128_si256(
            _mm_load_si128(reinterpret_cast<const __m128i*>(f.subnormal)))),
        spread(_mm256_set1_epi16(0x0202)),
        second_byte(_mm256_set1_epi16(0x0100)),
        shift(_mm_cvtsi32_si128(f.shift16)),
        sign_shift(_mm_cvtsi32_si128(f.sign_shift16)) {}

  __m256i operator()(__m256i c) const {
    const __m256i m = kSigned ? _mm256_and_si256(c, magnitude_mask) : c;
    const __m256i normal = _mm256_add_epi16(_mm256_sll_epi16(m, shift), rebias);
    // Entry m of the subnormals is bytes 2m and 2m + 1: the shuffle's index m * 0x0202 + 0x0100
    // (a lane whose m is 8 or more reads anything; the blend drops it).
    const __m256i index = _mm256_add_epi16(_mm256_mullo_epi16(m, spread), second_byte);
    const __m256i below = _mm256_shuffle_epi8(subnormal, index);
    __m256i bits = _mm256_blendv_epi8(normal, below, _mm256_cmpgt_epi16(subnormal_below, m));
    if constexpr (kTop) {
      bits = _mm256_blendv_epi8(bits, top_bits, _mm256_cmpgt_epi16(m, top_from));
    }
    if constexpr (kSigned) {
      bits = _mm256_or_si256(bits, _mm256_sll_epi16(_mm256_and_si256(c, sign_bit), sign_shift));
    }
    return bits;
  }
};

//: Elements [0, n) of 16-bit results in 16-bit lanes (ByteFloat::direct), 16 a step.
template <bool kSigned, bool kTop>
void byte_half_steps(const ByteFloat& f, const uint16_t* table, const uint8_t* src,
                     uint16_t* dst, size_t n) {
  static_assert(kStep<uint16_t> == 16, "one vector of results a step");
  const HalfLanes<kSigned, kTop> lanes(f);
  const __m128i mask = _mm_set1_epi8(static_cast<char>(f.mask));
  const PackRange r = pack_range(dst, n);
  for (size_t i = 0; i < r.head; ++i) dst[i] = table[src[i] & f.mask];
  for (size_t i = r.head; i < r.head + r.steps; i += kStep<uint16_t>) {
    const __m256i c = _mm256_cvtepu8_epi16(
        _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)), mask));
    store(dst + i, with_exceptions<uint16_t>(f, lanes(c), c), r.stream);
  }
  for (size_t i = r.head + r.steps; i < n; ++i) dst[i] = table[src[i] & f.mask];
  end_stream(r.stream);
}

//: Works out, once per kernel, whether `p`'s table is a float source's arithmetic, and keeps
//: the answer in p.preparation (module.cpp calls this when it makes the kernel: the check of
//: every code cost about 0.35 us, more than the gather of a few thousand elements).
static_assert(sizeof(ByteFloat) <= sizeof(Params::preparation), "the arithmetic fits Params");
static_assert(std::is_trivially_copyable_v<ByteFloat>, "kept as bytes");

template <class Out>
void prepare_byte_float(Params& p) {
  ByteFloat f;
  if (!find_byte_float(static_cast<const Out*>(p.table), p, &f)) return;
  std::memcpy(p.preparation, &f, sizeof f);
  p.prepared = true;
}

//: Below this many elements the gather runs: the steps' constants cost more than they save.
constexpr size_t kByteFloatFrom = 64;

//: Elements [0, n) of `table`'s cast by the arithmetic where the kernel's preparation found it
//: (true), else nothing (false).
template <class Out>
bool byte_float_lookup(const Out* table, const Params& p, const uint8_t* src, Out* dst,
                       size_t n) {
  if (!p.prepared || n < kByteFloatFrom) return false;
  ByteFloat f;
  std::memcpy(&f, p.preparation, sizeof f);
  if constexpr (sizeof(Out) == 8) {
    if (f.top) {
      byte_double_steps<true, true>(f, table, src, dst, n);
    } else if (f.sign != 0) {
      byte_double_steps<true, false>(f, table, src, dst, n);
    } else {
      byte_double_steps<false, false>(f, table, src, dst, n);
    }
    return true;
  } else {
    if constexpr (sizeof(Out) == 2) {
      if (f.direct) {
        if (f.top) {
          byte_half_steps<true, true>(f, table, src, dst, n);
        } else if (f.sign != 0) {
          byte_half_steps<true, false>(f, table, src, dst, n);
        } else {
          byte_half_steps<false, false>(f, table, src, dst, n);
        }
        return true;
      }
    }
    if (f.top) {
      byte_float_steps<Out, true, true>(f, table, src, dst, n);
    } else if (f.sign != 0) {
      byte_float_steps<Out, true, false>(f, table, src, dst, n);
    } else {
      byte_float_steps<Out, false, false>(f, table, src, dst, n);
    }
  }
  return true;
}
#endif

}  // namespace castlike
