// ONNX's packing of the sub-byte types (INT4, UINT4, FLOAT4E2M1: 4 bits; INT2, UINT2: 2 bits;
// FLOAT6E2M3, FLOAT6E3M2: 6 bits) in raw_data: the elements form a little-endian bit stream,
// the first element in the lowest bits of the first byte.  The kernels write (and read) one
// code per byte; these turn such codes into packed bytes and back, so that a cast can pack its
// results while they are still in the first-level cache.
//
// One template for every width: a group of 8 / gcd(Bits, 8) elements fills whole bytes (two of
// 4 bits in one byte, four of 2 bits in one, four of 6 bits in three), and the loop over full
// groups has no branch in its body, so that the compiler vectorises it.  Nothing here throws.
#pragma once

#include <cstddef>
#include <cstdint>

namespace castlike {

//: The packed layout of Bits-bit elements.
template <int Bits>
struct Packing {
  static_assert(Bits == 2 || Bits == 4 || Bits == 6, "ONNX packs elements of 2, 4 or 6 bits");
  static constexpr int kGcd = Bits == 4 ? 4 : 2;
  //: Elements and bytes of the smallest group that fills whole bytes.
  static constexpr std::size_t kElements = std::size_t(8 / kGcd);
  static constexpr std::size_t kBytes = std::size_t(Bits / kGcd);
  static constexpr std::uint32_t kMask = (1u << Bits) - 1u;

  //: Bytes that n packed elements take: ceil(n * Bits / 8), computed without overflow for any n
  //: (the unused high bits of the last byte are zero).
  static constexpr std::size_t bytes(std::size_t n) {
    return n / 8 * std::size_t(Bits) + (n % 8 * std::size_t(Bits) + 7) / 8;
  }
};

//: Packs the low Bits bits of `codes[0, n)` (a kernel's code may be sign-extended in its byte)
//: into exactly Packing<Bits>::bytes(n) bytes at `out`.
template <int Bits>
inline void pack(const std::uint8_t* __restrict codes, std::size_t n,
                 std::uint8_t* __restrict out) {
  using P = Packing<Bits>;
  const std::size_t groups = n / P::kElements;
  for (std::size_t g = 0; g < groups; ++g) {
    std::uint32_t word = 0;
    for (std::size_t j = 0; j < P::kElements; ++j) {
      word |= (std::uint32_t(codes[g * P::kElements + j]) & P::kMask) << (j * Bits);
    }
    for (std::size_t b = 0; b < P::kBytes; ++b) {
      out[g * P::kBytes + b] = std::uint8_t(word >> (8 * b));
    }
  }
  // The last, partial group: its missing elements count as zeros, and only its bytes are
  // written (the next row may start right after them).
  const std::size_t rest = n - groups * P::kElements;
  if (rest != 0) {
    std::uint32_t word = 0;
    for (std::size_t j = 0; j < rest; ++j) {
      word |= (std::uint32_t(codes[groups * P::kElements + j]) & P::kMask) << (j * Bits);
    }
    for (std::size_t b = 0; b < (rest * Bits + 7) / 8; ++b) {
      out[groups * P::kBytes + b] = std::uint8_t(word >> (8 * b));
    }
  }
}

//: Unpacks n elements from the Packing<Bits>::bytes(n) bytes at `packed` into `codes[0, n)`,
//: zero-extended (the kernels of sub-byte sources mask their input byte).
template <int Bits>
inline void unpack(const std::uint8_t* __restrict packed, std::size_t n,
                   std::uint8_t* __restrict codes) {
  using P = Packing<Bits>;
  const std::size_t groups = n / P::kElements;
  for (std::size_t g = 0; g < groups; ++g) {
    std::uint32_t word = 0;
    for (std::size_t b = 0; b < P::kBytes; ++b) {
      word |= std::uint32_t(packed[g * P::kBytes + b]) << (8 * b);
    }
    for (std::size_t j = 0; j < P::kElements; ++j) {
      codes[g * P::kElements + j] = std::uint8_t((word >> (j * Bits)) & P::kMask);
    }
  }
  const std::size_t rest = n - groups * P::kElements;
  if (rest != 0) {
    std::uint32_t word = 0;
    for (std::size_t b = 0; b < (rest * Bits + 7) / 8; ++b) {
      word |= std::uint32_t(packed[groups * P::kBytes + b]) << (8 * b);
    }
    for (std::size_t j = 0; j < rest; ++j) {
      codes[groups * P::kElements + j] = std::uint8_t((word >> (j * Bits)) & P::kMask);
    }
  }
}

}  // namespace castlike
