// The SIMD frame of the kernels that compute in 32-bit lanes and write results of 8, 16 or 32
// bits: the small float targets (small_float.hpp) and the saturating float -> integer
// conversions (float_to_int.hpp).
//
// A family supplies `Lanes`, with `codes(p)`: the results of the elements p[0 .. kLanes) in
// 32-bit lanes (kLanes = 16 with AVX-512, 8 with AVX2), and `finish(packed, p)`: the packed
// results of the step that starts at p, completed (most return them as they are).  The frame
// takes K = 4 (bytes), 2 (16 bits) or 1 (32 bits) vectors of results per step, packs them
// with saturation (32 -> 16 -> 8 bits: the families rely on it, e.g. a NaN's code above 255
// becomes 255, -1 becomes 0), restores the element order that the in-lane packs shuffle, and
// stores one vector.  What is left over goes through the family's portable form, which is
// also the whole kernel of the baseline build.
#pragma once

#include "kernels.hpp"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#define CASTLIKE_PACK_AVX512 1
#define CASTLIKE_PACK_SIMD 1
#elif defined(__AVX2__)
#define CASTLIKE_PACK_AVX2 1
#define CASTLIKE_PACK_SIMD 1
#endif

#if defined(CASTLIKE_PACK_AVX512)
#include <atomic>
#endif

namespace castlike {

// stream_bytes() and end_stream(): kernels.hpp.

#if defined(CASTLIKE_PACK_AVX512)
//: Whether the AVX-512 kernels use AVX512-BF16's FLOAT -> BFLOAT16 conversion (narrow_float.hpp),
//: which x86-64-v4 does not include (Zen 4 and Intel's Cooper Lake and Sapphire Rapids on have
//: it): chosen when a kernel runs, from the CPU's answer, which a testing hook may turn off so
//: that the steps without it are checked on such a CPU too (the module's
//: `_bfloat16_instructions`).
inline bool cpu_has_avx512_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}
inline std::atomic<bool>& bfloat16_instructions() {
  static std::atomic<bool> on{cpu_has_avx512_bf16()};
  return on;
}
inline bool use_bfloat16_instructions() {
  return bfloat16_instructions().load(std::memory_order_relaxed);
}
#endif

#if defined(CASTLIKE_PACK_AVX512)
using VecI = __m512i;
constexpr size_t kVecBytes = 64;

// GCC 12's plain forms of these start from an undefined register, which -Wmaybe-uninitialized
// reports wherever they are inlined; the zero-masked forms with every lane selected are the
// same instructions.
constexpr __mmask16 kAll16 = 0xFFFF;
inline __m512 min_ps(__m512 a, __m512 b) { return _mm512_maskz_min_ps(kAll16, a, b); }
inline __m512 max_ps(__m512 a, __m512 b) { return _mm512_maskz_max_ps(kAll16, a, b); }
inline __m512d min_pd(__m512d a, __m512d b) { return _mm512_maskz_min_pd(__mmask8(0xFF), a, b); }
inline __m512d max_pd(__m512d a, __m512d b) { return _mm512_maskz_max_pd(__mmask8(0xFF), a, b); }
inline __m512i max_epu32(__m512i a, __m512i b) { return _mm512_maskz_max_epu32(kAll16, a, b); }
inline __m512i min_epu32(__m512i a, __m512i b) { return _mm512_maskz_min_epu32(kAll16, a, b); }
inline __m512i srlv_epi32(__m512i a, __m512i n) { return _mm512_maskz_srlv_epi32(kAll16, a, n); }
template <unsigned int N>
inline __m512i srli_epi32(__m512i a) {
  return _mm512_maskz_srli_epi32(kAll16, a, N);
}
template <unsigned int N>
inline __m512i srai_epi32(__m512i a) {
  return _mm512_maskz_srai_epi32(kAll16, a, N);
}
inline __m512i permutexvar_epi32(__m512i index, __m512i a) {
  return _mm512_maskz_permutexvar_epi32(kAll16, index, a);
}
inline __m512i permutexvar_epi64(__m512i index, __m512i a) {
  return _mm512_maskz_permutexvar_epi64(__mmask8(0xFF), index, a);
}

//: Two halves of 8 results -> one vector of 16.
inline __m512i join(__m256i low, __m256i high) {
  return _mm512_maskz_inserti64x4(__mmask8(0xFF), _mm512_castsi256_si512(low), high, 1);
}

