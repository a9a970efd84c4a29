"""Which native kernel casts a (source, target, mode), with which tables and constants.

This is where the native path meets the spec: every table is one of the spec's lookup tables
(:mod:`castlike.spec.tables`) and every constant a kernel needs (saturation bounds, what NaN
becomes, masks) is computed here from the types of :mod:`castlike.spec` and its oracle, so
that the C++ kernels restate no rule.  :func:`kernel_for` returns None for the few casts the
kernels do not cover (listed in docs/performance.rst); the pure engine casts those.
"""

from __future__ import annotations

import enum
import struct
from fractions import Fraction
from functools import lru_cache
from types import ModuleType
from typing import Any

from .._engine import Engine, saturation_bounds
from ..spec.rules import Mode, RoundMode, float_to_int_zeroes
from ..spec.tables import (
    DOUBLE_CLASS_BITS,
    FLOAT32_CLASS_BITS,
    byte_table,
    double_class_table,
    float32_class_index,
    float32_class_table,
    pattern_table,
)
from ..spec.types import FloatFormat, Kind, OnnxType, Special, TypeSpec

__all__ = ["clear_caches", "covers", "kernel_for", "route"]

_T = OnnxType


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


def _nan_result(source: TypeSpec, target: TypeSpec, mode: Mode) -> int:
    """What a NaN of ``source`` becomes in ``target``, by the spec's array rules (already
    loaded for the tables, where the scalar oracle would add its import to a first cast)."""
    import numpy as np

    from ..spec.binary import cast_patterns

    nan = source.fmt.nan_bits()
    assert nan is not None  # the float sources of the kernels (FLOAT, DOUBLE) have a NaN
    return int(cast_patterns(np.array([nan], dtype=np.uint64), source, target, mode)[0])


def covers(source: TypeSpec, target: TypeSpec, mode: Mode) -> bool:
    """Whether a native kernel casts ``source`` to ``target`` under ``mode`` (no table built).

    Every numeric cast but one family: FLOAT8E8M0 from a wide source other than FLOAT in the
    profiles that round wide sources to the nearest FLOAT first (their R6 ``x < 0`` fix-up
    after that rounding is left to the pure engine).
    """
    if not (source.is_numeric and target.is_numeric):
        return False
    if source.storage_bits > 16 and float_to_int_zeroes(source, target, mode) != "none":
        return False  # R12 reference's ml_dtypes zeroes: the pure engine (a rare profile)
    return not (
        source.storage_bits > 16
        and target.code == _T.FLOAT8E8M0
        and not Engine.rounds_to_odd(source, target, mode)
    )


def route(source: TypeSpec, target: TypeSpec, mode: Mode) -> tuple[str, dict[str, Any]] | None:
    """The kernel name and its parameters for a cast, or None where the pure engine casts.

    ``mode`` must already be ``mode.effective_for(target)``.
    """
    if not covers(source, target, mode):
        return None
    if _T(source.code) in _HALF_KEYS and _T(target.code) in _WIDE_FLOAT_KEYS:
        # R3: widening is exact, with nothing to decide; the CPU's conversion where it has one.
        return f"widen:{_HALF_KEYS[_T(source.code)]}:{_WIDE_FLOAT_KEYS[_T(target.code)]}", {}
    if source.kind is Kind.BOOL:
        return _from_bool(source, target, mode)
    arithmetic = source.is_integer and not source.is_sub_byte
    if source.storage_bits <= 16 and not arithmetic:
        # Every pattern of the source, cast once by the spec's table: one gather.
        table = pattern_table(source, target, mode)
        mask = (1 << source.bits) - 1
        return f"gather:{_storage(source)}:{_storage(target)}", {"table": table, "mask": mask}
    # Integers of every width, FLOAT and DOUBLE: arithmetic kernels (an integer source's kernel
    # is a conversion, a mask or a clamp: faster than a gather).
    s, t = _T(source.code), _T(target.code)
    key = _type_key(source)
    rules = mode.profile.rules
    if target.kind is Kind.BOOL:
        width = source.storage_bits
        sign = (1 << (width - 1)) if source.is_float else 0
        return f"nonzero:u{width}:u8", {"mask": ((1 << width) - 1) ^ sign}
    if target.is_integer:
        return _to_integer(source, target, mode, key)
    if t is _T.FLOAT or t is _T.DOUBLE:
        if s is t:  # the same type: a copy of the bits
            return f"int_to_int:u{source.bits}:u{source.bits}", {"mask": (1 << source.bits) - 1}
        return f"convert:{key}:f{target.bits}", {}
    odd = Engine.rounds_to_odd(source, target, mode)
    if t is _T.FLOAT16:
        return f"float16:{key}:u16", {}
    if t is _T.BFLOAT16:
        # Wide sources: rounded once, or to the nearest FLOAT first; legacy then truncates.
        rounding = BFloat16Rounding.ONCE if odd else BFloat16Rounding.NEAREST_FLOAT_FIRST
        if rules.bfloat16 == "truncate":
            rounding = BFloat16Rounding.TRUNCATE
        return f"bfloat16:{key}:u16", {"variant": int(rounding)}
    # float8, float4, float6, FLOAT8E8M0 from FLOAT or DOUBLE: by arithmetic, where the spec's
    # class table confirms the kernel's special results; otherwise, and from the integers, the
    # spec's class tables.
    if s is _T.FLOAT or s is _T.DOUBLE:
        found = _small_float_route(source, target, mode, key, odd)
        if found is not None:
            return found
    if s is _T.DOUBLE and odd:
        table = double_class_table(target, mode)
        return "double_class:f64:u8", {"table": table, "class_bits": DOUBLE_CLASS_BITS}
    table = float32_class_table(target, mode)
    # Integers: clamped to +-2**24 first where the target's range allows (then exact in FLOAT).
    # DOUBLE: to the nearest FLOAT first where the profile says so.
    variant = int(target.fmt.max_value < 2**24) if source.is_integer else int(not odd)
    params = {"table": table, "class_bits": FLOAT32_CLASS_BITS, "variant": variant}
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

