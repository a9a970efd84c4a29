"""String casts (RULES.md R9): exact, vectorised formatting and parsing on the host.

Every backend comes here for STRING: numbers are brought to NumPy, formatted or parsed with
NumPy integer arithmetic, and the result goes back to the caller's library.  The exact rules
live in :mod:`castlike.spec.strings`; this module is the fast implementation of the same
rules, tested against it element by element.

Number -> STRING
    The shortest decimal that reads back to the same value in the source type, by the
    Schubfach algorithm (R. Giulietti, "The Schubfach way to render doubles", 2020; the
    variant of ``jdk.internal.math.DoubleToDecimal``/``FloatToDecimal``), run on whole arrays
    with 64-bit integers: FLOAT and DOUBLE directly, the 16-bit-or-smaller float types through
    a table of every pattern.  Two changes from the JDK: castlike wants the *shortest* decimal
    (the JDK accepts two digits where one would do), so the one-digit-shorter candidate is
    always tried and the JDK's scaling of tiny subnormals is replaced by their exact answers.
    The digits are then laid out by gathering bytes through per-layout templates built from
    the oracle's own layout function.

STRING -> number
    The strings become a byte matrix; bit masks of digit, point, exponent and sign positions
    validate the R9 grammar for every row at once; the mantissa (up to 19 digits) and the
    exponent are read exactly.  Integer targets are computed exactly from them.  Float targets
    get the nearest DOUBLE (Clinger's fast path, else the Eisel-Lemire algorithm as in
    fast_float) and then the numeric engine; where that DOUBLE is a point at which the
    target's rule changes (a tie of the target format, a power of two for FLOAT8E8M0) a second
    rounding could be wrong, so those elements, like every string the vectorised reader does
    not cover (whitespace, more than 19 digits, non-ASCII text, invalid text), are cast one by
    one by the exact rules.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import array_api_compat as aac
import numpy as np

from .backends.numpy import ADAPTER as NUMPY
from .backends.numpy import NUMPY_DTYPES
from .errors import BackendTypeError, InvalidStringError
from .spec import strings as spec_strings
from .spec.reference import Exact, cast_value
from .spec.rules import Mode
from .spec.types import TYPES, Kind, OnnxType, Special, TypeSpec, spec_of

__all__ = ["cast_strings", "format_numbers", "parse_strings"]

_T = OnnxType
_DOUBLE = spec_of(_T.DOUBLE)
_SD = np.dtypes.StringDType()
_U64 = np.uint64
_M32 = 0xFFFFFFFF
#: Rows are processed in chunks of this many elements so that temporaries stay in cache.
_CHUNK = 1 << 15


# == 64-bit helpers ===============================================================================


def _mul_hi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """High 64 bits of the 128-bit products ``a * b`` (unsigned)."""
    a0, a1 = a & _M32, a >> 32
    b0, b1 = b & _M32, b >> 32
    p00, p01, p10 = a0 * b0, a0 * b1, a1 * b0
    mid = (p00 >> 32) + (p01 & _M32) + (p10 & _M32)
    return a1 * b1 + (p01 >> 32) + (p10 >> 32) + (mid >> 32)


def _mul_full(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 128-bit products ``a * b`` as (high, low) 64-bit halves."""
    a0, a1 = a & _M32, a >> 32
    b0, b1 = b & _M32, b >> 32
    p00, p01, p10 = a0 * b0, a0 * b1, a1 * b0
    mid = (p00 >> 32) + (p01 & _M32) + (p10 & _M32)
    high = a1 * b1 + (p01 >> 32) + (p10 >> 32) + (mid >> 32)
    return high, (mid << 32) | (p00 & _M32)


def _flog10pow2(e: np.ndarray) -> np.ndarray:
    """floor(log10(2**e)) for |e| < 5000 (the JDK's multiply-shift form)."""
    return (e * 661_971_961_083) >> 41


def _flog10three_quarters_pow2(e: np.ndarray) -> np.ndarray:
    """floor(log10(3/4 * 2**e)) for |e| < 5000."""
    return (e * 661_971_961_083 - 274_743_187_321) >> 41


def _flog2pow10(e: np.ndarray) -> np.ndarray:
    """floor(log2(10**e)) for |e| < 5000."""
    return (e * 913_124_641_741) >> 38


# == number -> decimal (Schubfach) ================================================================

_K_MIN, _K_MAX = -324, 292


@lru_cache(maxsize=1)
def _g_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Schubfach's g = floor(10**-k / 2**r) + 1, r = flog2pow10(-k) - 125, for every k.

    Returns the DOUBLE split g = g1 * 2**63 + g0 and the FLOAT variant's 64-bit g1 + 1.
    """
    ks = range(_K_MIN, _K_MAX + 1)
    g1 = np.empty(len(ks), dtype=_U64)
    g0 = np.empty(len(ks), dtype=_U64)
    for i, k in enumerate(ks):
        e = -k
        exact_log2 = (10**e).bit_length() - 1 if e >= 0 else -((10**-e).bit_length())
        assert exact_log2 == int(_flog2pow10(np.int64(e)))
        r = exact_log2 - 125
        num, den = (10**e, 1) if e >= 0 else (1, 10**-e)
        if r >= 0:
            den <<= r
        else:
            num <<= -r
        g = num // den + 1
        assert (1 << 125) <= g < (1 << 126)
        g1[i], g0[i] = g >> 63, g & ((1 << 63) - 1)
    return g1, g0, g1 + _U64(1)


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return a & _M32, a >> 32


def _mul_hi_split(a0: np.ndarray, a1: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`_mul_hi` with ``a`` already split into 32-bit halves."""
    b0, b1 = b & _M32, b >> 32
    p00, p01, p10 = a0 * b0, a0 * b1, a1 * b0
    mid = (p00 >> 32) + (p01 & _M32) + (p10 & _M32)
    return a1 * b1 + (p01 >> 32) + (p10 >> 32) + (mid >> 32)


def _rop_double(
    g1: tuple[np.ndarray, np.ndarray],
    g0: tuple[np.ndarray, np.ndarray],
    g1_full: np.ndarray,
    cp: np.ndarray,
) -> np.ndarray:
    """Schubfach's r_o'(cp g 2**-127): the product rounded to odd (the JDK's ``rop``), with
    g = g1 * 2**63 + g0 given as 32-bit halves."""
    x1 = _mul_hi_split(*g0, cp)
    y0 = g1_full * cp  # low 64 bits
    y1 = _mul_hi_split(*g1, cp)
    z = (y0 >> 1) + x1
    vbp = y1 + (z >> 63)
    return vbp | (((z & 0x7FFFFFFFFFFFFFFF) + 0x7FFFFFFFFFFFFFFF) >> 63)


def _rop_single(g: tuple[np.ndarray, np.ndarray], cb: np.ndarray, h: np.ndarray) -> np.ndarray:
    """The FLOAT variant: x1 = high 64 bits of g * (cb << h), then rounded to odd at bit 31.

    ``cb < 2**26`` and ``33 <= h <= 36`` here, so g * cb (90 bits) is formed from two 32-bit
    by 26-bit products and shifted instead of multiplying by the 62-bit ``cb << h``.
    """
    low, high = g
    p0, p1 = low * cb, high * cb
    x1 = ((p1 + (p0 >> 32)) << (h - _U64(32))) + ((p0 & _M32) >> (_U64(64) - h))
    return (x1 >> 31) | (((x1 & _M32) + _M32) >> 32)