inline void store(void* p, VecI v, bool stream) {
  if (stream) {
    _mm512_stream_si512(static_cast<__m512i*>(p), v);
  } else {
    _mm512_storeu_si512(p, v);
  }
}
//: One vector to `p`, aligned to kVecBytes.
inline void store_aligned(void* p, VecI v) { _mm512_store_si512(p, v); }
#elif defined(CASTLIKE_PACK_AVX2)
using VecI = __m256i;
constexpr size_t kVecBytes = 32;

//: Two halves of 4 results -> one vector of 8.
inline __m256i join(__m128i low, __m128i high) { return _mm256_set_m128i(high, low); }

inline void store(void* p, VecI v, bool stream) {
  if (stream) {
    _mm256_stream_si256(static_cast<__m256i*>(p), v);
  } else {
    _mm256_storeu_si256(static_cast<__m256i*>(p), v);
  }
}
inline void store_aligned(void* p, VecI v) { _mm256_store_si256(static_cast<__m256i*>(p), v); }
#endif

#if defined(CASTLIKE_PACK_SIMD)
//: 32-bit lanes per vector.
constexpr size_t kLanes = kVecBytes / 4;

//: How K vectors of 32-bit results become one vector of Out: `pack` (saturating, in-lane
//: order) and `order` (the element order restored).
template <class Out>
struct Pack;

