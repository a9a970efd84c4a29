"""The string rules (R9) and the ``numpy`` string style of R12, exactly.

Standard library only, like the rest of the oracle: numbers are ``fractions.Fraction`` s and
bit patterns are ``int`` s.  :mod:`castlike.strings` is the fast, vectorised implementation;
the tests compare it with this module element by element.

Formatting (number -> STRING)
    ``style="spec"`` (R9): the *shortest* decimal that reads back to the same value in the
    source type (the nearest such decimal when several have that length, the even one of two
    as near), laid out as Python's ``repr(float)`` lays out its digits; ``"NaN"``, ``"INF"``,
    ``"-INF"``; integers in decimal; BOOL as ``"1"``/``"0"``.  FLOAT8E8M0 values (powers of
    two, read back with a directed ``round_mode``) are written exactly.
    ``style="numpy"`` (R12 reference/legacy): the text of ``numpy.ndarray.astype(str)``, which
    onnx.reference returns.

Parsing (STRING -> number)
    ``style="spec"``: the grammar of R9, read exactly; a magnitude that DOUBLE would round to
    infinity reads as infinity (R9: "1e400" -> +Inf before the target's rules).
    ``style="numpy"``: Python's ``float()`` grammar and value (what onnx.reference's
    ``astype`` does with strings); integer targets take the exact decimal instead.
"""

from __future__ import annotations

import math
import sys
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import cache

from .reference import (
    SPEC_WHITESPACE,
    Exact,
    cast_value,
    decode,
    encode,
    exact_decimal,
    floor_log2,
    read_decimal,
)
from .rules import Mode
from .types import Kind, OnnxType, Special, TypeSpec, spec_of

__all__ = [
    "DOUBLE_OVERFLOW",
    "NUMPY_POSITIONAL_LIMITS",
    "SPEC_WHITESPACE",
    "Decimal10",
    "floor_log10",
    "format_bits",
    "format_value",
    "has_nan",
    "layout",
    "layout_digits",
    "numpy_positional",
    "numpy_positional_limits",
    "parse",
    "shortest_decimal",
    "spec_positional",
    "string_to_bits",
]

_T = OnnxType
_DOUBLE = spec_of(_T.DOUBLE)
_STRING = spec_of(_T.STRING)

#: The smallest magnitude DOUBLE rounds to infinity: 2**1024 - 2**970 (R9 "1e400" -> +Inf).
DOUBLE_OVERFLOW = Fraction(2**1024 - 2**970)

#: ``numpy.ndarray.astype(str)`` writes float16/float32/float64 positionally below 10**n
#: (from 1e-4 up), by NumPy release, newest first: NumPy 2.3 lowered FLOAT16's and FLOAT's
#: limits to their precision.  The reference profiles' text is NumPy's, so it follows the
#: NumPy installed.
NUMPY_POSITIONAL_LIMITS: tuple[tuple[tuple[int, int], dict[OnnxType, int]], ...] = (
    ((2, 3), {_T.FLOAT16: 3, _T.FLOAT: 6, _T.DOUBLE: 16}),
    ((0, 0), {_T.FLOAT16: 16, _T.FLOAT: 16, _T.DOUBLE: 16}),
)


@cache
def numpy_positional_limits() -> dict[OnnxType, int]:
    """The entry of :data:`NUMPY_POSITIONAL_LIMITS` for the installed NumPy.

    Read from the loaded ``numpy`` module where there is one (a cast always has it), else from
    NumPy's package metadata, whose import alone costs more than a first cast: only the
    ``numpy`` text style asks, once.
    """
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        version = str(numpy.__version__)
    else:
        from importlib import metadata

        try:
            version = metadata.version("numpy")
        except metadata.PackageNotFoundError:
            version = ""
    try:
        release = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        release = NUMPY_POSITIONAL_LIMITS[0][0]
    return next(limits for since, limits in NUMPY_POSITIONAL_LIMITS if release >= since)