_NEGATIVE = 1 << 31  # FLOAT's sign bit
_FLOAT_INF = 0x7F800000
_FLOAT_NAN = 0x7FC00000


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
        0x7F7FFFFF: highest,  # FLOAT's largest, above the range
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


def _from_bool(source: TypeSpec, target: TypeSpec, mode: Mode) -> tuple[str, dict[str, Any]]:
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
        return "float16:b8:u16", {}
    if t is _T.BFLOAT16:
        return "bfloat16:b8:u16", {}
    return "gather:u8:u8", {"table": byte_table(source, target, mode), "mask": 0xFF}


def _to_integer(
    source: TypeSpec, target: TypeSpec, mode: Mode, key: str
) -> tuple[str, dict[str, Any]]:
    rules = mode.profile.rules
    if target.is_sub_byte:
        mask = (1 << target.bits) - 1
        saturate = rules.sub_byte_range == "saturate"
        if not source.is_float:  # integers
            params: dict[str, Any] = {"mask": mask}
            if saturate:
                params.update(
                    variant=1,
                    ilo=max(target.int_min, source.int_min),
                    ihi=min(target.int_max, source.int_max),
                )
            return f"int_to_int:{key}:u8", params
        # Every float of magnitude >= 2**(mantissa + 1 + bits) is a multiple of 2**bits: clamping
        # there keeps the low bits.
        bound = float(2 ** (source.fmt.mantissa_bits + 1 + target.bits))
        params = {
            "mask": mask,
            "hi": bound,
            "variant": int(
                SubByteRounding.HALF_EVEN
                if rules.sub_byte_rounding == "half_even"
                else SubByteRounding.TOWARD_ZERO
            ),
            "nan_result": _nan_result(source, target, mode),
        }
        if saturate:
            params.update(pre_lo=float(target.int_min), pre_hi=float(target.int_max))
        return f"float_to_sub_byte:{key}:u8", params
    tkey = _type_key(target)
    if not source.is_float:  # integers
        return f"int_to_int:{key}:u{target.bits}", {"mask": (1 << target.bits) - 1}
    # Truncation with saturation: clamp to bounds exact in the source format; a maximum the
    # format cannot hold is reached by x >= int_max + 1 instead.
    low, high, limit = saturation_bounds(source, target)
    return f"float_to_int:{key}:{tkey}", {
        "lo": low,
        "hi": high,
        "limit": float("inf") if limit is None else limit,
        "hi_result": target.int_max,
        "nan_result": _nan_result(source, target, mode),
    }


@lru_cache(maxsize=4096)
def _kernel(module: ModuleType, source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
    found = route(source, target, mode)
    if found is None:
        return None
    name, params = found
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
