"""STRING -> number: validating, reading and rounding whole arrays of strings."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..backends.numpy import ADAPTER as NUMPY
from ..spec import strings as spec_strings
from ..spec.reference import Exact, cast_value
from ..spec.rules import Mode
from ..spec.types import Kind, Special, TypeSpec
from ._common import _CHUNK, _DOUBLE, _NAN_SD, _SD, _T, _U64
from ._format import _POW10, _chunks, _digit_count, _style
from ._problems import is_missing
from ._shortest import _mul_full

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
    # StringDType: the width comes from a sample, so that one long row does not widen every
    # row; rows longer than it are read again in a batch of their own (see _parse_bits).
    # They are found by their length: the byte just past the width does not tell, since a
    # string may hold NUL characters before more text ("1" + "\0" * 40 + "5" is no number).
    sample = np.strings.str_len(flat[:: max(1, flat.shape[0] // 256)])
    width = _width_for(int(sample.max(initial=0)))
    long_rows = np.strings.str_len(flat) > width
    try:
        raw = flat.astype(f"S{width}")
    except UnicodeEncodeError:
        codes = flat.astype(f"U{width}").view(np.uint32).reshape(-1, width)
        return _code_matrix(codes, width)[0], long_rows
    return raw.view(np.uint8).reshape(-1, width), long_rows


def _as_string_array(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A flat array of any string kind as StringDType/U/S holding text in every row, the
    rows that are missing values, and the rows of an object array that hold no text.

    Missing values are a StringDType's ``na_object`` elements and an object array's None and
    NaN; their rows (and those that hold no text) become empty text, which no grammar reads
    as a number, so that the caller decides what they give.
    """
    none = np.zeros(flat.shape, bool)
    if flat.dtype.kind == "T":
        if not hasattr(flat.dtype, "na_object"):
            return flat, none, none
        # Only a NaN-like na_object is visible to a vectorised test (np.isnan): convert to
        # one (missing values stay missing), then give those rows an empty text, since
        # NumPy's string functions refuse missing values ("the length of a null string").
        clean = flat.astype(_NAN_SD)
        missing = np.isnan(clean)
        clean[missing] = ""
        return clean, missing, none
    if flat.dtype.kind != "O":
        return flat, none, none
    items = flat.tolist()
    kinds = {type(v) for v in items}
    if kinds <= {str}:
        try:
            return np.array(items, dtype=_SD), none, none
        except UnicodeEncodeError:  # a lone surrogate, which StringDType (UTF-8) cannot hold
            return np.array([_encodable(v) for v in items], dtype=_SD), none, none
    if kinds <= {bytes}:
        return np.array(items, dtype="S"), none, none
    # Mixed, missing or foreign objects: every text row goes the exact way (R9 decodes
    # bytes as UTF-8).
    missing = np.array([is_missing(v) for v in items], dtype=bool)
    text = np.array([isinstance(v, (str, bytes)) for v in items], dtype=bool)
    texts = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in items]
    return (
        np.array([_encodable(t) if isinstance(t, str) else "" for t in texts], _SD),
        missing,
        ~text & ~missing,
    )