class Decimal10:
    """A finite decimal ``(-1)**negative * digits * 10**exponent``, ``digits`` without trailing
    zeros (0 for zero)."""

    __slots__ = ("digits", "exponent", "negative")

    def __init__(self, negative: bool, digits: int, exponent: int) -> None:
        self.negative = negative
        self.digits = digits
        self.exponent = exponent

    @property
    def text(self) -> str:
        """The significant digits as a string ("0" for zero)."""
        return str(self.digits)

    @property
    def scientific_exponent(self) -> int:
        """``x`` with ``10**x <= |value| < 10**(x+1)`` (0 for zero)."""
        return self.exponent + len(self.text) - 1 if self.digits else 0

    def __repr__(self) -> str:
        return f"Decimal10({'-' if self.negative else ''}{self.digits}e{self.exponent})"


# -- formatting --------------------------------------------------------------------------------


def _pow10(k: int) -> Fraction:
    return Fraction(10**k) if k >= 0 else Fraction(1, 10**-k)


def floor_log10(q: Fraction) -> int:
    """``k`` with ``10**k <= q < 10**(k+1)``, for ``q > 0``."""
    k = math.floor(floor_log2(q) * math.log10(2))
    while _pow10(k) > q:
        k -= 1
    while _pow10(k + 1) <= q:
        k += 1
    return k


def _strip_zeros(digits: int, exponent: int) -> tuple[int, int]:
    while digits and digits % 10 == 0:
        digits //= 10
        exponent += 1
    return digits, exponent


def _rounding_interval(bits: int, t: TypeSpec) -> tuple[Fraction, Fraction, bool]:
    """The magnitudes that round (to nearest even, exponent unbounded above) to ``bits``.

    Returns ``(low, high, closed)``: both ends are in the interval when the pattern's last
    mantissa bit is 0 (a tie between two neighbours goes to the even one).  Above the largest
    finite value the format is extended with its exponent unbounded, as R4 judges ``[x] > max``
    after rounding: the decimal that reads back to max must not rely on saturation.
    """
    fmt = t.fmt
    mag = fmt.magnitude_of(bits)
    exp = floor_log2(mag)
    quantum = Fraction(2) ** (max(exp, fmt.min_exponent) - fmt.mantissa_bits)
    upper = quantum / 2
    power_of_two = mag == Fraction(2) ** exp
    lower = quantum / 4 if power_of_two and exp > fmt.min_exponent else quantum / 2
    return mag - lower, mag + upper, (bits & 1) == 0


def shortest_decimal(bits: int, t: TypeSpec) -> Decimal10:
    """The decimal R9 writes for a finite pattern of the float type ``t``.

    The shortest decimal (fewest significant digits) in the pattern's rounding interval, the
    nearest to the value when several have that length (of two as near, the one whose last
    digit is even).  FLOAT8E8M0 (R6: read back with
    ``round_mode`` up, down or nearest) has no interval common to all three modes but the value
    itself, so its values are written exactly.
    """
    value = decode(bits, t)
    if value.kind != "finite":
        raise ValueError(f"{value} has no decimal")
    mag = value.magnitude
    if mag == 0:
        return Decimal10(value.negative, 0, 0)
    if t.fmt.special is Special.E8M0:
        exp = floor_log2(mag)
        digits, exponent = (2**exp, 0) if exp >= 0 else (5**-exp, exp)
        return Decimal10(False, *_strip_zeros(digits, exponent))
    low, high, closed = _rounding_interval(bits, t)

    def multiples(k: int) -> tuple[int, int]:
        """The range of integers c with c * 10**k in the interval (empty if first > last)."""
        unit = _pow10(k)
        first, last = math.ceil(low / unit), math.floor(high / unit)
        if not closed:
            first += first * unit == low
            last -= last * unit == high
        return first, last

    # The interval is wider than 10**k here, so it holds a multiple of 10**k; holding a
    # multiple of 10**(k+1) implies holding one of 10**k, so climb while the next one fits.
    k = floor_log10(high - low) - 1
    while True:
        first, last = multiples(k + 1)
        if first > last:
            break
        k += 1
    first, last = multiples(k)
    unit = _pow10(k)
    scaled = mag / unit
    # Two decimals of that length can be as near: FLOAT16 0.46875 lies midway between 0.4687
    # and 0.4688.  The even one is taken, as numpy, Python and the JDK do.
    nearest = round(scaled)  # half to even
    digits = min(max(nearest, first), last)
    return Decimal10(value.negative, *_strip_zeros(digits, k))


