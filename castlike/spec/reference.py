"""The exact oracle: the executable form of rules R3-R8 and R12.

Given an exact value (a rational number, +-0, +-Inf or NaN) and a target type, it returns the
target's bits by the rules, using integer and :class:`fractions.Fraction` arithmetic only, no
floating point.  It is slow and obvious on purpose: the fast array paths are tested against it,
and ``castlike explain`` prints its reasoning.

:mod:`castlike.spec.binary` is its fast counterpart for whole arrays of bit patterns (exact
integer arithmetic on ``m * 2**e``): it builds the lookup tables and answers the exhaustive
tests and ``castlike parity``, and the tests hold it to this module on every pattern of every
type of 16 bits or fewer and on the curated inputs of the wider ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from .rules import (
    IEEE_NAN_TYPES,
    ROUNDED_VIA_FLOAT_TARGETS,
    WIDE_SOURCES,
    Action,
    Mode,
    RoundMode,
    float_to_int_zeroes,
    ieee_nan_field,
    nan_bits_for,
    overflow_rule,
)
from .types import FloatFormat, Kind, OnnxType, Special, TypeSpec, spec_of

__all__ = [
    "Exact",
    "Explanation",
    "Rounding",
    "cast_bits",
    "cast_value",
    "decode",
    "encode",
    "exact_decimal",
    "explain",
    "floor_log2",
    "read_decimal",
    "round_to_format",
]

_FLOAT = spec_of(OnnxType.FLOAT)

#: ASCII whitespace stripped before parsing (R9); Python's ``bytes.strip()`` set.
SPEC_WHITESPACE = " \t\n\r\x0b\x0c"
#: R9's grammar: ``[+-]? digits [. digits] [(e|E) [+-]? digits]`` (a leading or trailing
#: point is allowed), or, case-insensitive, ``[+-]?(inf|infinity|nan)``.
SPEC_NUMBER = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?", re.ASCII)
SPEC_SPECIAL = re.compile(r"([+-]?)(inf|infinity|nan)", re.ASCII | re.IGNORECASE)
#: R9's grammar in words, for error messages.
SPEC_GRAMMAR = "[+-]digits[.digits][(e|E)[+-]digits], inf, infinity or nan"


@dataclass(frozen=True)
class Exact:
    """An exact value: ``kind`` is "finite", "inf" or "nan"; zero keeps its sign."""

    kind: str
    negative: bool = False
    magnitude: Fraction = Fraction(0)

    @classmethod
    def of(cls, value: Fraction | int | str) -> Exact:
        """The exact value of a rational (``Fraction(1, 3)``), an int, or decimal text by R9's
        grammar (``"0.1"``, ``"-1e-3"``, ``"nan"``: :func:`read_decimal`)."""
        if isinstance(value, str):
            found = read_decimal(value)
            if found is None:
                raise ValueError(f"{value!r} is not a decimal of R9's grammar ({SPEC_GRAMMAR})")
            return found
        q = Fraction(value)
        return cls("finite", q < 0, abs(q))

    @classmethod
    def nan(cls, negative: bool = False) -> Exact:
        return cls("nan", negative)

    @classmethod
    def inf(cls, negative: bool = False) -> Exact:
        return cls("inf", negative)

    @property
    def is_nan(self) -> bool:
        return self.kind == "nan"

    @property
    def is_inf(self) -> bool:
        return self.kind == "inf"

    @property
    def is_zero(self) -> bool:
        return self.kind == "finite" and self.magnitude == 0

    @property
    def signed_value(self) -> Fraction:
        """The value as a signed Fraction (finite values only)."""
        return -self.magnitude if self.negative else self.magnitude

    def __str__(self) -> str:
        sign = "-" if self.negative else ""
        if self.kind == "nan":
            return f"{sign}NaN"
        if self.kind == "inf":
            return f"{sign}Inf"
        m = self.magnitude
        text = str(m.numerator) if m.denominator == 1 else f"{m.numerator}/{m.denominator}"
        return f"{sign}{text}"


class Rounding(NamedTuple):
    """How a positive magnitude was rounded: its two neighbours and the choice."""

    lower: Fraction
    upper: Fraction
    result: Fraction
    exact: bool
    tie: bool


def floor_log2(q: Fraction) -> int:
    """The integer ``k`` with ``2**k <= q < 2**(k+1)`` for ``q > 0``."""
    a, b = q.numerator, q.denominator
    k = a.bit_length() - b.bit_length()
    if k >= 0:
        return k if a >= (b << k) else k - 1
    return k if (a << -k) >= b else k - 1


def _pow2(k: int) -> Fraction:
    return Fraction(1 << k) if k >= 0 else Fraction(1, 1 << -k)


# -- reading decimal text exactly, in time bounded by its length -------------------------------

#: Beyond 10**400 every float format overflows, every integer saturates and FLOAT8E8M0 is above
#: its range; below 10**-400 every float format rounds to zero (the smallest DOUBLE subnormal is
#: 2**-1074, about 4.9e-324) and FLOAT8E8M0 is below its range.  A value past either bound is
#: read as a representative of the values there (see _decimal_value), so that no power of ten
#: beyond 10**401 is ever built: "1e999999999" costs what "1e9" costs.
_DECIDED_EXPONENT = 400
#: Significant digits read exactly (of a value within the bounds above); the rest count only as
#: nonzero or not, a sticky digit.  Every point where a rule changes (a midpoint of any format,
#: an integer, a half-integer, 1.5 * 2**k) has its last digit above the 1100th: a DOUBLE
#: subnormal midpoint has under 770 significant digits.
_MAX_SIGNIFICANT_DIGITS = 1100
#: The low decimal digits of the integer part kept above the bound: 10**64 is a multiple of
#: 2**64, so they fix the low 64 bits that R7 (4-bit and 2-bit targets) and R8 keep.
_WRAP_DIGITS = 64
#: An exponent written with more digits than this is beyond any text's length: it decides the
#: value whatever the digits before it (a text shorter than 10**19 characters).
_LONGEST_EXPONENT = 20


def _decimal_value(digits: str, exponent: int) -> Fraction:
    """The magnitude ``int(digits) * 10**exponent``, or a representative of it past the bounds.

    ``digits`` has no leading or trailing zero.  Past ``10**400`` the representative is
    ``10**401`` plus the integer part's last 64 digits plus a fraction that stands for the
    real one (its first digit, and a sticky 1/100 for any nonzero digit after it): above every
    range, with the same low bits of the integer part and the same rounding of the fraction to
    an integer (half to even, or toward zero).  Below ``10**-400`` it is ``10**-401``.
    """
    x = exponent + len(digits) - 1  # 10**x <= magnitude < 10**(x + 1)
    if x < -_DECIDED_EXPONENT:
        return Fraction(1, 10 ** (_DECIDED_EXPONENT + 1))
    if x > _DECIDED_EXPONENT:

        def digit(position: int) -> str:  # the digit of 10**position
            i = x - position
            return digits[i] if 0 <= i < len(digits) else "0"

        low = int("".join(digit(p) for p in range(_WRAP_DIGITS - 1, -1, -1)))
        sticky = len(digits) > x + 2  # a digit below 10**-1 (the last digit is not zero)
        fraction = Fraction(int(digit(-1)), 10) + Fraction(int(sticky), 100)
        return 10 ** (_DECIDED_EXPONENT + 1) + low + fraction
    if len(digits) > _MAX_SIGNIFICANT_DIGITS:
        rest = digits[_MAX_SIGNIFICANT_DIGITS:]  # not all zeros: the last digit is not zero
        digits = digits[:_MAX_SIGNIFICANT_DIGITS] + "1"
        exponent += len(rest) - 1
    m = int(digits)
    return Fraction(m * 10**exponent) if exponent >= 0 else Fraction(m, 10**-exponent)


def exact_decimal(negative: bool, digits: str, exponent: int) -> Exact:
    """The exact value of ``digits * 10**exponent`` with a sign, in time bounded by the length
    of ``digits`` whatever ``exponent`` is; past ``10**+-400``, a representative that every
    rule casts as it casts the value itself (see :func:`read_decimal`)."""
    significant = digits.lstrip("0")
    stripped = significant.rstrip("0")
    if not stripped:
        return Exact("finite", negative, Fraction(0))
    exponent += len(significant) - len(stripped)
    return Exact("finite", negative, _decimal_value(stripped, exponent))


def read_decimal(text: str) -> Exact | None:
    """The exact value of decimal text by R9's grammar, or None for text outside it.

    The grammar, after stripping ASCII whitespace: ``[+-]? digits [. digits] [(e|E) [+-]?
    digits]`` (a leading or trailing point is allowed), or, case-insensitive,
    ``[+-]?(inf|infinity|nan)``.  ``1/3``, ``1_000`` and ``0x10`` are not in it.

    The time is bounded by the text's length, not by the exponent's value: a magnitude beyond
    ``10**400`` or below ``10**-400`` is read as a representative that every rule (every
    float format, FLOAT8E8M0, saturating and wrapping integers, BOOL) casts to the same bits
    as the value itself, so ``"1e999999999"`` and ``"1e-999999999"`` are read at once.  The
    sign of zero is kept (``"-0"``).  This is the one exact reader of decimal text: the
    command line, ``castlike explain`` and :meth:`Exact.of` use it, and the string rules
    (:mod:`castlike.spec.strings`) read R9's strings with it.
    """
    s = text.strip(SPEC_WHITESPACE)
    special = SPEC_SPECIAL.fullmatch(s)
    if special:
        negative = special.group(1) == "-"
        return Exact.nan(negative) if special.group(2).lower() == "nan" else Exact.inf(negative)
    number = SPEC_NUMBER.fullmatch(s)
    if not number:
        return None
    sign, whole, frac, exp = number.groups()
    frac = frac or ""
    if not whole and not frac:
        return None  # "", ".", "+", "e5"
    exponent = 0
    if exp:
        exp_digits = exp.lstrip("+-").lstrip("0")
        exponent = (
            int(exp_digits or "0")
            if len(exp_digits) <= _LONGEST_EXPONENT
            else 10**_LONGEST_EXPONENT
        )
        if exp.startswith("-"):
            exponent = -exponent
    return exact_decimal(sign == "-", whole + frac, exponent - len(frac))


def round_to_format(magnitude: Fraction, fmt: FloatFormat) -> Rounding:
    """Round a positive magnitude to nearest, ties to even, at ``fmt``'s precision.

    The exponent is unbounded above (so that ``[x] > max`` can be judged after rounding, R4)
    and bounded below by the format's subnormals.
    """
    qexp = max(floor_log2(magnitude), fmt.min_exponent) - fmt.mantissa_bits
    a, b = magnitude.numerator, magnitude.denominator
    if qexp >= 0:
        n, r = divmod(a, b << qexp)
        den = b << qexp
    else:
        n, r = divmod(a << -qexp, b)
        den = b
    quantum = _pow2(qexp)
    lower, upper = n * quantum, (n + 1) * quantum
    tie = 2 * r == den
    up = 2 * r > den or (tie and n % 2 == 1)
    return Rounding(lower, upper, upper if up else lower, r == 0, tie and r != 0)


def _round_e8m0(magnitude: Fraction, round_mode: RoundMode) -> Rounding:
    """R6: round a positive magnitude to a power of two (no range limits here)."""
    k = floor_log2(magnitude)
    lower, upper = _pow2(k), _pow2(k + 1)
    if magnitude == lower:
        return Rounding(lower, lower, lower, True, False)
    if round_mode is RoundMode.UP:
        result = upper
    elif round_mode is RoundMode.DOWN:
        result = lower
    else:  # nearest in linear distance, ties (1.5 * 2**k) up
        result = upper if magnitude >= lower * Fraction(3, 2) else lower
    tie = round_mode is RoundMode.NEAREST and magnitude == lower * Fraction(3, 2)
    return Rounding(lower, upper, result, False, tie)


def decode(bits: int, t: TypeSpec) -> Exact:
    """The exact value of the bit pattern ``bits`` of type ``t`` (the low ``t.bits`` bits)."""
    width = t.bits
    bits &= (1 << width) - 1
    if t.kind is Kind.BOOL:
        return Exact.of(1 if bits else 0)
    if t.kind is Kind.UNSIGNED:
        return Exact.of(bits)
    if t.kind is Kind.SIGNED:
        return Exact.of(bits - (1 << width) if bits >> (width - 1) else bits)
    if t.kind is not Kind.FLOAT:
        raise TypeError(f"cannot decode bits of {t.name}")
    fmt = t.fmt
    negative = bool(bits & fmt.sign_mask)
    if fmt.is_nan_bits(bits):
        return Exact.nan(negative)
    if fmt.is_inf_bits(bits):
        return Exact.inf(negative)
    return Exact("finite", negative, fmt.magnitude_of(bits))


def encode(magnitude: Fraction, negative: bool, fmt: FloatFormat) -> int:
    """Bits of a value that ``fmt`` represents exactly (zero takes the sign if it can)."""
    sign = fmt.sign_mask if negative else 0
    if magnitude == 0:
        return sign if fmt.has_negative_zero else 0
    k = floor_log2(magnitude)
    m = fmt.mantissa_bits
    if fmt.special is Special.E8M0:
        return k + fmt.bias
    if k < fmt.min_exponent:
        mantissa = magnitude / _pow2(fmt.min_exponent - m)
        if mantissa.denominator != 1:
            raise ValueError(f"{magnitude} is not representable")
        return sign | int(mantissa)
    scaled = magnitude / _pow2(k - m)
    if scaled.denominator != 1:
        raise ValueError(f"{magnitude} is not representable")
    return sign | ((k + fmt.bias) << m) | (int(scaled) - (1 << m))


class _Result(NamedTuple):
    bits: int
    rule: str
    rounding: Rounding | None
    value: Exact  # the value the rule was applied to (after any profile pre-rounding)


def _to_ieee(value: Exact, fmt: FloatFormat) -> Exact:
    """Round to an IEEE format with overflow to Inf, returning the exact rounded value."""
    if value.kind != "finite" or value.magnitude == 0:
        return value
    r = round_to_format(value.magnitude, fmt).result
    if r > fmt.max_value:
        return Exact.inf(value.negative)
    return Exact("finite", value.negative, r)


def _signed_max(fmt: FloatFormat, negative: bool) -> int:
    return fmt.max_bits | (fmt.sign_mask if negative else 0)


def _act(action: Action, fmt: FloatFormat, negative: bool) -> int:
    if action is Action.MAX:
        return _signed_max(fmt, negative)
    bits = fmt.inf_bits(negative) if action is Action.INF else fmt.nan_bits(negative)
    assert bits is not None
    return bits


def _to_float(value: Exact, target: TypeSpec, mode: Mode) -> _Result:
    fmt = target.fmt
    rules = mode.profile.rules
    if value.is_nan:
        nan = nan_bits_for(target, mode, negative=value.negative)
        if fmt.special is Special.FINITE:
            if rules.finite_only_nan == "max":
                return _Result(nan, "R5 NaN -> +max", None, value)
            return _Result(nan, "R12 reference: NaN -> zero of opposite sign", None, value)
        if target.code == OnnxType.FLOAT8E5M2 and rules.float8e5m2_nan != fmt.nan_bits():
            return _Result(nan, "R12 legacy: NaN -> 0x7F / 0xFF", None, value)
        return _Result(nan, "NaN -> NaN", None, value)
    rule = overflow_rule(target, mode)
    if value.is_inf:
        return _Result(_act(rule.inf, fmt, value.negative), f"Inf -> {rule.inf.value}", None, value)
    if value.magnitude == 0:
        return _Result(encode(Fraction(0), value.negative, fmt), "zero -> zero", None, value)
    if rules.bfloat16 == "truncate" and target.code == OnnxType.BFLOAT16:
        as_float = _to_ieee(value, _FLOAT.fmt)
        if as_float.is_inf:
            return _Result(_act(Action.INF, fmt, value.negative), "overflow -> Inf", None, value)
        bits32 = encode(as_float.magnitude, as_float.negative, _FLOAT.fmt)
        return _Result(bits32 >> 16, "R12 legacy: keep upper 16 bits of FLOAT", None, as_float)
    rounding = round_to_format(value.magnitude, fmt)
    if rounding.result > fmt.max_value:
        action = rule.overflow
        return _Result(
            _act(action, fmt, value.negative), f"[x] > max -> {action.value}", rounding, value
        )
    bits = encode(rounding.result, value.negative, fmt)
    return _Result(bits, "round to nearest, ties to even", rounding, value)


def _to_e8m0(value: Exact, target: TypeSpec, mode: Mode) -> _Result:
    fmt = target.fmt
    nan, lowest, highest = 0xFF, 0x00, 0xFE
    if value.is_nan:
        return _Result(nan, "NaN -> NaN", None, value)
    rules = mode.profile.rules
    if rules.e8m0_by_onnx_helper:
        # The helper reads the FLOAT exponent field only: -x gives x's result.
        if value.negative and not value.is_zero and rules.e8m0_negative == "nan":
            return _Result(nan, "R6 [castlike] x < 0 -> NaN", None, value)
        return _onnx_e8m0_helper(value, mode)
    if value.negative and not value.is_zero:
        return _Result(nan, "R6 [castlike] x < 0 -> NaN", None, value)
    if value.is_zero:
        if mode.saturate:
            return _Result(lowest, "R6 0 -> 2^-127 (saturate)", None, value)
        return _Result(nan, "R6 0 -> NaN (no saturate)", None, value)
    if value.is_inf:
        if mode.saturate:
            return _Result(highest, "R6 Inf -> 2^127 (saturate)", None, value)
        return _Result(nan, "R6 Inf -> NaN (no saturate)", None, value)
    # Range is judged on x itself, before rounding, in every round_mode: the Cast-24 table
    # writes "x > E8M0_MAX" and "x < E8M0_MIN" with a plain x.
    if value.magnitude < fmt.min_normal:
        if mode.saturate:
            return _Result(lowest, "R6 x < 2^-127 -> 2^-127 (saturate)", None, value)
        return _Result(nan, "R6 x < 2^-127 -> NaN (no saturate)", None, value)
    if value.magnitude > fmt.max_value:
        if mode.saturate:
            return _Result(highest, "R6 x > 2^127 -> 2^127 (saturate)", None, value)
        return _Result(nan, "R6 x > 2^127 -> NaN (no saturate)", None, value)
    rounding = _round_e8m0(value.magnitude, mode.round_mode)
    return _Result(
        encode(rounding.result, False, fmt), f"R6 round {mode.round_mode.value}", rounding, value
    )


def _onnx_e8m0_helper(value: Exact, mode: Mode) -> _Result:
    """``onnx.numpy_helper.to_float8e8m0`` on the FLOAT nearest to ``value`` (R12 reference)."""
    as_float = _to_ieee(value, _FLOAT.fmt)
    if as_float.kind != "finite":
        return _Result(0xFF, "R12 reference: Inf/NaN -> 0xFF", None, as_float)
    f_bits = encode(as_float.magnitude, False, _FLOAT.fmt)
    exponent = f_bits >> 23
    if mode.round_mode is RoundMode.NEAREST:
        g, r, s = f_bits & 0x400000, f_bits & 0x200000, f_bits & 0x1FFFFF
        round_up = bool(g) and (bool(r) or bool(s) or exponent > 0)
    elif mode.round_mode is RoundMode.UP:
        round_up = (f_bits & mode.profile.rules.e8m0_up_fraction_mask) != 0
    else:
        round_up = False
    if round_up and mode.saturate and exponent == 0xFE:
        round_up = False
    return _Result(
        (exponent + int(round_up)) & 0xFF, "R12 reference: onnx e8m0 helper", None, as_float
    )


def _to_integer(value: Exact, source: TypeSpec, target: TypeSpec, mode: Mode) -> _Result:
    width = target.bits
    mask = (1 << width) - 1
    if target.kind is Kind.BOOL:
        bit = 0 if value.is_zero else 1
        return _Result(bit, "R7 zero -> False, else True", None, value)
    zeroes = float_to_int_zeroes(source, target, mode)
    if zeroes == "beyond_range":
        # R12 reference with ml_dtypes 0.7: NaN, Inf and what truncates beyond the range -> 0.
        n = int(value.signed_value) if value.kind == "finite" else None
        if n is None or not target.int_min <= n <= target.int_max:
            return _Result(0, "R12 reference: NaN, Inf, beyond the range -> 0", None, value)
        return _Result(n & mask, "R12 reference: truncate toward zero", None, value)
    if target.is_sub_byte:
        if value.kind != "finite":
            return _Result(0, "R7 [castlike] NaN/Inf -> 0", None, value)
        v = value.signed_value
        if zeroes == "beyond_int32" and not -(2**31) <= v <= 2**31 - 1:
            return _Result(0, "R12 reference: beyond INT32 -> 0", None, value)
        rules = mode.profile.rules
        if rules.sub_byte_rounding == "half_even":
            n, rule = round(v), "R7 round half to even, keep low bits"
        else:
            n, rule = int(v), "R12 reference: truncate, keep low bits"
        if rules.sub_byte_range == "saturate":
            n = min(max(n, target.int_min), target.int_max)
            rule = "R12 legacy: clip to the range, round half to even"
        return _Result(n & mask, rule, None, value)
    if source.kind in (Kind.SIGNED, Kind.UNSIGNED, Kind.BOOL):
        return _Result(int(value.signed_value) & mask, "R8 keep low bits", None, value)
    if value.is_nan:
        return _Result(0, "R7 [castlike] NaN -> 0", None, value)
    if value.is_inf:
        n = target.int_min if value.negative else target.int_max
        return _Result(n & mask, "R7 [castlike] Inf saturates", None, value)
    n = int(value.signed_value)  # toward zero
    if n > target.int_max or n < target.int_min:
        n = min(max(n, target.int_min), target.int_max)
        return _Result(n & mask, "R7 [castlike] out of range saturates", None, value)
    return _Result(n & mask, "R7 truncate toward zero", None, value)


def _cast(value: Exact, source: TypeSpec, target: TypeSpec, mode: Mode) -> _Result:
    if not target.is_numeric:
        raise TypeError("the oracle's string rules live in castlike.strings")
    t = target.code
    if (
        mode.profile.rules.wide_sources_via_float
        and source.code in WIDE_SOURCES
        and t in ROUNDED_VIA_FLOAT_TARGETS
        and t != OnnxType.FLOAT8E8M0  # the helper does its own FLOAT conversion
    ):
        value = _to_ieee(value, _FLOAT.fmt)
    if target.kind is Kind.FLOAT:
        if target.fmt.special is Special.E8M0:
            return _to_e8m0(value, target, mode)
        return _to_float(value, target, mode)
    return _to_integer(value, source, target, mode)


def cast_value(value: Exact, source: TypeSpec, target: TypeSpec, mode: Mode) -> int:
    """Bits of ``value`` (of type ``source``) cast to ``target`` under ``mode``.

    ``source`` matters: integer sources wrap into integer targets (R8) while floats saturate
    (R7), and the reference profile rounds wide sources through FLOAT (R12).
    """
    return _cast(value, source, target, mode).bits


def cast_bits(bits: int, source: TypeSpec, target: TypeSpec, mode: Mode) -> int:
    """Bits of the ``source`` pattern ``bits`` cast to ``target`` under ``mode``.

    A NaN between two different IEEE types of 16 bits or more keeps its sign and payload top
    bits, quieted (R3's NaN policy, :func:`~castlike.spec.rules.ieee_nan_field`); into its own
    type every pattern is kept as it is."""
    s, t = source.code, target.code  # plain codes: a format outside the 26 (a test's) too
    if s in IEEE_NAN_TYPES and t in IEEE_NAN_TYPES and source.fmt.is_nan_bits(bits):
        if s == t:
            return bits
        payload = bits & ((1 << source.fmt.mantissa_bits) - 1)
        sign = target.fmt.sign_mask if bits & source.fmt.sign_mask else 0
        return sign | ieee_nan_field(payload, source.fmt, target.fmt)
    return _cast(decode(bits, source), source, target, mode).bits


@dataclass(frozen=True)
class Explanation:
    """The oracle's reasoning for one value, as ``castlike explain`` prints it."""

    value: Exact
    source: TypeSpec
    target: TypeSpec
    mode: Mode
    bits: int
    result: Exact | None  # the decoded result, None for integer targets
    rule: str
    rounded_value: Exact  # the value the rule saw (differs after profile pre-rounding)
    rounding: Rounding | None


def explain(value: Exact, source: TypeSpec, target: TypeSpec, mode: Mode) -> Explanation:
    """Like :func:`cast_value`, with the neighbours, the tie and the rule that fired."""
    res = _cast(value, source, target, mode)
    result = decode(res.bits, target)
    return Explanation(
        value, source, target, mode, res.bits, result, res.rule, res.value, res.rounding
    )
