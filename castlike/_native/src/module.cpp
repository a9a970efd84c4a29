// The Python face of the native kernels: a `Kernel` object binds one family instantiation to
// its Params (tables and constants from castlike.spec, computed once per cast plan in
// castlike._native.routes) and runs it on contiguous buffers, with the GIL released, on the
// process's one thread pool (threads.hpp).  The same source is compiled once per CPU level
// (CASTLIKE_VARIANT); Python imports the best level this CPU supports.
//
// This is a boundary: whatever Python hands in is checked before a kernel runs (the name, the
// variant, every table's length, class_bits, the constants a conversion needs to be defined,
// the buffers' sizes, alignment and overlap), a Kernel never changes after construction, and
// no C++ exception leaves a function that Python calls.
//
// Sub-byte targets and sources: kernel.packed(...) casts and packs into ONNX's bit order (2, 4
// or 6 bits an element, each row from a byte boundary; packing.hpp) and kernel.unpacked(...)
// unpacks and casts, in one pass over memory: each block of elements goes through a stack
// buffer of one code per byte that stays in the first-level cache, instead of a whole unpacked
// array written and read again.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>  // madvise: huge pages for new outputs
#endif

#include "byte_table.hpp"
#include "float_to_int.hpp"
#include "fpenv.hpp"
#include "through_float.hpp"
#include "kernels.hpp"
#include "narrow_float.hpp"
#include "packing.hpp"
#include "small_float.hpp"
#include "threads.hpp"

#ifndef CASTLIKE_VARIANT
#error "CASTLIKE_VARIANT must name the CPU level this module is compiled for"
#endif
#define CASTLIKE_STR2(x) #x
#define CASTLIKE_STR(x) CASTLIKE_STR2(x)
#define CASTLIKE_MODULE_INIT2(v) PyInit__##v
#define CASTLIKE_MODULE_INIT(v) CASTLIKE_MODULE_INIT2(v)

