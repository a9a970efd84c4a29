"""Integer-exact IEEE rounding on bit patterns, written once for every backend.

The engine (:mod:`castlike._engine`) normally lets a library's own float conversions do the
last rounding, fed with a value that already carries the single correct rounding.  Where a
library's float operations are unreliable, it uses these routines instead: they touch only
unsigned integer arithmetic (shifts, masks, ``+``, ``-``, comparisons, ``where``) on the bit
patterns, plus the library's conversions between integer types and of integers that are exact
in the target format.  An adapter selects them by declaring
:attr:`~castlike._adapter.Adapter.flushes_subnormals` (XLA: its conversions and
comparisons treat subnormals as zero, and on accelerators it may drop a narrowing round trip).

Every routine takes the adapter first: its Array-API namespace, bit casts (``bits`` /
``from_bits``), unsigned dtypes (``uint``) and :meth:`~castlike._adapter.Adapter.clz`.
The library must implement unsigned integer arithmetic (torch does not: its adapter never
selects these routines).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec.types import FloatFormat, Kind, OnnxType, TypeSpec, spec_of

if TYPE_CHECKING:
    from ._adapter import Adapter

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
    rounding, which XLA does right); results below FLOAT's smallest normal, which XLA:CPU
    flushes to zero, are computed in integers: the FLOAT subnormal is the DOUBLE value in
    units of FLOAT's smallest subnormal, i.e. the DOUBLE significand shifted right, rounded
    half to even.  A rounding up to the smallest normal carries into the exponent field by
    itself.
    """
    xp = a.xp
    d, f = _DOUBLE.fmt, _FLOAT.fmt
    u64, u32 = a.uint(64), a.uint(32)

    def u(value: int) -> Any:
        return _const(a, value, u64)

    # The DOUBLE exponent field of FLOAT's smallest normal (897), and the shift that takes a
    # DOUBLE significand of exponent field 0 to units of FLOAT's smallest subnormal (926).
    normal_from = f.min_exponent + d.bias
    unit_shift = d.bias + d.mantissa_bits + (f.min_exponent - f.mantissa_bits)
    bits = a.bits(x, _DOUBLE)
    exp_field = (bits >> u(d.mantissa_bits)) & u((1 << d.exponent_bits) - 1)
    significand = (bits & u((1 << d.mantissa_bits) - 1)) | u(1 << d.mantissa_bits)
    shift = xp.minimum(u(unit_shift) - xp.minimum(exp_field, u(normal_from - 1)), u(63))
    kept = significand >> shift
    lost = significand & ((u(1) << shift) - u(1))
    half = u(1) << (shift - u(1))
    up = (lost > half) | ((lost == half) & ((kept & u(1)) != 0))
    tiny = xp.astype(kept + xp.astype(up, u64), u32)
    tiny = xp.where(exp_field == 0, _const(a, 0, u32), tiny)  # DOUBLE subnormals: 0
    sign = xp.astype(bits >> u(d.total_bits - f.total_bits), u32) & _const(a, f.sign_mask, u32)
    tiny = tiny | sign
    by_library = a.bits(a.astype(x, _FLOAT), _FLOAT)
    return xp.where(exp_field < u(normal_from), tiny, by_library)


def widen_float32_bits(a: Adapter, bits32: Any) -> Any:
    """FLOAT bits (uint32) -> the same value's DOUBLE bits (uint64), exactly, subnormals too."""
    xp = a.xp
    d, f = _DOUBLE.fmt, _FLOAT.fmt
    u64, u32 = a.uint(64), a.uint(32)

    def u(value: int) -> Any:
        return _const(a, value, u64)

    gap = d.mantissa_bits - f.mantissa_bits  # the mantissa moves up by this many bits
    exp_all_ones = (1 << f.exponent_bits) - 1
    exp_field = (bits32 >> _const(a, f.mantissa_bits, u32)) & _const(a, exp_all_ones, u32)
    mantissa32 = bits32 & _const(a, (1 << f.mantissa_bits) - 1, u32)
    sign = xp.astype(bits32 >> _const(a, f.total_bits - 1, u32), u64) << u(d.total_bits - 1)
    mantissa = xp.astype(mantissa32, u64)
    exp64 = xp.astype(exp_field, u64)
    normal = ((exp64 + u(d.bias - f.bias)) << u(d.mantissa_bits)) | (mantissa << u(gap))
    # Subnormal: value = mantissa * (FLOAT's smallest subnormal), with its leading one at bit
    # p = 31 - clz; as a DOUBLE that is exponent p + min_exponent - mantissa_bits, normal.
    top = u(f.total_bits - 1) - xp.astype(a.clz(mantissa32), u64)
    lowest = d.bias + f.min_exponent - f.mantissa_bits
    subnormal = ((top + u(lowest)) << u(d.mantissa_bits)) | (
        (mantissa << (u(d.mantissa_bits) - top)) & u((1 << d.mantissa_bits) - 1)
    )
    special = u(((1 << d.exponent_bits) - 1) << d.mantissa_bits) | (mantissa << u(gap))
    out = xp.where(exp_field == 0, xp.where(mantissa32 == 0, u(0), subnormal), normal)
    out = xp.where(exp_field == exp_all_ones, special, out)
    return out | sign


def integer_to_float32_odd(a: Adapter, x: Any, source: TypeSpec) -> Any:
    """FLOAT bits (uint32) of a 32/64-bit integer array rounded to odd at FLOAT's precision.

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
    precision = _FLOAT.fmt.mantissa_bits + 1  # FLOAT's significant bits (24)
    length = u(source.bits) - xp.astype(a.clz(magnitude), dtype)
    shift = xp.maximum(length, u(precision)) - u(precision)
    lost = magnitude & ((u(1) << shift) - u(1))
    odd = ((magnitude >> shift) | xp.astype(lost != 0, dtype)) << shift
    value = a.astype(odd, _FLOAT)
    if negative is not None:
        value = xp.where(negative, -value, value)
    return a.bits(value, _FLOAT)
