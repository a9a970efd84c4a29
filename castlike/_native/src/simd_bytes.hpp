// The SIMD frame of the kernels that write one byte per element from 32-bit lanes: the small
// float targets (small_float.hpp) and the saturating float -> 8-bit integer conversions.
//
// A family supplies `Lanes`: `codes(x)` turns 16 (AVX-512) or 8 (AVX2) FLOAT bit patterns into
// results held in 32-bit lanes, and `finish(bytes, signs)` completes 64 or 32 packed results
// (the sign of each input arrives packed the same way).  The frame loads four vectors, packs
// their results with saturation (32 -> 16 -> 8 bits: results outside the byte range become 0
// or 255, which the families use on purpose), restores the element order that the in-lane
// packs shuffle, and stores.  What is left over goes through the family's portable form, which
// is also the whole kernel of the baseline build.
#pragma once

#include "kernels.hpp"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define CASTLIKE_BYTES_AVX512 1
#elif defined(__AVX2__)
#define CASTLIKE_BYTES_AVX2 1
#endif

namespace castlike {

//: Output bytes of one call from which the stores are streaming (non-temporal): an output that
//: large leaves the caches before anyone reads it, and writing it around them saves reading
//: every line in first.  (Measured at 10**7 one-byte results: about 0.2 ms of 1.5 ms.)
constexpr size_t kStreamBytes = size_t{4} << 20;

#if defined(CASTLIKE_BYTES_AVX512)
//: Elements per SIMD step.
constexpr size_t kByteStep = 64;

// GCC 12's plain forms of these start from an undefined register, which -Wmaybe-uninitialized
// reports wherever they are inlined; the zero-masked forms with every lane selected are the
// same instructions.
constexpr __mmask16 kAll16 = 0xFFFF;
inline __m512 min_ps(__m512 a, __m512 b) { return _mm512_maskz_min_ps(kAll16, a, b); }
inline __m512i max_epu32(__m512i a, __m512i b) { return _mm512_maskz_max_epu32(kAll16, a, b); }
inline __m512i min_epu32(__m512i a, __m512i b) { return _mm512_maskz_min_epu32(kAll16, a, b); }
inline __m512i srlv_epi32(__m512i a, __m512i n) { return _mm512_maskz_srlv_epi32(kAll16, a, n); }
template <unsigned int N>
inline __m512i srai_epi32(__m512i a) {
  return _mm512_maskz_srai_epi32(kAll16, a, N);
}
inline __m512i permutexvar_epi32(__m512i index, __m512i a) {
  return _mm512_maskz_permutexvar_epi32(kAll16, index, a);
}

//: Four vectors of 32-bit results -> 64 bytes, signed saturation then unsigned: -1 -> 0,
//: anything above 255 (a NaN's code, say) -> 255.  In-lane order: see restore_order.
inline __m512i pack_to_bytes(__m512i a, __m512i b, __m512i c, __m512i d) {
  return _mm512_packus_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
}

//: Four vectors of FLOAT bits -> 64 bytes whose top bit is each input's sign (signed
//: saturation keeps the sign of every int32).
inline __m512i pack_signs(__m512i a, __m512i b, __m512i c, __m512i d) {
  return _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
}

//: The packs work within 128-bit lanes: lane i holds elements 4i..4i+3 of each of the four
//: inputs in turn.  One permutation of 32-bit groups puts every input's 16 back in order.
inline __m512i restore_order(__m512i packed) {
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return permutexvar_epi32(order, packed);
}

//: Elements [0, m) of `src` -> `dst`, m a multiple of 64.
template <class Lanes>
inline void byte_steps(const uint32_t* src, uint8_t* dst, size_t m, const Lanes& lanes,
                       bool stream) {
  for (size_t i = 0; i < m; i += kByteStep) {
    const __m512i x0 = _mm512_loadu_si512(src + i);
    const __m512i x1 = _mm512_loadu_si512(src + i + 16);
    const __m512i x2 = _mm512_loadu_si512(src + i + 32);
    const __m512i x3 = _mm512_loadu_si512(src + i + 48);
    const __m512i bytes = pack_to_bytes(lanes.codes(x0), lanes.codes(x1), lanes.codes(x2),
                                        lanes.codes(x3));
    const __m512i out = restore_order(lanes.finish(bytes, pack_signs(x0, x1, x2, x3)));
    if (stream) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), out);
    } else {
      _mm512_storeu_si512(dst + i, out);
    }
  }
}
#elif defined(CASTLIKE_BYTES_AVX2)
constexpr size_t kByteStep = 32;

inline __m256i pack_to_bytes(__m256i a, __m256i b, __m256i c, __m256i d) {
  return _mm256_packus_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
}

inline __m256i pack_signs(__m256i a, __m256i b, __m256i c, __m256i d) {
  return _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
}