namespace castlike {
namespace {

using KernelFn = void (*)(const void*, void*, size_t, size_t, const Params&);

// -- what each family accepts ------------------------------------------------------------------

//: Why a Kernel's arguments were refused (a fixed buffer: checking allocates nothing).
struct Why {
  char text[240] = "";
#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  bool fail(const char* format, ...) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    return false;
  }
};

//: The arguments of a Kernel besides its Params' values: whether a table and class_bits were
//: given, and the table's size.
struct Given {
  bool table = false;
  Py_ssize_t table_bytes = 0;
  Py_ssize_t table_itemsize = 0;
  bool class_bits = false;
};

bool no_table_nor_class_bits(const Given& given, Why& why) {
  if (given.table) return why.fail("takes no table");
  if (given.class_bits) return why.fail("takes no class_bits");
  return true;
}

//: The table must hold exactly `entries` entries of `size` bytes: every index the kernel can
//: compute is below `entries`.
bool table_of(const Given& given, uint64_t entries, size_t size, Why& why) {
  if (!given.table) {
    return why.fail("needs a table of %llu entries of %zu byte(s)",
                    static_cast<unsigned long long>(entries), size);
  }
  if (uint64_t(given.table_itemsize) != size || uint64_t(given.table_bytes) != entries * size) {
    return why.fail("needs a table of %llu entries of %zu byte(s), got %zd bytes in entries of %zd",
                    static_cast<unsigned long long>(entries), size, given.table_bytes,
                    given.table_itemsize);
  }
  return true;
}

//: class_bits within [lowest, highest], so that every shift by it is defined and every class
//: index fits 32 bits.
bool class_bits_in(const Params& p, const Given& given, int lowest, int highest, Why& why) {
  if (!given.class_bits) return why.fail("needs class_bits (%d to %d)", lowest, highest);
  if (p.class_bits < lowest || p.class_bits > highest) {
    return why.fail("class_bits must be %d to %d, got %d", lowest, highest, p.class_bits);
  }
  return true;
}

//: Whether every value of [lo, hi] converts to the integer W (its range, exact powers of two
//: in F, is [min, max + 1)): what makes the kernel's float -> integer conversion defined.
template <class F, class W>
bool converts_to(F lo, F hi) {
  const F low = F(std::numeric_limits<W>::min());
  const F beyond = std::ldexp(F(1), std::numeric_limits<W>::digits);
  return lo <= hi && lo >= low && hi < beyond;  // false for NaN
}

//: Families without a table, class bits or constants that decide whether their arithmetic is
//: defined (a mask or a clamp of any value is).
template <class Op>
struct Check {
  static bool ok(const Params&, const Given& given, Why& why) {
    return no_table_nor_class_bits(given, why);
  }
};

//: The spec's table of every pattern: `mask` within the source type, mask + 1 entries.
template <class In, class Out>
struct Check<Gather<In, Out>> {
  static bool ok(const Params& p, const Given& given, Why& why) {
    if (given.class_bits) return why.fail("takes no class_bits");
    if (!given.table) {
      return why.fail("needs a table of mask + 1 entries of %zu byte(s)", sizeof(Out));
    }
    if (p.mask > std::numeric_limits<In>::max()) {
      return why.fail("mask 0x%llx has bits beyond the %d-bit source",
                      static_cast<unsigned long long>(p.mask), int(8 * sizeof(In)));
    }
    return table_of(given, p.mask + 1, sizeof(Out), why);
  }
};

//: An integer kernel's clip [ilo, ihi]: not empty (the defaults, 0 and 0, would turn every
//: value into 0) and within the integer type I, so that I(ilo) and I(ihi) are the bounds given.
template <class I>
bool clip_within(const Params& p, Why& why) {
  const bool fits = std::is_signed_v<I>
                        ? p.ilo >= int64_t(std::numeric_limits<I>::min()) &&
                              p.ihi <= int64_t(std::numeric_limits<I>::max())
                        : p.ilo >= 0 && uint64_t(p.ihi) <= std::numeric_limits<I>::max();
  if (p.ilo >= p.ihi || !fits) {
    return why.fail("ilo < ihi within the %s%d range, got %lld and %lld",
                    std::is_signed_v<I> ? "int" : "uint", int(8 * sizeof(I)),
                    static_cast<long long>(p.ilo), static_cast<long long>(p.ihi));
  }
  return true;
}

//: The FLOAT class table: a class keeps 32 - class_bits bits and a sticky bit, so 2**(33 -
//: class_bits) entries of one byte.  An integer source's variant 1 clips first (the check of
//: variant 0 serves every variant, so it reads the variant asked for).
template <class Source, int Variant>
struct Check<FloatClass<Source, Variant>> {
  static bool ok(const Params& p, const Given& given, Why& why) {
    if constexpr (!std::is_same_v<Source, FloatBits> && !std::is_same_v<Source, DoubleBits>) {
      if (p.variant == 1 && !clip_within<typename Source::T>(p, why)) return false;
    }
    return class_bits_in(p, given, 1, 31, why) &&
           table_of(given, uint64_t{1} << (33 - p.class_bits), 1, why);
  }
};

//: A BOOL source (0 or 1 after FromBool) is checked as the kernel it feeds.
template <class Op>
struct Check<FromBool<Op>> : Check<Op> {};

//: An integer clamp [ilo, ihi] within I and within +-2**24, where every integer is exact in
//: FLOAT (and converts through int32).
template <class I>
bool clip_exact_in_float(const Params& p, Why& why) {
  constexpr int64_t kExact = int64_t{1} << 24;
  if (!clip_within<I>(p, why)) return false;
  if (p.ilo < -kExact || (p.ihi > 0 && uint64_t(p.ihi) > uint64_t(kExact))) {
    return why.fail("ilo and ihi must lie within +-2**24, got %lld and %lld",
                    static_cast<long long>(p.ilo), static_cast<long long>(p.ihi));
  }
  return true;
}

//: Integer -> FLOAT16 clips to [ilo, ihi] first, within +-2**24: the steps convert the clamped
//: integer to FLOAT as it is.
template <class I>
struct Check<IntToFloat16<I>> {
  static bool ok(const Params& p, const Given& given, Why& why) {
    return no_table_nor_class_bits(given, why) && clip_exact_in_float<I>(p, why);
  }
};

//: A widening takes no constants of its own, but the integer clamp (clip_exact_in_float).
template <class W>
struct WideningCheck {
  static bool ok(const Params&, Why&) { return true; }
};
template <class I>
struct WideningCheck<ClampedIntegerBits<I>> {
  static bool ok(const Params& p, Why& why) { return clip_exact_in_float<I>(p, why); }
};
//: A FLOAT family through a widening: the widening's constants, then the family's.
template <class W, class Op>
struct Check<ThroughFloat<W, Op>> {
  static bool ok(const Params& p, const Given& given, Why& why) {
    return WideningCheck<W>::ok(p, why) && Check<Op>::ok(p, given, why);
  }
};

//: The DOUBLE class table: 2**(65 - class_bits) entries, which fit 32-bit indices from 33 on.
template <>
struct Check<DoubleClass> {
  static bool ok(const Params& p, const Given& given, Why& why) {
    return class_bits_in(p, given, 33, 63, why) &&
           table_of(given, uint64_t{1} << (65 - p.class_bits), 1, why);
  }
};

//: Saturating float -> integer: [lo, hi] must convert to the kernel's integer lanes.
template <class F, class Out>
struct Check<FloatToInt<F, Out>> {
  static bool ok(const Params& p, const Given& given, Why& why) {
    using Work = typename FloatToInt<F, Out>::Work;
    if (!no_table_nor_class_bits(given, why)) return false;
    if (!converts_to<F, Work>(F(p.lo), F(p.hi))) {
      return why.fail("lo and hi must satisfy lo <= hi within the %s%d range, got %g and %g",
                      std::is_signed_v<Work> ? "int" : "uint", int(8 * sizeof(Work)), p.lo,
                      p.hi);
    }
    return true;
  }
};

//: Float -> sub-byte integer: every value is clamped to +-hi and then converted to an integer
//: of F's width, so hi must be in [0, 2**31) for FLOAT and [0, 2**63) for DOUBLE.
template <class F, SubByteRounding R>
struct Check<FloatToSubByte<F, R>> {
  static bool ok(const Params& p, const Given& given, Why& why) {
    using Work = std::conditional_t<sizeof(F) == 4, int32_t, int64_t>;
    if (!no_table_nor_class_bits(given, why)) return false;
    if (!converts_to<F, Work>(-F(p.hi), F(p.hi))) {
      return why.fail("hi must be from 0 to below 2**%d, got %g",
                      std::numeric_limits<Work>::digits, p.hi);
    }
    return true;
  }
};

//: A byte of a result or a mask: 0 to 255.
bool is_byte(int value, const char* what, Why& why) {
  if (value < 0 || value > 255) return why.fail("%s must be 0 to 255, got %d", what, value);
  return true;
}

//: The small float arithmetic kernel: every shift defined (mantissa_bits), the power of two it
//: adds a finite normal FLOAT for every clamped magnitude (min_exponent and the clamp `hi`),
//: every result a byte, and the cap at or above the clamp's own code (so that the cap changes
//: NaN only).
template <class Source, int Flags>
struct Check<SmallFloat<Source, Flags>> {
  static bool ok(const Params& p, const Given& given, Why& why) {
    if (!no_table_nor_class_bits(given, why)) return false;
    if (p.mantissa_bits < 1 || p.mantissa_bits > 10) {
      return why.fail("mantissa_bits must be 1 to 10, got %d", p.mantissa_bits);
    }
    const float clamp = static_cast<float>(p.hi);
    if (!(p.hi > 0.0) || !std::isfinite(clamp) || static_cast<double>(clamp) != p.hi) {
      return why.fail("hi (the clamp) must be a positive finite FLOAT value, got %g", p.hi);
    }
    if (p.min_exponent < -126 || p.min_exponent > 127) {
      return why.fail("min_exponent must be -126 to 127, got %d", p.min_exponent);
    }
    // The smallest P, 2**(min_exponent + 23 - mantissa_bits), is normal by the ranges above.
    const int highest = std::max(std::ilogb(clamp), p.min_exponent) + 23 - p.mantissa_bits;
    if (highest > 127) {
      return why.fail("min_exponent %d, mantissa_bits %d and hi %g round at 2**%d, beyond "
                      "FLOAT's range",
                      p.min_exponent, p.mantissa_bits, p.hi, highest);
    }
    const uint32_t clamp_code = SmallFloatCodes(p).magnitude_code(bit_cast<uint32_t>(clamp));
    if (p.cap_code < 0 || uint32_t(p.cap_code) < clamp_code || p.cap_code > 255) {
      return why.fail("cap_code must be from the clamp's code %u to 255, got %d", clamp_code,
                      p.cap_code);
    }
    return is_byte(p.sign_mask, "sign_mask", why) &&
           is_byte(p.zero_results[0], "zero_results[0]", why) &&
           is_byte(p.zero_results[1], "zero_results[1]", why) &&
           is_byte(p.cap_results[0], "cap_results[0]", why) &&
           is_byte(p.cap_results[1], "cap_results[1]", why);
  }
};

using CheckFn = bool (*)(const Params&, const Given&, Why&);

//: What a family works out once per kernel, after its checks passed and its table was copied
//: (Params::preparation): nothing, but for the families that specialise this.
using PrepareFn = void (*)(Params&);
template <class Op>
struct Prepare {
  static void run(Params&) {}
};
#if defined(CASTLIKE_PACK_AVX2)
//: AVX2: whether a one-byte float source's table is its arithmetic (byte_float.hpp).
template <class Out>
struct Prepare<Gather<uint8_t, Out>> {
  static void run(Params& p) {
    if constexpr (sizeof(Out) >= 2) prepare_byte_float<Out>(p);
  }
};
#endif

struct Entry {
  const char* name;
  KernelFn fn;
  CheckFn check;
  int in_size;
  int out_size;
  int in_align;
  int out_align;
  int variants;
  PrepareFn prepare;
};

//: The family whose checks a kernel's constants take: its own, or for a FLOAT family run
//: through a widening (through_float.hpp, whose variant families derive from it), ThroughFloat's.
template <class Op, class = void>
struct ChecksOf {
  using type = Op;
};
template <class Op>
struct ChecksOf<Op, std::void_t<typename Op::Checked>> {
  using type = typename Op::Checked;
};

//: A kernel whose Variant 0, 1, ... are `Op, Ops...` (one Op: a family without variants).  The
//: variants of a family share their checks.
template <class Op, class... Ops>
constexpr Entry entry(const char* name) {
  using In = typename Op::InT;
  using Out = typename Op::OutT;
  return Entry{name,
               &map_variant<Op, Ops...>,
               &Check<typename ChecksOf<Op>::type>::ok,
               int(sizeof(In)),
               int(sizeof(Out)),
               int(alignof(In)),
               int(alignof(Out)),
               int(1 + sizeof...(Ops)),
               &Prepare<Op>::run};
}

//: Every family that takes an integer source, for the integer type I named `k` (BOOL to the
//: integers takes the uint8 ones, clamped to [0, 1]; to the floats, the "b8" entries below).
//: A kernel whose variants 0, 1, ... count - 1 are Family<0>, Family<1>, ...: the families whose
//: variant is a named value (flags, an enum) say so in kVariant, checked against the position.
template <template <int> class Family, int... I>
constexpr Entry variants_entry(const char* name, std::integer_sequence<int, I...>) {
  static_assert(((Family<I>::kVariant == I) && ...), "a variant's position is its value");
  return entry<Family<I>...>(name);
}
template <template <int> class Family, int Count>
constexpr Entry variants_entry(const char* name) {
  return variants_entry<Family>(name, std::make_integer_sequence<int, Count>());
}
//: The BFLOAT16 families, whose variant is a BFloat16Rounding.
template <template <BFloat16Rounding> class Family>
constexpr Entry bfloat16_entry(const char* name) {
  using R = BFloat16Rounding;
  static_assert(int(R::kOnce) == 0 && int(R::kNearestFloatFirst) == 1 && int(R::kTruncate) == 2,
                "a variant's position is its value");
  return entry<Family<R::kOnce>, Family<R::kNearestFloatFirst>, Family<R::kTruncate>>(name);
}
template <BFloat16Rounding R>
using DoubleToBFloat16 = DoubleToHalf<BFloat16, R>;
//: FloatToSubByte, whose variant is a SubByteRounding.
template <class F>
constexpr Entry sub_byte_entry(const char* name) {
  using R = SubByteRounding;
  static_assert(int(R::kHalfEven) == 0 && int(R::kTowardZero) == 1,
                "a variant's position is its value");
  return entry<FloatToSubByte<F, R::kHalfEven>, FloatToSubByte<F, R::kTowardZero>>(name);
}
template <class I>
struct IntToBFloat16Of {
  template <BFloat16Rounding R>
  using Op = IntToBFloat16<I, R>;
};
template <int Flags>
using SmallFloatOfFloat = SmallFloat<FloatBits, Flags>;
template <int Flags>
using SmallFloatOfDouble = SmallFloat<DoubleBits, Flags>;
template <int Variant>
using E8M0OfFloat = E8M0<FloatBits, Variant>;
template <int Variant>
using E8M0OfDouble = E8M0<DoubleBits, Variant>;

#define CASTLIKE_INTEGER_SOURCE(I, k)                                                       \
  entry<FloatClass<Integer<I>, 0>, FloatClass<Integer<I>, 1>>("float_class:" k ":u8"),      \
      entry<IntToFloat16<I>>("float16:" k ":u16"),                                          \
      bfloat16_entry<IntToBFloat16Of<I>::template Op>("bfloat16:" k ":u16"),              \
      entry<Convert<I, float>>("convert:" k ":f32"),                                        \
      entry<Convert<I, double>>("convert:" k ":f64"),                                       \
      entry<IntToInt<I, uint8_t, 0>, IntToInt<I, uint8_t, 1>>("int_to_int:" k ":u8"),      \
      entry<IntToInt<I, uint16_t, 0>, IntToInt<I, uint16_t, 1>>("int_to_int:" k ":u16"),   \
      entry<IntToInt<I, uint32_t, 0>, IntToInt<I, uint32_t, 1>>("int_to_int:" k ":u32"),   \
      entry<IntToInt<I, uint64_t, 0>, IntToInt<I, uint64_t, 1>>("int_to_int:" k ":u64")

//: The FLOAT families on FLOAT16 or BFLOAT16 (H) named `k` (through_float.hpp): castlike._native.routes
//: takes one only where it gave the spec's table for every pattern.
#define CASTLIKE_HALF_SOURCE(H, k)                                                          \
  variants_entry<HalfOf<H, SmallFloatOfFloat>::Op, (kInfIsNan | kFixedSpecials) + 1>(      \
      "small_float:" k ":u8"),                                                              \
      variants_entry<HalfOf<H, E8M0OfFloat>::Op, 6>("e8m0:" k ":u8"),                       \
      entry<FromHalf<H, FloatToInt<float, int8_t>>>("float_to_int:" k ":i8"),               \
      entry<FromHalf<H, FloatToInt<float, uint8_t>>>("float_to_int:" k ":u8"),              \
      entry<FromHalf<H, FloatToInt<float, int16_t>>>("float_to_int:" k ":i16"),             \
      entry<FromHalf<H, FloatToInt<float, uint16_t>>>("float_to_int:" k ":u16"),            \
      entry<FromHalf<H, FloatToInt<float, int32_t>>>("float_to_int:" k ":i32"),             \
      entry<FromHalf<H, FloatToInt<float, uint32_t>>>("float_to_int:" k ":u32"),            \
      entry<FromHalf<H, FloatToInt<float, int64_t>>>("float_to_int:" k ":i64"),             \
      entry<FromHalf<H, FloatToInt<float, uint64_t>>>("float_to_int:" k ":u64"),            \
      entry<FromHalf<H, FloatToSubByte<float, SubByteRounding::kHalfEven>>,                 \
            FromHalf<H, FloatToSubByte<float, SubByteRounding::kTowardZero>>>(              \
          "float_to_sub_byte:" k ":u8")

//: Integers of 16 bits or more (I, named `k`) into the small floats through the FLOAT kernels
//: (through_float.hpp): clamped into float8/float6/float4, rounded to odd into FLOAT8E8M0.
#define CASTLIKE_INTEGER_THROUGH_FLOAT(I, k)                                                \
  variants_entry<ThroughFloatOf<ClampedIntegerBits<I>, SmallFloatOfFloat>::Op,              \
                 (kInfIsNan | kFixedSpecials) + 1>("small_float:" k ":u8"),                 \
      variants_entry<ThroughFloatOf<OddIntegerBits<I>, E8M0OfFloat>::Op, 6>("e8m0:" k ":u8")

// Names read "<family>:<source storage>:<target storage>"; castlike._native.routes builds them.
const Entry kEntries[] = {
    CASTLIKE_INTEGER_SOURCE(int8_t, "i8"),
    CASTLIKE_INTEGER_SOURCE(uint8_t, "u8"),
    CASTLIKE_INTEGER_SOURCE(int16_t, "i16"),
    CASTLIKE_INTEGER_SOURCE(uint16_t, "u16"),
    CASTLIKE_INTEGER_SOURCE(int32_t, "i32"),
    CASTLIKE_INTEGER_SOURCE(uint32_t, "u32"),
    CASTLIKE_INTEGER_SOURCE(int64_t, "i64"),
    CASTLIKE_INTEGER_SOURCE(uint64_t, "u64"),
    CASTLIKE_INTEGER_THROUGH_FLOAT(int16_t, "i16"),
    CASTLIKE_INTEGER_THROUGH_FLOAT(uint16_t, "u16"),
    CASTLIKE_INTEGER_THROUGH_FLOAT(int32_t, "i32"),
    CASTLIKE_INTEGER_THROUGH_FLOAT(uint32_t, "u32"),
    CASTLIKE_INTEGER_THROUGH_FLOAT(int64_t, "i64"),
    CASTLIKE_INTEGER_THROUGH_FLOAT(uint64_t, "u64"),
    // BOOL ("b8") to the floats whose kernels read the byte as a number; to BOOL, integers and
    // the small floats, routes picks kernels that read any byte as R8 says.  0 and 1 are exact
    // in every float: BFLOAT16 takes the integer kernel's fastest variant (through FLOAT).
    entry<FromBool<Convert<uint8_t, float>>>("convert:b8:f32"),
    entry<FromBool<Convert<uint8_t, double>>>("convert:b8:f64"),
    entry<FromBool<IntToFloat16<uint8_t>>>("float16:b8:u16"),
    entry<FromBool<IntToBFloat16<uint8_t, BFloat16Rounding::kNearestFloatFirst>>>(
        "bfloat16:b8:u16"),
    entry<Gather<uint8_t, uint8_t>>("gather:u8:u8"),
    entry<Gather<uint8_t, uint16_t>>("gather:u8:u16"),
    entry<Gather<uint8_t, uint32_t>>("gather:u8:u32"),
    entry<Gather<uint8_t, uint64_t>>("gather:u8:u64"),
    entry<Gather<uint16_t, uint8_t>>("gather:u16:u8"),
    entry<Gather<uint16_t, uint16_t>>("gather:u16:u16"),
    entry<Gather<uint16_t, uint32_t>>("gather:u16:u32"),
    entry<Gather<uint16_t, uint64_t>>("gather:u16:u64"),
    entry<FloatClass<FloatBits>>("float_class:f32:u8"),
    entry<FloatClass<DoubleBits, 0>, FloatClass<DoubleBits, 1>>("float_class:f64:u8"),
    entry<DoubleClass>("double_class:f64:u8"),
    // The small floats by arithmetic (small_float.hpp): SmallFloatFlag sums, E8M0 round modes
    // and saturation.  DOUBLE rounds to nearest FLOAT first only with kNearestFloatFirst.
    variants_entry<SmallFloatOfFloat, (kInfIsNan | kFixedSpecials) + 1>("small_float:f32:u8"),
    variants_entry<SmallFloatOfDouble, (kNearestFloatFirst | kInfIsNan | kFixedSpecials) + 1>(
        "small_float:f64:u8"),
    variants_entry<E8M0OfFloat, 6>("e8m0:f32:u8"),
    variants_entry<E8M0OfDouble, 6>("e8m0:f64:u8"),
    entry<Float32ToFloat16>("float16:f32:u16"),
    entry<DoubleToHalf<Float16>>("float16:f64:u16"),
    bfloat16_entry<Float32ToBFloat16>("bfloat16:f32:u16"),
    bfloat16_entry<DoubleToBFloat16>("bfloat16:f64:u16"),
    entry<Widen<Float16, float>>("widen:f16:f32"),
    entry<Widen<Float16, double>>("widen:f16:f64"),
    entry<Widen<BFloat16, float>>("widen:bf16:f32"),
    entry<Widen<BFloat16, double>>("widen:bf16:f64"),
    entry<Convert<double, float>>("convert:f64:f32"),
    entry<Convert<float, double>>("convert:f32:f64"),
    entry<FloatToInt<float, int8_t>>("float_to_int:f32:i8"),
    entry<FloatToInt<float, uint8_t>>("float_to_int:f32:u8"),
    entry<FloatToInt<float, int16_t>>("float_to_int:f32:i16"),
    entry<FloatToInt<float, uint16_t>>("float_to_int:f32:u16"),
    entry<FloatToInt<float, int32_t>>("float_to_int:f32:i32"),
    entry<FloatToInt<float, uint32_t>>("float_to_int:f32:u32"),
    entry<FloatToInt<float, int64_t>>("float_to_int:f32:i64"),
    entry<FloatToInt<float, uint64_t>>("float_to_int:f32:u64"),
    entry<FloatToInt<double, int8_t>>("float_to_int:f64:i8"),
    entry<FloatToInt<double, uint8_t>>("float_to_int:f64:u8"),
    entry<FloatToInt<double, int16_t>>("float_to_int:f64:i16"),
    entry<FloatToInt<double, uint16_t>>("float_to_int:f64:u16"),
    entry<FloatToInt<double, int32_t>>("float_to_int:f64:i32"),
    entry<FloatToInt<double, uint32_t>>("float_to_int:f64:u32"),
    entry<FloatToInt<double, int64_t>>("float_to_int:f64:i64"),
    entry<FloatToInt<double, uint64_t>>("float_to_int:f64:u64"),
    sub_byte_entry<float>("float_to_sub_byte:f32:u8"),
    sub_byte_entry<double>("float_to_sub_byte:f64:u8"),
    CASTLIKE_HALF_SOURCE(Float16, "f16"),
    CASTLIKE_HALF_SOURCE(BFloat16, "bf16"),
    entry<FromHalf<BFloat16, Float32ToFloat16>>("float16:bf16:u16"),
    entry<FromHalf<Float16, Float32ToBFloat16<BFloat16Rounding::kOnce>>,
          FromHalf<Float16, Float32ToBFloat16<BFloat16Rounding::kNearestFloatFirst>>,
          FromHalf<Float16, Float32ToBFloat16<BFloat16Rounding::kTruncate>>>("bfloat16:f16:u16"),
    entry<NonZero<uint8_t>>("nonzero:u8:u8"),
    entry<NonZero<uint16_t>>("nonzero:u16:u8"),
    entry<NonZero<uint32_t>>("nonzero:u32:u8"),
    entry<NonZero<uint64_t>>("nonzero:u64:u8"),
};

#undef CASTLIKE_INTEGER_SOURCE
#undef CASTLIKE_HALF_SOURCE
#undef CASTLIKE_INTEGER_THROUGH_FLOAT

constexpr size_t kEntryCount = sizeof(kEntries) / sizeof(kEntries[0]);

//: Elements below which a cast stays on the calling thread, and the fewest elements a thread
//: is given.  (Measured when every call started its own threads: below 2**20 elements the
//: fastest kernels finish before a thread has started.)
constexpr Py_ssize_t kMinParallel = Py_ssize_t{1} << 20;
constexpr Py_ssize_t kMinPerThread = Py_ssize_t{1} << 18;
//: Below this many elements a cast keeps the GIL: releasing it costs more than the cast.
constexpr Py_ssize_t kKeepGil = 4096;
//: The smallest piece of a cast split across threads is this fraction of a thread's share (the
//: pool hands out pieces that shrink toward it: threads.hpp).  A sixteenth: the last pieces
//: are a few microseconds of work, and the first of them large.
constexpr size_t kPiecesPerThread = 16;

//: The pool of castlike._native._threads (set at import: the module fails to import without it).
const PoolApi* g_pool = nullptr;

// -- the boundary ------------------------------------------------------------------------------

//: Runs `body`, a function Python calls: a C++ exception becomes a Python error instead of
//: reaching std::terminate.  The forced unwind of a thread that the interpreter ends (at
//: shutdown, when it takes the GIL back) is not an error and goes on.
template <class R, class Body>
R boundary(R failed, Body&& body) {
  try {
    return body();
#if defined(__GLIBCXX__)
  } catch (abi::__forced_unwind&) {
    throw;
#endif
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& error) {
    PyErr_Format(PyExc_RuntimeError, "castlike's native kernels: %s", error.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "castlike's native kernels: an unknown C++ exception");
  }
  return failed;
}

// -- the Kernel type -------------------------------------------------------------------------

//: What a call of a kernel does, each at its own speed: cast, or cast and pack, or unpack and
//: cast (the packed calls work per element and per row).
enum Work : int { kCastWork, kPackWork, kUnpackWork, kWorkKinds };

//: Set once, by Kernel.__new__, and never changed but for the speeds: a call that released
//: the GIL, another thread's call and a cached kernel all read the same Params and table.
struct KernelObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;  // calls skip tuple building: a small cast is mostly overhead
  const Entry* entry;         // never NULL in a Kernel that __new__ returned
  Params params;
  unsigned char* table;  // the kernel's own padded copy of its table (NULL when there is none)
  bool initialised;      // __init__ ran (the one call that type(...) makes)
  //: Nanoseconds per unit of work on one thread, learned from the calls (0: none yet), by
  //: which the pool judges whether a cast is worth waking a worker for.  Calls from several
  //: threads may update it at once: each store is whole, and any recent value will do.
  std::atomic<float> ns_per_unit[kWorkKinds];
};

