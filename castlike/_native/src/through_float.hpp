// Sources run through the FLOAT kernels: FLOAT16, BFLOAT16 and the integers of 16 bits or more
// into the families whose arithmetic is written for FLOAT bits.  A block of the source becomes
// FLOAT bits in the first-level cache (a "widening"), then the FLOAT family's own loop runs on
// it, SIMD steps included: memory is crossed once.  Where the build reads step sources in
// registers (AVX2: simd_pack.hpp), the halves and the clamped 16- and 32-bit integers go
// straight into the steps of a FLOAT family that has them, and no block is written.
//
// Each widening keeps the single rounding (R3):
// - FLOAT16 and BFLOAT16: every half is a FLOAT value, widened exactly (F16C's `vcvtph2ps` for
//   FLOAT16, a shift for BFLOAT16; NaN quieted either way).
// - Integers into float8, float6 and float4: clamped to the route's clip (+-2**24 within the
//   source's range, beyond the target's largest value, so every result is kept), then exact in
//   FLOAT: the FLOAT kernel rounds once.
// - Integers into FLOAT8E8M0, whose range the clip would cut: rounded to odd into FLOAT (exact
//   up to 16 bits), which keeps one rounding in all as it does for DOUBLE.
// The integer widenings give the FLOAT bits the FLOAT class gather of the same route indexes
// its table with (float32_bits_for_class), so the results are that gather's.
//
// For the halves, whether the FLOAT kernel gives the spec's result is a property of the rules,
// not of this code (a profile could treat a half differently from the FLOAT of the same value),
// so castlike._native.routes takes such a kernel only after it gave the spec's table entry for
// all 65536 patterns, and keeps the table's gather otherwise.
//
// Measured on the development machine (AVX-512, one thread, 10**6 elements, outputs allocated
// per call): see docs/performance.rst.
#pragma once

#include "kernels.hpp"
#include "simd_pack.hpp"

namespace castlike {

//: Elements widened at a time: 4 KiB of FLOAT bits (and 8 KiB of DOUBLE bits for the 32-bit
//: integers' rounding to odd) stay in the first-level cache.
constexpr size_t kWidenBlock = 1024;

//: FLOAT16 or BFLOAT16 (H) widened exactly into FLOAT bits.
template <class H>
struct HalfBits {
  using InT = uint16_t;
  using Steps = HalfSource<H>;
  explicit HalfBits(const Params&) {}
  Steps steps(const uint16_t* src) const { return {src}; }
  void operator()(const uint16_t* src, uint32_t* dst, size_t m) const { widen_block<H>(src, dst, m); }
};

//: An integer clamped to [`ilo`, `ihi`] (the route's clip, within +-2**24), then exact in FLOAT
//: (clamped_float32_bits).
template <class I>
struct ClampedIntegerBits {
  using InT = I;
  I lo, hi;
  explicit ClampedIntegerBits(const Params& p) : lo(I(p.ilo)), hi(I(p.ihi)) {}
  //: The step source of 16- and 32-bit integers (64-bit ones keep the block: AVX2 has no
  //: 64-bit minimum nor conversion).
  template <class J = I, class = std::enable_if_t<sizeof(J) <= 4>>
  ClampedIntSource<J> steps(const J* src) const {
    return {src, lo, hi};
  }
  void operator()(const I* __restrict src, uint32_t* __restrict dst, size_t m) const {
    for (size_t j = 0; j < m; ++j) dst[j] = clamped_float32_bits(src[j], lo, hi);
  }
};

//: An integer rounded to odd into FLOAT: exact (a plain conversion) where FLOAT holds every value
//: of I; wider ones rounded to odd into DOUBLE (exact for 32 bits; float64_odd_bits_of, a loop
//: of floating-point operations that vectorises), then DOUBLE's rounding to odd into FLOAT in
//: vectors (float32_odd_block): rounding to odd twice is rounding to odd once.
template <class I>
struct OddIntegerBits {
  using InT = I;
  explicit OddIntegerBits(const Params&) {}
  void operator()(const I* __restrict src, uint32_t* __restrict dst, size_t m) const {
    if constexpr (sizeof(I) <= 2) {
      for (size_t j = 0; j < m; ++j) {
        dst[j] = bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(src[j])));
      }
    } else {
      alignas(64) uint64_t wide[kWidenBlock];
      for (size_t j = 0; j < m; ++j) wide[j] = float64_odd_bits_of(src[j]);
      float32_odd_block(wide, dst, m);
    }
  }
};

//: Whether Op reads Widening's step source (simd_pack.hpp) in its own SIMD steps rather than a
//: widened block: where the build has such steps, Widening has a step source for InT, and Op
//: has `run` with SIMD steps for its results (every FLOAT family but the 64-bit integer
//: targets, whose portable loops would widen one element at a time).
template <class Widening, class Op, class = void>
struct WidensInSteps : std::false_type {};
template <class Widening, class Op>
struct WidensInSteps<
    Widening, Op,
    std::void_t<decltype(std::declval<const Op&>().run(
        std::declval<const Widening&>().steps(std::declval<const typename Widening::InT*>()),
        std::declval<typename Op::OutT*>(), size_t{}))>>
    : std::bool_constant<kRegisterSteps && sizeof(typename Op::OutT) <= 4> {};

//: The FLOAT family Op on a source made FLOAT bits by Widening.  Its variants are Op's
//: (kVariant, where Op has one); its checks are the widening's and Op's (module.cpp).
template <class Widening, class Op>
struct ThroughFloat {
  using InT = typename Widening::InT;
  using OutT = typename Op::OutT;
  using Checked = ThroughFloat;  // also for the variant families derived below
  const Params& params;
  explicit ThroughFloat(const Params& p) : params(p) {}

  void block(const InT* src, OutT* dst, size_t n) const {
    if constexpr (WidensInSteps<Widening, Op>::value) {
      Op(params).run(Widening(params).steps(src), dst, n);
    } else {
      alignas(64) uint32_t widened[kWidenBlock];
      const Widening widen(params);
      for (size_t i = 0; i < n; i += kWidenBlock) {
        const size_t m = std::min(kWidenBlock, n - i);
        widen(src + i, widened, m);
        map_elements<Op>(widened, dst + i, 0, m, params);
      }
    }
  }
};

//: A variant family of FLOAT sources (Family<V>) through Widening, as a variant family again.
template <class Widening, template <int> class Family>
struct ThroughFloatOf {
  template <int V>
  struct Op : ThroughFloat<Widening, Family<V>> {
    static constexpr int kVariant = Family<V>::kVariant;
    using ThroughFloat<Widening, Family<V>>::ThroughFloat;
  };
};

template <class H, class Op>
using FromHalf = ThroughFloat<HalfBits<H>, Op>;
template <class H, template <int> class Family>
using HalfOf = ThroughFloatOf<HalfBits<H>, Family>;

}  // namespace castlike
