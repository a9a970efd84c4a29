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

__all__ = [
    "block_text_dtype",
    "cast_strings",
    "deliver_numbers",
    "format_block",
    "format_numbers",
    "is_other_library",
    "output_kind",
    "parse_block",
    "parse_strings",
]

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


def _decoded(items: list[Any], shape: tuple[int, ...]) -> list[str]:
    """The texts of STRING elements (bytes decoded as UTF-8), or an InvalidStringError that
    names the first element that is not text: no ``str``/``bytes``, or bytes that are not
    UTF-8.  (STRING has no NaN, so ``errors="coerce"`` cannot help here.)"""
    texts: list[str] = []
    for i, v in enumerate(items):
        if isinstance(v, bytes):
            try:
                v = v.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidStringError(
                    f"the bytes {_shown(v)} at index {_index_of(i, shape)} are not UTF-8 text "
                    f"(R9 decodes bytes as UTF-8: {exc.reason} at byte {exc.start})"
                ) from None
        elif not isinstance(v, str):
            raise InvalidStringError(
                f"the element {_shown(v)} at index {_index_of(i, shape)} is not a string"
            )
        texts.append(v)
    return texts


def _encoded(texts: list[str], shape: tuple[int, ...]) -> list[bytes]:
    """The UTF-8 bytes of ``texts``, or an InvalidStringError naming the first text that
    UTF-8 cannot encode (one holding a lone surrogate such as ``'\\ud800'``)."""
    out: list[bytes] = []
    for i, text in enumerate(texts):
        try:
            out.append(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidStringError(
                f"the string {_shown(text)} at index {_index_of(i, shape)} holds a lone "
                f"surrogate ({text[exc.start]!r} at position {exc.start}), which UTF-8 cannot "
                "encode, so a UTF-8 string array cannot hold it"
            ) from None
    return out


def _strings_as(strings: np.ndarray, kind: str) -> np.ndarray:
    """STRING -> STRING: the same texts in the string ``kind`` (bytes decoded as UTF-8).

    ``U`` and object arrays of ``str`` hold any text; ``S``, bytes objects and StringDType
    hold UTF-8, so a text with a lone surrogate cannot go there (an InvalidStringError)."""
    items = strings.reshape(-1).tolist()
    texts = _decoded(items, strings.shape)
    if kind in "SBT":
        raw = _encoded(texts, strings.shape)  # checks every text once
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


def _host(x: Any, adapter: Any) -> np.ndarray:
    """A numeric array of any library as a native-order NumPy array (bits kept)."""
    host = np.asarray(x) if isinstance(x, (np.ndarray, np.generic)) else adapter.to_numpy(x)
    if not host.dtype.isnative:
        host = host.astype(host.dtype.newbyteorder("="))
    return host


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
            return _strings_as(np.asarray(array), kind)
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
    contiguous = host.flags.c_contiguous

    def block(start: int) -> np.ndarray:
        stop = min(start + FORMAT_BLOCK, total)
        # flat[] copies one block of a strided array, never the whole array.
        part = host.reshape(-1)[start:stop] if contiguous else host.flat[start:stop]
        return _text_bytes(part, source, style)

    starts = range(0, total, FORMAT_BLOCK)
    if total <= FORMAT_BLOCK:
        return _from_ascii(block(0), kind).reshape(host.shape)
    out: np.ndarray
    if kind in "SU":
        width = max(int(np.strings.str_len(block(i)).max(initial=1)) for i in starts)
        out = np.empty(total, dtype=f"{kind}{width}")
    else:
        out = np.empty(total, dtype=object if kind in "OB" else _SD)
    for start in starts:
        raw = block(start)
        out[start : start + raw.size] = raw if kind in "SUT" else _from_ascii(raw, kind)
    return out.reshape(host.shape)


def _deliver(result: np.ndarray, plan: Any, like: Any) -> Any:
    """Numbers read from strings, in ``like``'s library and on its device when ``like`` is an
    array of another library (R9), else as they are."""
    target = plan.target
    if _is_other_library(like):
        from ..backends import adapter_for

        other = adapter_for(aac.array_namespace(like))
        if other.native_dtype(target) is None:
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
    """The text of a NumPy ``block`` of ``plan.source`` (R9), of :func:`block_text_dtype`."""
    source = plan.source
    if source.kind is Kind.STRING:
        return _strings_as(np.asarray(block), kind)
    raw = _text_bytes(block, source, _style(plan.mode))
    return _from_ascii(raw, kind, _text_width(source)).reshape(block.shape)


def parse_block(
    block: np.ndarray, plan: Any, errors: str, origin: tuple[int, ...] | None = None
) -> np.ndarray:
    """The numbers of a NumPy ``block`` of strings (R9), with error messages giving indices
    in the whole array (``origin``: where the block starts in it)."""
    return parse_strings(
        block, plan.target, plan.mode, errors=errors, where=plan.describe(), origin=origin
    )


def deliver_numbers(result: np.ndarray, plan: Any, like: Any) -> Any:
    """Numbers read from strings in ``like``'s library and on its device when ``like`` is an
    array of another library (R9), else ``result`` itself."""
    return _deliver(result, plan, like)


def is_other_library(like: Any) -> bool:
    """Whether ``like`` is an array of a library other than NumPy."""
    return _is_other_library(like)


# Every numeric type has a NumPy dtype to format from and parse into.
assert all(t in NUMPY_DTYPES for t in TYPES if t != _T.STRING)