//: Bytes after every table (zeros): room for a wider read at the last entry.
constexpr size_t kTablePadding = 64;

//: One call's kernel, its buffers and Params: what a pool task runs.
struct Call {
  Call(const Entry* e, const void* source, void* target, const Params* p, Py_ssize_t n) noexcept
      : entry(e), in(source), out(target), params(p),
        cast_bytes(size_t(n) * size_t(e->in_size + e->out_size)) {}
  const Entry* entry;
  const void* in;
  void* out;
  const Params* params;
  size_t cast_bytes;  // input and output of the whole cast (its kernels' store decision)
};

void run_call(const void* context, size_t begin, size_t end) noexcept {
  const Call& call = *static_cast<const Call*>(context);
  const FpEnvGuard guard;  // per thread: each has its own floating-point environment
  const CastBytesScope whole(call.cast_bytes);  // per thread, as the pieces run on several
  call.entry->fn(call.in, call.out, begin, end, *call.params);
}

void Kernel_dealloc(PyObject* self) {
  auto* k = reinterpret_cast<KernelObject*>(self);
  PyMem_RawFree(k->table);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);  // instances of heap types own a reference to their type
}

const Entry* find_entry(const char* name) {
  for (size_t i = 0; i < kEntryCount; ++i) {
    if (std::strcmp(kEntries[i].name, name) == 0) return &kEntries[i];
  }
  return nullptr;
}