//: Lane i (of two) holds elements 4i..4i+3 of each input in turn.
inline __m256i restore_order(__m256i packed) {
  return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

template <class Lanes>
inline void byte_steps(const uint32_t* src, uint8_t* dst, size_t m, const Lanes& lanes,
                       bool stream) {
  for (size_t i = 0; i < m; i += kByteStep) {
    const auto load = [&](size_t k) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + k));
    };
    const __m256i x0 = load(0), x1 = load(8), x2 = load(16), x3 = load(24);
    const __m256i bytes = pack_to_bytes(lanes.codes(x0), lanes.codes(x1), lanes.codes(x2),
                                        lanes.codes(x3));
    const __m256i out = restore_order(lanes.finish(bytes, pack_signs(x0, x1, x2, x3)));
    if (stream) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), out);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), out);
    }
  }
}
#endif

//: Where the SIMD steps of a call start and stop: with streaming stores, after a head that
//: brings `dst` to a vector boundary.  (None in the baseline build.)
struct ByteRange {
  size_t head = 0;   // elements before the first step (the portable form)
  size_t steps = 0;  // elements the steps take, from `head`
  bool stream = false;
};

inline ByteRange byte_range(const uint8_t* dst, size_t n) {
  ByteRange r;
#if defined(CASTLIKE_BYTES_AVX512) || defined(CASTLIKE_BYTES_AVX2)
  r.stream = n >= kStreamBytes;
  if (r.stream) r.head = (kByteStep - reinterpret_cast<uintptr_t>(dst) % kByteStep) % kByteStep;
  r.steps = (n - r.head) / kByteStep * kByteStep;
#else
  (void)dst;
  (void)n;
#endif
  return r;
}

//: Streaming stores are weakly ordered: fence them before the call returns (and before the
//: thread pool reports the chunk done).
inline void end_stream(bool stream) {
#if defined(CASTLIKE_BYTES_AVX512) || defined(CASTLIKE_BYTES_AVX2)
  if (stream) _mm_sfence();
#else
  (void)stream;
#endif
}

//: The whole of a byte kernel over FLOAT bits: head and tail through `one` (the portable form,
//: `uint8_t(uint32_t)`), the rest through the SIMD steps of `lanes`.
template <class Lanes, class One>
inline void run_bytes(const uint32_t* src, uint8_t* dst, size_t n, const Lanes& lanes,
                      const One& one) {
  const ByteRange r = byte_range(dst, n);
  for (size_t i = 0; i < r.head; ++i) dst[i] = one(src[i]);
#if defined(CASTLIKE_BYTES_AVX512) || defined(CASTLIKE_BYTES_AVX2)
  byte_steps(src + r.head, dst + r.head, r.steps, lanes, r.stream);
#else
  (void)lanes;
#endif
  for (size_t i = r.head + r.steps; i < n; ++i) dst[i] = one(src[i]);
  end_stream(r.stream);
}

//: FLOAT bits of DOUBLEs, a block at a time: rounded to odd (one correct rounding later, to
//: any precision of 22 bits or fewer) or to nearest (the profiles that round wide sources
//: through FLOAT first).  Plain loops, which the compiler vectorises.
inline void float32_odd_block(const uint64_t* src, uint32_t* dst, size_t m) {
  for (size_t j = 0; j < m; ++j) dst[j] = float32_odd_bits(bit_cast<double>(src[j]));
}
inline void float32_nearest_block(const uint64_t* src, uint32_t* dst, size_t m) {
  for (size_t j = 0; j < m; ++j) {
    dst[j] = bit_cast<uint32_t>(static_cast<float>(bit_cast<double>(src[j])));
  }
}

//: A byte kernel over DOUBLE sources: each block of DOUBLEs becomes FLOAT bits (in the
//: first-level cache) and then goes through the FLOAT kernel, so memory is crossed once.
template <class Lanes, class One>
inline void run_bytes_from_double(const uint64_t* src, uint8_t* dst, size_t n, bool nearest,
                                  const Lanes& lanes, const One& one) {
  constexpr size_t kBlock = 1024;
  alignas(64) uint32_t bits[kBlock];
  const auto convert = [&](size_t i, size_t m) {
    if (nearest) {
      float32_nearest_block(src + i, bits, m);
    } else {
      float32_odd_block(src + i, bits, m);
    }
  };
  const ByteRange r = byte_range(dst, n);
  if (r.head > 0) {
    convert(0, r.head);
    for (size_t j = 0; j < r.head; ++j) dst[j] = one(bits[j]);
  }
  for (size_t i = r.head; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    convert(i, m);
    size_t done = 0;
#if defined(CASTLIKE_BYTES_AVX512) || defined(CASTLIKE_BYTES_AVX2)
    done = std::min(m, r.head + r.steps > i ? r.head + r.steps - i : 0);
    byte_steps(bits, dst + i, done, lanes, r.stream);
#else
    (void)lanes;
#endif
    for (size_t j = done; j < m; ++j) dst[i + j] = one(bits[j]);
  }
  end_stream(r.stream);
}

}  // namespace castlike