#if defined(CASTLIKE_PACK_AVX512)
//: After two in-lane packs, 128-bit lane i holds elements 4i..4i+3 of each of the four inputs
//: in turn; one permutation of 32-bit groups puts every input's 16 back in order.
inline __m512i order_quarters(__m512i v) {
  return permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                           v);
}
//: After one in-lane pack, lane i holds elements 4i..4i+3 of each of the two inputs: 64-bit
//: groups.
inline __m512i order_halves(__m512i v) {
  return permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), v);
}
template <>
struct Pack<uint8_t> {
  static constexpr size_t K = 4;
  static VecI pack(const VecI (&v)[K]) {
    return _mm512_packus_epi16(_mm512_packs_epi32(v[0], v[1]), _mm512_packs_epi32(v[2], v[3]));
  }
  static VecI order(VecI v) { return order_quarters(v); }
};
template <>
struct Pack<int8_t> {
  static constexpr size_t K = 4;
  static VecI pack(const VecI (&v)[K]) {
    return _mm512_packs_epi16(_mm512_packs_epi32(v[0], v[1]), _mm512_packs_epi32(v[2], v[3]));
  }
  static VecI order(VecI v) { return order_quarters(v); }
};
template <>
struct Pack<uint16_t> {
  static constexpr size_t K = 2;
  static VecI pack(const VecI (&v)[K]) { return _mm512_packus_epi32(v[0], v[1]); }
  static VecI order(VecI v) { return order_halves(v); }
};
template <>
struct Pack<int16_t> {
  static constexpr size_t K = 2;
  static VecI pack(const VecI (&v)[K]) { return _mm512_packs_epi32(v[0], v[1]); }
  static VecI order(VecI v) { return order_halves(v); }
};
#else
inline __m256i order_quarters(__m256i v) {
  return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
inline __m256i order_halves(__m256i v) { return _mm256_permute4x64_epi64(v, 0xD8); }
template <>
struct Pack<uint8_t> {
  static constexpr size_t K = 4;
  static VecI pack(const VecI (&v)[K]) {
    return _mm256_packus_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  }
  static VecI order(VecI v) { return order_quarters(v); }
};
template <>
struct Pack<int8_t> {
  static constexpr size_t K = 4;
  static VecI pack(const VecI (&v)[K]) {
    return _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  }
  static VecI order(VecI v) { return order_quarters(v); }
};
template <>
struct Pack<uint16_t> {
  static constexpr size_t K = 2;
  static VecI pack(const VecI (&v)[K]) { return _mm256_packus_epi32(v[0], v[1]); }
  static VecI order(VecI v) { return order_halves(v); }
};
template <>
struct Pack<int16_t> {
  static constexpr size_t K = 2;
  static VecI pack(const VecI (&v)[K]) { return _mm256_packs_epi32(v[0], v[1]); }
  static VecI order(VecI v) { return order_halves(v); }
};
#endif
//: 32-bit results: stored as they are.
template <class Out>
struct Pack32 {
  static constexpr size_t K = 1;
  static VecI pack(const VecI (&v)[K]) { return v[0]; }
  static VecI order(VecI v) { return v; }
};
template <>
struct Pack<uint32_t> : Pack32<uint32_t> {};
template <>
struct Pack<int32_t> : Pack32<int32_t> {};

//: Elements per step of a kernel writing Out.
template <class Out>
constexpr size_t kStep = Pack<Out>::K * kLanes;

//: Elements [0, m) of `src` -> `dst`, m a multiple of kStep<Out>.
template <class Out, class In, class Lanes>
inline void pack_steps(const In* src, Out* dst, size_t m, const Lanes& lanes, bool stream) {
  constexpr size_t K = Pack<Out>::K;
  for (size_t i = 0; i < m; i += kStep<Out>) {
    VecI codes[K];
    for (size_t k = 0; k < K; ++k) codes[k] = lanes.codes(src + i + k * kLanes);
    store(dst + i, Pack<Out>::order(lanes.finish(Pack<Out>::pack(codes), src + i)), stream);
  }
}
#endif

// -- Step sources --------------------------------------------------------------------------------
//
// A FLOAT family's kernel reads FLOAT bits.  A source of another type that becomes FLOAT bits
// exactly (a half widened, an integer clamped into FLOAT's exact range) can be read by the
// family's own steps through a "step source", which makes the FLOAT bits a step at a time in
// registers: the source crosses memory once and no widened copy is written
// (through_float.hpp passes one where the build has such steps: kRegisterSteps).  A step source
// has `bits(i)` (element i's FLOAT bits, the portable form: the head and tail), `from(k)` (the
// source from element k on) and, with SIMD, `lanes(i)` (elements i .. i + kLanes in a
// register).

//: Whether this build reads step sources in registers.
constexpr bool kRegisterSteps =
#if defined(CASTLIKE_PACK_SIMD)
    true;
#else
    false;
#endif

//: FLOAT16 or BFLOAT16 (H).  In the steps, FLOAT16 by F16C (which quiets a signalling NaN) and
//: BFLOAT16 by a shift, leaving a signalling NaN signalling: every FLOAT family's first
//: arithmetic on it (an addition, an FMA, an ordered comparison, F16C's conversion) treats it
//: as any NaN, and routes takes a half kernel only after it gave the spec's table for all
//: 65536 patterns.
template <class H>
struct HalfSource {
  using Format = H;
  const uint16_t* p;
  uint32_t bits(size_t i) const { return half_to_float32_bits<H>(p[i]); }
  HalfSource from(size_t k) const { return {p + k}; }
#if defined(CASTLIKE_PACK_AVX512)
  __m512i lanes(size_t i) const {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    if constexpr (std::is_same_v<H, Float16>) {
      return _mm512_castps_si512(_mm512_maskz_cvtph_ps(kAll16, h));
    } else {
      return _mm512_maskz_slli_epi32(kAll16, _mm512_maskz_cvtepu16_epi32(kAll16, h), 16);
    }
  }
#elif defined(CASTLIKE_PACK_AVX2)
  __m256i lanes(size_t i) const {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    if constexpr (std::is_same_v<H, Float16>) {
      return _mm256_castps_si256(_mm256_cvtph_ps(h));
    } else {
      return _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    }
  }
#endif
};

template <class S>
struct IsHalfSource : std::false_type {};
template <class H>
struct IsHalfSource<HalfSource<H>> : std::true_type {};

//: An integer of 8, 16 or 32 bits (I) clamped to [lo, hi], which lies within +-2**24 (the
//: route's clip, checked with the kernel's constants): then exact in FLOAT, converted through
//: int32.
template <class I>
struct ClampedIntSource {
  static_assert(sizeof(I) <= 4, "integers of 8 to 32 bits");
  const I* p;
  I lo, hi;
  uint32_t bits(size_t i) const { return clamped_float32_bits(p[i], lo, hi); }
  ClampedIntSource from(size_t k) const { return {p + k, lo, hi}; }
#if defined(CASTLIKE_PACK_AVX512)
  __m512i lanes(size_t i) const {
    __m512i v;
    if constexpr (sizeof(I) == 1) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      v = std::is_signed_v<I> ? _mm512_maskz_cvtepi8_epi32(kAll16, b)
                              : _mm512_maskz_cvtepu8_epi32(kAll16, b);
    } else if constexpr (sizeof(I) == 2) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
      v = std::is_signed_v<I> ? _mm512_maskz_cvtepi16_epi32(kAll16, h)
                              : _mm512_maskz_cvtepu16_epi32(kAll16, h);
    } else {
      v = _mm512_loadu_si512(p + i);
    }
    const __m512i low = _mm512_set1_epi32(int32_t(lo)), high = _mm512_set1_epi32(int32_t(hi));
    if constexpr (std::is_signed_v<I>) {
      v = _mm512_maskz_min_epi32(kAll16, _mm512_maskz_max_epi32(kAll16, v, low), high);
    } else {
      v = min_epu32(max_epu32(v, low), high);
    }
    return _mm512_castps_si512(_mm512_maskz_cvtepi32_ps(kAll16, v));  // within +-2**24: exact
  }
