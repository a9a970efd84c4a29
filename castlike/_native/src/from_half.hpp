// FLOAT16 and BFLOAT16 sources through the FLOAT kernels: every FLOAT16 and BFLOAT16 value is a
// FLOAT value, so a cast of the widened value rounds once, as the cast of the half does.  A
// block of halves is widened exactly into FLOAT bits in the first-level cache (widen_block:
// F16C's `vcvtph2ps` for FLOAT16, a shift for BFLOAT16; NaN quieted either way), then the
// FLOAT family's own loop runs on it, SIMD steps included: memory is crossed once.
//
// Whether that gives the spec's result is a property of the rules, not of this code (a profile
// could treat a half differently from the FLOAT of the same value), so castlike._native.routes
// takes such a kernel only after it gave the spec's table entry for all 65536 patterns, and
// keeps the table's gather otherwise.
//
// Measured on the development machine (AVX-512, one thread, 10**6 elements, outputs allocated
// per call) against the gather from the 65536-entry table: see docs/performance.rst.
#pragma once

#include "kernels.hpp"

namespace castlike {

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
