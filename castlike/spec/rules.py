"""The special rules R3-R8 and the profiles of R12, as data.

The oracle (:mod:`castlike.spec.reference`) and every backend read these tables; nothing here
computes on arrays.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from .types import FloatFormat, Kind, OnnxType, Special, TypeSpec

__all__ = [
    "FLOAT8_TYPES",
    "IEEE_NAN_TYPES",
    "ML_DTYPES_FLOATS",
    "OVERFLOW_RULES",
    "PROFILES",
    "ROUNDED_VIA_FLOAT_TARGETS",
    "SATURATE_TYPES",
    "WIDE_SOURCES",
    "Action",
    "Mode",
    "Profile",
    "ProfileRules",
    "RoundMode",
    "canonical_mode",
    "float_to_int_zeroes",
    "ieee_nan_field",
    "nan_bits_for",
    "overflow_rule",
]


class RoundMode(enum.Enum):
    """``round_mode`` of Cast-24+, used by FLOAT8E8M0 targets only (R6)."""

    UP = "up"
    DOWN = "down"
    NEAREST = "nearest"


class Profile(enum.Enum):
    """Which body of rules to follow (R12).

    ``reference`` is one profile per *ml_dtypes behaviour family*: onnx.reference casts through
    ml_dtypes, whose conversions changed between releases.  The name ``"reference"`` resolves
    to the family of the installed ml_dtypes (:func:`castlike.spec.profiles.resolve_profile`);
    ``"reference:ml_dtypes-0.6"`` names one explicitly.
    """

    SPEC = "spec"
    #: onnx.reference with ml_dtypes 0.5 and 0.6.
    REFERENCE_ML_DTYPES_0_5 = "reference:ml_dtypes-0.5"
    #: onnx.reference with ml_dtypes 0.7.
    REFERENCE_ML_DTYPES_0_7 = "reference:ml_dtypes-0.7"
    #: The same with onnx 1.19-1.21, whose FLOAT8E8M0 helper differs (round_mode="up").
    REFERENCE_ONNX_1_19_ML_DTYPES_0_5 = "reference:onnx-1.19:ml_dtypes-0.5"
    REFERENCE_ONNX_1_19_ML_DTYPES_0_7 = "reference:onnx-1.19:ml_dtypes-0.7"
    LEGACY = "legacy"

    @property
    def rules(self) -> ProfileRules:
        return PROFILES[self]

    @property
    def is_reference(self) -> bool:
        """Whether this is one of the ``reference`` families."""
        return self.value.startswith("reference:")


@dataclass(frozen=True)
class ProfileRules:
    """The knobs in which the profiles differ (R12).  Each is named after what it changes."""

    #: onnx.reference converts through ml_dtypes, which (before 0.7) rounds DOUBLE/INT32/UINT32/
    #: INT64/UINT64 sources to FLOAT first for the targets in ROUNDED_VIA_FLOAT_TARGETS (double
    #: rounding).
    wide_sources_via_float: bool
    #: float -> INT4/UINT4/INT2/UINT2: "half_even" (int4/int2 notes) or "toward_zero" (ml_dtypes).
    sub_byte_rounding: str
    #: any number -> INT4/UINT4/INT2/UINT2 beyond the range: "wrap" (keep the low bits, the
    #: int4/int2 notes) or "saturate" (onnx <= 1.18: clip to the range, then round).
    sub_byte_range: str
    #: The float values that a conversion *performed by ml_dtypes* turns into 0 where R7 would
    #: not (NaN and Inf into the 4/2-bit integers are 0 in every profile):
    #: "rules" (none: R7 everywhere);
    #: "zero_beyond_int32" (ml_dtypes 0.5-0.6: into INT4/UINT4/INT2/UINT2, from any float, x
    #: beyond the INT32 range);
    #: "zero_beyond_range" (ml_dtypes 0.7: into INT4/UINT4/INT2/UINT2 from any float, and into
    #: every integer from a float type of ml_dtypes (ML_DTYPES_FLOATS), NaN, Inf and every x
    #: whose truncation lies beyond the target's range).
    ml_dtypes_float_to_int: str
    #: The NaN pattern of FLOAT8E5M2 (sign bit added for negative NaN): 0x7E (ml_dtypes) or
    #: 0x7F (onnx <= 1.18's own float8 conversion).
    float8e5m2_nan: int
    #: NaN -> FLOAT4E2M1/FLOAT6*: "max" (float4 note) or "opposite_zero" (ml_dtypes: +NaN -> -0).
    finite_only_nan: str
    #: -> FLOAT8E8M0: "rules" (R6), "onnx_helper" (onnx.numpy_helper.to_float8e8m0 of onnx >=
    #: 1.22) or "onnx_helper_before_1.22" (onnx 1.19-1.21's, whose round_mode "up" looks at
    #: the FLOAT fraction bits of the mask 0x4FFFFF only, so that a fraction in bits 20-21
    #: alone rounds down).
    e8m0: str
    #: x < 0 -> FLOAT8E8M0: "nan" (R6's castlike choice) or "magnitude" (the onnx helper reads
    #: the exponent field only, so -x gives the result of x).
    e8m0_negative: str
    #: +-Inf -> FNUZ with saturate: "by_opset" (R2) or "max" (every version).
    fnuz_inf: str
    #: -> BFLOAT16: "nearest_even" or "truncate" (keep the upper 16 bits of the FLOAT).
    bfloat16: str
    #: Number <-> string: "spec" (R9) or "numpy" (numpy.astype(str) text).
    strings: str

    @property
    def e8m0_by_onnx_helper(self) -> bool:
        """Whether FLOAT8E8M0 targets follow one of onnx's helpers (through FLOAT)."""
        return self.e8m0.startswith("onnx_helper")

    @property
    def e8m0_up_fraction_mask(self) -> int:
        """The FLOAT fraction bits that make onnx's helper round up (round_mode "up")."""
        return 0x4FFFFF if self.e8m0 == "onnx_helper_before_1.22" else 0x7FFFFF