#elif defined(CASTLIKE_PACK_AVX2)
  __m256i lanes(size_t i) const {
    __m256i v;
    if constexpr (sizeof(I) == 1) {
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + i));
      v = std::is_signed_v<I> ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
    } else if constexpr (sizeof(I) == 2) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      v = std::is_signed_v<I> ? _mm256_cvtepi16_epi32(h) : _mm256_cvtepu16_epi32(h);
    } else {
      v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    }
    // The bounds as 32-bit lanes of I's sign (a UINT32 beyond 2**31 compares unsigned).
    const __m256i low = _mm256_set1_epi32(int32_t(lo)), high = _mm256_set1_epi32(int32_t(hi));
    if constexpr (std::is_signed_v<I>) {
      v = _mm256_min_epi32(_mm256_max_epi32(v, low), high);
    } else {
      v = _mm256_min_epu32(_mm256_max_epu32(v, low), high);
    }
    return _mm256_castps_si256(_mm256_cvtepi32_ps(v));  // within +-2**24: exact
  }
#endif
};

//: Element i's FLOAT (or DOUBLE) bits, and the source from element k on: a pointer to them, or
//: a step source.
template <class T>
inline T bits_at(const T* src, size_t i) {
  return src[i];
}
//: (A step source is a class; arrays and pointers take the pointer forms.)
template <class S, class = std::enable_if_t<std::is_class_v<S>>>
inline uint32_t bits_at(const S& src, size_t i) {
  return src.bits(i);
}
template <class T>
inline const T* advance(const T* src, size_t k) {
  return src + k;
}
template <class S, class = std::enable_if_t<std::is_class_v<S>>>
inline S advance(const S& src, size_t k) {
  return src.from(k);
}

#if defined(CASTLIKE_PACK_AVX512)
//: Elements i .. i + kLanes of FLOAT bits in a register: from a pointer to them, or a step
//: source.
inline VecI lanes_at(const uint32_t* src, size_t i) { return _mm512_loadu_si512(src + i); }
template <class S, class = std::enable_if_t<std::is_class_v<S>>>
inline VecI lanes_at(const S& src, size_t i) {
  return src.lanes(i);
}
#endif

#if defined(CASTLIKE_PACK_SIMD)
//: pack_steps on a step source: each step's FLOAT bits are made into a step-sized array that
//: the family's lanes read (the compiler keeps it in registers where it can; in the
//: first-level cache otherwise).
template <class Out, class S, class Lanes, class = std::enable_if_t<std::is_class_v<S>>>
inline void pack_steps(const S& src, Out* dst, size_t m, const Lanes& lanes, bool stream) {
  constexpr size_t K = Pack<Out>::K;
  for (size_t i = 0; i < m; i += kStep<Out>) {
    alignas(kVecBytes) uint32_t bits[kStep<Out>];
    for (size_t k = 0; k < K; ++k) store_aligned(bits + k * kLanes, src.lanes(i + k * kLanes));
    VecI codes[K];
    for (size_t k = 0; k < K; ++k) codes[k] = lanes.codes(bits + k * kLanes);
    store(dst + i, Pack<Out>::order(lanes.finish(Pack<Out>::pack(codes), bits)), stream);
  }
}
#endif

//: Whether a kernel's lanes stream their stores only past the last-level cache (pack_range)
//: where they read FLOAT or DOUBLE bits from memory (run_packed): lanes that say so have
//: `static constexpr bool kStreamPastLastLevel = true`.
template <class Lanes, class = void>
constexpr bool kStreamPastLastLevel = false;
template <class Lanes>
constexpr bool kStreamPastLastLevel<Lanes, std::void_t<decltype(Lanes::kStreamPastLastLevel)>> =
    Lanes::kStreamPastLastLevel;

//: Where the SIMD steps of a call start and stop: with streaming stores, after a head that
//: brings `dst` to a vector boundary.  (None in the baseline build.)
struct PackRange {
  size_t head = 0;   // elements before the first step (the portable form)
  size_t steps = 0;  // elements the steps take, from `head`
  bool stream = false;
};