def layout_digits(negative: bool, text: str, x: int, *, positional: bool) -> str:
    """Lay out the significant digits ``text`` (``x`` = exponent of the first one) as
    Python's ``repr(float)`` does: ``123.45``, ``0.001``, ``100.0``, ``1e+16``, ``1.5e-05``.

    Only slices ``text``, so :mod:`castlike.strings` builds its layout templates from this
    function with placeholder characters for the digits.
    """
    sign = "-" if negative else ""
    n = len(text)
    if positional:
        if x >= n - 1:
            return f"{sign}{text}{'0' * (x - n + 1)}.0"
        if x >= 0:
            return f"{sign}{text[: x + 1]}.{text[x + 1 :]}"
        return f"{sign}0.{'0' * (-x - 1)}{text}"
    mantissa = text if n == 1 else f"{text[0]}.{text[1:]}"
    return f"{sign}{mantissa}e{'-' if x < 0 else '+'}{abs(x):02d}"


def layout(d: Decimal10, *, positional: bool) -> str:
    """:func:`layout_digits` of a :class:`Decimal10`."""
    return layout_digits(d.negative, d.text, d.scientific_exponent, positional=positional)


def spec_positional(x: int) -> bool:
    """R9: positional notation for a decimal ``d.ddd * 10**x`` with ``-4 <= x < 16``.

    ``repr(float)`` decides on the decimal it prints (1e-4 <= |d| < 1e16), not on the value
    it stands for; the two differ only where the shortest decimal rounds up to a power of ten
    (FLOAT 9.99999975e-05 prints as ``0.0001``).
    """
    return -4 <= x < 16


def format_bits(bits: int, t: TypeSpec, style: str = "spec") -> str:
    """The text of the ``t`` pattern ``bits`` (R9 ``"spec"``, or ``"numpy"`` as R12)."""
    if t.kind is Kind.STRING:
        raise TypeError("format_bits formats numbers")
    if t.kind is Kind.BOOL:
        on = bool(bits & 1)
        if style == "numpy":
            return "True" if on else "False"
        return "1" if on else "0"
    if t.is_integer:
        return str(decode(bits, t).signed_value)
    value = decode(bits, t)
    if style == "numpy":
        return _format_numpy(bits, t, value)
    if value.is_nan:
        return "NaN"
    if value.is_inf:
        return "-INF" if value.negative else "INF"
    d = shortest_decimal(bits, t)
    return layout(d, positional=d.digits == 0 or spec_positional(d.scientific_exponent))


def _format_numpy(bits: int, t: TypeSpec, value: Exact) -> str:
    """``numpy.ndarray.astype(str)`` text of one float (what onnx.reference returns)."""
    if value.is_nan:
        return "nan"
    if value.is_inf:
        return "-inf" if value.negative else "inf"
    limit = numpy_positional_limits().get(_T(t.code))
    if limit is None:
        # numpy has no cast from ml_dtypes types to str; astype(object).astype(str) gives the
        # repr of the Python float, which holds every such value exactly.
        f = float(value.signed_value)
        return repr(-0.0 if value.negative and f == 0 else f)
    d = shortest_decimal(bits, t)
    return layout(d, positional=numpy_positional(value.magnitude, limit))


def numpy_positional(magnitude: Fraction, limit: int) -> bool:
    """numpy's choice of positional notation: ``1e-4 <= |v| < 10**limit`` on the value itself
    (the DOUBLE nearest 1e-4 as numpy's C code has it), or zero."""
    return magnitude == 0 or Fraction(1e-4) <= magnitude < 10**limit


def format_value(value: Exact, t: TypeSpec, style: str = "spec") -> str:
    """:func:`format_bits` for an exact value that ``t`` holds."""
    if value.kind != "finite":
        if t.kind is not Kind.FLOAT:
            raise ValueError(f"{t.name} holds no {value}")
        fmt = t.fmt
        bits = fmt.nan_bits(value.negative) if value.is_nan else fmt.inf_bits(value.negative)
        if bits is None:
            raise ValueError(f"{t.name} holds no {value}")
        return format_bits(bits, t, style)
    if t.kind is Kind.FLOAT:
        return format_bits(encode(value.magnitude, value.negative, t.fmt), t, style)
    return format_bits(int(value.signed_value) & ((1 << t.bits) - 1), t, style)


