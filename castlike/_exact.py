"""Integer-exact IEEE rounding on bit patterns, written once for every backend.

The engine (:mod:`castlike._engine`) normally lets a library's own float conversions do the
last rounding, fed with a value that already carries the single correct rounding.  Where a
library's float operations are unreliable, it uses these routines instead: they touch only
unsigned integer arithmetic (shifts, masks, ``+``, ``-``, comparisons, ``where``) on the bit
patterns, plus the library's conversions between integer types and of integers that are exact
in the target format.  An adapter selects them by declaring
:attr:`~castlike.backends._base.Adapter.flushes_subnormals` (XLA: its conversions and
comparisons treat subnormals as zero, and on accelerators it may drop a narrowing round trip).

Every routine takes the adapter first: its Array-API namespace, bit casts (``bits`` /
``from_bits``), unsigned dtypes (``uint``) and :meth:`~castlike.backends._base.Adapter.clz`.
The library must implement unsigned integer arithmetic (torch does not: its adapter never
selects these routines).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec.types import FloatFormat, Kind, OnnxType, TypeSpec, spec_of

if TYPE_CHECKING:
    from .backends._base import Adapter

__all__ = [
    "double_to_float_nearest",
    "integer_to_float32_odd",
    "narrow_float_bits",
    "widen_float32_bits",
]

_FLOAT = spec_of(OnnxType.FLOAT)
_DOUBLE = spec_of(OnnxType.DOUBLE)


def _const(a: Adapter, value: int, dtype: Any) -> Any:
    """An unsigned constant of ``dtype`` (so that the bit arithmetic is never promoted)."""
    return a.xp.asarray(value, dtype=dtype)


def narrow_float_bits(
    a: Adapter, bits: Any, src: FloatFormat, dst: FloatFormat, *, odd: bool
) -> Any:
    """IEEE bits of a wider float format rounded to a narrower IEEE format, in integers.

    Parameters
    ----------
    a
        The adapter of ``bits``' library.
    bits
        Unsigned integer array (``src``'s width) of FLOAT or DOUBLE bit patterns.
    src, dst
        The formats; ``dst`` has fewer exponent and mantissa bits (DOUBLE to FLOAT, FLOAT16
        or BFLOAT16).
    odd
        Round to odd (truncate, set the last bit if anything was lost; overflow gives the
        largest finite value) instead of to nearest, ties to even (overflow gives Inf).

    Returns
    -------
    array
        ``dst`` bit patterns, in ``bits``' dtype.  NaN stays NaN (sign and top payload bits
        kept, quiet bit set); subnormal inputs and results are exact.
    """
    xp = a.xp
    dtype = bits.dtype
    width = src.total_bits
    sm, dm = src.mantissa_bits, dst.mantissa_bits
    dst_width = dst.total_bits

    def u(value: int) -> Any:
        return _const(a, value, dtype)

    sign = bits >> u(width - 1)
    mag = bits & u((1 << (width - 1)) - 1)
    exp_field = mag >> u(sm)
    mantissa = mag & u((1 << sm) - 1)
    significand = xp.where(exp_field == 0, mantissa, mantissa | u(1 << sm))
    # The destination's exponent field if the result is normal, as a signed integer; below 1
    # the result is subnormal and the significand shifts further right.
    exponent = xp.astype(xp.maximum(exp_field, u(1)), xp.int32) - (src.bias - dst.bias)
    extra = xp.maximum(1 - exponent, 0)
    shift = xp.astype(xp.minimum(extra + (sm - dm), width - 1), dtype)
    kept = significand >> shift
    lost = significand & ((u(1) << shift) - u(1))
    # Adding the kept significand (with its implicit bit) to (exponent - 1) << dm gives the
    # exponent field and mantissa at once; a carry from rounding moves into the exponent.
    base = xp.astype(xp.maximum(exponent, 1) - 1, dtype) << u(dm)
    base = base + kept
    inf = ((1 << dst.exponent_bits) - 1) << dm
    if odd:
        out = xp.minimum(base | xp.astype(lost != 0, dtype), u(inf - 1))
    else:
        half = u(1) << (shift - u(1))
        up = (lost > half) | ((lost == half) & ((kept & u(1)) != 0))
        out = xp.minimum(base + xp.astype(up, dtype), u(inf))
    special = exp_field == u((1 << src.exponent_bits) - 1)
    nan = u(inf | (1 << (dm - 1))) | (mantissa >> u(sm - dm))
    out = xp.where(special, xp.where(mantissa != 0, nan, u(inf)), out)
    return out | (sign << u(dst_width - 1))


def double_to_float_nearest(a: Adapter, x: Any) -> Any:
    """DOUBLE -> FLOAT rounded to nearest even (R3), as FLOAT bits (uint32).

    The library's conversion is used wherever the result is a normal FLOAT (one IEEE
    rounding, which XLA does right); results below 2**-126, which XLA:CPU flushes to zero
    (DOUBLE exponent field below 897), are computed in integers: the FLOAT subnormal is
    round(|x| * 2**149), i.e. the DOUBLE significand shifted right by 926 - exponent, rounded
    half to even.  A rounding up to 2**-126 carries into the exponent field by itself.
    """
    xp = a.xp
    u64, u32 = a.uint(64), a.uint(32)

    def u(value: int) -> Any:
        return _const(a, value, u64)

    bits = a.bits(x, _DOUBLE)
    exp_field = (bits >> u(52)) & u(0x7FF)
    significand = (bits & u((1 << 52) - 1)) | u(1 << 52)
    shift = xp.minimum(u(926) - xp.minimum(exp_field, u(896)), u(63))
    kept = significand >> shift
    lost = significand & ((u(1) << shift) - u(1))
    half = u(1) << (shift - u(1))
    up = (lost > half) | ((lost == half) & ((kept & u(1)) != 0))
    tiny = xp.astype(kept + xp.astype(up, u64), u32)
    tiny = xp.where(exp_field == 0, _const(a, 0, u32), tiny)  # DOUBLE subnormals: 0
    tiny = tiny | (xp.astype(bits >> u(32), u32) & _const(a, 0x80000000, u32))
    native = a.bits(a.astype(x, _FLOAT), _FLOAT)
    return xp.where(exp_field < u(897), tiny, native)


def widen_float32_bits(a: Adapter, bits32: Any) -> Any:
    """FLOAT bits (uint32) -> the same value's DOUBLE bits (uint64), exactly, subnormals too."""
    xp = a.xp
    u64, u32 = a.uint(64), a.uint(32)

    def u(value: int) -> Any:
        return _const(a, value, u64)

    exp_field = (bits32 >> _const(a, 23, u32)) & _const(a, 0xFF, u32)
    mantissa32 = bits32 & _const(a, 0x7FFFFF, u32)
    sign = xp.astype(bits32 >> _const(a, 31, u32), u64) << u(63)
    mantissa = xp.astype(mantissa32, u64)
    exp64 = xp.astype(exp_field, u64)
    normal = ((exp64 + u(1023 - 127)) << u(52)) | (mantissa << u(29))
    # Subnormal: value = mantissa * 2**-149 with its leading one at bit p = 31 - clz.
    top = u(31) - xp.astype(a.clz(mantissa32), u64)
    subnormal = ((top + u(1023 - 149)) << u(52)) | ((mantissa << (u(52) - top)) & u((1 << 52) - 1))
    special = u(0x7FF << 52) | (mantissa << u(29))
    out = xp.where(exp_field == 0, xp.where(mantissa32 == 0, u(0), subnormal), normal)
    out = xp.where(exp_field == 0xFF, special, out)
    return out | sign


def integer_to_float32_odd(a: Adapter, x: Any, source: TypeSpec) -> Any:
    """FLOAT bits (uint32) of a 32/64-bit integer array rounded to odd at 24 bits.

    The magnitude keeps its top 24 significant bits, the last of them set if anything below
    was lost; that integer is exact in FLOAT, so the library's conversion of it rounds
    nothing.
    """
    xp = a.xp
    dtype = a.uint(source.bits)

    def u(value: int) -> Any:
        return _const(a, value, dtype)

    if source.kind is Kind.SIGNED:
        raw = a.bits(x, source)
        negative = x < 0
        magnitude = xp.where(negative, u(0) - raw, raw)  # exact, INT_MIN included
    else:
        magnitude, negative = x, None
    length = u(source.bits) - xp.astype(a.clz(magnitude), dtype)
    shift = xp.maximum(length, u(24)) - u(24)
    lost = magnitude & ((u(1) << shift) - u(1))
    odd = ((magnitude >> shift) | xp.astype(lost != 0, dtype)) << shift
    value = a.astype(odd, _FLOAT)
    if negative is not None:
        value = xp.where(negative, -value, value)
    return a.bits(value, _FLOAT)
