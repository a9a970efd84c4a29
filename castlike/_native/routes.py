"""Which native kernel carries out a cast's route, with which tables and constants.

The route of a cast is the spec's (:func:`castlike.spec.route.route_for`, for the kernels'
capabilities :data:`KERNELS`); this module names the C++ kernel that implements its family
and hands it the route's parameters (bounds, special results) and the spec's tables
(:mod:`castlike.spec.tables`), so that the kernels restate no rule and decide nothing.
:func:`kernel_for` returns None for the routes the kernels do not implement (listed in
docs/performance.rst); the pure engine carries those out.
"""

from __future__ import annotations

import enum
import struct
from fractions import Fraction
from functools import lru_cache
from types import ModuleType
from typing import Any

from ..spec.route import Capabilities, Family, FloatBits, Route, rounds_to_odd, route_for
from ..spec.rules import Mode, RoundMode
from ..spec.tables import (
    DOUBLE_CLASS_BITS,
    FLOAT32_CLASS_BITS,
    byte_table,
    double_class_table,
    float32_class_index,
    float32_class_table,
    pattern_table,
)
from ..spec.types import FloatFormat, Kind, OnnxType, Special, TypeSpec, spec_of

__all__ = ["KERNELS", "clear_caches", "covers", "kernel_for", "route"]

_T = OnnxType

#: What the kernels can do, as the routes read it: bit views, the DOUBLE class table, integers
#: clipped into the small floats, and integer sources by arithmetic rather than a gather (a
#: conversion, a mask or a clamp: faster).  No library conversion is declared: the kernels are
#: castlike's own.
KERNELS = Capabilities(double_class_table=True, clamped_integers=True, arithmetic_integers=True)


def _type_key(source: TypeSpec) -> str:
    """How a type of an arithmetic kernel is named in a kernel name: ``f32``/``f64`` for
    FLOAT/DOUBLE (which arrive as their bits), ``i8`` ... ``u64`` for integers (BOOL's kernels
    are chosen by :func:`_from_bool`)."""
    if source.is_float:
        return f"f{source.bits}"
    return f"{'i' if source.kind is Kind.SIGNED else 'u'}{source.bits}"


_HALF_KEYS = {_T.FLOAT16: "f16", _T.BFLOAT16: "bf16"}
_WIDE_FLOAT_KEYS = {_T.FLOAT: "f32", _T.DOUBLE: "f64"}


def _storage(t: TypeSpec) -> str:
    return f"u{t.storage_bits}"


def _implemented(r: Route) -> bool:
    """Whether the kernels implement ``r``: every route but three of rare profiles, left to
    the pure engine: the ml_dtypes zeroes (:attr:`Route.keep`), the FLOAT8E8M0 sign fix-up
    after a rounding through FLOAT (:attr:`Route.negative_is_nan`), and an integer rounded to
    nearest FLOAT first into a small float of wide range (the FLOAT class kernel's integer
    variants round to odd, or clip where the target's range allows: FLOAT8E8M0's does not)."""
    integer_nearest = (
        r.family is Family.SMALL_FLOAT and r.source.is_integer and r.float_bits is FloatBits.NEAREST
    )
    return r.keep is None and not r.negative_is_nan and not integer_nearest


def covers(source: TypeSpec, target: TypeSpec, mode: Mode) -> bool:
    """Whether a native kernel casts ``source`` to ``target`` under ``mode`` (no table built)."""
    if not (source.is_numeric and target.is_numeric):
        return False
    return _implemented(route_for(source, target, mode, KERNELS))