PyObject* Kernel_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames);

//: Marks "not given" for class_bits (every valid value is positive).
constexpr int kNoClassBits = INT_MIN;

//: A PyArg converter: an integer from 0 to 2**64 - 1, else OverflowError (the "K" format would
//: keep the low 64 bits of any int silently).
int to_uint64(PyObject* object, void* address) {
  PyObject* index = PyNumber_Index(object);
  if (index == nullptr) return 0;
  const unsigned long long value = PyLong_AsUnsignedLongLong(index);
  Py_DECREF(index);
  if (value == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return 0;
  *static_cast<unsigned long long*>(address) = value;
  return 1;
}

//: Kernel(name, *, table=None, mask=..., class_bits=..., variant=0, ...): the whole
//: construction; a Kernel is immutable from here on.
PyObject* kernel_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"name",          "table",        "mask",
                                   "class_bits",    "variant",      "lo",
                                   "hi",            "limit",        "pre_lo",
                                   "pre_hi",        "ilo",          "ihi",
                                   "nan_result",    "hi_result",    "mantissa_bits",
                                   "min_exponent",  "cap_code",     "sign_mask",
                                   "zero_results",  "cap_results",  nullptr};
  const char* name = nullptr;
  PyObject* table = Py_None;
  Params p;
  int class_bits = kNoClassBits;
  unsigned long long mask = p.mask, nan_result = 0, hi_result = 0;
  long long ilo = 0, ihi = 0;
  if (!PyArg_ParseTupleAndKeywords(
          args, kwargs, "s|$OO&iidddddLLO&O&iiii(ii)(ii)", const_cast<char**>(keywords), &name,
          &table, &to_uint64, &mask, &class_bits, &p.variant, &p.lo, &p.hi, &p.limit, &p.pre_lo,
          &p.pre_hi, &ilo, &ihi, &to_uint64, &nan_result, &to_uint64, &hi_result,
          &p.mantissa_bits, &p.min_exponent, &p.cap_code, &p.sign_mask, &p.zero_results[0],
          &p.zero_results[1], &p.cap_results[0], &p.cap_results[1])) {
    return nullptr;
  }
  const Entry* e = find_entry(name);
  if (e == nullptr) {
    PyErr_Format(PyExc_ValueError, "no native kernel named '%s' (kernel_names() lists them)",
                 name);
    return nullptr;
  }
  if (p.variant < 0 || p.variant >= e->variants) {
    PyErr_Format(PyExc_ValueError, "%s has variants 0 to %d, not %d", e->name, e->variants - 1,
                 p.variant);
    return nullptr;
  }
  p.mask = mask;
  p.class_bits = class_bits == kNoClassBits ? 0 : class_bits;
  p.ilo = ilo;
  p.ihi = ihi;
  p.nan_result = nan_result;
  p.hi_result = hi_result;

  Given given;
  given.class_bits = class_bits != kNoClassBits;
  Py_buffer view;
  if (table != Py_None) {
    if (PyObject_GetBuffer(table, &view, PyBUF_C_CONTIGUOUS) < 0) return nullptr;
    given.table = true;
    given.table_bytes = view.len;
    given.table_itemsize = view.itemsize;
  }
  Why why;
  if (!e->check(p, given, why)) {
    if (given.table) PyBuffer_Release(&view);
    PyErr_Format(PyExc_ValueError, "%s: %s", e->name, why.text);
    return nullptr;
  }
  unsigned char* copy = nullptr;
  if (given.table) {
    copy = static_cast<unsigned char*>(PyMem_RawCalloc(size_t(view.len) + kTablePadding, 1));
    if (copy != nullptr) std::memcpy(copy, view.buf, size_t(view.len));
    PyBuffer_Release(&view);
    if (copy == nullptr) return PyErr_NoMemory();
    p.table = copy;
  }
  e->prepare(p);
  auto* k = reinterpret_cast<KernelObject*>(type->tp_alloc(type, 0));
  if (k == nullptr) {
    PyMem_RawFree(copy);
    return nullptr;
  }
  k->vectorcall = Kernel_call;
  k->entry = e;
  k->params = p;
  k->table = copy;
  k->initialised = false;
  for (std::atomic<float>& speed : k->ns_per_unit) new (&speed) std::atomic<float>(0.0f);
  return reinterpret_cast<PyObject*>(k);
}

PyObject* Kernel_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  return boundary<PyObject*>(nullptr, [&] { return kernel_new(type, args, kwargs); });
}

//: Kernel.__init__ does nothing (__new__ built the kernel) and runs once: a second call would
//: change a kernel that a cache, another thread or a call without the GIL may be using.
int Kernel_init(PyObject* self, PyObject*, PyObject*) {
  auto* k = reinterpret_cast<KernelObject*>(self);
  if (k->initialised) {
    PyErr_SetString(PyExc_TypeError,
                    "a castlike Kernel cannot be changed after construction: make a new Kernel");
    return -1;
  }
  k->initialised = true;
  return 0;
}

//: Whether [a, a + a_len) and [b, b + b_len) share a byte.
bool overlap(const void* a, Py_ssize_t a_len, const void* b, Py_ssize_t b_len) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return a_len > 0 && b_len > 0 && x < y + uintptr_t(b_len) && y < x + uintptr_t(a_len);
}

//: New outputs of at least this many bytes ask for huge pages: NumPy's bound for its own new
//: arrays (its `madvise_hugepage`), so that a torch result is backed as a NumPy one is.
constexpr size_t kHugePageAdviceBytes = size_t{1} << 22;

//: Asks Linux to back the new output [p, p + bytes) with transparent huge pages where they are
//: given on request only ("madvise", the default of many distributions), as NumPy asks for its
//: arrays: the first touch of new memory then faults once per 2 MiB instead of once per
//: 4 KiB page.  torch's allocator does not ask, and its memory above glibc's mmap bound (at
//: most 32 MiB) is new from the system at every allocation, so that first touch was most of a
//: large cast's time: 10**7 FLOAT -> INT32 into a new torch tensor took 20.1 ms, 11.4 ms
//: with the advice (one thread, an Intel Xeon, Emerald Rapids).  Memory already in use (its
//: middle page resident: glibc gave out again what a freed tensor held) is left alone: it
//: faults no more, and the advice would only split its mapping and hand it to the kernel's
//: background collapsing.  The middle page, not the first: an allocator may write the start
//: of a new block (AddressSanitizer's malloc fills its first 4 KiB).  Only for memory the
//: caller has just allocated for the result (advice about other memory is not ours to give),
//: only whole pages inside it; an error (no THP, memory that cannot be advised) leaves
//: everything as it was, and no result depends on it.
void advise_huge_pages(void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes < kHugePageAdviceBytes) return;
  static const uintptr_t page = [] {
    const long size = sysconf(_SC_PAGESIZE);
    return size > 0 ? uintptr_t(size) : uintptr_t{4096};
  }();
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (start + page - 1) / page * page;
  const uintptr_t last = (start + bytes) / page * page;
  if (last <= first) return;
  const int saved = errno;
  const uintptr_t middle = first + (last - first) / page / 2 * page;
  unsigned char resident = 0;
  if (mincore(reinterpret_cast<void*>(middle), page, &resident) == 0 && (resident & 1) == 0) {
    (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }
  errno = saved;
#else
  (void)p;
  (void)bytes;
#endif
}

//: advise_huge_pages(out): the advice for a new output, any writable buffer (see
//: advise_huge_pages above).
PyObject* advise_huge_pages_of(PyObject*, PyObject* target) {
  Py_buffer out;
  if (PyObject_GetBuffer(target, &out, PyBUF_SIMPLE | PyBUF_WRITABLE) < 0) return nullptr;
  advise_huge_pages(out.buf, size_t(out.len));
  PyBuffer_Release(&out);
  Py_RETURN_NONE;
}

