// One-byte sources into 16- or 32-bit results (float8, FLOAT8E8M0, one-per-byte FLOAT4E2M1 and
// FLOAT6, the 8-, 4- and 2-bit integers -> FLOAT, FLOAT16, BFLOAT16, INT16, INT32, ...): the
// Gather family's table of every source pattern, held in vector registers and read with
// AVX-512's two-register permutations instead of one scalar load an element.
//
// One permutation (vpermt2d, vpermt2w) reads 32 entries of 32 bits or 64 of 16 bits by the
// index's low 5 or 6 bits; a table of 256 entries takes 8 or 4 of them, and masked blends on the
// index's higher bits pick the right one.  The table is the spec's, as for the scalar gather:
// entry i of the registers is table[i & mask], so the raw byte is the index and every mask
// (0x0F for FLOAT4E2M1, 0x3F for FLOAT6, 0xFF for float8) reads what the scalar loop reads, with
// as few permutations as the mask's bits need.
//
// Measured on the development machine (AVX-512, one thread, outputs allocated per call, medians
// of interleaved rounds), against the scalar gather: at 10**6 elements FLOAT8E4M3FN -> FLOAT
// 0.29 -> 0.089 ms (a copy of the same bytes: 0.084), FLOAT8E8M0 -> FLOAT (whose table does not
// fold) 0.29 -> 0.12, FLOAT8E5M2 -> BFLOAT16 0.29 -> 0.058; at 10**7 FLOAT8E4M3FN -> FLOAT
// 6.0 -> 4.1 ms, the copy's 4.1, and FLOAT8E5M2 -> BFLOAT16 3.1 -> 0.8.  The AVX2 build keeps
// the scalar gather: its permutation reads 8 entries, 32 of them for a float8 table.
#pragma once

#include "kernels.hpp"
#include "simd_pack.hpp"

