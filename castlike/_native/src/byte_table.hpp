// One-byte sources (float8, FLOAT8E8M0, one-per-byte FLOAT4E2M1 and FLOAT6, the 8-, 4- and
// 2-bit integers): the Gather family's table of every source pattern, held in vector registers
// instead of read with one scalar load an element.
//
// * 8-bit results (AVX-512 and AVX2): the byte shuffle (vpshufb) reads 16 entries by the low 4
//   bits within each 128-bit lane; the table is up to 16 such pieces, and blends on the index
//   bits 4 to 7 pick the piece.
// * 16- and 32-bit results (AVX-512): one two-register permutation (vpermt2w, vpermt2d) reads 64
//   entries of 16 bits or 32 of 32 bits by the index's low 6 or 5 bits; a table of 256 entries
//   takes 4 or 8 of them, and masked blends on the higher bits pick the right one.  AVX2's
//   permutation reads 8 entries, 32 of them for a float8 table: there a float source's FLOAT,
//   FLOAT16, BFLOAT16 and DOUBLE results are computed instead (byte_float.hpp), and other
//   tables keep the scalar gather.
//
// The table is the spec's, as for the scalar gather: entry i of the registers is table[i & mask],
// so the raw byte is the index and every mask (0x0F for FLOAT4E2M1, 0x3F for FLOAT6, 0xFF for
// float8) reads what the scalar loop reads, with as few pieces as the mask's bits need.
//
// Measured on the development machine (one thread, outputs allocated per call, medians of
// interleaved rounds), against the scalar gather, at 10**6 elements: FLOAT8E4M3FN -> FLOAT8E5M2
// 0.30 -> 0.042 ms (AVX2 0.126), FLOAT4E2M1 -> FLOAT8E4M3FN 0.30 -> 0.021; FLOAT8E4M3FN -> FLOAT
// 0.29 -> 0.089 ms (a copy of the same bytes: 0.084), FLOAT8E8M0 -> FLOAT (whose table does not
// fold) 0.29 -> 0.12, FLOAT8E5M2 -> BFLOAT16 0.29 -> 0.058; at 10**7 FLOAT8E4M3FN -> FLOAT
// 6.0 -> 4.1 ms, the copy's 4.1, and FLOAT8E5M2 -> BFLOAT16 3.1 -> 0.8.
#pragma once

#include "byte_float.hpp"
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

//: Calls `f` with the table's lookup in registers: the fewest permutations that cover the
//: mask's bits (or the sign-folded table).
template <class Out, class F>
void with_register_table(const Out* table, uint32_t mask, const F& f) {
  constexpr size_t kEntries = TableWidth<Out>::kEntries;
  if (mask < kEntries) {
    f(RegisterTable<Out, 1>(table, mask));
  } else if (mask < 2 * kEntries) {
    f(RegisterTable<Out, 2>(table, mask));
  } else if (mask < 4 * kEntries) {
    f(RegisterTable<Out, 4>(table, mask));
  } else if constexpr (std::is_same_v<Out, uint32_t>) {
    uint32_t odd = 0;
    if (mask == 0xFF && SignFoldedTable::folds(table, &odd)) {
      f(SignFoldedTable(table, odd));
    } else {
      f(RegisterTable<Out, 8>(table, mask));
    }
  }
}

template <class Out>
void table_lookup(const Out* table, uint32_t mask, const uint8_t* src, Out* dst, size_t n) {
  with_register_table(table, mask,
                      [&](const auto& lookup) { table_steps(lookup, table, mask, src, dst, n); });
}

//: How a table of 64-bit entries is a table of 32-bit entries widened (`narrow`).
enum class Widening { kNone, kFloatToDouble, kSignExtend };

