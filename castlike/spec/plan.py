"""Resolve one cast request against the spec: the operator version, the options, the pair.

:func:`resolve` is where every rule of R2/R11 about *whether* a cast is allowed lives; the
backends receive a :class:`Plan` that is known to be valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import CastValueError, DisallowedCastError, OpsetError, shown_value
from .opsets import LATEST_OPSET, OPS, Op, OpVersion, version_for
from .profiles import profile_names, resolve_profile
from .rules import Mode, Profile, RoundMode
from .types import OnnxType, TypeSpec

__all__ = [
    "Plan",
    "check_opset",
    "parse_profile",
    "parse_round_mode",
    "plain_int",
    "plain_str",
    "resolve",
]


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
    """The :class:`Profile` named ``profile`` (a str, any case; see
    :func:`castlike.spec.profiles.resolve_profile`: ``"reference"`` follows the installed
    ml_dtypes and onnx); a CastValueError lists the valid names."""
    if isinstance(profile, Profile):
        return profile
    if not isinstance(profile, str):
        names = ", ".join(repr(n) for n in profile_names())
        raise CastValueError(
            f"unknown profile {shown_value(profile)}; expected one of {names} (a str)"
        )
    return resolve_profile(plain_str(profile))


def parse_round_mode(round_mode: str | RoundMode) -> RoundMode:
    """The :class:`RoundMode` named ``round_mode`` (a str, any case); a CastValueError lists
    the valid names."""
    if isinstance(round_mode, RoundMode):
        return round_mode
    found = _member(RoundMode, round_mode)
    if found is None:
        names = ", ".join(repr(r.value) for r in RoundMode)
        raise CastValueError(
            f"unknown round_mode {shown_value(round_mode)}; expected one of {names} (a str)"
        )
    return found


#: The members of the option enums by value: a dict lookup, since torch 2.11's Dynamo cannot
#: trace iterating an Enum class (TypeError "missing required positional argument: cls").
_MEMBERS: dict[Any, dict[str, Any]] = {
    enum: {member.value: member for member in enum} for enum in (RoundMode, Profile)
}


def _member(enum: Any, name: Any) -> Any:
    """The member of ``enum`` whose value is the str ``name`` in lower case, or None (not a
    str)."""
    if not isinstance(name, str):
        return None
    return _MEMBERS[enum].get(plain_str(name).lower())


def plain_str(value: str) -> str:
    """The plain ``str`` a str (or an instance of a subclass) holds.

    A subclass's methods (``lower``, ``__eq__``, ``__hash__`` ...) may raise, or lie; the
    plain str has Python's own.  (A plain str is returned as it is, without a call that
    torch.compile cannot trace.)
    """
    return value if type(value) is str else str.__str__(value)


def plain_int(value: int) -> int:
    """The plain ``int`` an int (or an instance of a subclass, not bool) holds; see
    :func:`plain_str`."""
    return value if type(value) is int else int.__int__(value)


def check_opset(opset: Any) -> int | None:
    """``opset`` if it is one castlike knows: None (the latest) or a Python int from 1 to
    :data:`LATEST_OPSET`, as a plain ``int``.  The one check of what an opset is, shared by
    :func:`resolve` and ``can_cast``, so that they never disagree.

    Raises
    ------
    OpsetError
        Anything else: a bool, a float, a NumPy integer, a string, an int out of range.
    """
    if opset is None:
        return None
    if isinstance(opset, bool) or not isinstance(opset, int):
        raise OpsetError(
            f"opset must be an int or None, got {shown_value(opset)} of type "
            f"{type(opset).__name__}; opsets are Python ints from 1 to {LATEST_OPSET}"
        )
    value = plain_int(opset)  # a subclass's comparisons are never called
    if value < 1 or value > LATEST_OPSET:
        raise OpsetError(
            f"opset {value} is outside the opsets castlike knows (1 to {LATEST_OPSET})"
        )
    return value


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
    if all(type(option) in _CACHED_TYPES for option in options):
        return _cached_resolve(op, source, target, *options)
    # Anything else is validated without the cache, whose lookup would hash and compare the
    # option: an object's own __hash__ or __eq__ may raise, or call it valid.
    return _resolve(op, source, target, *options)


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
        raise CastValueError(f"saturate must be True or False, got {shown_value(saturate)}")
    opset = check_opset(opset)
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
#: The exact types of option values the cache takes (their hash and == are Python's own).
_CACHED_TYPES = frozenset({bool, int, str, type(None), RoundMode, Profile})


def _first_version_with(op: Op, t: TypeSpec) -> str:
    for v in OPS[op]:
        if OnnxType(t.code) in v.types:
            return f"{op.value} allows it from opset {v.since}"
    return f"no version of {op.value} allows it"