# -- parsing -----------------------------------------------------------------------------------


def _within_double(value: Exact) -> Exact:
    """R9: a magnitude that DOUBLE rounds to infinity reads as infinity ("1e400" -> +Inf
    before the target's rules)."""
    if value.kind == "finite" and value.magnitude >= DOUBLE_OVERFLOW:
        return Exact.inf(value.negative)
    return value


def _as_text(text: str | bytes) -> str | None:
    """The text of a string element: bytes decoded as UTF-8, trailing NULs dropped.

    NumPy's fixed-width types cannot hold trailing NUL characters and its ``str_len`` ignores
    them in StringDType too, so castlike reads them as padding in every kind of array.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(text, str):
        return text.rstrip("\x00")
    return None


def parse(text: str | bytes, style: str = "spec") -> Exact | None:
    """The exact value a string reads as, or None when it is not a number.

    ``"spec"``: R9's grammar after stripping ASCII whitespace, read exactly; magnitudes that
    DOUBLE rounds to infinity read as infinity.  ``"numpy"``: Python's ``float(text)``.
    """
    s = _as_text(text)
    if s is None:
        return None
    if style == "numpy":
        try:
            f = float(s)
        except ValueError:
            return None
        if math.isnan(f):
            return Exact.nan(math.copysign(1.0, f) < 0)
        if math.isinf(f):
            return Exact.inf(f < 0)
        return Exact("finite", math.copysign(1.0, f) < 0, abs(Fraction(f)))
    value = read_decimal(s)  # the oracle's reader: exact, in time bounded by the length
    return None if value is None else _within_double(value)


def _parse_python_exact(s: str) -> Exact | None:
    """The exact decimal of a string Python's ``float()`` accepts (for integer targets)."""
    try:
        float(s)
        d = Decimal(s)
    except (ValueError, InvalidOperation):
        return None
    if d.is_nan():
        return Exact.nan(d.is_signed())
    if d.is_infinite():
        return Exact.inf(d.is_signed())
    sign, digit_tuple, exponent = d.as_tuple()
    assert isinstance(exponent, int)
    return _within_double(exact_decimal(bool(sign), "".join(map(str, digit_tuple)), exponent))


def has_nan(t: TypeSpec) -> bool:
    """Whether ``t`` has a NaN encoding (``errors="coerce"`` needs one, R9)."""
    return t.kind is Kind.FLOAT and t.fmt.has_nan


def string_to_bits(text: str | bytes | object, target: TypeSpec, mode: Mode) -> int | None:
    """The ``target`` bits R9 (or R12's numpy style) gives for one string; None if invalid.

    The string's value is cast as a value of a float source would be (R7, not R8: a decimal
    string is truncated and saturated into integers, and wraps into 4/2-bit integers only after
    rounding, as floats do).
    """
    style = mode.profile.rules.strings
    if target.kind is Kind.BOOL:
        if style == "numpy":
            # onnx.reference: ndarray.astype(bool) of an object array is each string's truth.
            if isinstance(text, bytes):
                return int(len(text.rstrip(b"\x00")) > 0)
            return int(isinstance(text, str) and len(text.rstrip("\x00")) > 0)
        s = _as_text(text)  # type: ignore[arg-type]
        if s is not None:
            word = s.strip(SPEC_WHITESPACE).lower()
            if word in ("true", "false"):
                return int(word == "true")
    if not isinstance(text, (str, bytes)):
        return None
    if style == "numpy" and target.kind is not Kind.FLOAT:
        s = _as_text(text)
        value = None if s is None else _parse_python_exact(s)
    else:
        value = parse(text, style)
    if value is None:
        return None
    # Into integers, a string is read as text, not converted by ml_dtypes: the reference
    # profiles' ml_dtypes zeroes (ProfileRules.ml_dtypes_float_to_int) are not for it.
    return cast_value(value, _STRING if target.is_integer else _DOUBLE, target, mode)