_REFERENCE_ML_DTYPES_0_5 = ProfileRules(
    wide_sources_via_float=True,
    sub_byte_rounding="toward_zero",
    sub_byte_range="wrap",
    ml_dtypes_float_to_int="zero_beyond_int32",
    float8e5m2_nan=0x7E,
    finite_only_nan="opposite_zero",
    e8m0="onnx_helper",
    e8m0_negative="magnitude",
    fnuz_inf="max",
    bfloat16="nearest_even",
    strings="numpy",
)
PROFILES: dict[Profile, ProfileRules] = {
    Profile.SPEC: ProfileRules(
        wide_sources_via_float=False,
        sub_byte_rounding="half_even",
        sub_byte_range="wrap",
        ml_dtypes_float_to_int="rules",
        float8e5m2_nan=0x7E,
        finite_only_nan="max",
        e8m0="rules",
        e8m0_negative="nan",
        fnuz_inf="by_opset",
        bfloat16="nearest_even",
        strings="spec",
    ),
    Profile.REFERENCE_ML_DTYPES_0_5: _REFERENCE_ML_DTYPES_0_5,
    # ml_dtypes 0.7 rounds wide sources once, and turns NaN, Inf and out-of-range floats into 0
    # in every integer conversion it performs.
    Profile.REFERENCE_ML_DTYPES_0_7: replace(
        _REFERENCE_ML_DTYPES_0_5,
        wide_sources_via_float=False,
        ml_dtypes_float_to_int="zero_beyond_range",
    ),
    Profile.REFERENCE_ONNX_1_19_ML_DTYPES_0_5: replace(
        _REFERENCE_ML_DTYPES_0_5, e8m0="onnx_helper_before_1.22"
    ),
    # onnx <= 1.18's reference (and the test data it generated) differs from the ml_dtypes 0.5
    # reference in four ways: BFLOAT16 by truncation, INT4/UINT4 by clip-then-round-half-even,
    # NaN -> FLOAT8E5M2 as 0x7F/0xFF, and NaN -> FLOAT4E2M1 as +max.  It keeps castlike's
    # choices for negative FLOAT8E8M0 inputs and floats beyond INT32 into 4/2-bit integers.
    Profile.LEGACY: replace(
        _REFERENCE_ML_DTYPES_0_5,
        bfloat16="truncate",
        sub_byte_rounding="half_even",
        sub_byte_range="saturate",
        ml_dtypes_float_to_int="rules",
        float8e5m2_nan=0x7F,
        finite_only_nan="max",
        e8m0_negative="nan",
    ),
}
PROFILES[Profile.REFERENCE_ONNX_1_19_ML_DTYPES_0_7] = replace(
    PROFILES[Profile.REFERENCE_ML_DTYPES_0_7], e8m0="onnx_helper_before_1.22"
)

_T = OnnxType

#: The float8 types of R4.
FLOAT8_TYPES = frozenset({_T.FLOAT8E4M3FN, _T.FLOAT8E4M3FNUZ, _T.FLOAT8E5M2, _T.FLOAT8E5M2FNUZ})
#: Targets whose conversion the ``saturate`` attribute changes (R4, R6).
SATURATE_TYPES = FLOAT8_TYPES | {_T.FLOAT8E8M0}
#: Sources wider than FLOAT's 24-bit significand: rounded once, directly (R3), by the spec.
WIDE_SOURCES = frozenset({_T.DOUBLE, _T.INT32, _T.UINT32, _T.INT64, _T.UINT64})
#: Targets that ml_dtypes (hence onnx.reference) reaches from a wide source through FLOAT.
ROUNDED_VIA_FLOAT_TARGETS = SATURATE_TYPES | {
    _T.BFLOAT16,
    _T.FLOAT4E2M1,
    _T.FLOAT6E2M3,
    _T.FLOAT6E3M2,
}
#: The float types that ml_dtypes implements (NumPy has FLOAT16, FLOAT and DOUBLE itself).  A
#: conversion from one of them, or into a 4/2-bit integer, is ml_dtypes' own (R12).
ML_DTYPES_FLOATS = frozenset(
    {*FLOAT8_TYPES, _T.FLOAT8E8M0, _T.BFLOAT16, _T.FLOAT4E2M1, _T.FLOAT6E2M3, _T.FLOAT6E3M2}
)