def _encodable(text: str) -> str:
    """``text`` with its lone surrogates replaced by U+FFFD.

    A surrogate is no digit, sign, point or whitespace in any grammar here (R9's, or Python's
    ``float()`` of the reference profile), so the text stays invalid as a number and non-empty
    (its truth for the reference profile's BOOL); the error message shows the original text.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


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


def _last_word(c: np.ndarray, used: np.ndarray) -> np.ndarray:
    """The last 8 bytes of each row's ``used`` ones as a little-endian uint64 (the last byte
    highest; zeros in front for rows shorter than 8): two words of the row, funnel-shifted."""
    words = c.view("<u8")
    count = words.shape[1]
    start = used - 8
    first = np.maximum(start, 0)
    index = first >> 3
    # The words at ``index`` and ``index + 1`` (the last one past the end), chosen with
    # ``where``: at most 4 words a row, and a gather per row costs several times more.
    low, high = words[:, 0], words[:, min(1, count - 1)]
    for k in range(1, count):
        low = np.where(index == k, words[:, k], low)
        high = np.where(index == k, words[:, min(k + 1, count - 1)], high)
    shift = (first & 7).astype(_U64) << _U64(3)
    # A shift by 64 gives 0 in NumPy, so ``high`` drops out where the bytes are word-aligned.
    joined = (low >> shift) | (high << (_U64(64) - shift))
    return joined << (np.maximum(-start, 0).astype(_U64) << _U64(3))


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
        in_mantissa = np.unpackbits(mant_digits.view(np.uint8), bitorder="little")
        values = (c - np.uint8(48)) * in_mantissa.reshape(count, width)  # (np.where: 10x slower)
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
        # Exponent: its (at most 6) digits are the last characters of the row, read with the
        # character before them (its sign, or the marker) from the row's last 8 bytes; only
        # in the rows that have one.
        e = np.zeros(count, np.int64)
        has_e = np.flatnonzero(number & (marker != 0))
        if has_e.size:
            last8 = _last_word(c[has_e], used[has_e])
            digits = expo_count[has_e].astype(_U64)
            keep = ~_U64(0) << (_U64(8) * (_U64(8) - digits))
            magnitude = _swar_digits((last8 ^ _U64(0x3030303030303030)) & keep).astype(np.int64)
            before = (last8 >> (_U64(8) * (_U64(7) - digits))) & _U64(0xFF)
            e[has_e] = np.where(before == 45, -magnitude, magnitude)
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


def _clinger(w: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Where Clinger's fast path reads ``w * 10**q``: ``w`` and ``10**|q|`` are exact doubles,
    so one IEEE multiplication or division rounds the exact value once."""
    return (w <= _U64(1 << 53)) & (q >= -22) & (q <= 22)


