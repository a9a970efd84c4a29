"""The one exception family of castlike (rule R11).

Every error castlike raises on purpose is a :class:`CastError`.  Problems with *types* are also
:class:`TypeError` s, problems with *values* (options, invalid strings) also :class:`ValueError` s,
so that ordinary ``except TypeError`` / ``except ValueError`` code keeps working.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BackendTypeError",
    "CastError",
    "CastTypeError",
    "CastValueError",
    "DisallowedCastError",
    "InvalidInputError",
    "InvalidStringError",
    "OpsetError",
    "UnknownTypeError",
    "UnsupportedTypeError",
]


class CastError(Exception):
    """Base class of every error castlike raises on purpose."""


class CastTypeError(CastError, TypeError):
    """A problem with the types involved in a cast."""


class CastValueError(CastError, ValueError):
    """A problem with a value: an option, an opset, or an element that cannot be read."""


class UnknownTypeError(CastTypeError):
    """A name, code or dtype that is not one of the ONNX element types castlike knows."""


class UnsupportedTypeError(CastTypeError):
    """A type castlike never casts: COMPLEX64, COMPLEX128, UNDEFINED; and inputs of no ONNX
    type: datetime64 and timedelta64 arrays, object arrays holding anything but text."""


class DisallowedCastError(CastTypeError):
    """A (source, target) pair that the requested operator version does not allow."""


class BackendTypeError(CastTypeError):
    """A type the array library in use cannot hold (e.g. FLOAT4E2M1 on PyTorch)."""


class InvalidInputError(CastTypeError):
    """An input that is not an array castlike can cast: None, a dict, a class, a ragged list,
    a Python int beyond INT64/UINT64."""


class OpsetError(CastValueError):
    """An opset the operator does not exist in, or an attribute the version lacks."""


class InvalidStringError(CastValueError):
    """A string element that is not a number by the grammar of rule R9."""


def shown_value(value: Any, limit: int = 60) -> str:
    """``repr(value)`` for an error message, cut at ``limit`` characters.

    Never an exception of its own: the objects a caller passes as options may raise from
    ``repr`` (or ``str``, ``hash``, ``==``), and such an object is then named by its type.
    """
    try:
        text = repr(value)
    except Exception:
        return f"an object of type {type(value).__qualname__} (its repr() raised)"
    return text if len(text) <= limit else text[: limit - 3] + "..."
