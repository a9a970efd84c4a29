"""String casts (rule R9): exact, vectorised formatting and parsing on the host.

Every backend comes here for STRING: numbers are brought to NumPy, formatted or parsed with
NumPy integer arithmetic, and the result goes back to the caller's library.  A library of lazy
blocks (Dask) applies the block functions at the end of this module to each block instead
(its adapter's ``cast_strings``), so that the result stays lazy.  The exact rules live in
:mod:`castlike.spec.strings`; this module is the fast implementation of the same rules, tested
against it element by element.

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
from collections.abc import Iterator
from typing import Any

import array_api_compat as aac
import numpy as np

from ..backends.numpy import ADAPTER as NUMPY
from ..backends.numpy import NUMPY_DTYPES
from ..errors import BackendTypeError, InvalidStringError
from ..spec import strings as spec_strings
from ..spec.reference import Exact, cast_value
from ..spec.rules import Mode
from ..spec.types import TYPES, Kind, TypeSpec
from ._common import _DOUBLE, _SD, _T
from ._format import _WIDTH, _WIDTH_DOUBLE, _style, _text_bytes, format_numbers
from ._parse import _as_string_array, _parse_bits
from ._problems import (
    Problem,
    index_of,
    invalid_text,
    is_missing,
    missing_value,
    not_text,
    shown,
)

__all__ = [
    "Problem",
    "block_can_fail",
    "block_text_dtype",
    "cast_strings",
    "deliver_numbers",
    "format_block",
    "format_numbers",
    "is_other_library",
    "output_kind",
    "parse_strings",
    "read_block",
    "read_strings",
]

# == entry points =================================================================================

#: Elements read at a time from a STRING array.  A block's temporaries (its texts as a byte
#: matrix, their lengths, the result bits, the per-chunk masks) stay within ~20 MB whatever
#: the size of the input: 2*10**7 StringDType elements -> FLOAT took 477 MiB of temporaries
#: in one piece (a full ``S32`` copy, uint64 bits for every element), for a 76 MiB result.
PARSE_BLOCK = 1 << 18


def _flat_parts(x: np.ndarray, size: int) -> Iterator[np.ndarray]:
    """``x``'s elements in row-major order, as consecutive flat contiguous pieces of at most
    ``size`` elements: views of a C-contiguous array, else copies of one piece at a time
    (never of the whole array).

    A strided array is cut along its first axis into slabs of whole rows (a row bigger than
    ``size`` is cut the same way, recursively), which NumPy copies fast.  (``x.flat[a:b]``
    would be simpler, but NumPy's flat iterator copies StringDType elements without their
    text.)
    """
    if x.flags.c_contiguous:
        flat = x.reshape(-1)
        for start in range(0, flat.size, size):
            yield flat[start : start + size]
        return
    row = math.prod(x.shape[1:])  # elements in one index of the first axis
    if x.size == 0:
        return
    if row > size:
        for i in range(x.shape[0]):
            yield from _flat_parts(x[i], size)
        return
    rows = size // row
    for i in range(0, x.shape[0], rows):
        yield np.ascontiguousarray(x[i : i + rows]).reshape(-1)


def _native(part: np.ndarray) -> np.ndarray:
    """``part`` in machine byte order (a copy where it is not): the string and number readers
    look at the raw bytes."""
    return part if part.dtype.isnative else part.astype(part.dtype.newbyteorder("="))


def _missing_what(dtype: np.dtype[Any], value: Any) -> str:
    """How an error names a missing value: by the StringDType's ``na_object``, or the object
    array's element."""
    if dtype.kind == "T":
        return f"the na_object {getattr(dtype, 'na_object', None)!r} of {dtype}"
    return repr(value)