def route(source: TypeSpec, target: TypeSpec, mode: Mode) -> tuple[str, dict[str, Any]] | None:
    """The kernel name and its parameters for a cast, or None where the pure engine casts.

    ``mode`` must already be ``mode.effective_for(target)``.
    """
    if not (source.is_numeric and target.is_numeric):
        return None
    r = route_for(source, target, mode, KERNELS)
    if not _implemented(r):
        return None
    if _T(source.code) in _HALF_KEYS and _T(target.code) in _WIDE_FLOAT_KEYS:
        # R3: widening is exact (a NaN quieted, its payload kept, as the pattern table says);
        # the CPU's conversion where it has one.
        return f"widen:{_HALF_KEYS[_T(source.code)]}:{_WIDE_FLOAT_KEYS[_T(target.code)]}", {}
    if source.kind is Kind.BOOL:
        return _from_bool(source, target, r)
    if r.family is Family.PATTERN_TABLE:
        # Every pattern of the source, cast once by the spec's table: one gather.
        table = pattern_table(source, target, r.mode)
        mask = (1 << source.bits) - 1
        params: dict[str, Any] = {"table": table, "mask": mask}
        if source.is_float and source.storage_bits == 8:
            # The format, from which the AVX2 build computes FLOAT, FLOAT16, BFLOAT16 and DOUBLE
            # results where that gives this table (castlike/_native/src/byte_float.hpp): the
            # exponent of the code 1 << mantissa_bits (the smallest normal, but FLOAT8E8M0's
            # 2**-126), the mantissa bits and the sign bit (0: none).
            fmt = source.fmt
            params.update(
                mantissa_bits=fmt.mantissa_bits, min_exponent=1 - fmt.bias, sign_mask=fmt.sign_mask
            )
        return f"gather:{_storage(source)}:{_storage(target)}", params
    if r.family is Family.SMALL_FLOAT and source.is_integer and source.storage_bits == 8:
        # INT8/UINT8 into the small floats: the spec's table of the 256 bytes, which the kernels
        # read from vector registers, instead of the FLOAT class gather after a rounding to odd
        # (0.35 -> 0.04 ms at 10**6 with AVX-512, 0.52 -> 0.30 on the baseline build).
        return "gather:u8:u8", {"table": byte_table(source, target, r.mode), "mask": 0xFF}
    return _ARITHMETIC[r.family](r, _type_key(source))


def _nonzero(r: Route, key: str) -> tuple[str, dict[str, Any]]:
    width = r.source.storage_bits
    sign = (1 << (width - 1)) if r.source.is_float else 0
    return f"nonzero:u{width}:u8", {"mask": ((1 << width) - 1) ^ sign}


def _low_bits(r: Route, key: str) -> tuple[str, dict[str, Any]]:
    source, target = r.source, r.target
    params: dict[str, Any] = {"mask": (1 << target.bits) - 1}
    if r.clip is not None:  # the legacy clip to the range, in bounds the source holds
        params.update(
            variant=1, ilo=max(r.clip[0], source.int_min), ihi=min(r.clip[1], source.int_max)
        )
    return f"int_to_int:{key}:{_storage(target)}", params


def _saturating(r: Route, key: str) -> tuple[str, dict[str, Any]]:
    assert r.saturation is not None and r.nan_result is not None
    low, high, limit = r.saturation
    return f"float_to_int:{key}:{_type_key(r.target)}", {
        "lo": low,
        "hi": high,
        "limit": float("inf") if limit is None else limit,
        "hi_result": r.target.int_max,
        "nan_result": r.nan_result,
    }


def _sub_byte(r: Route, key: str) -> tuple[str, dict[str, Any]]:
    assert r.nan_result is not None
    params: dict[str, Any] = {
        "mask": (1 << r.target.bits) - 1,
        "hi": r.wrap_bound,
        "variant": int(
            SubByteRounding.HALF_EVEN if r.rounding == "half_even" else SubByteRounding.TOWARD_ZERO
        ),
        "nan_result": r.nan_result,
    }
    if r.clip is not None:
        params.update(pre_lo=float(r.clip[0]), pre_hi=float(r.clip[1]))
    return f"float_to_sub_byte:{key}:u8", params


def _ieee(r: Route, key: str) -> tuple[str, dict[str, Any]]:
    source, target = r.source, r.target
    if target.code == _T.FLOAT16:
        if source.is_integer:  # clipped where every integer beyond becomes Inf: exact in FLOAT
            bound = target.fmt.overflow_integer
            clip = {"ilo": max(source.int_min, -bound), "ihi": min(source.int_max, bound)}
            return f"float16:{key}:u16", clip
        return f"float16:{key}:u16", {}
    if source.code == target.code:  # the same type: a copy of the bits
        return f"int_to_int:u{source.bits}:u{source.bits}", {"mask": (1 << source.bits) - 1}
    return f"convert:{key}:f{target.bits}", {}