//: Takes the call's buffers and checks them: true with `in` and `out` held, or false with a
//: Python error set and nothing held.
bool get_buffers(const Entry& e, PyObject* source, PyObject* target, Py_buffer* in,
                 Py_buffer* out) {
  if (PyObject_GetBuffer(source, in, PyBUF_C_CONTIGUOUS) < 0) return false;
  if (PyObject_GetBuffer(target, out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
    PyBuffer_Release(in);
    return false;
  }
  if (in->len % e.in_size != 0 || out->len != in->len / e.in_size * e.out_size) {
    PyErr_Format(PyExc_ValueError,
                 "%s: %zd source bytes in elements of %d bytes do not match %zd output bytes in "
                 "elements of %d bytes",
                 e.name, in->len, e.in_size, out->len, e.out_size);
  } else if (reinterpret_cast<uintptr_t>(in->buf) % uintptr_t(e.in_align) != 0 ||
             reinterpret_cast<uintptr_t>(out->buf) % uintptr_t(e.out_align) != 0) {
    PyErr_Format(PyExc_ValueError,
                 "%s: the source must be aligned to %d bytes and the output to %d bytes (copy "
                 "them into new arrays)",
                 e.name, e.in_align, e.out_align);
  } else if (overlap(in->buf, in->len, out->buf, out->len)) {
    PyErr_Format(PyExc_ValueError, "%s: the source and the output share memory", e.name);
  } else {
    return true;
  }
  PyBuffer_Release(in);
  PyBuffer_Release(out);
  return false;
}

//: The `threads` argument of a call: at least 1 (LONG_MAX for an int beyond a C long), or false
//: with a ValueError that names the call (`usage`).
bool threads_argument(PyObject* arg, const char* usage, long* threads) {
  int overflow = 0;
  const long value = PyLong_AsLongAndOverflow(arg, &overflow);
  if (value == -1 && PyErr_Occurred()) return false;
  if (overflow < 0 || (overflow == 0 && value < 1)) {
    PyErr_Format(PyExc_ValueError, "%s: threads must be at least 1", usage);
    return false;
  }
  *threads = overflow > 0 ? LONG_MAX : value;
  return true;
}

//: The fewest elements the calling thread must have cast itself for its time to teach a kernel
//: its speed: fewer are a cast in the core's cache, faster an element than the large casts
//: the speed is for.
constexpr double kLearnElements = 1 << 16;

//: Folds one run's speed into what `speed` holds: a moving average that follows a machine
//: whose load changes, without one slow run (the thread lost its CPU) ruling it.
//: `elements_per_unit`: the run's elements over its units (rows, for some packed calls).
void learn_speed(std::atomic<float>& speed, const PoolReport& report, double elements_per_unit) {
  if (double(report.caller_units) * elements_per_unit < kLearnElements || report.caller_ns <= 0) {
    return;
  }
  const float seen = float(double(report.caller_ns) / double(report.caller_units));
  const float known = speed.load(std::memory_order_relaxed);
  speed.store(known > 0 ? known + (seen - known) / 4 : seen, std::memory_order_relaxed);
}

//: Runs `task` over [0, units), the work of `n` elements, as every call does: with the GIL held
//: on the caller below kKeepGil elements, else with the GIL released on at most `threads`
//: threads (one per kMinPerThread elements, and the pool caps it at its limit) in pieces of a
//: multiple of `align` units.  `speed` (the kernel's, for this kind of work) tells the pool
//: how long the work should take on one thread, and learns from the run.  Call it with the GIL
//: held; `task` must not touch Python.
void run_task(const PoolTask& task, Py_ssize_t n, size_t units, size_t align, long threads,
              std::atomic<float>& speed) {
  if (units == 0) {
    // nothing to do
  } else if (n < kKeepGil) {
    // With the GIL held: the interpreter runs one such cast at a time, on a thread that would
    // be running Python otherwise, so it takes no slot of the pool's limit.
    task.run(task.context, 0, units);
  } else {
    threads = std::min<long>({threads, std::max<Py_ssize_t>(1, n / kMinPerThread), INT_MAX});
    if (n < kMinParallel) threads = 1;
    const size_t per = (units + size_t(threads) * kPiecesPerThread - 1) /
                       (size_t(threads) * kPiecesPerThread);
    const size_t grain = threads == 1 ? units : (per + align - 1) / align * align;
    const double expected = double(speed.load(std::memory_order_relaxed)) * double(units);
    const long expected_ns = long(std::min(expected, 1e15));  // 0 while the speed is unknown
    // A cast too small to learn from is not timed (two clock reads of a few microseconds' cast).
    PoolReport report;
    PoolReport* const timed = double(n) >= kLearnElements ? &report : nullptr;
    // Nothing below throws or touches Python until the GIL is back.
    Py_BEGIN_ALLOW_THREADS;
    g_pool->run(task, units, grain, int(threads), expected_ns, timed);
    Py_END_ALLOW_THREADS;
    if (timed != nullptr) learn_speed(speed, report, double(n) / double(units));
  }
}

//: kernel(source, out, threads): cast the C-contiguous buffer `source` into `out` on at most
//: `threads` threads (and at most the pool's limit).
PyObject* kernel_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* k = reinterpret_cast<KernelObject*>(self);
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs != 3 || kwnames != nullptr) {
    PyErr_SetString(PyExc_TypeError, "kernel(source, out, threads) takes 3 positional arguments");
    return nullptr;
  }
  long threads = 1;
  if (!threads_argument(args[2], "kernel(source, out, threads)", &threads)) return nullptr;
  const Entry& e = *k->entry;
  Py_buffer in, out;
  if (!get_buffers(e, args[0], args[1], &in, &out)) return nullptr;
  const Py_ssize_t n = in.len / e.in_size;
  const Call call{&e, in.buf, out.buf, &k->params, n};
  run_task(PoolTask{&run_call, &call}, n, size_t(n), 64, threads, k->ns_per_unit[kCastWork]);
  PyBuffer_Release(&in);
  PyBuffer_Release(&out);
  Py_RETURN_NONE;
}

// -- the repeat path ---------------------------------------------------------------------------

//: Whether `array`'s dtype is in machine byte order (its `dtype.isnative`): 1, 0 (also for an
//: object without a dtype), or -1 with a Python error set.
int is_native_order(PyObject* array) {
  PyObject* dtype = PyObject_GetAttrString(array, "dtype");
  if (dtype == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 0;
  }
  PyObject* native = PyObject_GetAttrString(dtype, "isnative");
  Py_DECREF(dtype);
  if (native == nullptr) return -1;
  const int answer = PyObject_IsTrue(native);
  Py_DECREF(native);
  return answer;
}

//: The shape of a buffer as a tuple of ints.
PyObject* shape_of(const Py_buffer& view) {
  PyObject* shape = PyTuple_New(view.ndim);
  if (shape == nullptr) return nullptr;
  for (int d = 0; d < view.ndim; ++d) {
    PyObject* length = PyLong_FromSsize_t(view.shape[d]);
    if (length == nullptr) {
      Py_DECREF(shape);
      return nullptr;
    }
    PyTuple_SET_ITEM(shape, d, length);
  }
  return shape;
}

//: kernel.repeat(empty, dtype, fallback, source): the cast of a NumPy array `source` into a new
//: array `empty(source.shape, dtype)`, on the process's thread limit, where `source` is
//: C-contiguous, aligned and in machine byte order; `fallback(source)` for any other.  One C
//: call for the repeat path's usual case: at 10**6 elements each Python layer it replaces cost a
//: few microseconds, run with the caches cold after the kernel's pass.
PyObject* kernel_repeat(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError,
                    "kernel.repeat(empty, dtype, fallback, source) takes 4 positional arguments");
    return nullptr;
  }
  PyObject *empty = args[0], *dtype = args[1], *fallback = args[2], *source = args[3];
  auto* k = reinterpret_cast<KernelObject*>(self);
  const Entry& e = *k->entry;
  const int native = is_native_order(source);
  if (native < 0) return nullptr;
  Py_buffer in;
  if (native == 0 || PyObject_GetBuffer(source, &in, PyBUF_C_CONTIGUOUS) < 0) {
    PyErr_Clear();  // not contiguous: the fallback copies it (or says what is wrong)
    return PyObject_CallOneArg(fallback, source);
  }
  if (in.len % e.in_size != 0 ||
      reinterpret_cast<uintptr_t>(in.buf) % uintptr_t(e.in_align) != 0) {
    PyBuffer_Release(&in);
    return PyObject_CallOneArg(fallback, source);
  }
  PyObject* shape = shape_of(in);
  PyObject* result = nullptr;
  if (shape != nullptr) {
    PyObject* const empty_args[] = {shape, dtype};
    result = PyObject_Vectorcall(empty, empty_args, 2, nullptr);
    Py_DECREF(shape);
  }
  Py_buffer out;
  if (result == nullptr ||
      PyObject_GetBuffer(result, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
    Py_XDECREF(result);
    PyBuffer_Release(&in);
    return nullptr;
  }
  const Py_ssize_t n = in.len / e.in_size;
  if (out.len != n * e.out_size ||
      reinterpret_cast<uintptr_t>(out.buf) % uintptr_t(e.out_align) != 0) {
    PyErr_Format(PyExc_ValueError, "%s: kernel.repeat's empty() gave an unfit output", e.name);
    Py_DECREF(result);
    result = nullptr;
  } else {
    const Call call{&e, in.buf, out.buf, &k->params, n};
    run_task(PoolTask{&run_call, &call}, n, size_t(n), 64, g_pool->limit(),
             k->ns_per_unit[kCastWork]);
  }
  PyBuffer_Release(&out);
  PyBuffer_Release(&in);
  return result;
}

PyObject* Kernel_repeat(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  return boundary<PyObject*>(nullptr, [&] { return kernel_repeat(self, args, nargs); });
}

// -- the repeat path for torch tensors -------------------------------------------------------

//: What kernel.repeat_tensor reads of torch, taken from the torch module that is already
//: imported (this module never imports it: a tensor exists only once torch is), once.  Names
//: are interned, so each attribute lookup hashes nothing.
struct TorchNames {
  PyObject* tensor = nullptr;       // torch.Tensor (exactly: a subclass may override anything)
  PyObject* strided = nullptr;      // torch.strided
  PyObject* empty_like = nullptr;   // torch.empty_like
  PyObject* function_mode = nullptr;  // torch._C._is_torch_function_mode_enabled
  PyObject* dtype_keyword = nullptr;  // ("dtype",), the keyword names of empty_like's call
  PyObject* is_cpu = nullptr;
  PyObject* layout = nullptr;
  PyObject* is_nested = nullptr;
  PyObject* is_neg = nullptr;
  PyObject* is_zerotensor = nullptr;
  PyObject* is_contiguous = nullptr;
  PyObject* data_ptr = nullptr;
  PyObject* nbytes = nullptr;
};
TorchNames g_torch;

//: Fills g_torch: 1, 0 when torch is not imported (nothing filled), or -1 with a Python error.
int torch_names() {
  if (g_torch.tensor != nullptr) return 1;
  PyObject* name = PyUnicode_FromString("torch");
  if (name == nullptr) return -1;
  PyObject* torch = PyImport_GetModule(name);
  Py_DECREF(name);
  if (torch == nullptr) return PyErr_Occurred() ? -1 : 0;
  TorchNames found;
  // Each step only while every one before it succeeded (no call with an error pending).
  PyObject* c_module = PyObject_GetAttrString(torch, "_C");
  bool complete = c_module != nullptr &&
                  (found.tensor = PyObject_GetAttrString(torch, "Tensor")) != nullptr &&
                  (found.strided = PyObject_GetAttrString(torch, "strided")) != nullptr &&
                  (found.empty_like = PyObject_GetAttrString(torch, "empty_like")) != nullptr &&
                  (found.function_mode = PyObject_GetAttrString(
                       c_module, "_is_torch_function_mode_enabled")) != nullptr &&
                  (found.dtype_keyword = Py_BuildValue("(s)", "dtype")) != nullptr &&
                  PyType_Check(found.tensor);
  Py_XDECREF(c_module);
  Py_DECREF(torch);
  PyObject** names[] = {&found.is_cpu,        &found.layout,        &found.is_nested,
                        &found.is_neg,        &found.is_zerotensor, &found.is_contiguous,
                        &found.data_ptr,      &found.nbytes};
  const char* texts[] = {"is_cpu", "layout",        "is_nested", "is_neg",
                         "_is_zerotensor", "is_contiguous", "data_ptr", "nbytes"};
  for (size_t i = 0; complete && i < sizeof texts / sizeof *texts; ++i) {
    *names[i] = PyUnicode_InternFromString(texts[i]);
    complete = *names[i] != nullptr;
  }
  if (!complete) {
    PyObject* held[] = {found.tensor, found.strided, found.empty_like, found.function_mode,
                        found.dtype_keyword};
    for (PyObject* object : held) Py_XDECREF(object);
    for (PyObject** object : names) Py_XDECREF(*object);
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_RuntimeError, "castlike's native kernels: torch.Tensor is not a type");
    }
    return -1;
  }
  g_torch = found;  // held for the process's life, as the module that owns them is
  return 1;
}