def read_strings(
    strings: np.ndarray, target: TypeSpec, mode: Mode, *, errors: str = "raise", where: str = ""
) -> np.ndarray | Problem:
    """The numbers of a NumPy array of strings, or the :class:`Problem` of its first element
    (row-major) that cannot be read, without raising; :func:`parse_strings` raises it.

    The array is read :data:`PARSE_BLOCK` elements at a time into the one result, so that the
    temporaries do not grow with its size.  A problem is an element that is no text (an
    object array's number, an UnsupportedTypeError whatever ``errors`` says) or, unless
    ``errors="coerce"`` reads it as the target's NaN, invalid text or a missing value.
    """
    strings = np.asarray(strings)
    shape, total = strings.shape, strings.size
    raising = errors != "coerce" or not spec_strings.has_nan(target)
    out = np.empty(total, dtype=np.dtype(f"uint{target.storage_bits}"))
    nan: int | None = None
    start = 0
    for piece in _flat_parts(strings, PARSE_BLOCK):
        part = _native(piece)
        texts, missing, foreign = _as_string_array(part)
        bits, invalid = _parse_bits(texts, missing | foreign, target, mode)
        bad = (foreign | invalid) if raising else foreign
        if bad.any():
            first = int(np.argmax(bad))
            index = index_of(start + first, shape)
            value = part[first : first + 1].tolist()[0]
            if foreign[first]:
                return not_text(where, value, index)
            if missing[first]:
                return missing_value(where, _missing_what(part.dtype, value), index, errors, target)
            return invalid_text(where, shown(value), index, errors, target)
        if invalid.any():
            if nan is None:
                nan = cast_value(Exact.nan(), _DOUBLE, target, mode)
            bits[invalid] = nan
        out[start : start + part.size] = bits
        start += part.size
    return NUMPY.from_bits(out, target).reshape(shape)


def parse_strings(
    strings: np.ndarray, target: TypeSpec, mode: Mode, *, errors: str = "raise", where: str = ""
) -> np.ndarray:
    """Read a NumPy array of strings (StringDType, ``U``, ``S``, or objects holding ``str`` or
    ``bytes``) as the numeric type ``target`` by R9 (or R12's numpy style, per ``mode``).

    Parameters
    ----------
    strings : numpy.ndarray
        The strings; bytes are decoded as UTF-8.  Missing values (a StringDType's
        ``na_object``, None or NaN in an object array) are invalid text.
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

    Returns
    -------
    numpy.ndarray
        The values, of ``target``'s NumPy dtype and ``strings``' shape.

    Raises
    ------
    InvalidStringError
        Invalid text or a missing value, unless ``errors="coerce"`` makes it NaN.
    UnsupportedTypeError
        An object array holds an element that is no text and no missing value.
    """
    result = read_strings(strings, target, mode, errors=errors, where=where)
    if isinstance(result, Problem):
        raise result.exception()
    return result


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


def _decoded(
    items: list[Any],
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    missing: np.ndarray | None,
    where: str,
) -> list[str] | Problem:
    """The texts of STRING elements (bytes decoded as UTF-8), or the problem of the first
    element that is not text: a missing value (STRING has no NaN, so ``errors="coerce"``
    cannot help), bytes that are not UTF-8, or an object that is no text."""
    texts: list[str] = []
    prefix = f"{where}: " if where else ""
    for i, v in enumerate(items):
        if missing[i] if missing is not None else is_missing(v):
            what = _missing_what(dtype, v)
            return missing_value(where, what, index_of(i, shape), "raise", None)
        if isinstance(v, bytes):
            try:
                v = v.decode("utf-8")
            except UnicodeDecodeError as exc:
                return Problem(
                    index_of(i, shape),
                    InvalidStringError,
                    f"{prefix}the bytes {shown(v)} at index ",
                    f" are not UTF-8 text (R9 decodes bytes as UTF-8: {exc.reason} at byte "
                    f"{exc.start})",
                )
        elif not isinstance(v, str):
            return not_text(where, v, index_of(i, shape))
        texts.append(v)
    return texts


