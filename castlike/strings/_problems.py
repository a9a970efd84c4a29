"""The elements a string cast cannot take, and the errors that name them.

A cast reads its input block by block and stops at the first element it cannot take (in
row-major order); that element becomes a :class:`Problem`, which knows its index *in the
block* and the error to raise.  A whole NumPy array is one block of itself; a lazy array
(Dask) gathers the problems of its blocks, turns the first one's index into an index of the
whole array and raises only that one, whatever order its blocks were computed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import CastError, InvalidStringError, UnsupportedTypeError
from ..spec.types import TypeSpec

__all__ = [
    "Problem",
    "index_of",
    "invalid_text",
    "is_missing",
    "missing_value",
    "not_text",
    "shown",
]

#: The R9 grammar, as the errors state it.
_GRAMMAR = (
    "[+-]digits[.digits][(e|E)[+-]digits], inf, infinity or nan, with ASCII whitespace around"
)


@dataclass(frozen=True)
class Problem:
    """The first element of a block that the cast cannot take.

    The message is kept in two parts around the index, so that a lazy array can put the
    element's index in the whole array there.
    """

    #: The element's index in the block (a tuple, one entry per axis).
    index: tuple[int, ...]
    error: type[CastError]
    before: str
    after: str

    def exception(self, index: tuple[int, ...] | None = None) -> CastError:
        """The error naming the element, at ``index`` (by default its index in the block)."""
        at = self.index if index is None else index
        return self.error(f"{self.before}{at}{self.after}")


def index_of(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The row-major multi-index of ``flat_index`` in an array of ``shape``."""
    return tuple(int(i) for i in np.unravel_index(flat_index, shape)) if shape else ()


def shown(value: Any) -> str:
    """An element for an error message: the repr of text (cut at 80 characters), else the
    value and its type."""
    if isinstance(value, (str, bytes)):
        return _repr(value)
    return f"{_repr(value)} (a {type(value).__name__}, not a string)"


def _repr(value: Any) -> str:
    """``repr(value)``, cut at 80 characters; an object whose repr fails is named by type."""
    try:
        text = repr(value)
    except Exception:
        return f"a {type(value).__name__} object"
    return text if len(text) <= 80 else text[:77] + "..."


def is_missing(value: Any) -> bool:
    """Whether an element of an object array is a missing value: None or a float NaN (the
    missing values of object arrays that hold text, as pandas makes them)."""
    if value is None:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _prefix(where: str) -> str:
    return f"{where}: " if where else ""


def invalid_text(
    where: str, text: str, index: tuple[int, ...], errors: str, target: TypeSpec
) -> Problem:
    """A string that is not a number by R9 (``text`` as :func:`shown` gives it)."""
    if errors != "coerce":
        return Problem(
            index,
            InvalidStringError,
            f"{_prefix(where)}the string {text} at index ",
            f" is not a number (R9: {_GRAMMAR}); pass errors='coerce' to read such strings as NaN",
        )
    return Problem(
        index,
        InvalidStringError,
        f"{_prefix(where)}the string {text} at index ",
        f" is not a number, and errors='coerce' cannot make it NaN: {target.name} has no NaN",
    )


def missing_value(
    where: str, what: str, index: tuple[int, ...], errors: str, target: TypeSpec | None
) -> Problem:
    """A missing value (``what`` says which: a StringDType's ``na_object``, None, NaN).

    R9 reads it as invalid text: NaN under ``errors="coerce"`` where the target has one.
    ``target`` None is a STRING target, which holds no missing value.
    """
    start = f"{_prefix(where)}the element at index "
    if target is None:
        return Problem(
            index,
            InvalidStringError,
            start,
            f" is a missing value ({what}), and a STRING result holds text only; give the "
            "missing elements a text first",
        )
    if errors != "coerce":
        return Problem(
            index,
            InvalidStringError,
            start,
            f" is a missing value ({what}), which is not a number; pass errors='coerce' to "
            "read missing values and invalid strings as NaN",
        )
    return Problem(
        index,
        InvalidStringError,
        start,
        f" is a missing value ({what}), and errors='coerce' cannot make it NaN: "
        f"{target.name} has no NaN",
    )


def not_text(where: str, value: Any, index: tuple[int, ...]) -> Problem:
    """An element of an object array that is no text and no missing value: the array is not
    a STRING tensor, whatever ``errors`` says."""
    return Problem(
        index,
        UnsupportedTypeError,
        f"{_prefix(where)}x is an object array, which castlike reads as STRING (R9), but its "
        f"element {_repr(value)} (of type {type(value).__name__}) at index ",
        " is no text: an object array must hold str or bytes (None or NaN for a missing "
        "value); to cast numbers, pass an array of a numeric dtype (e.g. "
        "x.astype(numpy.float64))",
    )
