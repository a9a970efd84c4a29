"""Resolve one cast request against the spec: the operator version, the options, the pair.

:func:`resolve` is where every rule of R2/R11 about *whether* a cast is allowed lives; the
backends receive a :class:`Plan` that is known to be valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import CastValueError, DisallowedCastError, OpsetError
from .opsets import LATEST_OPSET, OPS, Op, OpVersion, version_for
from .profiles import resolve_profile
from .rules import Mode, Profile, RoundMode
from .types import OnnxType, TypeSpec

__all__ = ["Plan", "check_opset", "parse_profile", "parse_round_mode", "resolve"]


@dataclass(frozen=True)
class Plan:
    """A validated cast: what to convert, into what, under which rules."""

    op: Op
    version: OpVersion
    #: The opset the caller asked for (None: the latest definitions).
    opset: int | None
    source: TypeSpec
    target: TypeSpec
    mode: Mode

    def describe(self) -> str:
        """``Cast-28 FLOAT -> FLOAT8E4M3FN`` style label for messages."""
        return f"{self.version.label} {self.source.name} -> {self.target.name}"


def parse_profile(profile: str | Profile) -> Profile:
    """The :class:`Profile` named ``profile`` (see :func:`castlike.spec.profiles.resolve_profile`:
    ``"reference"`` follows the installed ml_dtypes); a CastValueError lists the valid names."""
    return resolve_profile(profile)


def parse_round_mode(round_mode: str | RoundMode) -> RoundMode:
    """The :class:`RoundMode` named ``round_mode``; a CastValueError lists the valid names."""
    if isinstance(round_mode, RoundMode):
        return round_mode
    try:
        return RoundMode(str(round_mode).lower())
    except ValueError:
        names = ", ".join(repr(r.value) for r in RoundMode)
        raise CastValueError(
            f"unknown round_mode {round_mode!r}; expected one of {names}"
        ) from None


def check_opset(opset: Any) -> int | None:
    """``opset`` if it is one castlike knows: None (the latest) or a Python int from 1 to
    :data:`LATEST_OPSET`.  The one check of what an opset is, shared by :func:`resolve` and
    ``can_cast``, so that they never disagree.

    Raises
    ------
    OpsetError
        Anything else: a bool, a float, a NumPy integer, a string, an int out of range.
    """
    if opset is None:
        return None
    if isinstance(opset, bool) or not isinstance(opset, int):
        raise OpsetError(
            f"opset must be an int or None, got {opset!r} of type {type(opset).__name__}; "
            f"opsets are Python ints from 1 to {LATEST_OPSET}"
        )
    if opset < 1 or opset > LATEST_OPSET:
        raise OpsetError(
            f"opset {opset} is outside the opsets castlike knows (1 to {LATEST_OPSET})"
        )
    return opset


def _check_opset(op: Op, opset: int | None) -> OpVersion:
    check_opset(opset)
    version = version_for(op, opset)
    if version is None:
        raise OpsetError(
            f"{op.value} does not exist in opset {opset}; "
            f"it first appears in opset {OPS[op][0].since}"
        )
    return version


def resolve(
    op: Op,
    source: TypeSpec,
    target: TypeSpec,
    *,
    saturate: bool = True,
    round_mode: str | RoundMode = "up",
    opset: int | None = None,
    profile: str | Profile = "spec",
) -> Plan:
    """Validate a cast and return its :class:`Plan`.

    ``CastLike`` with ``opset=None`` behaves as the latest ``Cast`` (R2: its function body is
    exactly that Cast); with an explicit opset it is validated against CastLike's own versions.
    """
    options = (saturate, round_mode, opset, profile)
    try:
        hash(options)
    except TypeError:  # an unhashable option: the validation rejects it
        return _resolve(op, source, target, *options)
    return _cached_resolve(op, source, target, *options)


def _resolve(
    op: Op,
    source: TypeSpec,
    target: TypeSpec,
    saturate: Any,
    round_mode: Any,
    opset: Any,
    profile: Any,
) -> Plan:
    if not isinstance(saturate, bool):
        raise CastValueError(f"saturate must be True or False, got {saturate!r}")
    rmode = parse_round_mode(round_mode)
    prof = parse_profile(profile)
    effective_op = Op.CAST if (op is Op.CAST_LIKE and opset is None) else op
    version = _check_opset(effective_op, opset)
    where = f"{version.label}" + (f" (opset {opset})" if opset is not None else "")
    if not saturate and "saturate" not in version.attributes:
        raise OpsetError(f"{where} has no 'saturate' attribute (it exists from opset 19)")
    if rmode is not RoundMode.UP and "round_mode" not in version.attributes:
        raise OpsetError(f"{where} has no 'round_mode' attribute (it exists from opset 24)")
    for role, t in (("source", source), ("target", target)):
        if OnnxType(t.code) not in version.types:
            raise DisallowedCastError(
                f"{where} does not allow {t.name} as {role} type "
                f"(casting {source.name} -> {target.name}); "
                f"{_first_version_with(effective_op, t)}"
            )
    mode = Mode(
        saturate=saturate,
        round_mode=rmode,
        profile=prof,
        inf_to_fnuz_is_nan=version.inf_to_fnuz_is_nan,
    )
    return Plan(op, version, opset, source, target, mode)


#: A cast is called with the same few options over and over, and resolving them costs more
#: than casting a small array.  ``typed``: 1 == True and 19.0 == 19, but only True and 19 are
#: valid.  (torch.compile traces through ``lru_cache`` to the function itself, so that it does
#: not guard on the cache's contents.)
_cached_resolve = lru_cache(maxsize=4096, typed=True)(_resolve)


def _first_version_with(op: Op, t: TypeSpec) -> str:
    for v in OPS[op]:
        if OnnxType(t.code) in v.types:
            return f"{op.value} allows it from opset {v.since}"
    return f"no version of {op.value} allows it"