def _bfloat16(r: Route, key: str) -> tuple[str, dict[str, Any]]:
    if r.truncate:
        rounding = BFloat16Rounding.TRUNCATE
    elif r.float_bits is FloatBits.NEAREST:
        rounding = BFloat16Rounding.NEAREST_FLOAT_FIRST
    else:  # FLOAT itself, or FLOAT bits rounded to odd: rounded once
        rounding = BFloat16Rounding.ONCE
    return f"bfloat16:{key}:u16", {"variant": int(rounding)}


#: The FLOAT class kernel's variants: FLOAT bits exact or rounded to odd; an integer clipped to
#: +-2**24 (or a DOUBLE rounded to nearest FLOAT first, a profile).
_CLASS_VARIANTS = {
    FloatBits.SAME: 0,
    FloatBits.ODD: 0,
    FloatBits.NEAREST: 1,
    FloatBits.CLAMPED_INTEGER: 1,
}


def _small_float(r: Route, key: str) -> tuple[str, dict[str, Any]]:
    target, mode = r.target, r.mode
    if r.source.code in (_T.FLOAT, _T.DOUBLE):
        # By arithmetic, where the spec's class table confirms the kernel's special results.
        odd = rounds_to_odd(r.source, target, mode)
        found = _small_float_route(r.source, target, mode, key, odd)
        if found is not None:
            return found
    if r.source.is_integer and r.source.storage_bits >= 16:
        found = _integer_through_float(r, key)
        if found is not None:
            return found
    if r.double_classes:
        table = double_class_table(target, mode)
        return "double_class:f64:u8", {"table": table, "class_bits": DOUBLE_CLASS_BITS}
    assert r.float_bits is not None
    table = float32_class_table(target, mode)
    params = {"table": table, "class_bits": FLOAT32_CLASS_BITS}
    params["variant"] = _CLASS_VARIANTS[r.float_bits]
    if r.float_bits is FloatBits.CLAMPED_INTEGER:
        assert r.clip is not None
        params.update(ilo=r.clip[0], ihi=r.clip[1])
    return f"float_class:{key}:u8", params


class BFloat16Rounding(enum.IntEnum):
    """The variants of the ``bfloat16`` kernels (``BFloat16Rounding`` in
    castlike/_native/src/kernels.hpp, whose values these are)."""

    #: Rounded once, from the exact value (R3).
    ONCE = 0
    #: To the nearest FLOAT first, then to nearest even (wide sources, reference profiles).
    NEAREST_FLOAT_FIRST = 1
    #: To the nearest FLOAT, then its upper half (the legacy profile).
    TRUNCATE = 2


class SubByteRounding(enum.IntEnum):
    """The variants of the ``float_to_sub_byte`` kernels (``SubByteRounding`` in kernels.hpp)."""

    HALF_EVEN = 0
    TOWARD_ZERO = 1


class SmallFloatFlag(enum.IntFlag):
    """The variant flags of the ``small_float`` kernels (``SmallFloatFlag`` in
    castlike/_native/src/small_float.hpp, whose values these are)."""

    #: The codes 0 and ``cap_code`` take their results from ``zero_results``/``cap_results``.
    FIXED_SPECIALS = 1
    #: +-Inf become NaN before the clamp.
    INF_IS_NAN = 2
    #: DOUBLE sources: to the nearest FLOAT first (otherwise rounded to odd, hence once).
    NEAREST_FLOAT_FIRST = 4


#: The ``e8m0`` kernels' round modes (``E8M0Round`` in small_float.hpp); the kernel's variant is
#: ``2 * round + (0 if saturate else 1)``.
_E8M0_ROUNDS = {RoundMode.UP: 0, RoundMode.DOWN: 1, RoundMode.NEAREST: 2}

_FLOAT = spec_of(_T.FLOAT)
_NEGATIVE = _FLOAT.fmt.sign_mask
_FLOAT_INF: int = _FLOAT.fmt.inf_bits()  # type: ignore[assignment]  # FLOAT has Inf and NaN
_FLOAT_NAN: int = _FLOAT.fmt.nan_bits()  # type: ignore[assignment]
_FLOAT_MAX = _FLOAT.fmt.max_bits


def _float_bits(value: Fraction | float) -> int:
    """FLOAT bits of a value that FLOAT holds exactly."""
    packed = struct.pack("<f", float(value))
    assert struct.unpack("<f", packed)[0] == value, f"{value} is not a FLOAT value"
    return int(struct.unpack("<I", packed)[0])