//: Whether `object.<name>` (an attribute, or a method called without arguments) is `expected`
//: (True, False, torch.strided: singletons): 1, 0, or -1 with a Python error set.
int attribute_is(PyObject* object, PyObject* name, PyObject* expected, bool call) {
  PyObject* value = call ? PyObject_CallMethodNoArgs(object, name) : PyObject_GetAttr(object, name);
  if (value == nullptr) return -1;
  const int answer = value == expected;
  Py_DECREF(value);
  return answer;
}

//: The memory of a tensor whose bytes the kernel may read or write as they lie: exactly a
//: torch.Tensor, on the CPU, strided, not nested, contiguous, with no lazy negation (the neg bit
//: of x.conj().imag: memory holds the values' negatives) and real storage (a ZeroTensor has
//: none).  1 with `*data` and `*bytes` set, 0 for anything else (the caller's fallback takes
//: it), or -1 with a Python error set.  Each test asks torch, through the attributes Python
//: code would read; none of them can run code of the caller's while no __torch_function__
//: mode is active, which the caller checks.
int tensor_memory(PyObject* tensor, void** data, Py_ssize_t* bytes) {
  if (Py_TYPE(tensor) != reinterpret_cast<PyTypeObject*>(g_torch.tensor)) return 0;
  struct Test {
    PyObject* name;
    PyObject* expected;
    bool call;
  };
  const Test tests[] = {
      {g_torch.is_cpu, Py_True, false},         {g_torch.layout, g_torch.strided, false},
      {g_torch.is_nested, Py_False, false},     {g_torch.is_neg, Py_False, true},
      {g_torch.is_zerotensor, Py_False, true},  {g_torch.is_contiguous, Py_True, true}};
  for (const Test& test : tests) {
    const int answer = attribute_is(tensor, test.name, test.expected, test.call);
    if (answer <= 0) return answer;
  }
  PyObject* length = PyObject_GetAttr(tensor, g_torch.nbytes);
  if (length == nullptr) return -1;
  *bytes = PyLong_AsSsize_t(length);
  Py_DECREF(length);
  if (*bytes < 0) return PyErr_Occurred() ? -1 : 0;
  PyObject* address = PyObject_CallMethodNoArgs(tensor, g_torch.data_ptr);
  if (address == nullptr) return -1;
  *data = PyLong_AsVoidPtr(address);
  Py_DECREF(address);
  if (PyErr_Occurred()) return -1;
  return *data != nullptr || *bytes == 0 ? 1 : 0;
}

//: kernel.repeat_tensor(dtype, fallback, source): the cast of a CPU tensor `source` into a new
//: torch.empty_like(source, dtype=dtype), on the thread limit of the process, where
//: tensor_memory takes both and `source` is aligned; fallback(source) for any other (and
//: while a __torch_function__ mode is active).  One C call for the repeat path of torch, as
//: kernel.repeat is for NumPy: NumPy views of a tensor and of its result (what the kernel's
//: buffers otherwise need) cost 3 of a repeat call's 6 microseconds at 10**3 elements.
PyObject* kernel_repeat_tensor(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError,
                    "kernel.repeat_tensor(dtype, fallback, source) takes 3 positional arguments");
    return nullptr;
  }
  PyObject *dtype = args[0], *fallback = args[1], *source = args[2];
  const Entry& e = *reinterpret_cast<KernelObject*>(self)->entry;
  const int names = torch_names();
  if (names < 0) return nullptr;
  if (names == 0) return PyObject_CallOneArg(fallback, source);
  PyObject* mode = PyObject_CallNoArgs(g_torch.function_mode);
  if (mode == nullptr) return nullptr;
  const bool plain = mode == Py_False;
  Py_DECREF(mode);
  void* in = nullptr;
  Py_ssize_t in_len = 0;
  const int usable = plain ? tensor_memory(source, &in, &in_len) : 0;
  if (usable < 0) return nullptr;
  if (usable == 0 || in_len % e.in_size != 0 ||
      reinterpret_cast<uintptr_t>(in) % uintptr_t(e.in_align) != 0) {
    return PyObject_CallOneArg(fallback, source);
  }
  PyObject* const empty_args[] = {source, dtype};
  PyObject* result = PyObject_Vectorcall(g_torch.empty_like, empty_args, 1, g_torch.dtype_keyword);
  if (result == nullptr) return nullptr;
  void* out = nullptr;
  Py_ssize_t out_len = 0;
  const int fit = tensor_memory(result, &out, &out_len);
  const Py_ssize_t n = in_len / e.in_size;
  if (fit < 0) {
    Py_DECREF(result);
    return nullptr;
  }
  if (fit == 0 || overlap(in, in_len, out, out_len)) {
    Py_DECREF(result);  // not a plain new tensor (a dispatch mode's, say): the fallback's
    return PyObject_CallOneArg(fallback, source);
  }
  if (out_len != n * e.out_size || reinterpret_cast<uintptr_t>(out) % uintptr_t(e.out_align) != 0) {
    PyErr_Format(PyExc_ValueError, "%s: kernel.repeat_tensor's dtype does not fit the kernel",
                 e.name);
    Py_DECREF(result);
    return nullptr;
  }
  advise_huge_pages(out, size_t(out_len));  // a new tensor of torch's: see advise_huge_pages
  auto* k = reinterpret_cast<KernelObject*>(self);
  const Call call{&e, in, out, &k->params, n};
  run_task(PoolTask{&run_call, &call}, n, size_t(n), 64, g_pool->limit(),
           k->ns_per_unit[kCastWork]);
  return result;
}

PyObject* Kernel_repeat_tensor(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  return boundary<PyObject*>(nullptr, [&] { return kernel_repeat_tensor(self, args, nargs); });
}

// -- packed sub-byte data ----------------------------------------------------------------------

//: Elements that packed() and unpacked() cast at a time through a stack buffer of one code per
//: byte: small enough that the buffer stays in the first-level cache between the kernel and
//: the packing, large enough that a kernel call's set-up is paid rarely (2048 cost FLOAT ->
//: FLOAT4E2M1 at 10**6 about 30% over the unpacked cast, 8192 about 8%), and a multiple of 8,
//: so that a block that starts inside a row starts on a byte of the packed data (8 elements of
//: `bits` bits take `bits` bytes).
constexpr size_t kPackBlock = 8192;
static_assert(kPackBlock % 8 == 0, "a block inside a row starts on a byte boundary");

//: Packed bytes of a row of n elements of `bits` bits (2, 4 or 6): ceil(n * bits / 8).
size_t packed_bytes(size_t n, int bits) {
  switch (bits) {
    case 2:
      return Packing<2>::bytes(n);
    case 4:
      return Packing<4>::bytes(n);
    default:
      return Packing<6>::bytes(n);
  }
}

//: One packed() or unpacked() call, a pool task's context: the kernel, the caller's buffers
//: (the elements on one side, the packed bytes on the other) and the rows.
struct PackedCall {
  const Entry* entry;
  const unsigned char* in;
  unsigned char* out;
  const Params* params;
  size_t row;        // elements a row
  size_t row_bytes;  // packed bytes a row
  //: Whether a row fills whole bytes (row * bits % 8 == 0): then the packed rows form one
  //: unbroken bit stream and the units of work are elements, else whole rows.
  bool flat;
};

//: `count` elements from element `first` of one unbroken run of the bit stream (a flat range or
//: one row), packed from byte `first_byte` on: a block of kPackBlock elements at a time, cast
//: into the stack buffer then packed (Pack), or unpacked into it then cast.
template <int Bits, bool Pack>
void packed_run(const PackedCall& c, size_t first, size_t first_byte, size_t count) noexcept {
  const Entry& e = *c.entry;
  alignas(64) uint8_t codes[kPackBlock];
  for (size_t done = 0; done < count; done += kPackBlock) {
    const size_t m = std::min(kPackBlock, count - done);
    const size_t element = first + done;
    const size_t byte = first_byte + done / 8 * size_t(Bits);
    // The kernel indexes from 0: its pointers are the block's (no pointer before an array).
    if constexpr (Pack) {
      e.fn(c.in + element * size_t(e.in_size), codes, 0, m, *c.params);
      pack<Bits>(codes, m, c.out + byte);
    } else {
      unpack<Bits>(c.in + byte, m, codes);
      e.fn(codes, c.out + element * size_t(e.out_size), 0, m, *c.params);
    }
  }
}

//: Rows [first_row, first_row + rows) of at most kPackBlock elements that do not fill whole
//: bytes.  The kernel still runs on whole blocks of kPackBlock elements of the rows' contiguous
//: elements, which straddle rows: a block of whole rows would end in the kernel's scalar tail on
//: every call (twice as slow for some row lengths).  The buffer holds a block behind the part of
//: a row that the last block left over; each complete row is packed (or unpacked) on its own.
template <int Bits, bool Pack>
void packed_short_rows(const PackedCall& c, size_t first_row, size_t rows) noexcept {
  const Entry& e = *c.entry;
  const size_t len = c.row;
  alignas(64) uint8_t codes[2 * kPackBlock];
  size_t element = first_row * len;  // the element of codes[0]
  size_t have = 0;                   // codes held, from codes[0]
  if constexpr (Pack) {
    const size_t end = element + rows * len;
    unsigned char* out = c.out + first_row * c.row_bytes;
    size_t next = element;  // the next element to cast
    while (next < end) {
      const size_t m = std::min(kPackBlock, end - next);
      e.fn(c.in + next * size_t(e.in_size), codes + have, 0, m, *c.params);
      next += m;
      have += m;
      size_t used = 0;
      for (; have - used >= len; used += len, out += c.row_bytes) {
        pack<Bits>(codes + used, len, out);
      }
      have -= used;
      std::memmove(codes, codes + used, have);  // less than a row
    }
  } else {
    const unsigned char* in = c.in + first_row * c.row_bytes;
    size_t left = rows;  // rows still to unpack
    while (left > 0 || have > 0) {
      for (; left > 0 && have < kPackBlock; --left, in += c.row_bytes, have += len) {
        unpack<Bits>(in, len, codes + have);
      }
      const size_t m = std::min(kPackBlock, have);
      e.fn(codes, c.out + element * size_t(e.out_size), 0, m, *c.params);
      element += m;
      have -= m;
      std::memmove(codes, codes + m, have);  // less than a row
    }
  }
}

