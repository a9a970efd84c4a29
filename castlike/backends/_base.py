"""The Adapter protocol: what one array library must provide so the shared rules can run on it.

An adapter knows the library's dtypes and a handful of primitives (bit views, raw conversion,
lookup tables on the right device).  The rules themselves are written once, in
:mod:`castlike._engine`, against these primitives and the library's Array-API namespace.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from ..spec.types import OnnxType, TypeSpec

if TYPE_CHECKING:
    import numpy as np

    from .._engine import Engine

__all__ = ["Adapter"]


class Adapter(ABC):
    """Primitives of one array library.  Subclasses live in ``castlike.backends.<name>``."""

    #: Library name used in messages ("numpy", "torch", ...).
    name: str = "?"
    #: The Array-API namespace (array-api-compat's wrapper where there is one).
    xp: Any

    # -- types -----------------------------------------------------------------------------
    @abstractmethod
    def native_dtype(self, t: TypeSpec) -> Any | None:
        """The library's dtype holding ``t``, or None when the library cannot hold it."""

    @abstractmethod
    def onnx_type_of(self, dtype: Any) -> OnnxType | None:
        """The ONNX type of one of the library's dtypes, or None if it is not one of ours."""

    def cannot_hold_hint(self, t: TypeSpec) -> str:
        """What to do instead when the library cannot hold ``t`` (R10), for the error text."""
        return "cast to a type it can hold, or pass a NumPy array instead"

    # -- primitives the engine uses ----------------------------------------------------------
    @abstractmethod
    def bits(self, x: Any, t: TypeSpec) -> Any:
        """Unsigned integer view of the storage of ``x`` (type ``t``).

        Sub-byte types are masked to their low ``t.bits`` bits; BOOL gives 0/1 as uint8.
        """

    @abstractmethod
    def from_bits(self, u: Any, t: TypeSpec) -> Any:
        """Reinterpret an unsigned integer array of ``t``'s storage width as type ``t``."""

    def astype(self, x: Any, t: TypeSpec) -> Any:
        """The library's own conversion to ``t`` (only used where it equals the rule)."""
        return self.xp.astype(x, self.native_dtype(t))

    def uint(self, bits: int) -> Any:
        """The unsigned integer dtype of ``bits`` width."""
        return getattr(self.xp, f"uint{bits}")

    @abstractmethod
    def device_table(self, table: np.ndarray, like: Any) -> Any:
        """The host lookup table ``table`` as an array of this library on ``like``'s device."""

    def clip(self, x: Any, low: float, high: float) -> Any:
        """``x`` clipped to ``[low, high]`` (bounds exact in ``x``'s dtype; NaN stays NaN)."""
        return self.xp.clip(x, low, high)

    def take(self, table: Any, index: Any) -> Any:
        """``table[index]`` elementwise for an integer ``index`` array of any shape."""
        xp = self.xp
        flat = xp.reshape(index, (-1,))
        return xp.reshape(xp.take(table, flat), index.shape)

    # -- moving data (tests, the parity command, string results) ---------------------------
    def from_numpy(self, array: np.ndarray, like: Any = None) -> Any:
        """A NumPy array of a numeric ONNX type as an array of this library (on ``like``'s
        device when given).  Raises BackendTypeError if the library cannot hold the type."""
        raise NotImplementedError

    def to_numpy(self, x: Any) -> np.ndarray:
        """An array of this library as a NumPy array of the same ONNX type (bits kept)."""
        raise NotImplementedError

    def repeat_cast(self, plan: Any) -> Any:
        """A function casting any array of ``plan.source`` as ``plan`` says, with no further
        validation, for the frontend to reuse on repeated calls; None where there is none."""
        return None

    def cast_strings(self, x: Any, plan: Any, *, errors: str, like: Any) -> Any:
        """A cast from or to STRING (R9) done the library's own way, or None for the default:
        numbers brought to the host, formatted or parsed there, and brought back.  A library
        of lazy blocks (Dask) formats block by block, so that the result stays lazy."""
        return None

    # -- the engine ---------------------------------------------------------------------------
    def engine(self) -> Engine:
        """The rule engine bound to this adapter (subclasses may return a specialised one)."""
        from .._engine import Engine

        return Engine(self)