def _code_value(fmt: FloatFormat, code: int) -> Fraction:
    """The magnitude that ``code`` encodes in ``fmt``'s layout, read as if its exponent field
    were wider (so that the code above the largest value is the next value, whatever ``fmt``
    spends that pattern on)."""
    m = fmt.mantissa_bits
    field, mantissa = code >> m, code & ((1 << m) - 1)
    if field == 0:
        return mantissa * Fraction(2) ** (fmt.min_exponent - m)
    return ((1 << m) | mantissa) * Fraction(2) ** (field - fmt.bias - m)


def _class_results(target: TypeSpec, mode: Mode) -> Any:
    """``result(bits)``: the spec's result for the FLOAT pattern ``bits`` (its class's entry)."""
    table = float32_class_table(target, mode)

    def result(bits: int) -> int:
        return int(table[int(float32_class_index(bits))])

    return result


@lru_cache(maxsize=256)
def _small_float_params(target: TypeSpec, mode: Mode) -> tuple[tuple[str, Any], ...] | None:
    """The ``small_float`` kernel's parameters for a float target with a sign bit (float8,
    float6, float4), or None where the spec's results do not have the kernel's shape.

    The kernel rounds |x| to nearest even at the format's precision after clamping it (see
    small_float.hpp); every result a rule decides is read here off the spec's FLOAT class
    table: whether an overflow saturates (the clamp is then the largest value) or becomes the
    code above it (Inf, NaN), whether Inf goes the overflow's way or NaN's, what NaN and zero
    become by sign.  Each is either "the code with the format's sign bit for a negative x", as
    every finite result is, or a fixed result by sign (``FIXED_SPECIALS``).
    """
    fmt = target.fmt
    result = _class_results(target, mode)
    sign, max_code = fmt.sign_mask, fmt.max_bits

    def by_sign(bits: int) -> tuple[int, int]:
        return result(bits), result(bits | _NEGATIVE)

    def natural(code: int) -> tuple[int, int]:
        return code, code | sign

    # The finite codes are the format's encoding (a cheap guard: 1, the smallest subnormal, max).
    finite = [(Fraction(1), fmt.bias << fmt.mantissa_bits), (fmt.min_subnormal, 1)]
    finite.append((fmt.max_value, max_code))
    if any(by_sign(_float_bits(v)) != natural(code) for v, code in finite):
        return None
    above = by_sign(_float_bits(_code_value(fmt, max_code + 1)))
    if above == natural(max_code):
        clamp_code = max_code  # an overflow saturates
    elif above == natural(max_code + 1):
        clamp_code = max_code + 1  # an overflow is the code above the largest (Inf, NaN)
    else:
        return None
    flags = SmallFloatFlag(0)
    inf, nan = by_sign(_FLOAT_INF), by_sign(_FLOAT_NAN)
    if inf != above:
        if inf != nan:
            return None
        flags |= SmallFloatFlag.INF_IS_NAN
    if nan == natural(nan[0]) and clamp_code < nan[0] <= 0xFF:
        cap = nan[0]  # NaN's own code, above every finite one
    elif clamp_code > max_code and nan == natural(clamp_code):
        cap = clamp_code  # NaN shares the overflow's code
    else:
        cap = clamp_code + 1
        flags |= SmallFloatFlag.FIXED_SPECIALS
    zero = by_sign(0)
    if zero != natural(0):
        flags |= SmallFloatFlag.FIXED_SPECIALS
    return (
        ("hi", float(_code_value(fmt, clamp_code))),
        ("mantissa_bits", fmt.mantissa_bits),
        ("min_exponent", fmt.min_exponent),
        ("cap_code", cap),
        ("sign_mask", sign),
        ("zero_results", zero),
        ("cap_results", nan),
        ("variant", int(flags)),
    )