//: A pool task of packed() (Pack) or unpacked(): units [begin, end) are elements of the one bit
//: stream (flat: `begin` is a multiple of 8, as every piece is) or whole rows.
template <int Bits, bool Pack>
void run_packed(const void* context, size_t begin, size_t end) noexcept {
  const PackedCall& c = *static_cast<const PackedCall*>(context);
  const FpEnvGuard guard;  // per thread: each has its own floating-point environment
  if (c.flat) {
    packed_run<Bits, Pack>(c, begin, begin / 8 * size_t(Bits), end - begin);
  } else if (c.row <= kPackBlock) {
    packed_short_rows<Bits, Pack>(c, begin, end - begin);
  } else {
    for (size_t r = begin; r < end; ++r) {
      packed_run<Bits, Pack>(c, r * c.row, r * c.row_bytes, c.row);
    }
  }
}

template <bool Pack>
PoolTask packed_task(int bits, const PackedCall* call) {
  switch (bits) {
    case 2:
      return PoolTask{&run_packed<2, Pack>, call};
    case 4:
      return PoolTask{&run_packed<4, Pack>, call};
    default:
      return PoolTask{&run_packed<6, Pack>, call};
  }
}

//: The `row` and `bits` arguments of packed() and unpacked(): row from 1 to PY_SSIZE_T_MAX,
//: bits 2, 4 or 6; else false with a ValueError naming the kernel and the method.
bool row_and_bits(const Entry& e, const char* method, PyObject* row_arg, PyObject* bits_arg,
                  size_t* row, int* bits) {
  int overflow = 0;
  const long long r = PyLong_AsLongLongAndOverflow(row_arg, &overflow);
  if (r == -1 && PyErr_Occurred()) return false;
  if (overflow != 0 || r < 1 || r > PY_SSIZE_T_MAX) {
    PyErr_Format(PyExc_ValueError, "%s: %s(): row must be from 1 to %zd elements", e.name,
                 method, PY_SSIZE_T_MAX);
    return false;
  }
  const long b = PyLong_AsLongAndOverflow(bits_arg, &overflow);
  if (b == -1 && PyErr_Occurred()) return false;
  if (overflow != 0 || (b != 2 && b != 4 && b != 6)) {
    PyErr_Format(PyExc_ValueError, "%s: %s(): bits must be 2, 4 or 6 (ONNX's sub-byte widths)",
                 e.name, method);
    return false;
  }
  *row = size_t(r);
  *bits = int(b);
  return true;
}

//: Takes and checks the buffers of packed() (Pack: `source` holds elements, `target` the packed
//: rows) or unpacked() (the other way round), as get_buffers does: true with `in` and `out`
//: held and the number of rows in `rows`, or false with a Python error set and nothing held.
bool get_packed_buffers(const Entry& e, bool pack, PyObject* source, PyObject* target,
                        size_t row, int bits, Py_buffer* in, Py_buffer* out, size_t* rows) {
  const char* method = pack ? "packed" : "unpacked";
  if (PyObject_GetBuffer(source, in, PyBUF_C_CONTIGUOUS) < 0) return false;
  if (PyObject_GetBuffer(target, out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
    PyBuffer_Release(in);
    return false;
  }
  const Py_ssize_t elements_len = pack ? in->len : out->len;
  const Py_ssize_t packed_len = pack ? out->len : in->len;
  const int size = pack ? e.in_size : e.out_size;
  const char* elements_side = pack ? "source" : "output";
  const char* packed_side = pack ? "output" : "source";
  const size_t row_bytes = packed_bytes(row, bits);
  // Whole rows of elements; the packed bytes (at most as many as the elements) cannot overflow.
  const bool whole_rows = elements_len % size == 0 && size_t(elements_len / size) % row == 0;
  *rows = whole_rows ? size_t(elements_len / size) / row : 0;
  if (!whole_rows) {
    PyErr_Format(PyExc_ValueError,
                 "%s: %s(): the %s's %zd bytes are not whole rows of %zu elements of %d bytes",
                 e.name, method, elements_side, elements_len, row, size);
  } else if (size_t(packed_len) != *rows * row_bytes) {
    PyErr_Format(PyExc_ValueError,
                 "%s: %s(): %zu rows of %zu elements of %d bits take %zu packed bytes, the %s "
                 "has %zd",
                 e.name, method, *rows, row, bits, *rows * row_bytes, packed_side, packed_len);
  } else if (reinterpret_cast<uintptr_t>(in->buf) % uintptr_t(e.in_align) != 0 ||
             reinterpret_cast<uintptr_t>(out->buf) % uintptr_t(e.out_align) != 0) {
    PyErr_Format(PyExc_ValueError,
                 "%s: %s(): the source must be aligned to %d bytes and the output to %d bytes "
                 "(copy them into new arrays)",
                 e.name, method, pack ? e.in_align : 1, pack ? 1 : e.out_align);
  } else if (overlap(in->buf, in->len, out->buf, out->len)) {
    PyErr_Format(PyExc_ValueError, "%s: %s(): the source and the output share memory", e.name,
                 method);
  } else {
    return true;
  }
  PyBuffer_Release(in);
  PyBuffer_Release(out);
  return false;
}

//: kernel.packed(source, out, row, bits, threads) (Pack) and kernel.unpacked(source, out, row,
//: bits, threads): the kernel's cast with ONNX's packing of `bits`-bit elements on the side of
//: the one-byte codes, rows of `row` elements each packed from a byte boundary.
template <bool Pack>
PyObject* packed_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  const char* usage = Pack ? "kernel.packed(source, out, row, bits, threads)"
                           : "kernel.unpacked(source, out, row, bits, threads)";
  const char* method = Pack ? "packed" : "unpacked";
  auto* k = reinterpret_cast<KernelObject*>(self);
  const Entry& e = *k->entry;
  if (nargs != 5) {
    PyErr_Format(PyExc_TypeError, "%s takes 5 positional arguments", usage);
    return nullptr;
  }
  // The codes' side is one byte an element: the kernel writes (Pack) or reads one code a byte.
  if ((Pack ? e.out_size : e.in_size) != 1) {
    PyErr_Format(PyExc_ValueError,
                 "%s: %s() needs a kernel that %s one byte an element (a sub-byte %s), this one "
                 "%s %d",
                 e.name, method, Pack ? "writes" : "reads", Pack ? "target" : "source",
                 Pack ? "writes" : "reads", Pack ? e.out_size : e.in_size);
    return nullptr;
  }
  size_t row = 0;
  int bits = 0;
  long threads = 1;
  if (!row_and_bits(e, method, args[2], args[3], &row, &bits) ||
      !threads_argument(args[4], usage, &threads)) {
    return nullptr;
  }
  Py_buffer in, out;
  size_t rows = 0;
  if (!get_packed_buffers(e, Pack, args[0], args[1], row, bits, &in, &out, &rows)) {
    return nullptr;
  }
  const PackedCall call{&e,
                        static_cast<const unsigned char*>(in.buf),
                        static_cast<unsigned char*>(out.buf),
                        &k->params,
                        row,
                        packed_bytes(row, bits),
                        row % 8 * size_t(bits) % 8 == 0};
  const size_t n = rows * row;
  // Flat: pieces of a multiple of 64 elements, so that each starts on a byte of the stream.
  run_task(packed_task<Pack>(bits, &call), Py_ssize_t(n), call.flat ? n : rows,
           call.flat ? 64 : 1, threads, k->ns_per_unit[Pack ? kPackWork : kUnpackWork]);
  PyBuffer_Release(&in);
  PyBuffer_Release(&out);
  Py_RETURN_NONE;
}

PyObject* Kernel_packed(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  return boundary<PyObject*>(nullptr, [&] { return packed_call<true>(self, args, nargs); });
}

PyObject* Kernel_unpacked(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  return boundary<PyObject*>(nullptr, [&] { return packed_call<false>(self, args, nargs); });
}

PyObject* Kernel_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return boundary<PyObject*>(nullptr, [&] { return kernel_call(self, args, nargsf, kwnames); });
}

PyObject* Kernel_tp_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  return PyVectorcall_Call(self, args, kwargs);
}

PyObject* Kernel_get_name(PyObject* self, void*) {
  auto* k = reinterpret_cast<KernelObject*>(self);
  return PyUnicode_FromString(k->entry != nullptr ? k->entry->name : "?");
}

PyGetSetDef Kernel_getset[] = {
    {"name", Kernel_get_name, nullptr, "The kernel's family:source:target name.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

//: METH_FASTCALL functions through the cast that CPython documents (a PyCFunction is how the
//: table stores every kind).
template <class F>
PyCFunction fastcall(F function) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(function));
}