#if defined(CASTLIKE_PACK_SIMD)
//: Elements of `p` (of at most `n`) before its first vector boundary.  `p` is aligned to its
//: element (the module checks it): whole elements reach the boundary.
template <class T>
inline size_t elements_to_boundary(const T* p, size_t n) {
  const size_t misaligned = reinterpret_cast<uintptr_t>(p) % kVecBytes;
  return std::min(n, (kVecBytes - misaligned) % kVecBytes / sizeof(T));
}
#endif

//: The head, steps and store mode of `n` results at `dst`.  The stores stream by streams():
//: `past_last_level` for the light kernels (kStreamPastLastLevel, DOUBLE -> FLOAT16), which
//: stream only where the whole cast's input and output exceed the last-level cache; the others
//: already where they exceed a quarter of it.  The first figures, which alternated the rules
//: call by call (biased towards streaming: docs/performance.rst), one thread, Zen 5,
//: streamed -> stored as usual: FLOAT -> INT8 and FLOAT8E8M0 0.11 -> 0.08 ms at 2e6 elements,
//: 0.38 -> 0.18 at 4e6; DOUBLE -> FLOAT16 0.54 -> 0.37 at 2e6.  Past the cache every kernel
//: streams: on two threads (3e7 elements) that gained the light ones 1.06-1.15x.
template <class Out>
inline PackRange pack_range(const Out* dst, size_t n, bool past_last_level = false) {
  PackRange r;
#if defined(CASTLIKE_PACK_SIMD)
  r.stream = sizeof(Out) < 4 && streams(n * sizeof(Out), past_last_level);
  if (r.stream) r.head = elements_to_boundary(dst, n);
  r.steps = (n - r.head) / kStep<Out> * kStep<Out>;
#else
  (void)dst;
  (void)n;
  (void)past_last_level;
#endif
  return r;
}

//: pack_range for a pointer to the source's FLOAT or DOUBLE bits: where the stores do not
//: stream, the head brings the source to a vector boundary instead (a load across two cache
//: lines costs two, and NumPy aligns its arrays to 16 bytes).  One thread, 10**6 elements with
//: the input in the third-level cache, a preallocated output, Zen 5, interleaved: FLOAT ->
//: INT8, INT4 and FLOAT8E8M0 1.13-1.14x faster, DOUBLE -> INT32 1.13x (1.10x at 10**7),
//: DOUBLE -> INT8 1.09x, DOUBLE -> INT4 1.15x, FLOAT -> UINT32 1.04x, FLOAT -> INT32 and INT16
//: 0.99-1.00x.
template <class Out, class In>
inline PackRange pack_range(const Out* dst, size_t n, const In* src, bool past_last_level) {
  PackRange r = pack_range(dst, n, past_last_level);
#if defined(CASTLIKE_PACK_SIMD)
  if (!r.stream) {
    r.head = elements_to_boundary(src, n);
    r.steps = (n - r.head) / kStep<Out> * kStep<Out>;
  }
#else
  (void)src;
#endif
  return r;
}

//: The whole of a kernel: head and tail through `one` (the portable form, on the source's bits),
//: the rest through the SIMD steps of `lanes`.  `src`: a pointer to FLOAT or DOUBLE bits, or a
//: step source.
template <class Src, class Out, class Lanes, class One>
inline void run_packed(Src src, Out* dst, size_t n, const Lanes& lanes, const One& one) {
  const PackRange r = [&] {
    if constexpr (std::is_pointer_v<Src>) {
      return pack_range(dst, n, src, kStreamPastLastLevel<Lanes>);
    } else {
      // A step source (halves, integers) is not light: FLOAT16 -> INT8 at 10**7 elements (30
      // MB), back to back, outputs dropped, one thread, Zen 5: 0.40 ms streamed, 0.54 stored
      // as usual (at 4e6, 12 MB, 0.21 both).
      return pack_range(dst, n);
    }
  }();
  for (size_t i = 0; i < r.head; ++i) dst[i] = one(bits_at(src, i));
#if defined(CASTLIKE_PACK_SIMD)
  pack_steps(advance(src, r.head), dst + r.head, r.steps, lanes, r.stream);
#else
  (void)lanes;
#endif
  for (size_t i = r.head + r.steps; i < n; ++i) dst[i] = one(bits_at(src, i));
  end_stream(r.stream);
}

