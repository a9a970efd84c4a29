"""Shortest round-trip decimals of float values (Schubfach), on whole arrays."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..spec import strings as spec_strings
from ..spec.types import Special, TypeSpec
from ._common import _M32, _U64

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