namespace castlike {

#if defined(CASTLIKE_PACK_AVX512)
//: What differs between 32- and 16-bit entries: the lanes of one vector, the entries one
//: permutation reads, and the instructions.
template <class Out>
struct TableWidth;

template <>
struct TableWidth<uint32_t> {
  static constexpr size_t kLanes = 16;
  static constexpr size_t kEntries = 32;
  using Mask = __mmask16;
  static __m512i index(const uint8_t* p) {
    // The zero-masked forms here: GCC 12's plain ones start from an undefined register.
    return _mm512_maskz_cvtepu8_epi32(Mask(0xFFFF),
                                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m512i permute(__m512i index, __m512i low, __m512i high) {
    return _mm512_permutex2var_epi32(low, index, high);
  }
  static Mask has_bit(__m512i index, int bit) {
    return _mm512_test_epi32_mask(index, _mm512_set1_epi32(bit));
  }
  static __m512i blend(Mask take_second, __m512i first, __m512i second) {
    return _mm512_mask_blend_epi32(take_second, first, second);
  }
};

template <>
struct TableWidth<uint16_t> {
  static constexpr size_t kLanes = 32;
  static constexpr size_t kEntries = 64;
  using Mask = __mmask32;
  static __m512i index(const uint8_t* p) {
    return _mm512_maskz_cvtepu8_epi16(Mask(0xFFFFFFFF),
                                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512i permute(__m512i index, __m512i low, __m512i high) {
    return _mm512_permutex2var_epi16(low, index, high);
  }
  static Mask has_bit(__m512i index, int bit) {
    return _mm512_test_epi16_mask(index, _mm512_set1_epi16(static_cast<short>(bit)));
  }
  static __m512i blend(Mask take_second, __m512i first, __m512i second) {
    return _mm512_mask_blend_epi16(take_second, first, second);
  }
};

//: The table in 2 * kPairs registers (kPairs * kEntries entries, at least mask + 1) and its
//: lookup.
template <class Out, size_t kPairs>
struct RegisterTable {
  using W = TableWidth<Out>;
  static constexpr size_t kSize = kPairs * W::kEntries;
  __m512i part[2 * kPairs];

  RegisterTable(const Out* table, uint32_t mask) {
    alignas(64) Out entries[kSize];
    for (size_t i = 0; i < kSize; ++i) entries[i] = table[i & mask];
    for (size_t k = 0; k < 2 * kPairs; ++k) part[k] = _mm512_load_si512(entries + k * W::kLanes);
  }

  //: The entries of the bytes p[0 .. kLanes).
  __m512i operator()(const uint8_t* p) const {
    const __m512i index = W::index(p);
    return pick<0, kPairs>(index);
  }

  //: The entries of pairs [First, First + Count): the two halves' entries, blended on the index
  //: bit that tells them apart (a tree written out at compile time, so that every value stays
  //: in a register).
  template <size_t First, size_t Count>
  __m512i pick(__m512i index) const {
    if constexpr (Count == 1) {
      return W::permute(index, part[2 * First], part[2 * First + 1]);
    } else {
      constexpr size_t kHalf = Count / 2;
      return W::blend(W::has_bit(index, int(W::kEntries * kHalf)), pick<First, kHalf>(index),
                      pick<First + kHalf, kHalf>(index));
    }
  }
};

//: A table of 256 FLOAT-wide entries in which entry c | 0x80 is entry c with its top bit
//: flipped (a float target's sign follows the source's), but for at most one code (`odd`: the
//: FNUZ formats' NaN at 0x80, whose twin 0x00 is zero): the magnitudes' 128 entries, half the
//: permutations of the whole table, then the sign and the one exception.
struct SignFoldedTable {
  using W = TableWidth<uint32_t>;
  RegisterTable<uint32_t, 4> magnitude;
  __m512i odd_code, odd_value, sign;

  //: Whether `table` folds so, and its one exception (else 0x80, whose entry then is its twin's
  //: with the sign flipped anyway).
  static bool folds(const uint32_t* table, uint32_t* odd) {
    int exceptions = 0;
    *odd = 0x80;
    for (uint32_t c = 0x80; c < 0x100; ++c) {
      if (table[c] != (table[c - 0x80] ^ 0x80000000u)) {
        ++exceptions;
        *odd = c;
      }
    }
    return exceptions <= 1;
  }

  SignFoldedTable(const uint32_t* table, uint32_t odd)
      : magnitude(table, 0x7F),
        odd_code(_mm512_set1_epi32(int(odd))),
        odd_value(_mm512_set1_epi32(int(table[odd]))),
        sign(_mm512_set1_epi32(INT32_MIN)) {}

  __m512i operator()(const uint8_t* p) const {
    const __m512i index = W::index(p);
    __m512i v = magnitude.pick<0, 4>(index);  // reads the index's low 7 bits
    v = _mm512_mask_xor_epi32(v, W::has_bit(index, 0x80), v, sign);
    return _mm512_mask_mov_epi32(v, _mm512_cmpeq_epi32_mask(index, odd_code), odd_value);
  }
};

//: Elements [0, n) through `lookup`; streamed stores for a large 16-bit output, as the SIMD
//: frame does (pack_range).
template <class Out, class Lookup>
void table_steps(const Lookup& lookup, const Out* table, uint32_t mask, const uint8_t* src,
                 Out* dst, size_t n) {
  static_assert(kStep<Out> == TableWidth<Out>::kLanes, "one vector of results a step");
  const PackRange r = pack_range(dst, n);
  for (size_t i = 0; i < r.head; ++i) dst[i] = table[src[i] & mask];
  for (size_t i = r.head; i < r.head + r.steps; i += TableWidth<Out>::kLanes) {
    store(dst + i, lookup(src + i), r.stream);
  }
  for (size_t i = r.head + r.steps; i < n; ++i) dst[i] = table[src[i] & mask];
  end_stream(r.stream);
}

template <class Out, size_t kPairs>
void table_lookup(const Out* table, uint32_t mask, const uint8_t* src, Out* dst, size_t n) {
  table_steps(RegisterTable<Out, kPairs>(table, mask), table, mask, src, dst, n);
}

//: The fewest permutations that cover the mask's bits (or the sign-folded table).
template <class Out>
void table_lookup(const Out* table, uint32_t mask, const uint8_t* src, Out* dst, size_t n) {
  constexpr size_t kEntries = TableWidth<Out>::kEntries;
  if (mask < kEntries) {
    table_lookup<Out, 1>(table, mask, src, dst, n);
  } else if (mask < 2 * kEntries) {
    table_lookup<Out, 2>(table, mask, src, dst, n);
  } else if (mask < 4 * kEntries) {
    table_lookup<Out, 4>(table, mask, src, dst, n);
  } else if constexpr (std::is_same_v<Out, uint32_t>) {
    uint32_t odd = 0;
    if (mask == 0xFF && SignFoldedTable::folds(table, &odd)) {
      table_steps(SignFoldedTable(table, odd), table, mask, src, dst, n);
    } else {
      table_lookup<Out, 8>(table, mask, src, dst, n);
    }
  }
}
#endif

//: Gather<uint8_t, Out> for 16- and 32-bit results: the registers' lookup where the build has
//: AVX-512, else the scalar gather.
template <class Out>
void map_byte_table(const void* in, void* out, size_t begin, size_t end, const Params& p) {
  const Gather<uint8_t, Out> op(p);
  const uint8_t* src = static_cast<const uint8_t*>(in) + begin;
  Out* dst = static_cast<Out*>(out) + begin;
#if defined(CASTLIKE_PACK_AVX512)
  table_lookup<Out>(op.table, op.mask, src, dst, end - begin);
#else
  for (size_t i = 0; i < end - begin; ++i) dst[i] = op.table[op.index(src[i])];
#endif
}

template <>
inline void map_elements<Gather<uint8_t, uint32_t>>(const void* in, void* out, size_t begin,
                                                    size_t end, const Params& p) {
  map_byte_table<uint32_t>(in, out, begin, end, p);
}

template <>
inline void map_elements<Gather<uint8_t, uint16_t>>(const void* in, void* out, size_t begin,
                                                    size_t end, const Params& p) {
  map_byte_table<uint16_t>(in, out, begin, end, p);
}

}  // namespace castlike