#if defined(CASTLIKE_PACK_AVX512)
//: 8 DOUBLEs -> their FLOAT bits rounded to odd (see float32_odd_block), in a register.
inline __m256i float32_odd8(const uint64_t* p) {
  const __m512d x = _mm512_loadu_pd(p);
  const __m256 truncated =
      _mm512_maskz_cvt_roundpd_ps(__mmask8(0xFF), x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512d back = _mm512_maskz_cvtps_pd(__mmask8(0xFF), truncated);
  const __mmask8 inexact = _mm512_cmp_pd_mask(back, x, _CMP_NEQ_UQ);
  const __m256i bits = _mm256_castps_si256(truncated);
  return _mm256_mask_or_epi32(bits, inexact, bits, _mm256_set1_epi32(1));
}
//: float32_odd8 for the targets that give +-0 for every value below 2**-126 (FLOAT16, and the
//: small floats' block of FLOAT bits: 1.04-1.15x in the cache on Zen 4, the same at 10**6, where
//: reading the DOUBLEs bounds it): there the truncating conversion is inexact exactly where the
//: DOUBLE has a bit below FLOAT's 24 (its 29 low mantissa bits), which one test tells without
//: converting back.
//: Below 2**-126 (FLOAT's subnormals, whose quantum is coarser) the last bit may differ from
//: float32_odd8's, where such a target cannot tell, and so may a NaN's last payload bit (a NaN
//: stays a NaN with its sign and top payload bits); Inf and the values beyond FLOAT's range come
//: out as float32_odd8 gives them (Inf, FLOAT's largest value).
inline __m256i float32_odd8_above_subnormals(const uint64_t* p) {
  const __m512i b = _mm512_loadu_si512(p);
  const __m256 truncated = _mm512_maskz_cvt_roundpd_ps(__mmask8(0xFF), _mm512_castsi512_pd(b),
                                                       _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask8 inexact = _mm512_test_epi64_mask(b, _mm512_set1_epi64((int64_t{1} << 29) - 1));
  const __m256i bits = _mm256_castps_si256(truncated);
  return _mm256_mask_or_epi32(bits, inexact, bits, _mm256_set1_epi32(1));
}
//: 8 DOUBLEs -> their nearest FLOATs' bits.
inline __m256i float32_nearest8(const uint64_t* p) {
  return _mm256_castps_si256(_mm512_maskz_cvtpd_ps(__mmask8(0xFF), _mm512_loadu_pd(p)));
}
//: 8 DOUBLEs -> FLOAT bits, first rounded to odd at kBits significant bits in their integer
//: bits: the AVX2 form below says how, and when that carries one rounding.
template <int kBits>
inline __m256 float32_odd_at8(const uint64_t* p) {
  static_assert(kBits >= 2 && kBits <= 24, "a FLOAT precision");
  const __m512i below = _mm512_set1_epi64((int64_t{1} << (53 - kBits)) - 1);
  const __m512i b = _mm512_loadu_si512(p);
  const __m512i sticky = _mm512_add_epi64(_mm512_and_si512(b, below), below);
  const __m512i odd =
      _mm512_maskz_andnot_epi64(__mmask8(0xFF), below, _mm512_or_si512(b, sticky));
  return _mm512_maskz_cvtpd_ps(__mmask8(0xFF), _mm512_castsi512_pd(odd));
}
#endif

#if defined(CASTLIKE_PACK_AVX2)
//: 8 DOUBLEs -> their FLOAT bits rounded to odd (see float32_odd_block), in a register, for
//: code that runs while MXCSR rounds toward zero (AVX2 cannot name the rounding in the
//: instruction): the conversion truncates, and the last bit is set where the value came back
//: different.
inline __m256i float32_odd8_toward_zero(const uint64_t* p) {
  const __m256d x0 = _mm256_loadu_pd(reinterpret_cast<const double*>(p));
  const __m256d x1 = _mm256_loadu_pd(reinterpret_cast<const double*>(p + 4));
  const __m128 t0 = _mm256_cvtpd_ps(x0), t1 = _mm256_cvtpd_ps(x1);
  const __m256 inexact0 = _mm256_castpd_ps(_mm256_cmp_pd(_mm256_cvtps_pd(t0), x0, _CMP_NEQ_UQ));
  const __m256 inexact1 = _mm256_castpd_ps(_mm256_cmp_pd(_mm256_cvtps_pd(t1), x1, _CMP_NEQ_UQ));
  // One 32-bit half of each 64-bit mask, in element order: picked within the 128-bit lanes
  // (x0's two, then x1's two), then the 64-bit groups put in order.
  const __m256i inexact = _mm256_permute4x64_epi64(
      _mm256_castps_si256(_mm256_shuffle_ps(inexact0, inexact1, _MM_SHUFFLE(2, 0, 2, 0))), 0xD8);
  const __m256i truncated = _mm256_castps_si256(_mm256_set_m128(t1, t0));
  return _mm256_or_si256(truncated, _mm256_srli_epi32(inexact, 31));
}

//: 8 DOUBLEs -> FLOAT bits, first rounded to odd at kBits significant bits in their integer bits
//: (the bits below cleared, the last one kept set where any of them was not zero), then
//: converted.  No second conversion and no comparison: measured faster than
//: float32_odd8_toward_zero on Zen 3, for the targets it serves.
//:
//: The result carries one correct rounding to a target of kBits - 2 or fewer significant bits
//: (rounding to odd at two or more extra bits, then to nearest, rounds once) when:
//: - the conversion is exact wherever it matters: it is for values in FLOAT's range whose
//:   kBits-bit quantum is at least FLOAT's smallest subnormal (from 2**(kBits - 150)); any
//:   value below that must give the target's +-0, as every FLOAT at or below it does;
//: - the target overflows at or below 2**128: from there the conversion gives Inf (rounding to
//:   nearest, or FLOAT's largest value toward zero, which such a target also takes to Inf).
//: NaN stays NaN with its sign and top payload bits (the last kept bit is set where only low
//: payload bits were).  BFLOAT16 (kBits 10) and FLOAT16 (kBits 13) meet all of it.
template <int kBits>
inline __m128 float32_odd_at4(const uint64_t* p) {
  static_assert(kBits >= 2 && kBits <= 24, "a FLOAT precision");
  const __m256i below = _mm256_set1_epi64x((int64_t{1} << (53 - kBits)) - 1);
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  // (b & below) + below < 2 * 2**(53 - kBits): its bit 53 - kBits, the last kept one, is set
  // exactly when b & below is not zero.
  const __m256i sticky = _mm256_add_epi64(_mm256_and_si256(b, below), below);
  const __m256i odd = _mm256_andnot_si256(below, _mm256_or_si256(b, sticky));
  return _mm256_cvtpd_ps(_mm256_castsi256_pd(odd));
}
template <int kBits>
inline __m256 float32_odd_at8(const uint64_t* p) {
  return _mm256_set_m128(float32_odd_at4<kBits>(p + 4), float32_odd_at4<kBits>(p));
}

//: A DOUBLE step source (see "Step sources" above) for the FLOAT families that round once more
//: at 22 bits or fewer, treat Inf and FLOAT's largest value alike (a clamp to a finite value
//: first) and give +-0 for every value below 2**-126: SmallFloat without kInfIsNan.  The steps
//: round to odd at FLOAT's 24 bits in the DOUBLE's integer bits (float32_odd_at8); the
//: portable form (head and tail) rounds to odd through the conversion (float32_odd_bits).  The
//: two FLOAT bits differ only where such a family cannot tell them apart: beyond FLOAT's range
//: (Inf, or FLOAT's largest value) and below 2**-126.
struct DoubleOddSource {
  const uint64_t* p;
  uint32_t bits(size_t i) const { return float32_odd_bits(bit_cast<double>(p[i])); }
  DoubleOddSource from(size_t k) const { return {p + k}; }
  __m256i lanes(size_t i) const { return _mm256_castps_si256(float32_odd_at8<24>(p + i)); }
};

//: MXCSR set to round toward zero around a call of `steps` (which float32_odd8_toward_zero
//: needs), and restored after it.  `steps` must be a function of its own that is not inlined
//: (noinline), so that no conversion moves across the change of MXCSR.
template <class Steps>
inline void toward_zero_around(const Steps& steps) {
  const unsigned int csr = _mm_getcsr();
  _mm_setcsr((csr & ~0x6000u) | 0x6000u);  // rounding control: toward zero
  steps();
  _mm_setcsr(csr);
}

//: float32_odd8_toward_zero over a block, 8 at a time; returns how many were done.
__attribute__((noinline)) inline size_t float32_odd_steps_toward_zero(const uint64_t* src,
                                                                      uint32_t* dst, size_t m) {
  size_t j = 0;
  for (; j + 8 <= m; j += 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), float32_odd8_toward_zero(src + j));
  }
  return j;
}
#endif