@lru_cache(maxsize=64)
def _e8m0_variant(target: TypeSpec, mode: Mode) -> int | None:
    """The ``e8m0`` kernel's variant, or None where the spec's results differ from it.

    The kernel computes R6's round modes on x (small_float.hpp); with saturate, zero and
    values below the range give the smallest code and values above it and +Inf the largest,
    without, NaN; NaN and negative x give NaN.  The profiles that follow onnx's helper round
    otherwise and keep the class table.
    """
    if mode.profile.rules.e8m0_by_onnx_helper:
        return None
    result = _class_results(target, mode)
    fmt = target.fmt
    nan = fmt.nan_bits()
    lowest, highest = (0, fmt.max_bits) if mode.saturate else (nan, nan)
    one = fmt.bias  # the code of 1.0
    rounded = {RoundMode.UP: (one + 1, one + 1), RoundMode.DOWN: (one, one)}
    rounded[RoundMode.NEAREST] = (one + 1, one)  # 1.5 (a tie: up) and 1.25
    expected = {
        0: lowest,
        _NEGATIVE: lowest,  # -0 is 0
        1: lowest,  # FLOAT's smallest subnormal, below the range
        _float_bits(fmt.min_normal): 0,
        _float_bits(fmt.max_value): fmt.max_bits,
        _FLOAT_MAX: highest,  # FLOAT's largest, above the range
        _FLOAT_INF: highest,
        _FLOAT_INF | _NEGATIVE: nan,
        _FLOAT_NAN: nan,
        _FLOAT_NAN | _NEGATIVE: nan,
        _float_bits(-1.0): nan,
        _float_bits(1.0): one,
        _float_bits(1.5): rounded[mode.round_mode][0],
        _float_bits(1.25): rounded[mode.round_mode][1],
    }
    if any(result(bits) != code for bits, code in expected.items()):
        return None
    return 2 * _E8M0_ROUNDS[mode.round_mode] + (0 if mode.saturate else 1)


def _small_float_route(
    source: TypeSpec, target: TypeSpec, mode: Mode, key: str, odd: bool
) -> tuple[str, dict[str, Any]] | None:
    """The arithmetic kernel of FLOAT/DOUBLE -> a float of 8 bits or fewer, if it applies.

    DOUBLE is rounded to odd into FLOAT first (which keeps the single rounding, R3), or to the
    nearest FLOAT where the profile rounds wide sources through FLOAT (``odd`` False).
    """
    if target.fmt.special is Special.E8M0:
        variant = _e8m0_variant(target, mode) if odd else None
        return None if variant is None else (f"e8m0:{key}:u8", {"variant": variant})
    found = _small_float_params(target, mode)
    if found is None:
        return None
    params = dict(found)
    if source.code == _T.DOUBLE and not odd:
        params["variant"] = int(params["variant"] | SmallFloatFlag.NEAREST_FLOAT_FIRST)
    return f"small_float:{key}:u8", params


def _integer_through_float(r: Route, key: str) -> tuple[str, dict[str, Any]] | None:
    """The FLOAT arithmetic kernel of a small float target run on an integer of 16 bits or
    more (``through_float.hpp``), where the route's FLOAT bits allow it, else None (the FLOAT
    class gather).

    The kernel makes the integer the FLOAT bits the class gather would index its table with
    (the route's clip, then an exact conversion; or, into FLOAT8E8M0, a rounding to odd), and
    the FLOAT kernel gives that table's entry for them, so the results are the gather's.
    Measured at 10**6 on one thread (AVX-512): INT32 -> FLOAT8E4M3FN 0.37 -> 0.24 ms.
    """
    target, mode = r.target, r.mode
    if r.float_bits is FloatBits.CLAMPED_INTEGER:  # never FLOAT8E8M0: its range is beyond the clip
        assert r.clip is not None
        found = _small_float_route(_FLOAT, target, mode, key, odd=True)
        if found is None:
            return None
        name, params = found
        return name, {**params, "ilo": r.clip[0], "ihi": r.clip[1]}
    if r.float_bits is FloatBits.ODD and target.fmt.special is Special.E8M0:
        return _small_float_route(_FLOAT, target, mode, key, odd=True)
    return None


_ARITHMETIC = {
    Family.NONZERO: _nonzero,
    Family.LOW_BITS: _low_bits,
    Family.SATURATING_TRUNCATION: _saturating,
    Family.SUB_BYTE: _sub_byte,
    Family.IEEE: _ieee,
    Family.BFLOAT16: _bfloat16,
    Family.SMALL_FLOAT: _small_float,
}