//: The entries that sign extension does not give (FLOAT8E5M2's two Infs into INT64: the largest
//: and smallest INT64), at most kMost of them: each has a 32-bit stand-in that no other entry
//: has, which the widened lanes are compared with and replaced where equal (two operations a
//: vector of 8 an exception, half of what comparing the index bytes takes).
struct WideExceptions {
  static constexpr int kMost = 2;
  int count = 0;
  __m512i stand_in[kMost], value[kMost];

  __m512i patch(__m512i v) const {
    for (int k = 0; k < count; ++k) {
      v = _mm512_mask_mov_epi64(v, _mm512_cmpeq_epi64_mask(v, stand_in[k]), value[k]);
    }
    return v;
  }
};

//: Which widening gives every entry of `table` (those the mask reaches) from a 32-bit entry,
//: sign extension with at most WideExceptions::kMost exceptions, and those 32-bit entries in
//: `narrow` (256 of them, entry i at i & mask, as the registers read them; an exception's
//: stand-in there).  FLOAT -> DOUBLE is the scalar conversion, which vcvtps2pd's lanes repeat
//: (both exact, NaN quieted with its payload kept); it runs where the kernel runs, under
//: FpEnvGuard.
inline Widening narrow_table(const uint64_t* table, uint32_t mask, uint32_t* narrow,
                             WideExceptions* exceptions) {
  const auto sign_extends = [](uint64_t entry) {
    return int64_t(entry) == int64_t(int32_t(uint32_t(entry)));
  };
  bool as_float = true;
  uint32_t odd[WideExceptions::kMost];
  int n_odd = 0;
  for (uint32_t i = 0; i <= mask; ++i) {
    if (as_float) {  // (after the first entry that fails, the rest need not be converted)
      const float f = static_cast<float>(bit_cast<double>(table[i]));
      as_float = bit_cast<uint64_t>(static_cast<double>(f)) == table[i];
    }
    if (!sign_extends(table[i]) && n_odd++ < WideExceptions::kMost) odd[n_odd - 1] = i;
  }
  const Widening widening = as_float                         ? Widening::kFloatToDouble
                            : n_odd <= WideExceptions::kMost ? Widening::kSignExtend
                                                             : Widening::kNone;
  uint32_t stand_in[WideExceptions::kMost];
  if (widening == Widening::kSignExtend) {
    // Stand-ins from INT32_MIN up that no entry (nor an earlier stand-in) has: entries that
    // sign-extend are at most 256, so one is found within 256 + kMost tries.
    uint32_t candidate = 0x80000000u;
    for (int k = 0; k < n_odd; ++k, ++candidate) {
      const auto taken = [&](uint32_t c) {
        for (uint32_t i = 0; i <= mask; ++i) {
          if (sign_extends(table[i]) && uint32_t(table[i]) == c) return true;
        }
        return false;
      };
      while (taken(candidate)) ++candidate;
      stand_in[k] = candidate;
      exceptions->stand_in[k] = _mm512_set1_epi64(int64_t(int32_t(candidate)));
      exceptions->value[k] = _mm512_set1_epi64(int64_t(table[odd[k]]));
    }
    exceptions->count = n_odd;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    const uint64_t entry = table[i & mask];
    narrow[i] = widening == Widening::kFloatToDouble
                    ? bit_cast<uint32_t>(static_cast<float>(bit_cast<double>(entry)))
                    : uint32_t(entry);
    for (int k = 0; k < exceptions->count; ++k) {
      if ((i & mask) == odd[k]) narrow[i] = stand_in[k];
    }
  }
  return widening;
}

