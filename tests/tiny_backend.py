"""A tiny castlike backend: an array library of one wrapper class around NumPy arrays.

The library ("tiny") has its own array type and namespace object, as any Array-API library
does; array-api-compat finds the namespace through ``__array_namespace__``.  Its castlike
backend is this file plus one registration (:data:`BACKEND`): an adapter that knows the
library's dtypes and how to move data, and an engine that runs castlike's NumPy engine on the
wrapped data, as the Dask backend does block by block.  The tests register it with
:func:`castlike.backends.register` and through an entry point, and check it like any other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from castlike._engine import Engine
from castlike.backends import Adapter, BackendInfo
from castlike.backends.numpy import ADAPTER as NUMPY
from castlike.errors import BackendTypeError
from castlike.spec.plan import Plan
from castlike.spec.types import OnnxType, TypeSpec


class TinyNamespace:
    """The library's namespace: a name and a way to make arrays."""

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def asarray(self, data: Any) -> TinyArray:
        return wrap(np.array(data), self)


class TinyArray:
    """The library's array: NumPy data of a numeric ONNX type, behind its own class."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def __array_namespace__(self, api_version: str | None = None) -> TinyNamespace:
        return tiny

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.data.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape


class BrokenArray(TinyArray):
    """The array of a second library, whose backend is broken on purpose (it flips the lowest
    bit of every result), so that the tests can see parity catch it.  A class of its own:
    castlike finds an array's namespace by its type."""

    def __array_namespace__(self, api_version: str | None = None) -> TinyNamespace:
        return tiny_broken


#: The two libraries' namespaces.
tiny = TinyNamespace("tiny")
tiny_broken = TinyNamespace("tiny-broken")


def wrap(data: np.ndarray, namespace: TinyNamespace) -> TinyArray:
    """NumPy data as an array of the library ``namespace``."""
    return BrokenArray(data) if namespace is tiny_broken else TinyArray(data)


class TinyAdapter(Adapter):
    """The primitives castlike needs of the library: its dtypes and moving data (no bit
    primitives: its engine casts the wrapped NumPy data with the NumPy backend)."""

    def __init__(self, namespace: TinyNamespace, flip_lowest_bit: bool = False) -> None:
        self.xp = namespace
        self.name = namespace.__name__
        self.flip_lowest_bit = flip_lowest_bit

    def library_dtype(self, t: TypeSpec) -> Any | None:
        return None if t.code == OnnxType.STRING else NUMPY.library_dtype(t)

    def onnx_type_of(self, dtype: Any) -> OnnxType | None:
        return NUMPY.onnx_type_of(dtype)

    def from_numpy(self, array: np.ndarray, like: Any = None) -> TinyArray:
        found = NUMPY.onnx_type_of(array.dtype)
        if found is None or found == OnnxType.STRING:
            raise BackendTypeError(f"{self.name} holds numbers only, not {array.dtype}")
        return wrap(np.array(array), self.xp)

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.array(x.data)

    def engine(self) -> Engine:
        return TinyEngine(self)


class TinyEngine(Engine):
    """The cast of the wrapped data by castlike's NumPy engine (the rules are not repeated)."""

    a: TinyAdapter

    def cast(self, x: Any, plan: Plan) -> Any:
        out = NUMPY.engine().cast(x.data, plan)
        if self.a.flip_lowest_bit:
            bits = NUMPY.bits(out, plan.target) ^ 1
            out = NUMPY.from_bits(bits & ((1 << plan.target.bits) - 1), plan.target)
        return wrap(out, self.a.xp)


ADAPTER = TinyAdapter(tiny)
BROKEN_ADAPTER = TinyAdapter(tiny_broken, flip_lowest_bit=True)

#: The one registration: castlike.backends.register(BACKEND), or an entry point
#: ``tiny = "tiny_backend:BACKEND"`` in the group ``castlike.backends``.
BACKEND = BackendInfo(
    name="tiny",
    module="tiny_backend",
    is_namespace=lambda xp: xp is tiny,
    adapter="tiny_backend:ADAPTER",
)
BROKEN_BACKEND = BackendInfo(
    "tiny-broken", "tiny_backend", lambda xp: xp is tiny_broken, "tiny_backend:BROKEN_ADAPTER"
)
#: Not an adapter: registering it works, using it is a clear error.
NOT_AN_ADAPTER = 42
