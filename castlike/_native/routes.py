"""Which native kernel casts a (source, target, mode), with which tables and constants.

This is where the native path meets the spec: every table is one of the spec's lookup tables
(:mod:`castlike.spec.tables`) and every constant a kernel needs (saturation bounds, what NaN
becomes, masks) is computed here from the types of :mod:`castlike.spec` and its oracle, so
that the C++ kernels restate no rule.  :func:`kernel_for` returns None for the few casts the
kernels do not cover (listed in docs/performance.rst); the pure engine casts those.
"""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType
from typing import Any

from .._engine import Engine, saturation_bounds
from ..spec.rules import Mode, float_to_int_zeroes
from ..spec.tables import (
    DOUBLE_CLASS_BITS,
    FLOAT32_CLASS_BITS,
    byte_table,
    double_class_table,
    float32_class_table,
    pattern_table,
)
from ..spec.types import Kind, OnnxType, TypeSpec

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
        truncate = rules.bfloat16 == "truncate"
        if s is _T.FLOAT:
            return "bfloat16:f32:u16", {"variant": 2 if truncate else 0}
        # Wide sources: rounded once (0), or to the nearest FLOAT first (1), then truncated (2).
        variant = 2 if truncate else (0 if odd else 1)
        return f"bfloat16:{key}:u16", {"variant": variant}
    # float8, float4, float6, FLOAT8E8M0: the spec's class tables.
    if s is _T.DOUBLE and odd:
        table = double_class_table(target, mode)
        return "double_class:f64:u8", {"table": table, "class_bits": DOUBLE_CLASS_BITS}
    table = float32_class_table(target, mode)
    # Integers: clamped to +-2**24 first where the target's range allows (then exact in FLOAT).
    # DOUBLE: to the nearest FLOAT first where the profile says so.
    variant = int(target.fmt.max_value < 2**24) if source.is_integer else int(not odd)
    params = {"table": table, "class_bits": FLOAT32_CLASS_BITS, "variant": variant}
    return f"float_class:{key}:u8", params


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
            "variant": 0 if rules.sub_byte_rounding == "half_even" else 1,
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
    for table in (pattern_table, byte_table, float32_class_table, double_class_table):
        table.cache_clear()
