"""Number -> STRING: laying the decimals out as text."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..backends.numpy import ADAPTER as NUMPY
from ..spec import strings as spec_strings
from ..spec.rules import Mode
from ..spec.types import Kind, Special, TypeSpec
from ._common import _CHUNK, _DOUBLE, _SD, _T, _U64
from ._shortest import _float_decimals, _nan_patterns

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
    i = np.arange(10000, dtype=np.uint32)
    quads = np.zeros(i.shape, dtype="<u4")
    for k, power in enumerate((1000, 100, 10, 1)):  # the first character in the lowest byte
        quads |= ((i // power) % 10 + ord("0")) << (8 * k)
    return quads


def _x_range(width: int) -> tuple[int, int]:
    """Decimal exponents a template table of ``width`` covers (DOUBLE needs the widest)."""
    return (-330, 330) if width > _WIDTH else (-50, 50)


#: One template block per (negative, layout, digit count): every exponent of one of those.
_BLOCKS = 2 * 3 * (_DIGIT_SLOTS + 1)
_LITERAL_INDEX = {ord(ch): _DIGIT_SLOTS + i for i, ch in enumerate(_LITERALS.decode("latin-1"))}


class _Templates:
    """For every (negative, layout, digit count, exponent): the ``width`` bytes of the text,
    as indices into a row's digit-and-literal buffer (see :func:`_layout_into`).

    Placeholder characters stand for the digits, so the oracle's own layout function decides
    where every digit and literal goes.  The table is filled one block (negative, layout,
    digit count) at a time, when a text first needs it: a first cast of a few numbers lays
    out a few blocks, not all 126 (22 ms).  Filling is idempotent, so two threads filling the
    same block at once write the same bytes.
    """

    def __init__(self, width: int) -> None:
        self.width = width
        self.x_min, self.x_max = _x_range(width)
        xs = range(self.x_min, self.x_max + 1)
        self.rows = np.full((_BLOCKS, len(xs), width), _EXT - 1, dtype=np.uint8)
        self.filled = np.zeros(_BLOCKS, dtype=bool)
        # Scientific texts differ only in their exponent: each digit count's text is laid out
        # once and these exponents are appended (checked at both ends in _fill).
        self.suffixes = [
            f"e{'-' if x < 0 else '+'}{abs(x):02d}".translate(_LITERAL_INDEX).encode("latin-1")
            for x in xs
        ]

    def table(self, blocks: np.ndarray) -> np.ndarray:
        """The template rows, (block * exponents + exponent, width), with ``blocks`` filled."""
        needed = np.bincount(blocks.reshape(-1), minlength=_BLOCKS).astype(bool)
        for block in np.flatnonzero(needed & ~self.filled):
            self._fill(int(block))
            self.filled[block] = True
        return self.rows.reshape(-1, self.width)

    def _encode(self, text: str, to_index: dict[int, int]) -> np.ndarray | None:
        raw = text.translate(to_index).encode("latin-1")
        return np.frombuffer(raw, dtype=np.uint8) if len(raw) <= self.width else None

    def _fill(self, block: int) -> None:
        negative, code, n = (
            block // (3 * (_DIGIT_SLOTS + 1)),
            block // (_DIGIT_SLOTS + 1) % 3,
            block % (_DIGIT_SLOTS + 1),
        )
        if n == 0:
            return  # no number has no digits
        x_min, x_max, width = self.x_min, self.x_max, self.width
        sign = "-" if negative else ""
        placeholder = "".join(chr(0x100 + j) for j in range(n))
        to_index = dict(_LITERAL_INDEX)
        to_index.update({0x100 + j: _DIGIT_SLOTS - n + j for j in range(n)})
        rows = self.rows[block]
        if code == _INT:
            row = self._encode(sign + placeholder, to_index)
            if row is not None:
                rows[n - 1 - x_min, : row.size] = row
        elif code == _POS:
            for x in range(max(x_min, -30), min(x_max, 30) + 1):  # never positional beyond
                text = spec_strings.layout_digits(bool(negative), placeholder, x, positional=True)
                row = self._encode(text, to_index)
                if row is not None:
                    rows[x - x_min, : row.size] = row
        else:
            ends = [
                spec_strings.layout_digits(bool(negative), placeholder, x, positional=False)
                for x in (x_min, x_max)
            ]
            prefix = ends[0][: -len(f"e-{-x_min}")]
            assert ends == [prefix + f"e-{-x_min}", prefix + f"e+{x_max}"]
            head = prefix.translate(to_index).encode("latin-1")
            texts = [
                (head + tail).ljust(width, bytes([_EXT - 1]))[:width] for tail in self.suffixes
            ]
            fits = np.array([len(head) + len(tail) <= width for tail in self.suffixes])
            laid = np.frombuffer(b"".join(texts), dtype=np.uint8).reshape(len(texts), width)
            rows[fits] = laid[fits]


@lru_cache(maxsize=4)
def _templates(width: int) -> _Templates:
    """The one template table of each width."""
    return _Templates(width)


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
    block = (negative * 3 + code) * (_DIGIT_SLOTS + 1) + n
    key = block * (x_max - x_min + 1) + (x - x_min)
    table = _templates(width).table(block)  # (kept as bytes: 2 MB)
    index = table.take(key, axis=0).astype(np.int32)
    ext = np.empty((rows, _EXT), dtype=np.uint8)
    ext[:, _DIGIT_SLOTS:] = np.frombuffer(_LITERALS, dtype=np.uint8)
    quad_view = ext.view("<u4")
    quads = _digit_quads()
    rest = f
    for i in range(_DIGIT_SLOTS // 4):
        higher = rest // _QUAD
        # Indices as intp: NumPy 2.0's take refuses uint64 ones (later releases cast them).
        quad_view[:, _DIGIT_SLOTS // 4 - 1 - i] = quads.take(
            (rest - higher * _QUAD).astype(np.intp)
        )
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
    limit = spec_strings.numpy_positional_limits().get(_T(t.code)) if style == "numpy" else None
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


def _texts_of_patterns(patterns: np.ndarray, t: TypeSpec, style: str) -> np.ndarray:
    """The text of each of the bit ``patterns`` of a type of 16 bits or fewer (``S``)."""
    if t.kind is Kind.BOOL or (t.is_float and t.fmt.special is Special.E8M0):
        return np.array([spec_strings.format_bits(int(b), t, style) for b in patterns], dtype="S")
    if t.is_integer:
        matrix = _integer_text(NUMPY.from_bits(patterns, t), t)
    elif style == "numpy" and _T(t.code) not in spec_strings.numpy_positional_limits():
        # repr() of the Python float: DOUBLE digits and layout, lower-case specials.
        with np.errstate(invalid="ignore"):  # NaN of ml_dtypes types
            wide = NUMPY.from_bits(patterns, t).astype(np.float64)
        matrix = _float_text(NUMPY.bits(wide, _DOUBLE), _DOUBLE, "numpy")
    else:
        matrix = _float_text(patterns, t, style)
    return np.ascontiguousarray(matrix).view(f"S{matrix.shape[1]}").reshape(-1)


@lru_cache(maxsize=128)
def _pattern_text(t: TypeSpec, style: str) -> np.ndarray:
    """The text of every pattern of a type of 16 bits or fewer (an ``S`` array)."""
    patterns = np.arange(1 << t.bits, dtype=np.dtype(f"uint{t.storage_bits}"))
    table = _texts_of_patterns(patterns, t, style)
    table.flags.writeable = False
    return table


#: Below (patterns of the type) / _FEW elements, only the patterns present are formatted:
#: a first cast of ten FLOAT16 values need not lay out all 65,536 texts (about 40 ms).
_FEW = 64


def _text_bytes(x: np.ndarray, source: TypeSpec, style: str) -> np.ndarray:
    """The text of every element of the NumPy array ``x`` (type ``source``, either byte
    order), flat, as ``S``."""
    flat = np.ascontiguousarray(x).reshape(-1)
    if not flat.dtype.isnative:  # the bits are read from memory: big-endian ones swapped
        flat = flat.astype(flat.dtype.newbyteorder("="))
    if source.kind is Kind.BOOL or source.bits <= 16:
        bits = NUMPY.bits(flat, source)
        if flat.size * _FEW < (1 << source.bits):
            present, where = np.unique(bits, return_inverse=True)
            return _texts_of_patterns(present, source, style)[where.reshape(-1)]
        return _pattern_text(source, style)[bits.astype(np.intp)]
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
