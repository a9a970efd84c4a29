// FLOAT16 and BFLOAT16 sources through the FLOAT kernels: every FLOAT16 and BFLOAT16 value is a
// FLOAT value, so a cast of the widened value rounds once, as the cast of the half does.  A
// block of halves is widened exactly into FLOAT bits in the first-level cache (F16C's
// `vcvtph2ps` for FLOAT16, a shift for BFLOAT16; NaN quieted either way), then the FLOAT
// family's own loop runs on it, SIMD steps included: memory is crossed once.
//
// Whether that gives the spec's result is a property of the rules, not of this code (a profile
// could treat a half differently from the FLOAT of the same value), so castlike._native.routes
// takes such a kernel only after it gave the spec's table entry for all 65536 patterns, and
// keeps the table's gather otherwise.
//
// Measured on the development machine (AVX-512, one thread, 10**6 elements, outputs allocated
// per call) against the gather from the 65536-entry table: see docs/performance.rst.
#pragma once

#include <cstring>

#include "kernels.hpp"

#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

namespace castlike {

//: `m` halves -> their FLOAT bits, stored as T (uint32_t or float: the FLOAT family's InT).
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
  // BFLOAT16 (a loop the compiler vectorises) and FLOAT16's tail.
  for (; j < m; ++j) {
    const uint32_t bits = half_to_float32_bits<H>(src[j]);
    std::memcpy(dst + j, &bits, sizeof bits);
  }
}

//: The FLOAT family Op on halves H.  Its variants are Op's (kVariant, where Op has one).
template <class H, class Op>
struct FromHalf {
  using InT = uint16_t;
  using OutT = typename Op::OutT;
  using Checked = Op;  // the constants it takes are Op's, checked as Op checks them
  const Params& params;
  explicit FromHalf(const Params& p) : params(p) {}

  void block(const uint16_t* src, OutT* dst, size_t n) const {
    constexpr size_t kBlock = 1024;  // 4 KiB of FLOAT bits: stays in the first-level cache
    alignas(64) typename Op::InT widened[kBlock];
    for (size_t i = 0; i < n; i += kBlock) {
      const size_t m = std::min(kBlock, n - i);
      widen_block<H>(src + i, widened, m);
      map_elements<Op>(widened, dst + i, 0, m, params);
    }
  }
};

//: A variant family of FLOAT sources (Family<V>) on halves, as a variant family again.
template <class H, template <int> class Family>
struct HalfOf {
  template <int V>
  struct Op : FromHalf<H, Family<V>> {
    static constexpr int kVariant = Family<V>::kVariant;
    using FromHalf<H, Family<V>>::FromHalf;
  };
};

}  // namespace castlike