//: 64-bit results: the 32-bit entries' lookup in registers, each vector of 16 widened into two
//: of 8, and the exceptions written over them.  False (nothing done) where no widening gives
//: the table (the scalar gather then).
inline bool wide_table_lookup(const uint64_t* table, uint32_t mask, const uint8_t* src,
                              uint64_t* dst, size_t n) {
  alignas(64) uint32_t narrow[256];
  WideExceptions exceptions;
  const Widening widening = narrow_table(table, mask, narrow, &exceptions);
  if (widening == Widening::kNone) return false;
  // One loop per way of widening, so that nothing of the choice is read again in the steps.
  const auto steps = [&](const auto& widen) {
    with_register_table(narrow, mask, [&](const auto& lookup) {
      size_t i = 0;
      for (; i + 16 <= n; i += 16) {
        const __m512i v = lookup(src + i);
        // The masked extraction for the low half too: GCC 12's cast reads an undefined register.
        const __m256i low = _mm512_maskz_extracti64x4_epi64(__mmask8(0xF), v, 0);
        const __m256i high = _mm512_maskz_extracti64x4_epi64(__mmask8(0xF), v, 1);
        _mm512_storeu_si512(dst + i, widen(low));
        _mm512_storeu_si512(dst + i + 8, widen(high));
      }
      for (; i < n; ++i) dst[i] = table[src[i] & mask];
    });
  };
  const auto sign_extend = [](__m256i v) {
    return _mm512_maskz_cvtepi32_epi64(__mmask8(0xFF), v);
  };
  if (widening == Widening::kFloatToDouble) {
    steps([](__m256i v) {
      return _mm512_castpd_si512(_mm512_maskz_cvtps_pd(__mmask8(0xFF), _mm256_castsi256_ps(v)));
    });
  } else if (exceptions.count == 0) {
    steps(sign_extend);
  } else {
    const WideExceptions patch = exceptions;
    steps([&](__m256i v) { return patch.patch(sign_extend(v)); });
  }
  return true;
}
#endif

#if defined(CASTLIKE_PACK_SIMD)
//: 8-bit results, with AVX-512 or AVX2: the byte shuffle (vpshufb) reads 16 entries by the low 4
//: bits, within each 128-bit lane, so the table is kTables pieces of 16 entries, each in every
//: lane of a register, and blends on the index bits 4 to 7 pick the piece.
template <size_t kTables>
struct ShuffleTable {
  VecI piece[kTables];

  ShuffleTable(const uint8_t* table, uint32_t mask) {
    for (size_t k = 0; k < kTables; ++k) {
      alignas(16) uint8_t entries[16];
      for (size_t j = 0; j < 16; ++j) entries[j] = table[(16 * k + j) & mask];
      const __m128i lane = _mm_load_si128(reinterpret_cast<const __m128i*>(entries));
#if defined(CASTLIKE_PACK_AVX512)
      piece[k] = _mm512_maskz_broadcast_i32x4(__mmask16(0xFFFF), lane);  // (GCC 12: see above)
#else
      piece[k] = _mm256_broadcastsi128_si256(lane);
#endif
    }
  }

  //: The entries of the bytes p[0 .. kVecBytes).
  VecI operator()(const uint8_t* p) const {
#if defined(CASTLIKE_PACK_AVX512)
    const VecI index = _mm512_loadu_si512(p);
    const VecI low = _mm512_and_si512(index, _mm512_set1_epi8(0x0F));
#else
    const VecI index = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const VecI low = _mm256_and_si256(index, _mm256_set1_epi8(0x0F));
#endif
    return pick<0, kTables>(index, low);
  }

  //: Pieces [First, First + Count), blended on the index bit that tells their halves apart.
  template <size_t First, size_t Count>
  VecI pick(VecI index, VecI low) const {
    if constexpr (Count == 1) {
#if defined(CASTLIKE_PACK_AVX512)
      return _mm512_shuffle_epi8(piece[First], low);
#else
      return _mm256_shuffle_epi8(piece[First], low);
#endif
    } else {
      constexpr size_t kHalf = Count / 2;
      const VecI first = pick<First, kHalf>(index, low);
      const VecI second = pick<First + kHalf, kHalf>(index, low);
      const char bit = static_cast<char>(16 * kHalf);
#if defined(CASTLIKE_PACK_AVX512)
      return _mm512_mask_blend_epi8(_mm512_test_epi8_mask(index, _mm512_set1_epi8(bit)), first,
                                    second);
#else
      const __m256i has = _mm256_set1_epi8(bit);
      return _mm256_blendv_epi8(first, second,
                                _mm256_cmpeq_epi8(_mm256_and_si256(index, has), has));
#endif
    }
  }
};