def _equals_its_double(w: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Where ``w * 10**q`` is exactly a DOUBLE, as far as the fast path can tell (zero; an
    integer below 2**53; ``w / 10**k`` with ``5**k`` dividing ``w``, a dyadic number)."""
    qa = np.abs(np.clip(q, -22, 22))
    below = w <= _U64(1 << 53) // _POW10.take(np.minimum(qa, 19))
    dyadic = w % _POW5.take(qa) == 0
    return (w == 0) | (_clinger(w, q) & np.where(q >= 0, below, dyadic))


def _to_double(negative: np.ndarray, w: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The DOUBLE nearest to each ``w * 10**q`` (sign from ``negative``), and where that was
    not decided here (subnormal results, the Eisel-Lemire algorithm's rare undecided case).

    ``w < 10**19``.  Clinger's fast path where ``w`` and ``10**|q|`` are exact doubles (one
    rounding of an exact product or quotient), else the Eisel-Lemire algorithm as in
    fast_float.
    """
    total = w.shape[0]
    bits = np.zeros(total, _U64)
    undecided = np.zeros(total, bool)
    zero = w == 0
    fast = ~zero & _clinger(w, q)
    slow = ~zero & ~fast
    everywhere = bool(fast.all())  # FLOAT's 9 digits: no copies
    pick = slice(None) if everywhere else np.flatnonzero(fast)
    if everywhere or pick.size:  # type: ignore[union-attr]
        wf, qf = w[pick], q[pick]
        ten = _POW10_DOUBLE.take(np.abs(qf))
        x = wf.astype(np.float64)
        product = np.multiply(x, ten)
        np.divide(x, ten, out=product, where=qf < 0)  # (only there: a division is slow)
        bits[pick] = product.view(_U64)
    count = int(np.count_nonzero(slow))
    if count:
        # Most rows (DOUBLE's 17 digits): run on all of them and pick, cheaper than copying.
        everywhere = count * 4 > total * 3
        ws, qs = (w, q) if everywhere else (w[slow], q[slow])
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
        out_undecided = (unsure | subnormal) & ~tiny & ~overflow
        if everywhere:
            bits = np.where(slow, out, bits)
            undecided = slow & out_undecided
        else:
            bits[slow] = out
            undecided[slow] = out_undecided
    bits |= negative.astype(_U64) << _U64(63)
    return bits.view(np.float64), undecided


# == STRING -> number: the rules ==================================================================


def _critical(x: np.ndarray, target: TypeSpec) -> np.ndarray:
    """Where the DOUBLE ``x`` (nearest to a decimal) sits on a point at which the target's
    rounding changes, so that the decimal, a little off ``x``, might round differently."""
    bits = x.view(_U64)
    field = (bits >> _U64(52)) & _U64(0x7FF)
    normal = (field - _U64(1)) < _U64(0x7FE)  # (0 wraps around)
    fmt = target.fmt
    if fmt.special is Special.E8M0:
        # up/down change at powers of two, nearest at 1.5 * 2**k.
        frac = bits & _U64((1 << 52) - 1)
        return normal & ((frac == 0) | (frac == _U64(1 << 51)))
    # A tie of the target format: the bits below its quantum are exactly 100...0.  Below
    # the target's normal range the quantum is fixed, so more bits count (few rows).
    below = 51 - fmt.mantissa_bits
    tie = normal & ((bits & _U64((2 << below) - 1)) == _U64(1 << below))
    small = np.flatnonzero(normal & (field < _U64(1023 + fmt.min_exponent)))
    if small.size:
        exponent = field[small].astype(np.int64) - 1023
        deeper = np.minimum(below + fmt.min_exponent - exponent, 63).astype(_U64)
        significand = (bits[small] & _U64((1 << 52) - 1)) | _U64(1 << 52)
        half = _U64(1) << deeper
        ties = (deeper <= 52) & ((significand & ((half << _U64(1)) - _U64(1))) == half)
        tie[small] = ties
    return tie


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
        if number.all():  # the common case: no copies
            values, undecided = _to_double(rows.negative, rows.mantissa, rows.exponent)
        else:
            x, undecided = _to_double(
                rows.negative[number], rows.mantissa[number], rows.exponent[number]
            )
            values = np.zeros(number.shape, np.float64)
            values[number] = x
        for i, value in enumerate(_literal_values() if (literal >= 0).any() else ()):
            hit = literal == i
            if hit.any():
                magnitude = math.nan if value.is_nan else math.inf
                values[hit] = -magnitude if value.negative else magnitude
        readable = number | ((literal >= 0) & (literal < _NAN_INF_LITERALS))
        redo = np.zeros(number.shape, bool)
        redo[np.flatnonzero(number)[undecided]] = True
        readable &= ~redo
        wide = values[readable]
        engine = NUMPY.engine()
        out = engine.run(wide, engine.route(_DOUBLE, target, mode))
        bits[readable] = NUMPY.bits(out, target)
        if _style(mode) == "spec" and target.code != _T.DOUBLE:
            # The DOUBLE is the decimal rounded once; a second rounding could go wrong where
            # it sits exactly on a point at which the target's rule changes.
            critical = _critical(wide, target)
            if target.fmt.special is Special.E8M0:
                critical |= (wide == 0) & (rows.mantissa[readable] != 0)  # -tiny -> NaN
            suspect = np.flatnonzero(readable)[critical]
            # ... unless the DOUBLE is the decimal itself.
            m, e = rows.mantissa[suspect], rows.exponent[suspect]
            redo[suspect[~_equals_its_double(m, e)]] = True
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
    flat: np.ndarray, skip: np.ndarray, target: TypeSpec, mode: Mode
) -> tuple[np.ndarray, np.ndarray]:
    """Result bits (uint64) of every string, and which strings are not numbers (the rows
    ``skip``, which hold no text, among them)."""
    total = flat.shape[0]
    bits = np.zeros(total, _U64)
    invalid = skip.copy()
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
            again = np.flatnonzero(long_rows & ~skip)
            more_bits, more_invalid = _parse_bits(flat[again], skip[again], target, mode)
            bits[again], invalid[again] = more_bits, more_invalid
            exact[again] = False
    _exact_rows(flat, np.flatnonzero(exact & ~skip), target, mode, bits, invalid)
    return bits, invalid