def _from_bool(source: TypeSpec, target: TypeSpec, r: Route) -> tuple[str, dict[str, Any]]:
    """A BOOL source, whose storage byte the kernels read.

    R8: a BOOL is 0 or 1 whatever its byte holds (NumPy, PyTorch and JAX read any nonzero byte
    as True; an array made from foreign memory may hold 2 or 255).  Each kernel here reads
    every byte so, in its one pass: a comparison with 0 (-> BOOL), a clamp to ``[0, 1]``,
    BOOL's own range, before the low bits are kept (-> integers), the ``b8`` conversions, which
    compare the byte with 0 first (-> FLOAT, DOUBLE, FLOAT16, BFLOAT16: 0 and 1 are exact in
    each, so every profile's variant is the same), and a gather from the byte table (-> the
    floats of 8 bits or fewer).
    """
    t = _T(target.code)
    if target.kind is Kind.BOOL:
        return "nonzero:u8:u8", {"mask": 0xFF}
    if target.is_integer:
        params = {"mask": (1 << target.bits) - 1, "variant": 1}
        params.update(ilo=source.int_min, ihi=source.int_max)
        return f"int_to_int:u8:{_storage(target)}", params
    if t is _T.FLOAT or t is _T.DOUBLE:
        return f"convert:b8:f{target.bits}", {}
    if t is _T.FLOAT16:
        return "float16:b8:u16", {"ilo": 0, "ihi": 1}  # the byte is 0 or 1 by then
    if t is _T.BFLOAT16:
        return "bfloat16:b8:u16", {}
    return "gather:u8:u8", {"table": byte_table(source, target, r.mode), "mask": 0xFF}


#: The FLOAT families that also run on FLOAT16 and BFLOAT16 sources (a block widened to FLOAT
#: first: ``through_float.hpp``).
#: Not the FLOAT class gather (FLOAT8E8M0 under onnx's helper): a gather on the widened values
#: measured no faster than the gather from the table of the halves (0.54 against 0.51 ms at
#: 10**6 on one thread).
_THROUGH_FLOAT = ("small_float", "e8m0", "float_to_int", "float_to_sub_byte", "float16", "bfloat16")


def _through_float(
    module: ModuleType, source: TypeSpec, target: TypeSpec, mode: Mode, table: Any
) -> Any:
    """The FLOAT kernel of ``target`` run on the widened FLOAT16/BFLOAT16 ``source``, where it
    gives ``table`` (the spec's result for every pattern), else None.

    Every half is a FLOAT value, so the FLOAT route's arithmetic rounds a half once, as R3
    wants; whether every rule (each profile's special cases) treats the half as it treats the
    FLOAT of the same value is what the comparison with the table settles, for all 65,536
    patterns, before the kernel is taken (about a millisecond, once per cast).
    """
    import numpy as np

    found = route(spec_of(_T.FLOAT), target, mode)
    if found is None:
        return None
    name, params = found
    family, _, out = name.split(":")
    name = f"{family}:{_HALF_KEYS[_T(source.code)]}:{out}"
    if family not in _THROUGH_FLOAT or name not in module.kernel_names():
        return None
    kernel = module.Kernel(name, **params)
    result = np.empty(table.shape, dtype=table.dtype)
    kernel(np.arange(1 << 16, dtype=np.uint16), result, 1)
    return kernel if np.array_equal(result, table) else None


@lru_cache(maxsize=4096)
def _kernel(module: ModuleType, source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
    found = route(source, target, mode)
    if found is None:
        return None
    name, params = found
    if name.startswith("gather:u16:") and _T(source.code) in _HALF_KEYS:
        kernel = _through_float(module, source, target, mode, params["table"])
        if kernel is not None:
            return kernel
    return module.Kernel(name, **params)


def kernel_for(module: ModuleType, source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
    """The ready-to-run ``Kernel`` of ``module`` for a cast, or None (cached per cast)."""
    return _kernel(module, source, target, mode.effective_for(target))


def clear_caches() -> None:
    """Forget every kernel and table built so far (after the spec's rules were changed)."""
    from .. import _fastpath

    _fastpath.clear()
    _kernel.cache_clear()
    _small_float_params.cache_clear()
    _e8m0_variant.cache_clear()
    for table in (pattern_table, byte_table, float32_class_table, double_class_table):
        table.cache_clear()