#if defined(CASTLIKE_PACK_AVX512)
//: A DOUBLE step source with AVX-512: the FLOAT bits that float32_odd_block<kAboveSubnormals>
//: writes (rounded to odd by the truncating conversion named in the instruction), made in
//: registers a step at a time, so that a FLOAT family's steps read them there instead of from a
//: block in the first-level cache.  The same bits as the block, head and tail included (the
//: portable rounding to odd).  Zen 4, one thread, against the block in one process: FLOAT8E5M2,
//: FLOAT8E4M3FN and FLOAT4E2M1 0.86-0.92x the time at 10**6 in the cache, 0.91-1.01x with the
//: input from memory, 0.75-0.81x at 10**7 (FLOAT8E8M0 1.07x: it keeps the block).
template <bool kAboveSubnormals>
struct DoubleOdd16Source {
  const uint64_t* p;
  uint32_t bits(size_t i) const { return float32_odd_bits(bit_cast<double>(p[i])); }
  DoubleOdd16Source from(size_t k) const { return {p + k}; }
  static __m256i odd8(const uint64_t* q) {
    return kAboveSubnormals ? float32_odd8_above_subnormals(q) : float32_odd8(q);
  }
  __m512i lanes(size_t i) const { return join(odd8(p + i), odd8(p + i + 8)); }
};
#endif