def _encoded(texts: list[str], shape: tuple[int, ...], where: str) -> list[bytes] | Problem:
    """The UTF-8 bytes of ``texts``, or the problem of the first text that UTF-8 cannot
    encode (one holding a lone surrogate such as ``'\\ud800'``)."""
    out: list[bytes] = []
    prefix = f"{where}: " if where else ""
    for i, text in enumerate(texts):
        try:
            out.append(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            return Problem(
                index_of(i, shape),
                InvalidStringError,
                f"{prefix}the string {shown(text)} at index ",
                f" holds a lone surrogate ({text[exc.start]!r} at position {exc.start}), which "
                "UTF-8 cannot encode, so a UTF-8 string array cannot hold it",
            )
    return out


def _strings_as(strings: np.ndarray, kind: str, where: str = "") -> np.ndarray | Problem:
    """STRING -> STRING: the same texts in the string ``kind`` (bytes decoded as UTF-8), or
    the problem of the first element that cannot be.

    ``U`` and object arrays of ``str`` hold any text; ``S``, bytes objects and StringDType
    hold UTF-8, so a text with a lone surrogate cannot go there (an InvalidStringError)."""
    flat = strings.reshape(-1)
    # StringDType says which elements are missing; an object array's None and NaN are.
    missing = _as_string_array(flat)[1] if flat.dtype.kind == "T" else None
    texts = _decoded(flat.tolist(), strings.shape, flat.dtype, missing, where)
    if isinstance(texts, Problem):
        return texts
    if kind in "SBT":
        raw = _encoded(texts, strings.shape, where)  # checks every text once
        if isinstance(raw, Problem):
            return raw
        if kind == "S":
            return np.array(raw, dtype="S").reshape(strings.shape)
        if kind == "B":
            out: np.ndarray = np.empty(len(raw), dtype=object)
            out[:] = raw
            return out.reshape(strings.shape)
    if kind == "O":
        out = np.empty(len(texts), dtype=object)
        out[:] = texts
    else:
        out = np.array(texts, dtype="U" if kind == "U" else _SD)
    return out.reshape(strings.shape)


def _raised(result: np.ndarray | Problem) -> np.ndarray:
    """``result``, or its problem raised."""
    if isinstance(result, Problem):
        raise result.exception()
    return result


def _host(x: Any, adapter: Any) -> np.ndarray:
    """A numeric array of any library as a NumPy array (bits kept; its byte order too: the
    formatting brings each block to machine byte order)."""
    return np.asarray(x) if isinstance(x, (np.ndarray, np.generic)) else adapter.to_numpy(x)


def _is_other_library(like: Any) -> bool:
    return (
        like is not None
        and not isinstance(like, (type, np.ndarray, np.generic))  # a class is a dtype-like
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
    by_blocks = adapter.cast_strings(array, plan, errors=errors, like=like)
    if by_blocks is not None:  # a library of lazy blocks (Dask) keeps the result lazy (R10)
        return by_blocks
    if target.kind is Kind.STRING:
        kind = _output_kind(like)
        if source.kind is Kind.STRING:
            return _raised(_strings_as(np.asarray(array), kind, plan.describe()))
        host = _host(array, adapter)
        return _format_blocks(host, source, _style(mode), kind)
    result = parse_strings(np.asarray(array), target, mode, errors=errors, where=plan.describe())
    return _deliver(result, plan, like)


#: Elements formatted at a time for a STRING result.  A block's text matrix (24 bytes an
#: element at most) and its conversion to the result's kind stay within ~16 MB whatever the
#: size of the input (10**7 FLOAT once took 193 MB of temporaries in one piece).
FORMAT_BLOCK = 1 << 18


def _format_blocks(host: np.ndarray, source: TypeSpec, style: str, kind: str) -> np.ndarray:
    """The text of every element of ``host`` as an array of the string ``kind``, formatted
    block by block into the one result.  A fixed-width result (``U``/``S``) is as wide as its
    longest text, as ``numpy.array(list_of_texts)`` makes it: when there are several blocks,
    a first pass measures them (formatting twice costs time, never memory)."""
    total = host.size
    if total <= FORMAT_BLOCK:
        return _from_ascii(_text_bytes(host, source, style), kind).reshape(host.shape)

    def blocks() -> Iterator[np.ndarray]:
        return (_text_bytes(part, source, style) for part in _flat_parts(host, FORMAT_BLOCK))

    out: np.ndarray
    if kind in "SU":
        width = max(int(np.strings.str_len(raw).max(initial=1)) for raw in blocks())
        out = np.empty(total, dtype=f"{kind}{width}")
    else:
        out = np.empty(total, dtype=object if kind in "OB" else _SD)
    start = 0
    for raw in blocks():
        out[start : start + raw.size] = raw if kind in "SUT" else _from_ascii(raw, kind)
        start += raw.size
    return out.reshape(host.shape)


def _deliver(result: np.ndarray, plan: Any, like: Any) -> Any:
    """Numbers read from strings, in ``like``'s library and on its device when ``like`` is an
    array of another library (R9), else as they are."""
    target = plan.target
    if _is_other_library(like):
        from ..backends import adapter_for

        other = adapter_for(aac.array_namespace(like))
        if other.library_dtype(target) is None:
            raise BackendTypeError(
                f"{plan.describe()}: {other.name} cannot hold {target.name}; "
                f"{other.cannot_hold_hint(target)}"
            )
        return other.from_numpy(result, like=like)
    return result


# == block by block: for backends whose arrays are lazy blocks of NumPy arrays (Dask) ==========


def output_kind(like: Any) -> str:
    """The kind of string array a cast to STRING gives for CastLike's ``like`` (R9): ``"T"``
    (StringDType), ``"U"``, ``"S"``, ``"O"`` (objects holding ``str``) or ``"B"`` (objects
    holding ``bytes``)."""
    return _output_kind(like)


def block_text_dtype(source: TypeSpec, kind: str) -> np.dtype[Any]:
    """The dtype of the text of every block of a lazy cast of ``source`` to STRING.  Fixed
    width kinds get the widest text ``source`` has, so that every block shares one dtype."""
    if kind in "SU":
        return np.dtype(f"{kind}{_text_width(source)}")
    return np.dtype(object) if kind in "OB" else _SD


def _text_width(source: TypeSpec) -> int:
    """The longest text of any value of the numeric type ``source``."""
    return _WIDTH_DOUBLE if source.bits > 32 else _WIDTH


def format_block(block: np.ndarray, plan: Any, kind: str) -> np.ndarray:
    """The text of a NumPy ``block`` of the numeric ``plan.source`` (R9), of
    :func:`block_text_dtype` (a block in either byte order)."""
    raw = _text_bytes(block, plan.source, _style(plan.mode))
    return _from_ascii(raw, kind, _text_width(plan.source)).reshape(block.shape)


def read_block(block: np.ndarray, plan: Any, errors: str, kind: str) -> np.ndarray | Problem:
    """A NumPy ``block`` of strings cast to ``plan.target`` (a number; or STRING, as texts of
    ``kind``), or the :class:`Problem` of its first element that cannot be cast, with its
    index in the block: the caller decides which block's problem to raise."""
    block = np.asarray(block)
    if plan.target.kind is Kind.STRING:
        return _strings_as(block, kind, plan.describe())
    return read_strings(block, plan.target, plan.mode, errors=errors, where=plan.describe())


def block_can_fail(plan: Any, errors: str, dtype: np.dtype[Any]) -> bool:
    """Whether :func:`read_block` can find a problem in a block of ``dtype``.  Only a cast
    to a target with a NaN, under ``errors="coerce"``, from a string array that holds only
    text or missing values (no object array, which may hold numbers) never does."""
    if plan.target.kind is Kind.STRING or dtype.kind == "O":
        return True
    return errors != "coerce" or not spec_strings.has_nan(plan.target)


def deliver_numbers(result: np.ndarray, plan: Any, like: Any) -> Any:
    """Numbers read from strings in ``like``'s library and on its device when ``like`` is an
    array of another library (R9), else ``result`` itself."""
    return _deliver(result, plan, like)


def is_other_library(like: Any) -> bool:
    """Whether ``like`` is an array of a library other than NumPy."""
    return _is_other_library(like)


# Every numeric type has a NumPy dtype to format from and parse into.
assert all(t in NUMPY_DTYPES for t in TYPES if t != _T.STRING)
