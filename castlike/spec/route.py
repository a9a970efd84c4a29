"""How a cast is carried out, decided once: the route of a (source, target, mode) on a library.

:func:`route_for` is a pure function of the pair, the mode and what the library declares
(:class:`Capabilities`).  It returns a :class:`Route`: the *family* of the cast, the *steps*
that produce the FLOAT bits a family rounds from, and every parameter a step needs (bounds,
special results, which table, the NaN policy).  Every engine executes a route and decides
nothing of its own:

* the array engine (:mod:`castlike._engine`), one implementation of each family and step
  written against a library's primitives;
* the native kernels (:mod:`castlike._native.routes`), one C++ kernel family per route family,
  its constants taken from the route;
* torch under ``torch.compile``, which reads a route's :attr:`Route.single_op` and family to
  choose between its own fused loop and the native operator.

Adding a family, a profile or a layout means a route here plus one implementation per engine.
Standard library only, like the rest of :mod:`castlike.spec`; nothing here computes on arrays,
and everything is plain values, so that ``torch.compile`` can trace it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from .float8_repairs import Float8Plan, PlanKey, plan_for
from .rules import (
    IEEE_NAN_TYPES,
    ROUNDED_VIA_FLOAT_TARGETS,
    WIDE_SOURCES,
    Mode,
    float_to_int_zeroes,
    nan_bits_for,
)
from .types import Kind, OnnxType, Special, TypeSpec, spec_of

__all__ = [
    "Capabilities",
    "Family",
    "FloatBits",
    "IeeeRecipe",
    "Route",
    "rounds_to_odd",
    "route_for",
    "saturation_bounds",
]

_T = OnnxType
_FLOAT = spec_of(_T.FLOAT)
#: Read once: torch.compile does not trace into a cached_property (its lock).
_FLOAT_EXACT_INTEGERS = _FLOAT.fmt.exact_integer_bound
_DOUBLE = spec_of(_T.DOUBLE)
_BFLOAT16 = spec_of(_T.BFLOAT16)

_IEEE_TARGETS = frozenset({_T.FLOAT, _T.DOUBLE, _T.FLOAT16})
#: Integer sources held exactly by DOUBLE (and whose DOUBLE is exact in the library).
_DOUBLE_EXACT_INTEGERS = frozenset({_T.INT32, _T.UINT32})
_WIDE_INTEGERS = frozenset({_T.INT64, _T.UINT64})


class Family(enum.Enum):
    """How a cast is carried out.  Every engine has one implementation of each."""

    #: The library's own conversion, where the library declares that it is the rule for the
    #: pair (:attr:`Capabilities.library_pairs`); R8's low bits for two integer types.
    LIBRARY = "the library's own conversion"
    #: A source of 16 bits or fewer: one gather from the spec's table of every pattern.
    PATTERN_TABLE = "one gather from the table of every source pattern"
    #: A wide integer source into an integer: keep the low bits (R8), after a clip to the
    #: target's range where the profile says so.
    LOW_BITS = "keep the low bits"
    #: A wide source into BOOL: nonzero is True.
    NONZERO = "nonzero"
    #: FLOAT or DOUBLE into an 8- to 64-bit integer: truncate, saturate, NaN to its result (R7).
    SATURATING_TRUNCATION = "truncation with saturation"
    #: FLOAT or DOUBLE into INT4/UINT4/INT2/UINT2: round as the profile says, keep the low bits.
    SUB_BYTE = "rounded, the low bits kept"
    #: A wide source into FLOAT, DOUBLE or FLOAT16: one rounding (:class:`IeeeRecipe`).
    IEEE = "one rounding into an IEEE type"
    #: A wide source into BFLOAT16: FLOAT bits rounded to odd, then to nearest even.
    BFLOAT16 = "BFLOAT16 from FLOAT bits"
    #: A wide source into a float of 8 bits or fewer: FLOAT bits rounded to odd, then one
    #: gather from the FLOAT class table (or the library's float8 conversion, repaired).
    SMALL_FLOAT = "FLOAT bits, then the class table"


class FloatBits(enum.Enum):
    """How a wide source becomes the FLOAT bits a family rounds from."""

    #: FLOAT itself.
    SAME = "FLOAT's own bits"
    #: The library's conversion to FLOAT: one rounding to nearest even (declared).
    LIBRARY_NEAREST = "the library's conversion to FLOAT"
    #: DOUBLE (an INT32/UINT32 exactly, an INT64/UINT64 rounded to odd by an exact two-part
    #: sum) rounded to odd into FLOAT by a round trip through the library's conversion.
    ODD = "rounded to odd into FLOAT"
    #: The same value rounded to nearest into FLOAT by the library's conversion.
    NEAREST = "rounded to nearest into FLOAT"
    #: DOUBLE's bits rounded to odd into FLOAT in integer arithmetic (a library whose float
    #: conversions flush subnormals).
    ODD_IN_INTEGERS = "rounded to odd into FLOAT, in integers"
    #: DOUBLE's bits rounded to nearest into FLOAT in integer arithmetic.
    NEAREST_IN_INTEGERS = "rounded to nearest into FLOAT, in integers"
    #: An integer's bits rounded to odd into FLOAT in integer arithmetic.
    INTEGER_ODD_IN_INTEGERS = "an integer rounded to odd into FLOAT, in integers"
    #: An integer clipped to +-2**24 (every integer beyond is beyond the small target's max,
    #: so the result is kept), then exact in FLOAT: fewer passes than rounding to odd.
    CLAMPED_INTEGER = "an integer clipped to +-2**24, exact in FLOAT"


class IeeeRecipe(enum.Enum):
    """How :attr:`Family.IEEE` rounds once into FLOAT, DOUBLE or FLOAT16."""

    #: The library's conversion rounds once already (or is exact): use it.
    LIBRARY = "the library's conversion"
    #: FLOAT's bits widened to DOUBLE in integers (a library that flushes subnormals).
    WIDEN_IN_INTEGERS = "FLOAT widened in integers"
    #: DOUBLE's bits rounded to nearest into FLOAT16/BFLOAT16 or FLOAT, in integers.
    NARROW_IN_INTEGERS = "DOUBLE narrowed in integers"
    #: FLOAT rounded to odd (:attr:`Route.float_bits`), then the library's conversion: the
    #: library may round DOUBLE -> FLOAT16 through FLOAT, twice (torch and XLA do).
    VIA_ODD_FLOAT = "FLOAT rounded to odd, then the library's conversion"
    #: An INT64/UINT64 rounded to odd into DOUBLE first, then the library's conversion.
    VIA_ODD_DOUBLE = "DOUBLE rounded to odd, then the library's conversion"


@dataclass(frozen=True)
class Capabilities:
    """What a library declares of its own arithmetic (see the adapter's attributes), as plain
    values: the input of :func:`route_for` besides the pair and the mode."""

    #: (source code, target code) pairs where the library's own conversion is the rule in the
    #: default mode (R8's low bits for two integer types).
    library_pairs: frozenset[tuple[int, int]] = frozenset()
    #: Its float conversions and comparisons may flush subnormals (XLA).
    flushes_subnormals: bool = False
    #: It has bit views and gathers (the Array-API standard has neither: a generic backend
    #: works on values, casts a small source as a wide one, and R3's NaN payload policy does
    #: not reach it).
    bit_views: bool = True
    #: It gathers DOUBLE sources into the small floats from the DOUBLE class table (one
    #: gather on uint64 index arithmetic, instead of FLOAT rounded to odd first).
    double_class_table: bool = False
    #: It takes integer sources into the small floats of max below 2**24 by a clip and an
    #: exact FLOAT (:attr:`FloatBits.CLAMPED_INTEGER`).
    clamped_integers: bool = False
    #: It casts the 8- and 16-bit integer sources by arithmetic, as the wide ones, rather than
    #: by a gather (castlike's kernels: a conversion, a mask or a clamp is faster).
    arithmetic_integers: bool = False
    #: How to repair its FLOAT -> float8 conversions, per target and mode
    #: (:func:`castlike.spec.float8_repairs.plans` of what the library makes of overflow, Inf
    #: and NaN, computed once: the plans need Fraction arithmetic, which torch.compile cannot
    #: trace); empty: the class table.
    float8_plans: tuple[tuple[PlanKey, Float8Plan | None], ...] = ()

    def __post_init__(self) -> None:
        # The plans as a mapping, built once: a dict made from the tuple on every lookup made
        # torch.compile guard on each of its ~250 entries (over 1,000 guards, checked before
        # every call of a compiled function); a lookup in a built dict guards on its key.
        object.__setattr__(self, "_plans", dict(self.float8_plans))

    def plans(self) -> Mapping[PlanKey, Float8Plan | None]:
        plans: Mapping[PlanKey, Float8Plan | None] = self.__dict__["_plans"]
        return plans


@dataclass(frozen=True)
class Route:
    """A cast, decided: its family, steps and every parameter (see the module docstring)."""

    family: Family
    source: TypeSpec
    target: TypeSpec
    #: The mode with the options the target ignores at their defaults.
    mode: Mode
    #: Wide sources of the rounding families: the FLOAT bits they round from.
    float_bits: FloatBits | None = None
    #: :attr:`Family.IEEE`: how it rounds.
    ieee: IeeeRecipe | None = None
    #: :attr:`Family.SATURATING_TRUNCATION`: clip to ``[low, high]`` (exact in the source
    #: format) and truncate; where ``limit`` is not None, every ``x >= limit`` is int_max.
    saturation: tuple[float, float, float | None] | None = None
    #: :attr:`Family.SUB_BYTE` / :attr:`Family.LOW_BITS`: clip to the target's range first
    #: (the legacy profile), as (low, high).  :attr:`FloatBits.CLAMPED_INTEGER`: the integer
    #: range that is exact in FLOAT and holds every result.
    clip: tuple[int, int] | None = None
    #: :attr:`Family.SUB_BYTE`: "half_even" or "toward_zero".
    rounding: str = "half_even"
    #: :attr:`Family.SUB_BYTE`: the magnitude from which every float is a multiple of
    #: 2**bits, so that clipping there keeps the low bits.
    wrap_bound: float = 0.0
    #: :attr:`Family.SUB_BYTE`: the float values the profile's ml_dtypes turns into 0
    #: (:func:`~castlike.spec.rules.float_to_int_zeroes`), as the open interval kept:
    #: ``(low, high, inclusive)``; None keeps every value.
    keep: tuple[float, float, bool] | None = None
    #: What a NaN of the source becomes (integer targets, the repaired library conversions).
    nan_result: int | None = None
    #: :attr:`Family.BFLOAT16`: keep the upper 16 bits of the FLOAT (legacy) instead of
    #: rounding to nearest even.
    truncate: bool = False
    #: :attr:`Family.BFLOAT16`: round by the library's FLOAT -> BFLOAT16 conversion (declared).
    library_bfloat16: bool = False
    #: :attr:`Family.SMALL_FLOAT`: FLOAT8E8M0 from a source rounded to nearest FLOAT first:
    #: x < 0 is NaN (R6's choice) even where it rounded to -0.0.
    negative_is_nan: bool = False
    #: :attr:`Family.SMALL_FLOAT`: the library's float8 conversion with its specials repaired.
    float8_plan: Float8Plan | None = None
    #: :attr:`Family.SMALL_FLOAT` from DOUBLE: one gather from the DOUBLE class table.
    double_classes: bool = False
    #: R3's NaN policy after the step: a NaN between two different IEEE types keeps its sign
    #: and payload top bits, quieted (where the family's step may not: a library conversion).
    nan_policy: bool = False
    #: :attr:`Family.LIBRARY` from the FNUZ NaN (0x80) into a float: the rule's NaN bits, which
    #: a library may not write (XLA writes a positive NaN).
    fnuz_nan: int | None = None
    #: :attr:`Family.NONZERO` and the FLOAT8E8M0 sign test: test a float's bits, not its
    #: value (a library whose comparisons treat subnormals as zero).
    on_bits: bool = False
    #: Whether the cast is one library operation (torch blocks only the several-op ones).
    single_op: bool = False
    #: Human-readable steps, for ``castlike explain --verbose``.
    steps: tuple[str, ...] = field(default=(), compare=False)

    def describe(self) -> str:
        """The route in words, one line per step."""
        head = f"{self.source.name} -> {self.target.name}: {self.family.value}"
        return "\n".join([head, *(f"  - {s}" for s in self.steps)])


# -- facts of the spec that the routes use --------------------------------------------------


def saturation_bounds(source: TypeSpec, target: TypeSpec) -> tuple[float, float, float | None]:
    """R7's saturating truncation from FLOAT/DOUBLE ``source`` to a whole-byte integer type.

    Returns ``(low, high, limit)``: clip to ``[low, high]`` (both exact in the source format)
    and truncate; where ``limit`` is not None, ``target.int_max`` is not a value of the source
    format, ``high`` is the largest one below it, and every ``x >= limit`` becomes
    ``int_max``.
    """
    mantissa = source.fmt.mantissa_bits
    low = float(target.int_min)
    if target.int_max < 2 ** (mantissa + 1):
        return low, float(target.int_max), None
    limit = float(target.int_max + 1)  # a power of two
    # The float just below a power of two p is p * (1 - 2**-(mantissa + 1)).
    return low, limit - limit / float(1 << (mantissa + 1)), limit


def rounds_to_odd(source: TypeSpec, target: TypeSpec, mode: Mode) -> bool:
    """False where the profile rounds a wide source to nearest FLOAT first (R12): through
    ml_dtypes before 0.7, and into FLOAT8E8M0 wherever the onnx helper converts."""
    if source.code not in WIDE_SOURCES:
        return True
    rules = mode.profile.rules
    if target.code == _T.FLOAT8E8M0 and rules.e8m0_by_onnx_helper:
        return False
    return not (rules.wide_sources_via_float and target.code in ROUNDED_VIA_FLOAT_TARGETS)


def library_is_rule(source: TypeSpec, target: TypeSpec, mode: Mode, caps: Capabilities) -> bool:
    """Whether the library's own conversion of the pair is the rule under ``mode``: declared
    (for the default mode), and the mode does not change the pair's rule."""
    if (int(source.code), int(target.code)) not in caps.library_pairs:
        return False
    rules = mode.profile.rules
    if target.code == _T.BFLOAT16 and rules.bfloat16 != "nearest_even":
        return False
    if target.is_sub_byte and rules.sub_byte_range != "wrap":
        return False
    if float_to_int_zeroes(source, target, mode) != "none":
        return False
    return rounds_to_odd(source, target, mode)  # no rounding through FLOAT first


def _nan_policy(source: TypeSpec, target: TypeSpec) -> bool:
    """Whether R3's NaN payload policy concerns the pair (two different IEEE types)."""
    s, t = source.code, target.code  # plain codes: a format outside the 26 (a test's) too
    return s != t and s in IEEE_NAN_TYPES and t in IEEE_NAN_TYPES


def _float_bits(source: TypeSpec, odd: bool, caps: Capabilities, mode: Mode) -> FloatBits:
    s = source.code
    if s == _T.FLOAT:
        return FloatBits.SAME
    if not odd and library_is_rule(source, _FLOAT, mode, caps):
        return FloatBits.LIBRARY_NEAREST
    if caps.flushes_subnormals:
        if s == _T.DOUBLE:
            return FloatBits.ODD_IN_INTEGERS if odd else FloatBits.NEAREST_IN_INTEGERS
        if odd:
            return FloatBits.INTEGER_ODD_IN_INTEGERS
    return FloatBits.ODD if odd else FloatBits.NEAREST


# -- the compiler --------------------------------------------------------------------------


def route_for(source: TypeSpec, target: TypeSpec, mode: Mode, caps: Capabilities) -> Route:
    """The route of ``source`` -> ``target`` under ``mode`` on a library of ``caps``.

    ``mode`` may carry options the target ignores; the route holds
    ``mode.effective_for(target)``.  Cached: a route is a few plain values.
    """
    return _route(source, target, mode.effective_for(target), caps)


@lru_cache(maxsize=8192)
def _route(source: TypeSpec, target: TypeSpec, mode: Mode, caps: Capabilities) -> Route:
    base = Route(Family.LIBRARY, source, target, mode)
    if library_is_rule(source, target, mode, caps):
        if source.is_integer and target.is_integer:  # R8's low bits, however the library
            return _with(base, Family.LOW_BITS, single_op=True, steps=("keep the low bits",))
        return _library(base, source, target, mode, caps)
    by_arithmetic = caps.arithmetic_integers and source.is_integer and not source.is_sub_byte
    if source.storage_bits <= 16 and caps.bit_views and not by_arithmetic:
        return _with(base, Family.PATTERN_TABLE, steps=("gather the pattern table",))
    if target.kind is Kind.BOOL:
        on_bits = source.is_float and caps.flushes_subnormals
        return _with(
            base,
            Family.NONZERO,
            on_bits=on_bits,
            single_op=not on_bits,
            steps=("a bit of the magnitude set" if on_bits else "x != 0",),
        )
    if target.is_integer:
        return _integer(base, source, target, mode)
    t = target.code
    odd = rounds_to_odd(source, target, mode)
    if t in _IEEE_TARGETS:
        return _ieee(base, source, target, mode, caps)
    bits = _float_bits(source, odd, caps, mode)
    if t == _T.BFLOAT16:
        return _bfloat16(base, source, target, mode, caps, odd)
    plan = plan_for(caps.plans(), target, mode) if caps.float8_plans else None
    double_classes = source.code == _T.DOUBLE and odd and caps.double_class_table and not plan
    # (The conditions in this order: torch.compile traces no Fraction, and a library without
    # clamped integers never reaches max_value.)
    clip = None
    bound = _FLOAT_EXACT_INTEGERS
    if (
        plan is None
        and source.is_integer
        and caps.clamped_integers
        and target.fmt.max_value < bound
    ):
        bits = FloatBits.CLAMPED_INTEGER
        clip = (max(source.int_min, -bound), min(source.int_max, bound))
    on_bits = caps.flushes_subnormals
    negative_is_nan = (
        t == _T.FLOAT8E8M0
        and not odd
        and source.code != _T.FLOAT
        and mode.profile.rules.e8m0_negative == "nan"
    )
    return _with(
        base,
        Family.SMALL_FLOAT,
        float_bits=bits,
        clip=clip,
        float8_plan=plan,
        double_classes=double_classes,
        negative_is_nan=negative_is_nan,
        on_bits=on_bits and negative_is_nan,
        single_op=plan is not None
        and bits is FloatBits.SAME
        and plan.repair == "none"
        and plan.library_nan is None,
        steps=(
            ("gather the DOUBLE class table",)
            if double_classes
            else (
                f"FLOAT bits: {bits.value}",
                "the library's float8 conversion, repaired" if plan else "gather the class table",
            )
        ),
    )


def _bfloat16(
    base: Route, source: TypeSpec, target: TypeSpec, mode: Mode, caps: Capabilities, odd: bool
) -> Route:
    truncate = mode.profile.rules.bfloat16 == "truncate"
    if truncate:  # the legacy rule: FLOAT's upper half, of FLOAT rounded to nearest
        bits = _float_bits(source, False, caps, mode)
        return _with(
            base,
            Family.BFLOAT16,
            float_bits=bits,
            truncate=True,
            steps=(f"FLOAT bits: {bits.value}", "keep the upper 16 bits"),
        )
    if source.code == _T.DOUBLE and odd and caps.flushes_subnormals:
        return _with(
            base,
            Family.BFLOAT16,
            ieee=IeeeRecipe.NARROW_IN_INTEGERS,
            steps=(IeeeRecipe.NARROW_IN_INTEGERS.value,),
        )
    bits = _float_bits(source, odd, caps, mode)
    library = library_is_rule(_FLOAT, _BFLOAT16, mode, caps)
    return _with(
        base,
        Family.BFLOAT16,
        float_bits=bits,
        library_bfloat16=library,
        # The bit arithmetic quiets a NaN itself; a library's conversion may not.
        nan_policy=library and _nan_policy(source, target) and caps.bit_views,
        single_op=library and bits is FloatBits.SAME and not _nan_policy(source, target),
        steps=(
            f"FLOAT bits: {bits.value}",
            "the library's FLOAT -> BFLOAT16" if library else "round to nearest even",
        ),
    )


def _with(base: Route, family: Family, **changes: object) -> Route:
    from dataclasses import replace

    return replace(base, family=family, **changes)  # type: ignore[arg-type]


def _library(
    base: Route, source: TypeSpec, target: TypeSpec, mode: Mode, caps: Capabilities
) -> Route:
    fnuz = None
    if source.is_float and source.fmt.special is Special.FNUZ and target.is_float:
        fnuz = nan_bits_for(target, mode, negative=True)
    policy = _nan_policy(source, target) and caps.bit_views
    return _with(
        base,
        Family.LIBRARY,
        fnuz_nan=fnuz,
        nan_policy=policy,
        single_op=fnuz is None and not policy,
        steps=("the library's conversion",)
        + (("a NaN quieted, its sign and payload top bits kept",) if policy else ()),
    )


def _integer(base: Route, source: TypeSpec, target: TypeSpec, mode: Mode) -> Route:
    rules = mode.profile.rules
    clip = None
    if target.is_sub_byte and rules.sub_byte_range == "saturate":
        clip = (target.int_min, target.int_max)
    if not source.is_float:
        return _with(base, Family.LOW_BITS, clip=clip, steps=("keep the low bits",))
    if not target.is_sub_byte:
        return _with(
            base,
            Family.SATURATING_TRUNCATION,
            saturation=saturation_bounds(source, target),
            nan_result=nan_bits_for(target, mode, negative=False),
            steps=("NaN to its result, clip to the range, truncate",),
        )
    zeroes = float_to_int_zeroes(source, target, mode)
    keep = None
    if zeroes == "beyond_range":  # trunc(x) in [min, max]: min - 1 < x < max + 1
        keep = (float(target.int_min - 1), float(target.int_max + 1), False)
    elif zeroes == "beyond_int32":  # x itself in [-2**31, 2**31 - 1]
        keep = (-(2.0**31), 2.0**31 - 1, True)
    return _with(
        base,
        Family.SUB_BYTE,
        clip=clip,
        rounding="half_even" if rules.sub_byte_rounding == "half_even" else "toward_zero",
        wrap_bound=float(2 ** (source.fmt.mantissa_bits + 1 + target.bits)),
        keep=keep,
        nan_result=nan_bits_for(target, mode, negative=False),
        steps=(
            f"round {rules.sub_byte_rounding.replace('_', ' ')}, keep the low bits"
            + ("" if keep is None else f", 0 outside {keep[:2]}"),
        ),
    )


def _ieee(base: Route, source: TypeSpec, target: TypeSpec, mode: Mode, caps: Capabilities) -> Route:
    s, t = source.code, target.code
    flushes = caps.flushes_subnormals
    bits = None
    if s == t:
        recipe = IeeeRecipe.LIBRARY
    elif t == _T.DOUBLE:
        recipe = IeeeRecipe.WIDEN_IN_INTEGERS if s == _T.FLOAT and flushes else IeeeRecipe.LIBRARY
    elif t == _T.FLOAT16:
        if s == _T.FLOAT:
            recipe = IeeeRecipe.LIBRARY
        elif s == _T.DOUBLE and flushes:
            recipe = IeeeRecipe.NARROW_IN_INTEGERS
        else:
            recipe, bits = IeeeRecipe.VIA_ODD_FLOAT, _float_bits(source, True, caps, mode)
    elif s == _T.DOUBLE and flushes:
        recipe = IeeeRecipe.NARROW_IN_INTEGERS
    elif s in _WIDE_INTEGERS:
        recipe = IeeeRecipe.VIA_ODD_DOUBLE
    else:
        recipe = IeeeRecipe.LIBRARY
    policy = _nan_policy(source, target) and caps.bit_views
    return _with(
        base,
        Family.IEEE,
        ieee=recipe,
        float_bits=bits,
        nan_policy=policy,
        single_op=recipe is IeeeRecipe.LIBRARY and not policy,
        steps=(recipe.value,)
        + (("a NaN quieted, its sign and payload top bits kept",) if policy else ()),
    )