def float_to_int_zeroes(source: TypeSpec, target: TypeSpec, mode: Mode) -> str:
    """Which float values the profile's ml_dtypes turns into 0 for this float -> integer pair
    (:attr:`ProfileRules.ml_dtypes_float_to_int`): ``"none"``, ``"beyond_int32"`` (x itself
    beyond the INT32 range) or ``"beyond_range"`` (NaN, Inf, and x whose truncation is beyond
    the target's range)."""
    how = mode.profile.rules.ml_dtypes_float_to_int
    if not (source.is_float and target.is_integer and target.kind is not Kind.BOOL):
        return "none"
    if how == "zero_beyond_int32" and target.is_sub_byte:
        return "beyond_int32"
    if how == "zero_beyond_range" and (target.is_sub_byte or source.code in ML_DTYPES_FLOATS):
        return "beyond_range"
    return "none"


#: The IEEE types between which a NaN keeps its sign and payload top bits, quieted (R3's one
#: NaN policy, :func:`ieee_nan_field`); into its own type a pattern is kept as it is.  A NaN
#: from a float of 8 bits or fewer becomes the target's quiet NaN with the input's sign bit.
IEEE_NAN_TYPES = frozenset({_T.FLOAT16, _T.BFLOAT16, _T.FLOAT, _T.DOUBLE})


def nan_bits_for(target: TypeSpec, mode: Mode, *, negative: bool) -> int:
    """What a NaN (of the given sign) becomes in ``target`` under ``mode``, where no payload is
    kept: R4's NaN encodings (R12's in the other profiles), R5's result for the finite-only
    formats, R6's 0xFF, and 0 for integers (R7's choice).  The oracle, the tables and the
    routes read it."""
    if not target.is_float:
        return int(target.kind is Kind.BOOL)  # NaN is nonzero: True
    fmt = target.fmt
    if fmt.special is Special.FINITE:
        if mode.profile.rules.finite_only_nan == "max":
            return fmt.max_bits
        return 0 if negative else fmt.sign_mask  # ml_dtypes: +NaN -> -0, -NaN -> +0
    if target.code == _T.FLOAT8E5M2:
        return mode.profile.rules.float8e5m2_nan | (fmt.sign_mask if negative else 0)
    nan = fmt.nan_bits(negative)
    assert nan is not None
    return nan


def ieee_nan_field(payload: int, source: FloatFormat, target: FloatFormat) -> int:
    """R3's one NaN policy between FLOAT16, BFLOAT16, FLOAT and DOUBLE: the exponent and
    mantissa fields that a NaN of ``source`` whose mantissa field is ``payload`` gets in
    ``target`` (the sign is kept apart): quiet (the mantissa's top bit set), with the top bits
    of its payload, aligned at the top and cut or filled with zeros.  What the hardware's
    conversions do.  Works on Python ints and on integer arrays alike."""
    shift = target.mantissa_bits - source.mantissa_bits
    moved = payload << shift if shift >= 0 else payload >> -shift
    quiet = 1 << (target.mantissa_bits - 1)
    inf = ((1 << target.exponent_bits) - 1) << target.mantissa_bits
    return inf | quiet | moved


class Action(enum.Enum):
    """What an out-of-range value (or Inf) becomes."""

    MAX = "max"  # +-largest finite value
    INF = "inf"  # +-Inf
    NAN = "nan"  # the format's NaN (sign kept where the format has one)


@dataclass(frozen=True)
class OverflowRule:
    """R4/R5 table rows: what Inf and a rounded value beyond max become."""

    inf: Action
    overflow: Action


#: (format special, saturate) -> rule.  IEEE formats other than FLOAT8E5M2 ignore saturate.
OVERFLOW_RULES: dict[tuple[Special, bool], OverflowRule] = {
    (Special.IEEE, True): OverflowRule(Action.MAX, Action.MAX),  # FLOAT8E5M2, saturate
    (Special.IEEE, False): OverflowRule(Action.INF, Action.INF),
    (Special.FN, True): OverflowRule(Action.MAX, Action.MAX),
    (Special.FN, False): OverflowRule(Action.NAN, Action.NAN),
    (Special.FNUZ, True): OverflowRule(Action.MAX, Action.MAX),
    (Special.FNUZ, False): OverflowRule(Action.NAN, Action.NAN),
    # R5: finite-only formats always saturate; saturate does not apply.
    (Special.FINITE, True): OverflowRule(Action.MAX, Action.MAX),
    (Special.FINITE, False): OverflowRule(Action.MAX, Action.MAX),
}


