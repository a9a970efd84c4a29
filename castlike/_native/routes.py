"""Which native kernel carries out a cast's route, with which tables and constants.

The route of a cast is the spec's (:func:`castlike.spec.route.route_for`, for the kernels'
capabilities :data:`KERNELS`); this module names the C++ kernel that implements its family
and hands it the route's parameters (bounds, special results) and the spec's tables
(:mod:`castlike.spec.tables`), so that the kernels restate no rule and decide nothing.
:func:`kernel_for` returns None for the routes the kernels do not implement (listed in
docs/performance.rst); the pure engine carries those out.
"""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType
from typing import Any

from ..spec.route import Capabilities, Family, FloatBits, Route, route_for
from ..spec.rules import Mode
from ..spec.tables import (
    DOUBLE_CLASS_BITS,
    FLOAT32_CLASS_BITS,
    byte_table,
    double_class_table,
    float32_class_table,
    pattern_table,
)
from ..spec.types import Kind, OnnxType, TypeSpec

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
        return f"gather:{_storage(source)}:{_storage(target)}", {"table": table, "mask": mask}
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
        "variant": 0 if r.rounding == "half_even" else 1,
        "nan_result": r.nan_result,
    }
    if r.clip is not None:
        params.update(pre_lo=float(r.clip[0]), pre_hi=float(r.clip[1]))
    return f"float_to_sub_byte:{key}:u8", params


def _ieee(r: Route, key: str) -> tuple[str, dict[str, Any]]:
    source, target = r.source, r.target
    if target.code == _T.FLOAT16:
        return f"float16:{key}:u16", {}
    if source.code == target.code:  # the same type: a copy of the bits
        return f"int_to_int:u{source.bits}:u{source.bits}", {"mask": (1 << source.bits) - 1}
    return f"convert:{key}:f{target.bits}", {}


#: The BFLOAT16 kernel's variants: from FLOAT bits rounded to odd (or FLOAT itself), from FLOAT
#: rounded to nearest first (a profile), or truncated.
_BFLOAT16_VARIANTS = {"odd": 0, "nearest": 1, "truncate": 2}


def _bfloat16(r: Route, key: str) -> tuple[str, dict[str, Any]]:
    if r.truncate:
        variant = "truncate"
    else:
        variant = "nearest" if r.float_bits is FloatBits.NEAREST else "odd"
    return f"bfloat16:{key}:u16", {"variant": _BFLOAT16_VARIANTS[variant]}


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
    if r.double_classes:
        table = double_class_table(target, mode)
        return "double_class:f64:u8", {"table": table, "class_bits": DOUBLE_CLASS_BITS}
    assert r.float_bits is not None
    table = float32_class_table(target, mode)
    params = {"table": table, "class_bits": FLOAT32_CLASS_BITS}
    params["variant"] = _CLASS_VARIANTS[r.float_bits]
    return f"float_class:{key}:u8", params


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
        return "float16:b8:u16", {}
    if t is _T.BFLOAT16:
        return "bfloat16:b8:u16", {}
    return "gather:u8:u8", {"table": byte_table(source, target, r.mode), "mask": 0xFF}


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