def _schubfach(
    c: np.ndarray, q: np.ndarray, c_min: int, q_min: int, double: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Shortest decimals ``f * 10**e`` of the positive values ``c * 2**q``.

    ``c_min`` is the format's smallest normal significand and ``q_min`` its subnormal
    exponent (together they tell where the spacing below a value halves).  ``f`` may end in
    zeros; callers strip them.  Tiny subnormals (``c`` < 8) are not handled here.
    """
    g1, g0, g_single = _g_tables()
    out = c & 1
    cb = c << 2
    cbr = cb + 2
    irregular = (c == c_min) & (q != q_min)
    cbl = cb - 2 + irregular.astype(_U64)
    k = np.where(irregular, _flog10three_quarters_pow2(q), _flog10pow2(q))
    index = k - _K_MIN
    if double:
        h = (q + _flog2pow10(-k) + 2).astype(_U64)
        g1k = g1.take(index)
        halves1, halves0 = _split(g1k), _split(g0.take(index))
        vb, vbl, vbr = (_rop_double(halves1, halves0, g1k, x << h) for x in (cb, cbl, cbr))
    else:
        h = (q + _flog2pow10(-k) + 33).astype(_U64)
        g = _split(g_single.take(index))
        vb, vbl, vbr = (_rop_single(g, x, h) for x in (cb, cbl, cbr))
    s = vb >> 2
    # One digit shorter: at most one multiple of 10**(k+1) lies in the rounding interval, and
    # if one does it is the shortest decimal (the JDK only looks here when s >= 100).
    sp10 = (s // 10) * 10
    tp10 = sp10 + 10
    upin = vbl + out <= sp10 << 2
    wpin = (tp10 << 2) + out <= vbr
    t = s + 1
    uin = vbl + out <= s << 2
    win = (t << 2) + out <= vbr
    cmp = vb.astype(np.int64) - ((s + t) << 1).astype(np.int64)
    nearer_s = (cmp < 0) | ((cmp == 0) & ((s & 1) == 0))
    f = np.where(
        upin != wpin,
        np.where(upin, sp10, tp10),
        np.where(uin != win, np.where(uin, s, t), np.where(nearer_s, s, t)),
    )
    return f, k


def _strip_zeros(f: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Remove trailing zeros from the nonzero ``f`` (up to 19), adding them to ``e``."""
    tens = f // _U64(10)
    pick = np.flatnonzero(tens * _U64(10) == f)  # only these end in a zero
    if not pick.size:
        return f, e
    fz, ez = tens.take(pick), e.take(pick) + 1
    for digits in (16, 8, 4, 2, 1):
        unit = _U64(10**digits)
        whole = fz // unit
        exact = whole * unit == fz
        fz = np.where(exact, whole, fz)
        ez = ez + exact * digits
    f, e = f.copy(), e.copy()
    f[pick], e[pick] = fz, ez
    return f, e


# == the decimal of each value of a float type ====================================================

_C_TINY = 8  # subnormal significands below this take exact answers (see module doc)


def _float_fields(bits: np.ndarray, t: TypeSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(negative, c, q) with |value| = c * 2**q for finite patterns of ``t`` (any others are
    decoded as if they were finite; the caller overrides them)."""
    fmt = t.fmt
    b = bits.astype(_U64)
    negative = (b & _U64(fmt.sign_mask)) != 0 if fmt.sign_mask else np.zeros(b.shape, bool)
    mag = b & _U64(~fmt.sign_mask & ((1 << fmt.total_bits) - 1))
    m = fmt.mantissa_bits
    field = (mag >> m).astype(np.int64)
    frac = mag & _U64((1 << m) - 1)
    normal = field != 0
    c = np.where(normal, frac | _U64(1 << m), frac)
    q = np.where(normal, field - fmt.bias - m, fmt.min_exponent - m)
    return negative, c, q


@lru_cache(maxsize=64)
def _tiny_answers(t: TypeSpec) -> dict[int, tuple[int, int]]:
    """Exact (digits, exponent) of the subnormal magnitudes with significand below 8."""
    answers = {}
    for c in range(1, min(_C_TINY, 1 << t.fmt.mantissa_bits)):
        d = spec_strings.shortest_decimal(c, t)
        answers[c] = (d.digits, d.exponent)
    return answers


def _nan_patterns(t: TypeSpec) -> list[int]:
    """The NaN encodings castlike writes for ``t`` (none for finite-only formats)."""
    return sorted({b for b in (t.fmt.nan_bits(False), t.fmt.nan_bits(True)) if b is not None})


def _float_decimals(
    bits: np.ndarray, t: TypeSpec
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(negative, digits, exponent, special) for patterns of the IEEE-like float type ``t``.

    ``special`` marks zero, NaN and Inf (their digits are meaningless).
    """
    fmt = t.fmt
    negative, c, q = _float_fields(bits, t)
    b = bits.astype(_U64)
    mag = b & _U64(~fmt.sign_mask & ((1 << fmt.total_bits) - 1))
    special = c == 0
    if fmt.special is Special.IEEE:
        special |= (mag >> fmt.mantissa_bits) == (1 << fmt.exponent_bits) - 1
    elif fmt.special in (Special.FN, Special.FNUZ):
        for nan in _nan_patterns(t):
            special |= b == _U64(nan)
    c = np.where(special, _U64(1 << fmt.mantissa_bits), c)
    q_min = fmt.min_exponent - fmt.mantissa_bits
    f, e = _schubfach(c, q, 1 << fmt.mantissa_bits, q_min, double=t.bits > 32)
    tiny = (c < _C_TINY) & (q == q_min)
    if tiny.any():
        for small, (digits, exponent) in _tiny_answers(t).items():
            hit = tiny & (c == _U64(small))
            f = np.where(hit, _U64(digits), f)
            e = np.where(hit, exponent, e)
    f, e = _strip_zeros(f, e)
    return negative, f, e, special


# == decimal -> bytes (layout templates) ==========================================================

#: Literal characters a layout may contain beyond the digits of the number.
_LITERALS = b".e+-0123456789\x00\x00"
_DIGIT_SLOTS = 20  # a row's digits, right-aligned and zero-padded (uint64 has at most 20)
_EXT = _DIGIT_SLOTS + len(_LITERALS)  # 36 bytes per row: digits, then the literals
_SCI, _POS, _INT = 0, 1, 2  # layout codes
_POW10 = np.array([10**i for i in range(20)], dtype=_U64)
_QUAD = _U64(10000)


@lru_cache(maxsize=1)
def _digit_quads() -> np.ndarray:
    """ASCII of 0000 ... 9999 as little-endian uint32 (first character in the low byte)."""
    text = "".join(f"{i:04d}" for i in range(10000)).encode()
    return np.frombuffer(text, dtype="<u4").copy()


def _x_range(width: int) -> tuple[int, int]:
    """Decimal exponents a template table of ``width`` covers (DOUBLE needs the widest)."""
    return (-330, 330) if width > _WIDTH else (-50, 50)


@lru_cache(maxsize=4)
def _templates(width: int) -> np.ndarray:
    """For every (negative, layout, digit count, exponent): the ``width`` bytes of the text,
    as indices into a row's digit-and-literal buffer (see :func:`_layout_into`).

    Placeholder characters stand for the digits, so the oracle's own layout function decides
    where every digit and literal goes.  Scientific texts differ only in their exponent: it is
    laid out once per digit count and the exponents are appended (checked at both ends).
    """
    x_min, x_max = _x_range(width)
    xs = range(x_min, x_max + 1)
    table = np.full((2, 3, _DIGIT_SLOTS + 1, len(xs), width), _EXT - 1, dtype=np.uint8)
    literal = {ord(ch): _DIGIT_SLOTS + i for i, ch in enumerate(_LITERALS.decode("latin-1"))}
    suffixes = [
        f"e{'-' if x < 0 else '+'}{abs(x):02d}".translate(literal).encode("latin-1") for x in xs
    ]

    def encode(text: str, to_index: dict[int, int]) -> np.ndarray | None:
        raw = text.translate(to_index).encode("latin-1")
        return np.frombuffer(raw, dtype=np.uint8) if len(raw) <= width else None

    for negative in (0, 1):
        for n in range(1, _DIGIT_SLOTS + 1):
            placeholder = "".join(chr(0x100 + j) for j in range(n))
            to_index = dict(literal)
            to_index.update({0x100 + j: _DIGIT_SLOTS - n + j for j in range(n)})
            row = encode(("-" if negative else "") + placeholder, to_index)
            if row is not None:
                table[negative, _INT, n, n - 1 - x_min, : row.size] = row
            for x in range(max(x_min, -30), min(x_max, 30) + 1):  # never positional beyond
                text = spec_strings.layout_digits(bool(negative), placeholder, x, positional=True)
                row = encode(text, to_index)
                if row is not None:
                    table[negative, _POS, n, x - x_min, : row.size] = row
            ends = [
                spec_strings.layout_digits(bool(negative), placeholder, x, positional=False)
                for x in (x_min, x_max)
            ]
            prefix = ends[0][: -len(f"e-{-x_min}")]
            assert ends == [prefix + f"e-{-x_min}", prefix + f"e+{x_max}"]
            head = prefix.translate(to_index).encode("latin-1")
            block = [(head + tail).ljust(width, bytes([_EXT - 1]))[:width] for tail in suffixes]
            fits = np.array([len(head) + len(tail) <= width for tail in suffixes])
            rows = np.frombuffer(b"".join(block), dtype=np.uint8).reshape(len(xs), width)
            table[negative, _SCI, n][fits] = rows[fits]
    table = table.reshape(-1, width)
    table.flags.writeable = False
    return table


def _digit_count(f: np.ndarray) -> np.ndarray:
    """Number of decimal digits of each ``f`` (1 for 0)."""
    return np.maximum(np.searchsorted(_POW10, f, side="right"), 1)


def _layout_into(
    out: np.ndarray,
    negative: np.ndarray,
    f: np.ndarray,
    n: np.ndarray,
    x: np.ndarray,
    code: np.ndarray,
) -> None:
    """Write the text of each decimal into the rows of ``out`` (one chunk, NUL-padded).

    ``f`` holds the significant digits (``n`` of them), ``x`` the exponent of the first one
    and ``code`` the layout (_SCI, _POS or _INT).  Every byte is gathered from the row's 20
    zero-padded digits and the literal characters through the template of its layout.
    """
    rows, width = out.shape
    x_min, x_max = _x_range(width)
    key = ((negative * 3 + code) * (_DIGIT_SLOTS + 1) + n) * (x_max - x_min + 1) + (x - x_min)
    index = _templates(width).take(key, axis=0).astype(np.int32)  # (kept as bytes: 2 MB)
    ext = np.empty((rows, _EXT), dtype=np.uint8)
    ext[:, _DIGIT_SLOTS:] = np.frombuffer(_LITERALS, dtype=np.uint8)
    quad_view = ext.view("<u4")
    quads = _digit_quads()
    rest = f
    for i in range(_DIGIT_SLOTS // 4):
        higher = rest // _QUAD
        quad_view[:, _DIGIT_SLOTS // 4 - 1 - i] = quads.take(rest - higher * _QUAD)
        rest = higher
    index += (np.arange(rows, dtype=np.int32) * _EXT)[:, None]
    ext.reshape(-1).take(index, out=out)


def _put_rows(out: np.ndarray, mask: np.ndarray, text: str) -> None:
    """Overwrite the rows of ``out`` selected by ``mask`` with ``text`` (NUL-padded)."""
    if mask.any():
        row = np.zeros(out.shape[1], dtype=np.uint8)
        raw = text.encode()
        row[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        out[mask] = row


# == formatting entry points ======================================================================

#: Widest text of each kind of source (DOUBLE: "-1.2345678901234567e-308").
_WIDTH_DOUBLE, _WIDTH = 24, 20


def _style(mode: Mode) -> str:
    return mode.profile.rules.strings


def _chunks(total: int) -> range:
    return range(0, total, _CHUNK)


def _float_text(bits: np.ndarray, t: TypeSpec, style: str) -> np.ndarray:
    """Byte matrix of the text of float patterns (IEEE-like formats, not E8M0)."""
    width = _WIDTH_DOUBLE if t.bits > 32 else _WIDTH
    fmt = t.fmt
    total = bits.shape[0]
    out = np.empty((total, width), dtype=np.uint8)
    limit = spec_strings.NUMPY_POSITIONAL_LIMIT.get(_T(t.code)) if style == "numpy" else None
    nan_text, inf_text = ("nan", "inf") if style == "numpy" else ("NaN", "INF")
    magnitude_mask = _U64(~fmt.sign_mask & ((1 << fmt.total_bits) - 1))
    for start in _chunks(total):
        chunk = bits[start : start + _CHUNK]
        negative, f, e, special = _float_decimals(chunk, t)
        n = _digit_count(f)
        x = e + n - 1
        if limit is not None:
            # numpy decides on the value itself (see spec_strings.numpy_positional).
            with np.errstate(invalid="ignore"):
                magnitude = np.abs(NUMPY.from_bits(chunk, t).astype(np.float64))
            positional = (magnitude >= 1e-4) & (magnitude < 10.0**limit)
        else:
            positional = (x >= -4) & (x < 16)  # spec_strings.spec_positional
        where = out[start : start + _CHUNK]
        _layout_into(where, negative.astype(np.int64), f, n, x, positional.astype(np.int64))
        if special.any():
            b = chunk.astype(_U64)
            zero = (b & magnitude_mask) == 0
            if fmt.special is Special.IEEE:
                infinity = fmt.max_bits + 1  # IEEE: +Inf follows the largest finite pattern
                is_nan = (b & magnitude_mask) > _U64(infinity)
            else:
                is_nan = np.zeros(b.shape, bool)
                for nan in _nan_patterns(t):
                    is_nan |= b == _U64(nan)
            is_inf = special & ~zero & ~is_nan
            zero &= ~is_nan  # FNUZ: the negative-zero pattern is NaN
            _put_rows(where, zero & ~negative, "0.0")
            _put_rows(where, zero & negative, "-0.0")
            _put_rows(where, is_nan, nan_text)
            _put_rows(where, is_inf & ~negative, inf_text)
            _put_rows(where, is_inf & negative, "-" + inf_text)
    return out


def _integer_text(values: np.ndarray, t: TypeSpec) -> np.ndarray:
    """Byte matrix of the decimal text of integers (any width)."""
    total = values.shape[0]
    out = np.empty((total, _WIDTH), dtype=np.uint8)
    for start in _chunks(total):
        chunk = values[start : start + _CHUNK]
        if t.kind is Kind.SIGNED:
            wide = chunk.astype(np.int64)
            negative = wide < 0
            magnitude = np.where(negative, -wide, wide).astype(_U64)  # -INT64_MIN wraps right
        else:
            negative = np.zeros(chunk.shape, bool)
            magnitude = chunk.astype(_U64)
        n = _digit_count(magnitude)
        code = np.full(chunk.shape, _INT, dtype=np.int64)
        _layout_into(
            out[start : start + _CHUNK], negative.astype(np.int64), magnitude, n, n - 1, code
        )
    return out


@lru_cache(maxsize=128)
def _pattern_text(t: TypeSpec, style: str) -> np.ndarray:
    """The text of every pattern of a type of 16 bits or fewer (an ``S`` array)."""
    patterns = np.arange(1 << t.bits, dtype=np.dtype(f"uint{t.storage_bits}"))
    if t.kind is Kind.BOOL:
        texts = [spec_strings.format_bits(b, t, style) for b in (0, 1)]
        return np.array(texts, dtype="S")
    if t.is_integer:
        matrix = _integer_text(NUMPY.from_bits(patterns, t), t)
    elif t.fmt.special is Special.E8M0:
        return np.array([spec_strings.format_bits(int(b), t, style) for b in patterns], dtype="S")
    elif style == "numpy" and _T(t.code) not in spec_strings.NUMPY_POSITIONAL_LIMIT:
        # repr() of the Python float: DOUBLE digits and layout, lower-case specials.
        with np.errstate(invalid="ignore"):  # NaN of ml_dtypes types
            wide = NUMPY.from_bits(patterns, t).astype(np.float64)
        matrix = _float_text(NUMPY.bits(wide, _DOUBLE), _DOUBLE, "numpy")
    else:
        matrix = _float_text(patterns, t, style)
    table = np.ascontiguousarray(matrix).view(f"S{matrix.shape[1]}").reshape(-1)
    table.flags.writeable = False
    return table


def _text_bytes(x: np.ndarray, source: TypeSpec, style: str) -> np.ndarray:
    """The text of every element of the NumPy array ``x`` (type ``source``), flat, as ``S``."""
    flat = np.ascontiguousarray(x).reshape(-1)
    if source.kind is Kind.BOOL or source.bits <= 16:
        table = _pattern_text(source, style)
        return table[NUMPY.bits(flat, source).astype(np.intp)]
    if source.is_integer:
        matrix = _integer_text(flat, source)
    else:
        matrix = _float_text(NUMPY.bits(flat, source), source, style)
    return np.ascontiguousarray(matrix).view(f"S{matrix.shape[1]}").reshape(-1)


def format_numbers(x: np.ndarray, source: TypeSpec, *, style: str = "spec") -> np.ndarray:
    """The R9 text (or, with ``style="numpy"``, numpy's ``astype(str)`` text) of every element
    of a NumPy array of the numeric type ``source``, as a ``StringDType`` array of its shape.

    Examples
    --------
    >>> import numpy as np
    >>> from castlike.spec.types import spec_of, OnnxType
    >>> format_numbers(np.array([0.1, -0.0, np.inf], np.float32), spec_of(OnnxType.FLOAT))
    array(['0.1', '-0.0', 'INF'], dtype=StringDType())
    """
    return _text_bytes(x, source, style).astype(_SD).reshape(np.shape(x))


# == STRING -> number: the byte matrix ============================================================

#: Longest string the vectorised reader takes; longer ones are read one by one.
_MAX_WIDTH = 32
_WIDTHS = (8, 16, 32)  # byte-matrix widths (their bit masks are uint8/16/32 per row)


def _width_for(longest: int) -> int:
    return next(w for w in _WIDTHS if w >= min(max(longest, 1), _MAX_WIDTH))


def _code_matrix(codes: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Code points (N, w) -> (byte matrix (N, width), rows too long for it).

    Characters above ASCII become bytes above 0x7F, which no rule here accepts: such rows go
    to the exact path, where R9 rejects them and Python's grammar (R12) may accept them.
    """
    total, w = codes.shape
    long_rows = np.asarray(codes[:, width:].any(axis=1) if w > width else np.zeros(total, bool))
    matrix = np.zeros((total, width), dtype=np.uint8)
    part = codes[:, : min(w, width)]
    matrix[:, : part.shape[1]] = np.minimum(part, 0xFF)
    return matrix, long_rows


def _byte_matrix(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The strings as a NUL-padded byte matrix, and the rows too long for it.

    Trailing NUL characters are padding here, as in NumPy's fixed-width string types and its
    ``str_len`` (the exact rules strip them too).
    """
    kind = flat.dtype.kind
    codes: np.ndarray
    if kind == "U":
        w = flat.dtype.itemsize // 4
        codes = flat.view(np.uint32).reshape(-1, w) if w else np.zeros((flat.size, 0), np.uint32)
        longest = int(codes.any(axis=0).nonzero()[0].max(initial=-1)) + 1 if w else 0
        return _code_matrix(codes, _width_for(longest))
    if kind == "S":
        w = flat.dtype.itemsize
        codes = flat.view(np.uint8).reshape(-1, w) if w else np.zeros((flat.size, 0), np.uint8)
        longest = int(codes.any(axis=0).nonzero()[0].max(initial=-1)) + 1 if w else 0
        return _code_matrix(codes, _width_for(longest))
    # StringDType: the width comes from a sample (measuring every string costs as much as a
    # third of the conversion); rows longer than it are found by the byte just past it and
    # read again in a batch of their own (see _parse_bits).
    sample = np.strings.str_len(flat[:: max(1, flat.shape[0] // 256)])
    width = _width_for(int(sample.max(initial=0)))
    try:
        raw = flat.astype(f"S{width + 1}")
    except UnicodeEncodeError:
        codes = flat.astype(f"U{width + 1}").view(np.uint32).reshape(-1, width + 1)
        return _code_matrix(codes, width)
    matrix = raw.view(np.uint8).reshape(-1, width + 1)
    return matrix[:, :width], matrix[:, width] != 0


def _as_string_array(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A flat array of any string kind as StringDType/U/S, and the rows that hold neither
    ``str`` nor ``bytes`` (object arrays only)."""
    if flat.dtype.kind != "O":
        return flat, np.zeros(flat.shape, bool)
    items = flat.tolist()
    kinds = {type(v) for v in items}
    if kinds <= {str}:
        return np.array(items, dtype=_SD), np.zeros(flat.shape, bool)
    if kinds <= {bytes}:
        return np.array(items, dtype="S"), np.zeros(flat.shape, bool)
    # Mixed or foreign objects: every row goes the exact way (R9 decodes bytes as UTF-8).
    bad = np.array([not isinstance(v, (str, bytes)) for v in items], dtype=bool)
    texts = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in items]
    return np.array([t if isinstance(t, str) else "\x00" for t in texts], dtype=_SD), bad


def _packed(flags: np.ndarray) -> np.ndarray:
    """Per-row bit masks (bit j = column j) of a boolean (N, width) matrix, as unsigned
    integers of ``width`` bits."""
    total, width = flags.shape
    packed = np.packbits(flags.reshape(-1), bitorder="little")
    return packed.view(f"<u{width // 8}") if total else np.zeros(0, f"<u{width // 8}")


def _bit_index(single: np.ndarray) -> np.ndarray:
    """Position of the (single) set bit of each mask (meaningless where none is set)."""
    one = single.dtype.type(1)
    return np.bitwise_count((single - one) & ~single).astype(np.intp)  # (width where none)


# == STRING -> number: reading the rows ===========================================================

#: Words (first 8 bytes, little-endian) of the non-numeric literals read without the exact
#: path, with the bits that a case-insensitive comparison ignores.
_LITERAL_WORDS = ("nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "true", "false")
_NAN_INF_LITERALS = 7  # the first seven are numbers (NaN, Inf); true/false only for BOOL


@lru_cache(maxsize=1)
def _literal_words() -> list[tuple[int, int, int]]:
    out = []
    for text in _LITERAL_WORDS:
        raw = text.encode().ljust(8, b"\x00")
        fold = int.from_bytes(bytes(0x20 if chr(b).isalpha() else 0 for b in raw), "little")
        out.append((int.from_bytes(raw, "little") | fold, fold, (1 << len(text)) - 1))
    return out


def _literal_values() -> list[Exact]:
    nan, inf = Exact.nan, Exact.inf
    return [nan(False), nan(False), nan(True), inf(False), inf(False), inf(True), inf(False)]


class _Rows:
    """What the vectorised reader found in each row of one chunk."""

    def __init__(self, count: int) -> None:
        self.number = np.zeros(count, bool)  # a valid decimal, read into the fields below
        self.invalid = np.zeros(count, bool)  # certainly not a number
        self.literal = np.full(count, -1, np.int8)  # index into _LITERAL_WORDS, -1 if none
        self.negative = np.zeros(count, bool)
        self.mantissa = np.zeros(count, _U64)  # the significant digits, < 10**19
        self.exponent = np.zeros(count, np.int64)  # value = mantissa * 10**exponent
        self.exact = np.zeros(count, bool)  # to be read one by one by the exact rules


def _swar_digits(words: np.ndarray) -> np.ndarray:
    """Value of 8 digit values (0-9) per uint64, the first (lowest) byte most significant."""
    x = words
    x = ((x * _U64(10)) + (x >> _U64(8))) & _U64(0x00FF00FF00FF00FF)
    x = ((x * _U64(100)) + (x >> _U64(16))) & _U64(0x0000FFFF0000FFFF)
    return ((x * _U64(10000)) + (x >> _U64(32))) & _U64(0xFFFFFFFF)


def _read_chunk(c: np.ndarray, long_rows: np.ndarray) -> _Rows:
    """Validate (R9 grammar) and read the rows of one chunk of the byte matrix.

    Rows holding only ``0-9 . e E + -`` are decided here: the grammar is checked on bit masks
    of where each kind of character is; the mantissa's digits (point read as a zero digit) are
    added 8 at a time with SWAR arithmetic, then the point is taken out.
    """
    count, width = c.shape
    rows = _Rows(count)
    is_digit = (c - np.uint8(48)) < 10
    digit = _packed(is_digit)
    point = _packed(c == 46)
    marker = _packed((c | np.uint8(0x20)) == 0x65)
    sign = _packed((c == 43) | (c == 45))
    filled = _packed(c != 0)
    used = np.bitwise_count(filled).astype(np.intp)
    one = digit.dtype.type(1)  # masks are as wide as the rows: uint8/16/32
    contiguous = (filled & (filled + one)) == 0
    plain = contiguous & ((digit | point | marker | sign) == filled) & ~long_rows
    mant = np.where(marker != 0, marker - one, filled)
    mant_digits = digit & mant
    expo_digits = digit & filled & ~mant & ~marker
    valid = (marker & (marker - one)) == 0
    valid &= (point & (point - one)) == 0
    valid &= (point & ~mant) == 0
    valid &= (sign & ~(one | (marker << one))) == 0
    valid &= mant_digits != 0
    valid &= (marker == 0) | (expo_digits != 0)
    # From the first nonzero digit to the mantissa's end (point included) at most 19
    # characters, so that the digits with the point read as a zero fit in uint64.  Leading
    # zeros are only looked for when the whole mantissa is longer than that.
    span = np.bitwise_count(mant_digits | point)
    if (span > 19).any():
        nonzero = _packed((c > 48) & (c < 58)) & mant_digits
        first = nonzero & (~nonzero + one)
        span = np.where(nonzero != 0, np.bitwise_count((mant_digits | point) & ~(first - one)), 0)
    expo_count = np.bitwise_count(expo_digits).astype(np.intp)
    number = plain & valid & (span <= 19) & (expo_count <= 6)
    rows.number = number
    rows.invalid = plain & ~valid
    if number.any():
        end = np.where(marker != 0, _bit_index(marker), used)  # the mantissa's end
        columns = np.arange(width, dtype=np.uint8)
        in_mantissa = is_digit & (columns < end.astype(np.uint8)[:, None])
        values = (c - np.uint8(48)) * in_mantissa  # (not np.where: 10x slower on bytes)
        words = values.view("<u8")
        m = np.zeros(count, _U64)
        for w in range(width // 8):
            word = words[:, w]
            if not word.any():
                continue
            # The word's 8 digits end 8 * (w + 1) - end places after the mantissa's last one.
            # Where that is positive (the mantissa ends inside the word) the trailing places
            # are zeros: shifting them out as leading zeros saves a division.
            after = 8 * (w + 1) - end
            inside = np.clip(after, 0, 7).astype(_U64) << _U64(3)
            part = _swar_digits(word << inside)
            m += part * _POW10.take(np.clip(-after, 0, 19))
        # The point was read as a zero digit: take it out.
        after_point = mant_digits & ~((point << one) - one)
        fraction = np.where(point != 0, np.bitwise_count(after_point), 0).astype(np.intp)
        has_point = point != 0
        tail = m % _POW10.take(np.minimum(fraction, 19))  # m < 10**19
        m = np.where(has_point, (m - tail) // _U64(10) + tail, m)
        rows.mantissa = np.where(number, m, _U64(0))
        # Exponent: its digits are the last characters of the row.
        e = np.zeros(count, np.int64)
        flat = c.reshape(-1)
        base = np.arange(count, dtype=np.intp) * width
        for k in range(6):
            inside = number & (k < expo_count)
            if not inside.any():
                break
            ch = flat.take(base + np.maximum(used - 1 - k, 0)).astype(np.int64)
            e += np.where(inside, (ch - 48) * 10**k, 0)
        expo_sign = flat.take(base + np.minimum(end + 1, width - 1))
        e = np.where((marker != 0) & (expo_sign == 45), -e, e)
        rows.exponent = np.where(number, e - fraction, 0)
        rows.negative = number & (c[:, 0] == 45)
    # Literals: nan, inf, infinity, true, false (any case, optionally signed).
    rest = ~plain & contiguous & (used <= 8) & ~long_rows
    if rest.any():
        padded = c if width >= 8 else np.pad(c, ((0, 0), (0, 8 - width)))
        word = np.ascontiguousarray(padded[:, :8]).view("<u8").reshape(-1)
        for i, (value, fold, mask) in enumerate(_literal_words()):
            hit = rest & ((word | _U64(fold)) == _U64(value)) & (filled == mask)
            rows.literal[hit] = i
            rows.negative |= hit & (_LITERAL_WORDS[i][0] == "-")
    rows.exact = ~(number | rows.invalid | (rows.literal >= 0))
    return rows


# == STRING -> number: decimal -> DOUBLE ==========================================================

_POW10_DOUBLE = np.array([10.0**i for i in range(23)])  # exact
_POW2 = np.array([1 << i for i in range(64)], dtype=_U64)


@lru_cache(maxsize=1)
def _powers_of_five() -> tuple[np.ndarray, np.ndarray]:
    """fast_float's 128-bit approximations of 5**q, q in [-342, 308] (Lemire 2021, Appendix B)."""
    high, low = [], []
    for q in range(-342, 309):
        if q < 0:
            power5 = 5**-q
            z = power5.bit_length() if power5 & (power5 - 1) else power5.bit_length() - 1
            b = z + 127 if q >= -27 else 2 * z + 128
            c = 2**b // power5 + 1
            while c >= 1 << 128:
                c //= 2
        else:
            c = 5**q
            while c < 1 << 127:
                c *= 2
            while c >= 1 << 128:
                c //= 2
        high.append(c >> 64)
        low.append(c & ((1 << 64) - 1))
    return np.array(high, dtype=_U64), np.array(low, dtype=_U64)


_POW5 = np.array([5**i for i in range(23)], dtype=_U64)


def _to_double(
    negative: np.ndarray, w: np.ndarray, q: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The DOUBLE nearest to each ``w * 10**q`` (sign from ``negative``); where that was not
    decided here (subnormal results, the Eisel-Lemire algorithm's rare undecided case); and
    where it is known to equal the decimal exactly.

    ``w < 10**19``.  Clinger's fast path where ``w`` and ``10**|q|`` are exact doubles (one
    rounding of an exact product or quotient), else the Eisel-Lemire algorithm as in
    fast_float.
    """
    total = w.shape[0]
    bits = np.zeros(total, _U64)
    undecided = np.zeros(total, bool)
    exact = w == 0
    fast = ~exact & (w <= _U64(1 << 53)) & (q >= -22) & (q <= 22)
    slow = ~exact & ~fast
    pick = np.flatnonzero(fast)
    if pick.size:
        wf, qf = w.take(pick), q.take(pick)
        qa = np.abs(qf)
        ten = _POW10_DOUBLE.take(qa)
        x = wf.astype(np.float64)
        bits[pick] = np.where(qf >= 0, x * ten, x / ten).view(_U64)
        # Exact: an integer below 2**53, or w / 10**k with 5**k dividing w (a dyadic one).
        below = wf <= _U64(1 << 53) // _POW10.take(np.minimum(qa, 19))
        exact[pick] = np.where(qf >= 0, below, wf % _POW5.take(qa) == 0)
    if slow.any():
        ws, qs = w[slow], q[slow]
        out = np.zeros(ws.shape, _U64)
        tiny, huge = qs < -342, qs > 308
        qc = np.clip(qs, -342, 308)
        high5, low5 = _powers_of_five()
        index = (qc + 342).astype(np.intp)
        length = np.frexp(ws.astype(np.float64))[1]  # bit length of w, or one more when
        length -= ws < _POW2.take(length - 1)  # the conversion rounded up to a power of two
        lz = (64 - length).astype(_U64)
        wn = ws << lz
        hi, lo = _mul_full(wn, high5.take(index))
        second = np.flatnonzero((hi & _U64(0x1FF)) == 0x1FF)  # the rare ones
        if second.size:
            hi2, _ = _mul_full(wn[second], low5.take(index[second]))
            lo_sum = lo[second] + hi2
            hi[second] += (hi2 > lo_sum).astype(_U64)
            lo[second] = lo_sum
        unsure = (lo == _U64(0xFFFFFFFFFFFFFFFF)) & ((qc < -27) | (qc > 55))
        upper = hi >> _U64(63)
        shift = upper + _U64(9)
        mantissa = hi >> shift
        power2 = ((217706 * qc) >> 16) + 63 + upper.astype(np.int64) - lz.astype(np.int64) + 1023
        subnormal = power2 <= 0
        tie = (lo <= 1) & (qc >= -4) & (qc <= 23) & ((mantissa & _U64(3)) == 1)
        tie &= (mantissa << shift) == hi
        mantissa = np.where(tie, mantissa & ~_U64(1), mantissa)
        mantissa = (mantissa + (mantissa & _U64(1))) >> _U64(1)
        carry = mantissa >= _U64(1 << 53)
        mantissa = np.where(carry, _U64(1 << 52), mantissa)
        power2 = power2 + carry
        mantissa &= ~_U64(1 << 52)
        overflow = huge | (power2 >= 0x7FF)
        out = mantissa | (np.clip(power2, 0, 0x7FF).astype(_U64) << _U64(52))
        out = np.where(overflow, _U64(0x7FF << 52), out)
        out = np.where(tiny, _U64(0), out)
        bits[slow] = out
        undecided[slow] = (unsure | subnormal) & ~tiny & ~overflow
    bits |= negative.astype(_U64) << _U64(63)
    return bits.view(np.float64), undecided, exact


# == STRING -> number: the rules ==================================================================


def _critical(x: np.ndarray, target: TypeSpec) -> np.ndarray:
    """Where the DOUBLE ``x`` (nearest to a decimal) sits on a point at which the target's
    rounding changes, so that the decimal, a little off ``x``, might round differently."""
    bits = x.view(_U64)
    field = ((bits >> _U64(52)) & _U64(0x7FF)).astype(np.int64)
    frac = bits & _U64((1 << 52) - 1)
    normal = (field > 0) & (field < 0x7FF)
    fmt = target.fmt
    if fmt.special is Special.E8M0:
        # up/down change at powers of two, nearest at 1.5 * 2**k.
        return normal & ((frac == 0) | (frac == _U64(1 << 51)))
    # A tie of the target format: the bits below its quantum are exactly 100...0.
    exponent = field - 1023
    below = 51 - fmt.mantissa_bits + np.maximum(fmt.min_exponent - exponent, 0)
    below = np.clip(below, 0, 63).astype(_U64)
    significand = frac | _U64(1 << 52)
    half = _U64(1) << below
    return normal & (below <= 52) & ((significand & ((half << _U64(1)) - _U64(1))) == half)


def _integer_bits(rows: _Rows, pick: np.ndarray, target: TypeSpec, mode: Mode) -> np.ndarray:
    """R7 on the exact decimals ``mantissa * 10**exponent`` of the rows ``pick``: truncation
    toward zero and saturation, or (4/2-bit targets) rounding and the low bits."""
    m, e, negative = rows.mantissa[pick], rows.exponent[pick], rows.negative[pick]
    pos = np.clip(e, 0, 19)
    neg_e = np.clip(-e, 0, 19)
    scale = _POW10[pos]
    with np.errstate(all="ignore"):
        whole = np.where(e >= 0, m * scale, m // _POW10[neg_e])
    whole = np.where(e < -19, _U64(0), whole)
    mask = _U64((1 << target.bits) - 1)
    if target.kind is Kind.BOOL:
        return (m != 0).astype(_U64)
    overflow = (e > 19) | ((e >= 0) & (m > _U64(0xFFFFFFFFFFFFFFFF) // scale))
    overflow &= m != 0
    if target.is_sub_byte:
        rules = mode.profile.rules
        if rules.sub_byte_rounding == "half_even":
            unit = np.where(e < -19, _U64(0), _POW10[neg_e])
            rest = np.where(e < 0, m - whole * unit, _U64(0))
            twice = rest * _U64(2)
            up = (
                (e < 0)
                & (e >= -19)
                & ((twice > unit) | ((twice == unit) & ((whole & _U64(1)) == 1)))
            )
            whole = whole + up.astype(_U64)
        if getattr(rules, "sub_byte_range", "wrap") == "saturate":
            # Clip to the range first (R12 legacy), then keep the bits.
            high = np.where(negative, _U64(-target.int_min), _U64(target.int_max))
            whole = np.where(overflow | (whole > high), high, whole)
        # The low bits of the exact integer: uint64 arithmetic wraps modulo 2**64, which
        # keeps them.
        signed = np.where(negative, _U64(0) - whole, whole)
        return signed & mask
    top = _U64(target.int_max)
    if target.kind is Kind.SIGNED:
        bottom = _U64(-target.int_min)  # magnitude of the most negative value
        big_neg = negative & (overflow | (whole > bottom))
        big_pos = ~negative & (overflow | (whole > top))
        value = np.where(negative, _U64(0) - whole, whole)
        value = np.where(big_neg, _U64((1 << 64) + target.int_min), value)
        value = np.where(big_pos, top, value)
        return value & mask
    value = np.where(negative, _U64(0), whole)
    value = np.where(~negative & (overflow | (whole > top)), top, value)
    return value & mask


def _exact_rows(
    flat: np.ndarray,
    index: np.ndarray,
    target: TypeSpec,
    mode: Mode,
    bits: np.ndarray,
    invalid: np.ndarray,
) -> None:
    """Cast the rows ``index`` one by one by the exact rules."""
    for i in index.tolist():
        found = spec_strings.string_to_bits(flat[i], target, mode)
        if found is None:
            invalid[i] = True
        else:
            bits[i] = found


def _chunk_bits(rows: _Rows, target: TypeSpec, mode: Mode, bits: np.ndarray) -> None:
    """Write the result bits of the rows read as numbers or literals; mark the rows whose
    result the exact rules must decide (``rows.exact``)."""
    literal = rows.literal
    number = rows.number
    if target.is_float:
        x, undecided, exact = _to_double(
            rows.negative[number], rows.mantissa[number], rows.exponent[number]
        )
        values = np.zeros(number.shape, np.float64)
        values[number] = x
        known = np.zeros(number.shape, bool)  # the DOUBLE is the decimal itself
        known[number] = exact
        for i, value in enumerate(_literal_values()):
            hit = literal == i
            if hit.any():
                magnitude = math.nan if value.is_nan else math.inf
                values[hit] = -magnitude if value.negative else magnitude
        readable = number | ((literal >= 0) & (literal < _NAN_INF_LITERALS))
        redo = np.zeros(number.shape, bool)
        redo[np.flatnonzero(number)[undecided]] = True
        readable &= ~redo
        wide = values[readable]
        out = NUMPY.engine().from_wide(wide, _DOUBLE, target, mode)
        bits[readable] = NUMPY.bits(out, target)
        if _style(mode) == "spec" and target.code != _T.DOUBLE:
            # The DOUBLE is the decimal rounded once; a second rounding could go wrong where
            # it sits exactly on a point at which the target's rule changes.
            suspect = _critical(wide, target) & ~known[readable]
            if target.fmt.special is Special.E8M0:
                suspect |= (wide == 0) & (rows.mantissa[readable] != 0)  # -tiny -> NaN
            redo[np.flatnonzero(readable)[suspect]] = True
        rows.exact |= redo | (literal >= _NAN_INF_LITERALS)  # true/false: BOOL only
        return
    # Decimals of DOUBLE's overflow threshold or more read as infinity (R9), which 4/2-bit
    # targets turn into 0 and clipping profiles into their bounds: the exact rules decide
    # those (rare) rows.
    magnitude = rows.exponent + _digit_count(rows.mantissa) - 1
    rows.exact |= number & (rows.mantissa != 0) & (magnitude >= 308)
    number = number & ~rows.exact
    bits[number] = _integer_bits(rows, number, target, mode)
    specials = _literal_values()
    for i, word in enumerate(_LITERAL_WORDS):
        hit = literal == i
        if not hit.any():
            continue
        if i < _NAN_INF_LITERALS:
            bits[hit] = cast_value(specials[i], _DOUBLE, target, mode)
        elif target.kind is Kind.BOOL:
            bits[hit] = int(word == "true")
        else:
            rows.exact |= hit


def _parse_bits(
    flat: np.ndarray, foreign: np.ndarray, target: TypeSpec, mode: Mode
) -> tuple[np.ndarray, np.ndarray]:
    """Result bits (uint64) of every string, and which strings are not numbers."""
    total = flat.shape[0]
    bits = np.zeros(total, _U64)
    invalid = foreign.copy()
    if target.kind is Kind.BOOL and _style(mode) == "numpy":
        # onnx.reference: astype(bool) of the strings is their truth: non-empty -> True.
        if flat.dtype.kind == "T":
            return (np.strings.str_len(flat) > 0).astype(_U64), invalid
        texts = flat.tolist()
        return np.array(
            [len(v.rstrip(b"\x00" if isinstance(v, bytes) else "\x00")) > 0 for v in texts],
            dtype=_U64,
        ), invalid
    exact = np.zeros(total, bool)
    if total:
        matrix, long_rows = _byte_matrix(flat)
        width = matrix.shape[1]
        for start in _chunks(total):
            stop = min(start + _CHUNK, total)
            rows = _read_chunk(np.ascontiguousarray(matrix[start:stop]), long_rows[start:stop])
            invalid[start:stop] |= rows.invalid
            _chunk_bits(rows, target, mode, bits[start:stop])
            exact[start:stop] = rows.exact
        if width < _MAX_WIDTH and long_rows.any():
            # Longer than the width the sample suggested: a batch of their own, wider.
            again = np.flatnonzero(long_rows & ~foreign)
            more_bits, more_invalid = _parse_bits(flat[again], foreign[again], target, mode)
            bits[again], invalid[again] = more_bits, more_invalid
            exact[again] = False
    _exact_rows(flat, np.flatnonzero(exact & ~foreign), target, mode, bits, invalid)
    return bits, invalid


# == entry points =================================================================================


def _index_of(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat_index, shape)) if shape else ()


def _shown(value: Any) -> str:
    if isinstance(value, (str, bytes)):
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    return f"{value!r} (a {type(value).__name__}, not a string)"


def parse_strings(
    strings: np.ndarray,
    target: TypeSpec,
    mode: Mode,
    *,
    errors: str = "raise",
    where: str = "",
    origin: tuple[int, ...] | None = None,
) -> np.ndarray:
    """Read a NumPy array of strings (StringDType, ``U``, ``S``, or objects holding ``str`` or
    ``bytes``) as the numeric type ``target`` by R9 (or R12's numpy style, per ``mode``).

    Parameters
    ----------
    strings : numpy.ndarray
        The strings; bytes are decoded as UTF-8.
    target : TypeSpec
        A numeric type.
    mode : Mode
        Its ``profile`` picks the grammar and reading (R9, or Python's ``float()`` for the
        reference and legacy profiles); ``saturate``/``round_mode`` apply as for numbers.
    errors : {"raise", "coerce"}
        What a string that is not a number does: raise :class:`InvalidStringError` naming the
        first one's index and text, or become NaN (targets without a NaN still raise).
    where : str
        Prefix of error messages (the operator and the pair).
    origin : tuple of int, optional
        Where ``strings`` starts in a larger array (a block of a lazy one): error messages
        give indices in the larger array.

    Returns
    -------
    numpy.ndarray
        The values, of ``target``'s NumPy dtype and ``strings``' shape.
    """
    strings = np.asarray(strings)
    shape = strings.shape
    original = strings.reshape(-1)
    if original.dtype.kind in "US" and not original.dtype.isnative:
        original = original.astype(original.dtype.newbyteorder("="))
    flat, foreign = _as_string_array(np.ascontiguousarray(original))
    bits, invalid = _parse_bits(flat, foreign, target, mode)
    if invalid.any():
        first = int(np.argmax(invalid))
        index = _index_of(first, shape)
        if origin is not None:
            index = tuple(i + o for i, o in zip(index, origin, strict=True))
        text = _shown(original[first : first + 1].tolist()[0])
        prefix = f"{where}: " if where else ""
        if errors != "coerce":
            raise InvalidStringError(
                f"{prefix}the string {text} at index {index} is not a number (R9: "
                "[+-]digits[.digits][(e|E)[+-]digits], inf, infinity or nan, with ASCII "
                "whitespace around); pass errors='coerce' to read such strings as NaN"
            )
        if not spec_strings.has_nan(target):
            raise InvalidStringError(
                f"{prefix}the string {text} at index {index} is not a number, and "
                f"errors='coerce' cannot make it NaN: {target.name} has no NaN"
            )
        bits[invalid] = cast_value(Exact.nan(), _DOUBLE, target, mode)
    storage = np.dtype(f"uint{target.storage_bits}")
    return NUMPY.from_bits(bits.astype(storage), target).reshape(shape)


def _output_kind(like: Any) -> str:
    """R9: the result follows ``like``'s kind when it is a NumPy string array; "T"
    (StringDType) otherwise.  "B" is an object array of bytes."""
    if isinstance(like, (np.ndarray, np.generic)) and like.dtype.kind in "USOT":
        if like.dtype.kind == "O":
            first = like.reshape(-1)[:1].tolist()
            return "B" if first and isinstance(first[0], bytes) else "O"
        return str(like.dtype.kind)
    return "T"


def _from_ascii(raw: np.ndarray, kind: str, width: int | None = None) -> np.ndarray:
    """An ``S`` array of ASCII text as an array of the string ``kind`` (``U``/``S`` as wide
    as ``width``, or as the longest text, as ``numpy.array(list_of_texts)`` would make it)."""
    if kind in "SU":
        if width is None:
            width = int(np.strings.str_len(raw).max(initial=1)) if raw.size else 1
        return raw.astype(f"{kind}{max(width, 1)}")
    if kind == "B":
        return raw.astype(object)
    text = raw.astype(_SD)
    return text.astype(object) if kind == "O" else text


def _strings_as(strings: np.ndarray, kind: str) -> np.ndarray:
    """STRING -> STRING: the same texts in the string ``kind`` (bytes decoded as UTF-8)."""
    items = strings.reshape(-1).tolist()
    texts = [v.decode("utf-8") if isinstance(v, bytes) else v for v in items]
    if any(not isinstance(v, str) for v in texts):
        bad = next(i for i, v in enumerate(texts) if not isinstance(v, str))
        raise InvalidStringError(
            f"the element {_shown(items[bad])} at index {_index_of(bad, strings.shape)} is not "
            "a string"
        )
    if kind == "S":
        out: np.ndarray = np.array([t.encode() for t in texts], dtype="S")
    elif kind == "B":
        out = np.empty(len(texts), dtype=object)
        out[:] = [t.encode() for t in texts]
    elif kind == "O":
        out = np.empty(len(texts), dtype=object)
        out[:] = texts
    else:
        out = np.array(texts, dtype="U" if kind == "U" else _SD)
    return out.reshape(strings.shape)


def _host(x: Any, adapter: Any) -> np.ndarray:
    """A numeric array of any library as a native-order NumPy array (bits kept)."""
    host = np.asarray(x) if isinstance(x, (np.ndarray, np.generic)) else adapter.to_numpy(x)
    if not host.dtype.isnative:
        host = host.astype(host.dtype.newbyteorder("="))
    return host


def _is_other_library(like: Any) -> bool:
    return (
        like is not None
        and not isinstance(like, (np.ndarray, np.generic))
        and aac.is_array_api_obj(like)
    )


def cast_strings(
    array: Any, plan: Any, adapter: Any, *, errors: str = "raise", like: Any = None
) -> Any:
    """Run a cast from or to STRING (R9); :func:`castlike.cast` calls it.

    Parameters
    ----------
    array : array
        The input: a NumPy string array (STRING source) or a numeric array of any library.
    plan : Plan
        The validated cast (``plan.source`` or ``plan.target`` is STRING).
    adapter : Adapter
        The adapter of ``array``'s library.
    errors : {"raise", "coerce"}
        For STRING sources, see :func:`parse_strings`.
    like : optional
        CastLike's ``like``: a NumPy string array picks the kind of string output; an array of
        another library (torch, JAX) receives the numbers, on its device.

    Returns
    -------
    array
        Strings: a NumPy array (StringDType unless ``like`` is a string array of another kind).
        Numbers: a NumPy array, or ``like``'s library's array on its device.  A lazy input
        (Dask) gives a lazy result, cast block by block when computed (R10).
    """
    source, target, mode = plan.source, plan.target, plan.mode
    if _is_lazy_blocks(array):
        return _lazy_cast(array, plan, errors, like)
    if target.kind is Kind.STRING:
        kind = _output_kind(like)
        if source.kind is Kind.STRING:
            return _strings_as(np.asarray(array), kind)
        host = _host(array, adapter)
        raw = _text_bytes(host, source, _style(mode))
        return _from_ascii(raw, kind).reshape(host.shape)
    result = parse_strings(np.asarray(array), target, mode, errors=errors, where=plan.describe())
    return _deliver(result, plan, like)


def _deliver(result: np.ndarray, plan: Any, like: Any) -> Any:
    """Numbers read from strings, in ``like``'s library and on its device when ``like`` is an
    array of another library (R9), else as they are."""
    target = plan.target
    if _is_other_library(like):
        from .backends import adapter_for

        other = adapter_for(aac.array_namespace(like))
        if other.native_dtype(target) is None:
            raise BackendTypeError(
                f"{plan.describe()}: {other.name} cannot hold {target.name}; "
                f"{other.cannot_hold_hint(target)}"
            )
        return other.from_numpy(result, like=like)
    return result


def _is_lazy_blocks(x: Any) -> bool:
    """Whether ``x`` is a lazy array of NumPy blocks (Dask), which string casts must keep lazy
    (R10): they then run block by block when the caller computes."""
    return not isinstance(x, (np.ndarray, np.generic)) and all(
        hasattr(x, name) for name in ("map_blocks", "chunks", "compute")
    )


def _meta(array: Any, dtype: Any) -> np.ndarray:
    """An empty NumPy array of the result's type: given to ``map_blocks`` so that Dask does
    not run the cast on made-up data to find it out."""
    return np.empty((0,) * array.ndim, dtype=dtype)


def _lazy_cast(array: Any, plan: Any, errors: str, like: Any) -> Any:
    """:func:`cast_strings` of each block of a lazy array, lazily."""
    source, target, mode = plan.source, plan.target, plan.mode
    if target.kind is Kind.STRING:
        kind = _output_kind(like)
        if source.kind is Kind.STRING:
            if kind in "SU":  # the width would depend on every block
                kind = "T"
            same = np.dtype(object) if kind in "OB" else _SD
            return array.map_blocks(_strings_as, kind, dtype=same, meta=_meta(array, same))
        width = _WIDTH_DOUBLE if source.bits > 32 else _WIDTH
        if kind in "SU":
            dtype: Any = np.dtype(f"{kind}{width}")
        else:
            dtype = np.dtype(object) if kind in "OB" else _SD
        style = _style(mode)

        def text_block(block: np.ndarray) -> np.ndarray:
            raw = _text_bytes(block, source, style)
            return _from_ascii(raw, kind, width).reshape(block.shape)

        return array.map_blocks(text_block, dtype=dtype, meta=_meta(array, dtype))

    def number_block(block: np.ndarray, block_info: Any = None) -> np.ndarray:
        origin = None
        if block_info and block_info.get(0):
            origin = tuple(start for start, _ in block_info[0]["array-location"])
        where = plan.describe()
        return parse_strings(block, target, mode, errors=errors, where=where, origin=origin)

    numbers = NUMPY_DTYPES[_T(target.code)]
    result = array.map_blocks(number_block, dtype=numbers, meta=_meta(array, numbers))
    if _is_other_library(like) and not _is_lazy_blocks(like):
        return _deliver(np.asarray(result.compute()), plan, like)
    return result


# Every numeric type has a NumPy dtype to format from and parse into.
assert all(t in NUMPY_DTYPES for t in TYPES if t != _T.STRING)