//: FLOAT bits of DOUBLEs, a block at a time: rounded to odd (one correct rounding later, to
//: any precision of 22 bits or fewer) or to nearest (the profiles that round wide sources
//: through FLOAT first, a plain loop that the compiler vectorises).
//:
//: To odd: the conversion truncates (rounding toward zero, which also gives FLOAT's largest
//: value for every finite DOUBLE beyond it), and the last bit is set where the value came back
//: different (NaN included, which stays NaN).  AVX-512 names the rounding in the instruction;
//: AVX2 takes it from MXCSR, set to toward zero for the steps and restored before the portable
//: tail, which needs round to nearest.
//: kAboveSubnormals: by float32_odd8_above_subnormals, for targets that give +-0 below 2**-126.
template <bool kAboveSubnormals = false>
inline void float32_odd_block(const uint64_t* src, uint32_t* dst, size_t m) {
  size_t j = 0;
#if defined(CASTLIKE_PACK_AVX512)
  for (; j + 8 <= m; j += 8) {
    const __m256i odd =
        kAboveSubnormals ? float32_odd8_above_subnormals(src + j) : float32_odd8(src + j);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), odd);
  }
#elif defined(CASTLIKE_PACK_AVX2)
  toward_zero_around([&] { j = float32_odd_steps_toward_zero(src, dst, m); });
#endif
  for (; j < m; ++j) dst[j] = float32_odd_bits(bit_cast<double>(src[j]));
}
inline void float32_nearest_block(const uint64_t* src, uint32_t* dst, size_t m) {
  for (size_t j = 0; j < m; ++j) {
    dst[j] = bit_cast<uint32_t>(static_cast<float>(bit_cast<double>(src[j])));
  }
}

//: A kernel over FLOAT bits run on DOUBLE sources: each block of DOUBLEs becomes FLOAT bits (in
//: the first-level cache) and then goes through the FLOAT kernel, so memory is crossed once.
template <bool kAboveSubnormals = false, class Out, class Lanes, class One>
inline void run_packed_from_double(const uint64_t* src, Out* dst, size_t n, bool nearest,
                                   const Lanes& lanes, const One& one) {
  constexpr size_t kBlock = 1024;  // a multiple of every step
  alignas(64) uint32_t bits[kBlock];
  const auto convert = [&](size_t i, size_t m) {
    if (nearest) {
      float32_nearest_block(src + i, bits, m);
    } else {
      float32_odd_block<kAboveSubnormals>(src + i, bits, m);
    }
  };
  const PackRange r = pack_range(dst, n);
  if (r.head > 0) {
    convert(0, r.head);
    for (size_t j = 0; j < r.head; ++j) dst[j] = one(bits[j]);
  }
  const size_t steps_end = r.head + r.steps;
  for (size_t i = r.head; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    convert(i, m);
    const size_t done = std::min(m, steps_end > i ? steps_end - i : 0);
#if defined(CASTLIKE_PACK_SIMD)
    pack_steps(bits, dst + i, done, lanes, r.stream);
#else
    (void)lanes;
#endif
    for (size_t j = done; j < m; ++j) dst[i + j] = one(bits[j]);
  }
  end_stream(r.stream);
}

}  // namespace castlike