//: Elements [0, n) of a one-byte result through the shuffles.
template <size_t kTables>
void shuffle_lookup(const uint8_t* table, uint32_t mask, const uint8_t* src, uint8_t* dst,
                    size_t n) {
  static_assert(kStep<uint8_t> == kVecBytes, "one vector of results a step");
  const ShuffleTable<kTables> lookup(table, mask);
  const PackRange r = pack_range(dst, n);
  for (size_t i = 0; i < r.head; ++i) dst[i] = table[src[i] & mask];
  for (size_t i = r.head; i < r.head + r.steps; i += kVecBytes) {
    store(dst + i, lookup(src + i), r.stream);
  }
  for (size_t i = r.head + r.steps; i < n; ++i) dst[i] = table[src[i] & mask];
  end_stream(r.stream);
}

//: The fewest pieces that cover the mask's bits.
inline void shuffle_lookup(const uint8_t* table, uint32_t mask, const uint8_t* src, uint8_t* dst,
                           size_t n) {
  if (mask < 16) {
    shuffle_lookup<1>(table, mask, src, dst, n);
  } else if (mask < 32) {
    shuffle_lookup<2>(table, mask, src, dst, n);
  } else if (mask < 64) {
    shuffle_lookup<4>(table, mask, src, dst, n);
  } else if (mask < 128) {
    shuffle_lookup<8>(table, mask, src, dst, n);
  } else {
    shuffle_lookup<16>(table, mask, src, dst, n);
  }
}
#endif

//: Gather<uint8_t, Out>: the registers' lookup where the build has one (8-bit results with
//: AVX-512 or AVX2, 16- and 32-bit results with AVX-512, 64-bit ones with AVX-512 where they are
//: 32-bit entries widened), with AVX2 a float source's 16-, 32-
//: and 64-bit float results by arithmetic where it gives the table (byte_float.hpp), else the
//: scalar gather.
template <class Out>
void map_byte_table(const void* in, void* out, size_t begin, size_t end, const Params& p) {
  const Gather<uint8_t, Out> op(p);
  const uint8_t* src = static_cast<const uint8_t*>(in) + begin;
  Out* dst = static_cast<Out*>(out) + begin;
  if constexpr (std::is_same_v<Out, uint8_t>) {
#if defined(CASTLIKE_PACK_SIMD)
    shuffle_lookup(op.table, op.mask, src, dst, end - begin);
    return;
#endif
  } else {
#if defined(CASTLIKE_PACK_AVX512)
    if constexpr (sizeof(Out) <= 4) {
      table_lookup<Out>(op.table, op.mask, src, dst, end - begin);
      return;
    } else {
      if (wide_table_lookup(op.table, op.mask, src, dst, end - begin)) return;
    }
#elif defined(CASTLIKE_PACK_AVX2)
    if (byte_float_lookup<Out>(op.table, p, src, dst, end - begin)) return;
#endif
  }
  for (size_t i = 0; i < end - begin; ++i) dst[i] = op.table[op.index(src[i])];
}

template <>
inline void map_elements<Gather<uint8_t, uint8_t>>(const void* in, void* out, size_t begin,
                                                   size_t end, const Params& p) {
  map_byte_table<uint8_t>(in, out, begin, end, p);
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

template <>
inline void map_elements<Gather<uint8_t, uint64_t>>(const void* in, void* out, size_t begin,
                                                    size_t end, const Params& p) {
  map_byte_table<uint64_t>(in, out, begin, end, p);
}

}  // namespace castlike