PyMethodDef Kernel_methods[] = {
    {"repeat", fastcall(Kernel_repeat), METH_FASTCALL,
     "repeat(empty, dtype, fallback, source): the cast of `source` into a new array "
     "empty(source.shape, dtype), on the thread limit of the process, where `source` is a "
     "C-contiguous, aligned NumPy array in machine byte order; fallback(source) otherwise."},
    {"repeat_tensor", fastcall(Kernel_repeat_tensor), METH_FASTCALL,
     "repeat_tensor(dtype, fallback, source): the cast of `source` into a new "
     "torch.empty_like(source, dtype=dtype), on the thread limit of the process, where `source` "
     "is exactly a torch.Tensor on the CPU, contiguous, aligned, of real storage and no lazy "
     "negation, and no __torch_function__ mode is active; fallback(source) otherwise."},
    {"packed", fastcall(Kernel_packed), METH_FASTCALL,
     "packed(source, out, row, bits, threads): cast `source` (rows of `row` elements) and write "
     "each row packed at `bits` (2, 4 or 6) bits an element into `out`, from a byte boundary, "
     "as ONNX's raw_data; one pass over memory.  Kernels of one-byte targets only."},
    {"unpacked", fastcall(Kernel_unpacked), METH_FASTCALL,
     "unpacked(source, out, row, bits, threads): unpack rows of `row` elements of `bits` bits "
     "from `source` (packed as packed() writes them) and cast them into `out`; one pass over "
     "memory.  Kernels of one-byte sources only: the codes arrive zero-extended, as the "
     "sub-byte sources' kernels (which mask their input) read them."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef Kernel_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(KernelObject, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot Kernel_slots[] = {
    {Py_tp_doc, const_cast<char*>("Kernel(name, *, table=None, ...): one native cast, ready to run.")},
    {Py_tp_dealloc, reinterpret_cast<void*>(Kernel_dealloc)},
    {Py_tp_init, reinterpret_cast<void*>(Kernel_init)},
    {Py_tp_new, reinterpret_cast<void*>(Kernel_new)},
    {Py_tp_call, reinterpret_cast<void*>(Kernel_tp_call)},
    {Py_tp_getset, Kernel_getset},
    {Py_tp_methods, Kernel_methods},
    {Py_tp_members, Kernel_members},
    {0, nullptr}};

PyType_Spec Kernel_spec = {"castlike._native.Kernel", int(sizeof(KernelObject)), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, Kernel_slots};

// -- module functions --------------------------------------------------------------------------

PyObject* kernel_names(PyObject*, PyObject*) {
  PyObject* out = PyList_New(Py_ssize_t(kEntryCount));
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < kEntryCount; ++i) {
    PyObject* name = PyUnicode_FromString(kEntries[i].name);
    if (name == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, Py_ssize_t(i), name);
  }
  return out;
}

PyObject* cpu_features(PyObject*, PyObject*) {
  PyObject* out = PyDict_New();
  if (out == nullptr) return nullptr;
  auto put = [out](const char* name, bool value) {
    return PyDict_SetItemString(out, name, value ? Py_True : Py_False) == 0;
  };
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // x86-64-v3 (AVX2, F16C, FMA, BMI2 ...) and x86-64-v4 (AVX-512 F/BW/CD/DQ/VL) are what the
  // avx2 and avx512 modules are compiled for.
  const bool ok = put("x86-64-v3", __builtin_cpu_supports("x86-64-v3")) &&
                  put("x86-64-v4", __builtin_cpu_supports("x86-64-v4")) &&
                  put("avx2", __builtin_cpu_supports("avx2")) &&
                  put("f16c", __builtin_cpu_supports("f16c")) &&
                  put("fma", __builtin_cpu_supports("fma")) &&
                  put("bmi2", __builtin_cpu_supports("bmi2")) &&
                  put("avx512f", __builtin_cpu_supports("avx512f")) &&
                  put("avx512bw", __builtin_cpu_supports("avx512bw")) &&
                  put("avx512vl", __builtin_cpu_supports("avx512vl")) &&
                  put("avx512dq", __builtin_cpu_supports("avx512dq")) &&
                  put("avx512bf16", __builtin_cpu_supports("avx512bf16"));
#elif defined(__aarch64__)
  const bool ok = put("neon", true);
#else
  const bool ok = true;
#endif
  if (!ok) {
    Py_DECREF(out);
    return nullptr;
  }
  return out;
}

//: Testing hook: set the calling thread's FTZ/DAZ flags and rounding mode (0 nearest, 1 down,
//: 2 up, 3 toward zero) as a hostile caller might; returns the previous control word, which
//: `_restore_fp_environment` puts back.  The kernels must give the same bits either way.
PyObject* set_fp_environment(PyObject*, PyObject* args) {
  int flush = 0, rounding = 0;
  if (!PyArg_ParseTuple(args, "pi", &flush, &rounding)) return nullptr;
  if (rounding < 0 || rounding > 3) {
    PyErr_SetString(PyExc_ValueError, "rounding must be 0, 1, 2 or 3");
    return nullptr;
  }
#if defined(CASTLIKE_FPENV_X86)
  const unsigned int saved = _mm_getcsr();
  unsigned int csr = (saved & ~0x8040u & ~0x6000u) | (unsigned(rounding) << 13);
  if (flush) csr |= 0x8040u;  // FTZ and DAZ
  _mm_setcsr(csr);
  return PyLong_FromUnsignedLongLong(saved);
#elif defined(CASTLIKE_FPENV_AARCH64)
  std::uint64_t saved;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(saved));
  // AArch64 RMode: 0 nearest, 1 up, 2 down, 3 toward zero.
  static const std::uint64_t kMode[] = {0, 2, 1, 3};
  std::uint64_t fpcr = (saved & ~(std::uint64_t{3} << 22)) | (kMode[rounding] << 22);
  if (flush) fpcr |= (std::uint64_t{1} << 24) | (std::uint64_t{1} << 19);
  __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
  return PyLong_FromUnsignedLongLong(saved);
#else
  (void)flush;
  PyErr_SetString(PyExc_NotImplementedError, "no control word on this architecture");
  return nullptr;
#endif
}

PyObject* restore_fp_environment(PyObject*, PyObject* arg) {
  const unsigned long long saved = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return nullptr;
#if defined(CASTLIKE_FPENV_X86)
  _mm_setcsr(static_cast<unsigned int>(saved));
#elif defined(CASTLIKE_FPENV_AARCH64)
  const std::uint64_t fpcr = saved;
  __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
#else
  (void)saved;
#endif
  Py_RETURN_NONE;
}

PyObject* stream_bytes_of(PyObject*, PyObject*) { return PyLong_FromSize_t(stream_bytes()); }

PyObject* last_level_cache_bytes_of(PyObject*, PyObject*) {
  return PyLong_FromSize_t(last_level_cache_bytes().load(std::memory_order_relaxed));
}

//: Testing hook: set the last-level cache's bytes that the kernels go by (0: unknown) for the
//: whole process; returns the value before.
PyObject* set_last_level_cache_bytes(PyObject*, PyObject* arg) {
  const size_t bytes = PyLong_AsSize_t(arg);
  if (bytes == size_t(-1) && PyErr_Occurred()) return nullptr;
  return PyLong_FromSize_t(last_level_cache_bytes().exchange(bytes, std::memory_order_relaxed));
}

//: Testing hook: whether this module's kernels use instructions beyond its CPU level where the
//: CPU has them (AVX512-BF16 in the AVX-512 build: simd_pack.hpp); with an argument, turn them
//: on or off for the whole process first (on only where the CPU has them).  None in the builds
//: that have no such instructions.
PyObject* bfloat16_instructions_hook(PyObject*, PyObject* args) {
  int enable = -1;
  if (!PyArg_ParseTuple(args, "|p", &enable)) return nullptr;
#if defined(CASTLIKE_PACK_AVX512)
  if (enable == 1 && !cpu_has_avx512_bf16()) {
    PyErr_SetString(PyExc_ValueError, "this CPU has no AVX512-BF16 instructions");
    return nullptr;
  }
  if (enable >= 0) bfloat16_instructions().store(enable == 1);
  return PyBool_FromLong(use_bfloat16_instructions());
#else
  if (enable == 1) {
    PyErr_SetString(PyExc_ValueError, "this build's kernels have no AVX512-BF16 steps");
    return nullptr;
  }
  Py_RETURN_NONE;
#endif
}

PyMethodDef kMethods[] = {
    {"_set_fp_environment", set_fp_environment, METH_VARARGS,
     "Testing hook: set FTZ/DAZ and the rounding mode of the calling thread."},
    {"_restore_fp_environment", restore_fp_environment, METH_O,
     "Testing hook: restore the control word _set_fp_environment returned."},
    {"kernel_names", kernel_names, METH_NOARGS, "Names of the kernels this module holds."},
    {"cpu_features", cpu_features, METH_NOARGS, "The CPU features the dispatcher looks at."},
    {"_bfloat16_instructions", bfloat16_instructions_hook, METH_VARARGS,
     "Testing hook: whether the kernels use AVX512-BF16 (None where they have no such steps); "
     "True or False turns them on or off first."},
    {"advise_huge_pages", advise_huge_pages_of, METH_O,
     "advise_huge_pages(out): ask Linux for transparent huge pages behind the new output `out` "
     "(a writable buffer the caller has just allocated), where it has 4 MiB or more and its "
     "middle page is not yet in memory, as NumPy does for its new arrays; elsewhere nothing."},
    {"stream_bytes", stream_bytes_of, METH_NOARGS,
     "Output bytes of one call (a thread's piece of a cast) from which 1- and 2-byte results "
     "are stored around the caches (this CPU's second-level cache, at least 1 MiB)."},
    {"last_level_cache_bytes", last_level_cache_bytes_of, METH_NOARGS,
     "The last-level cache's bytes as Linux reports them (0: unknown): into bytes and 2-byte "
     "integers (and DOUBLE -> FLOAT16), the light kernels stream only casts whose input and "
     "output exceed it."},
    {"_set_last_level_cache_bytes", set_last_level_cache_bytes, METH_O,
     "Testing hook: set the bytes last_level_cache_bytes() gives and the kernels go by (0: "
     "unknown); returns the value before."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "castlike._native._" CASTLIKE_STR(CASTLIKE_VARIANT),
                       "castlike's native cast kernels, compiled for one CPU level.",
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace
}  // namespace castlike

namespace castlike {
namespace {

//: The pool that castlike._native._threads shares with every kernel module (threads.hpp).
const PoolApi* import_pool() {
  PyObject* threads = PyImport_ImportModule(kPoolModule);
  if (threads == nullptr) return nullptr;
  PyObject* capsule = PyObject_GetAttrString(threads, kPoolAttribute);
  Py_DECREF(threads);
  if (capsule == nullptr) return nullptr;
  // The capsule points into the _threads module, which stays loaded: the pointer outlives it.
  auto* api = static_cast<const PoolApi*>(PyCapsule_GetPointer(capsule, kPoolCapsule));
  Py_DECREF(capsule);
  if (api != nullptr && api->abi != kPoolAbi) {
    PyErr_Format(PyExc_ImportError, "%s is version %u, castlike's kernels need version %u",
                 kPoolModule, api->abi, kPoolAbi);
    return nullptr;
  }
  return api;
}

#if defined(CASTLIKE_SANITIZED)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

}  // namespace
}  // namespace castlike

PyMODINIT_FUNC CASTLIKE_MODULE_INIT(CASTLIKE_VARIANT)() {
  using namespace castlike;
  g_pool = import_pool();
  if (g_pool == nullptr) return nullptr;
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  PyObject* type = PyType_FromSpec(&Kernel_spec);
  if (type == nullptr || PyModule_AddObject(m, "Kernel", type) < 0) {
    Py_XDECREF(type);
    Py_DECREF(m);
    return nullptr;
  }
  // `sanitized`: built with AddressSanitizer and UndefinedBehaviorSanitizer (nox -s sanitize).
  if (PyModule_AddStringConstant(m, "variant", CASTLIKE_STR(CASTLIKE_VARIANT)) < 0 ||
      PyModule_AddObjectRef(m, "sanitized", kSanitized ? Py_True : Py_False) < 0) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