@dataclass(frozen=True)
class Mode:
    """The options of one cast, resolved against an opset (see ``castlike.cast``)."""

    saturate: bool = True
    round_mode: RoundMode = RoundMode.UP
    profile: Profile = Profile.SPEC
    #: Set by the opset (R2): Cast/CastLike 19-23.
    inf_to_fnuz_is_nan: bool = False

    def effective_for(self, target: TypeSpec) -> Mode:
        """The same mode with the options ``target`` ignores set to their defaults.

        Two modes with equal ``effective_for`` give the same results; caches key on it.
        """
        t = target.code  # a plain code: a format outside the 26 (a test's) resolves too
        saturate = self.saturate if t in SATURATE_TYPES else True
        round_mode = self.round_mode if t == _T.FLOAT8E8M0 else RoundMode.UP
        fnuz_target = t in (_T.FLOAT8E4M3FNUZ, _T.FLOAT8E5M2FNUZ)
        fnuz = self.inf_to_fnuz_is_nan and saturate and fnuz_target
        return Mode(saturate, round_mode, self.profile, fnuz)


def _relevant_knobs(source: TypeSpec, target: TypeSpec, mode: Mode) -> tuple[str, ...]:
    """The :class:`ProfileRules` fields that can change a ``source`` -> ``target`` cast."""
    s, t = source.code, target.code
    floaty = source.kind.value in ("float", "string")  # sources that carry fractions or NaN
    knobs = []
    if s in WIDE_SOURCES and t in ROUNDED_VIA_FLOAT_TARGETS:
        knobs.append("wide_sources_via_float")
    if target.is_sub_byte and target.is_integer:
        knobs.append("sub_byte_range")
        if floaty:
            knobs.append("sub_byte_rounding")
    if source.kind.value == "float" and target.is_integer:
        knobs.append("ml_dtypes_float_to_int")
    if t == _T.FLOAT8E5M2 and floaty:
        knobs.append("float8e5m2_nan")
    if target.float_format is not None and target.fmt.special is Special.FINITE and floaty:
        knobs.append("finite_only_nan")
    if t == _T.FLOAT8E8M0:
        knobs += ["e8m0", "e8m0_negative"]
    if mode.inf_to_fnuz_is_nan:  # effective_for() keeps it only where it applies
        knobs.append("fnuz_inf")
    if t == _T.BFLOAT16:
        knobs.append("bfloat16")
    if _T.STRING in (s, t):
        knobs.append("strings")
    return tuple(knobs)


def canonical_mode(mode: Mode, source: TypeSpec, target: TypeSpec) -> Mode:
    """The simplest mode that gives the same results as ``mode`` for this pair.

    Options the target ignores take their defaults, and the profile becomes the first of
    spec / reference / legacy whose rules agree with ``mode.profile`` on every knob that can
    change this pair.  Caches of results key on it.
    """
    mode = mode.effective_for(target)
    knobs = _relevant_knobs(source, target, mode)
    wanted = [knob_effect(mode.profile, k, source, target) for k in knobs]
    for profile in Profile:
        if [knob_effect(profile, k, source, target) for k in knobs] == wanted:
            return replace(mode, profile=profile)
    return mode


def knob_effect(profile: Profile, knob: str, source: TypeSpec, target: TypeSpec) -> object:
    """What the :class:`ProfileRules` field ``knob`` of ``profile`` does to this pair: its value,
    or for ``ml_dtypes_float_to_int`` the values it zeroes here (:func:`float_to_int_zeroes`),
    so that two profiles whose fields differ only where this pair does not look agree."""
    if knob == "ml_dtypes_float_to_int":
        return float_to_int_zeroes(source, target, Mode(profile=profile))
    return getattr(profile.rules, knob)


def overflow_rule(target: TypeSpec, mode: Mode) -> OverflowRule:
    """The R4/R5 rule for a float target (IEEE wider than 8 bits always overflows to Inf)."""
    fmt = target.fmt
    saturate = mode.saturate if target.code in SATURATE_TYPES else False
    rule = OVERFLOW_RULES[(fmt.special, saturate)]
    if (
        fmt.special is Special.FNUZ
        and saturate
        and mode.inf_to_fnuz_is_nan
        and mode.profile.rules.fnuz_inf == "by_opset"
    ):
        rule = replace(rule, inf=Action.NAN)
    return rule
