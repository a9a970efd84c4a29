"""The Adapter protocol: what one array library must provide so the shared rules can run on it.

An adapter knows the library's dtypes and a handful of primitives (bit views, raw conversion,
lookup tables on the right device, gathers, ``where``), and declares what the route of a cast
needs to know of the library's arithmetic (:meth:`Adapter.capabilities`): the pairs where its
own conversion is the rule (:attr:`Adapter.library_pairs`), whether its float operations
flush subnormals, whether it does unsigned arithmetic.  The routes are decided by the spec
(:mod:`castlike.spec.route`) and carried out by :mod:`castlike._engine`, against these
primitives and the library's Array-API namespace.  This module imports the spec only: the
engine and every backend import it, it imports neither (a leaf under them).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from .spec.route import Capabilities
from .spec.types import OnnxType, TypeSpec

if TYPE_CHECKING:
    import numpy as np

    from .spec.float8_repairs import Float8Plan, PlanKey
    from .spec.rules import Mode

__all__ = ["Adapter"]


class Adapter(ABC):
    """Primitives of one array library.  Subclasses live in ``castlike.backends.<name>``."""

    #: Library name used in messages ("numpy", "torch", ...).
    name: str = "?"
    #: The Array-API namespace (array-api-compat's wrapper where there is one).
    xp: Any

    # -- declarations the routes read (see castlike.spec.route) ---------------------------
    #: (source code, target code) pairs where the library's own conversion (:meth:`astype`;
    #: for integer pairs, R8's low bits) is the rule, bit for bit, in the default mode.  The
    #: routes then use it in every mode that does not change the pair's rule.  Checked on
    #: every pattern (small sources) or the curated inputs (wide sources) against the oracle by
    #: ``tests/test_engine_pairs.py``; never asserted by hand.
    library_pairs: ClassVar[frozenset[tuple[int, int]]] = frozenset()
    #: The library's float conversions and comparisons may treat subnormals as zero, and may
    #: drop a narrowing round trip (XLA): the routes then round from DOUBLE, and to odd, in
    #: integers (:mod:`castlike._exact`), and test floats for zero and sign on their bits.
    flushes_subnormals: ClassVar[bool] = False
    #: Whether the library does arithmetic, shifts and ordering on uint16/uint32/uint64; if not
    #: (torch), :meth:`int_bits` is the signed view and :meth:`where`/:meth:`clip` handle the
    #: unsigned dtypes themselves.
    unsigned_arithmetic: ClassVar[bool] = True
    #: How the library's FLOAT -> float8 conversions are repaired, per target and mode:
    #: :func:`castlike.spec.float8_repairs.plans` of what they make of overflow, Inf and NaN
    #: (measured).  Empty: the routes use the class table.
    float8_plans: ClassVar[Mapping[PlanKey, Float8Plan | None]] = {}
    #: Whether the library has bit views and gathers (the Array-API standard has neither).
    bit_views: ClassVar[bool] = True
    #: Whether DOUBLE sources into the small floats take one gather from the DOUBLE class
    #: table, and integer sources a clip and an exact FLOAT (fewer passes on a library with
    #: fast uint64 arithmetic: NumPy).
    wide_class_shortcuts: ClassVar[bool] = False
    #: Whether casts from and to STRING may move numbers between the library and NumPy, where
    #: strings live (R9).  False refuses STRING on the backend (R10): the generic Array-API
    #: backend moves no data between libraries.
    moves_strings_through_numpy: ClassVar[bool] = True

    #: Whether the engine packs and unpacks the sub-byte types (``cast(..., packed=True)``,
    #: :meth:`castlike._engine.Engine.cast_packed`): it needs the bit primitives, uint8 and
    #: the Array-API operations of :mod:`castlike.spec.packing` (or an engine that overrides
    #: ``cast_packed``).  Off unless declared: a backend without them refuses packed casts
    #: with a clear error.
    packs: ClassVar[bool] = False

    #: The declarations as the routes read them (made once per class: see
    #: :meth:`__init_subclass__`; torch.compile traces a plain attribute, not a computation).
    _capabilities: ClassVar[Capabilities] = Capabilities()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._capabilities = Capabilities(
            library_pairs=frozenset(cls.library_pairs),
            flushes_subnormals=cls.flushes_subnormals,
            bit_views=cls.bit_views,
            float8_plans=tuple(cls.float8_plans.items()),
            double_class_table=cls.wide_class_shortcuts,
            clamped_integers=cls.wide_class_shortcuts,
        )

    def capabilities(self) -> Capabilities:
        """What the routes of a cast need to know of the library (its declarations)."""
        return self._capabilities

    # -- types -----------------------------------------------------------------------------
    @abstractmethod
    def library_dtype(self, t: TypeSpec) -> Any | None:
        """The library's dtype holding ``t``, or None when the library cannot hold it."""

    @abstractmethod
    def onnx_type_of(self, dtype: Any) -> OnnxType | None:
        """The ONNX type of one of the library's dtypes, or None if it is not one of ours."""

    def cannot_hold_hint(self, t: TypeSpec) -> str:
        """What to do instead when the library cannot hold ``t`` (R10), for the error text."""
        return "cast to a type it can hold, or pass a NumPy array instead"

    # -- primitives the engine uses ----------------------------------------------------------
    # A backend writes the ones its engine uses.  The bit primitives and the tables are not
    # abstract: a backend whose engine never asks for them (Dask casts each block with the
    # NumPy backend; the generic backend declares ``bit_views = False``) leaves them out.
    def bits(self, x: Any, t: TypeSpec) -> Any:
        """Unsigned integer view of the storage of ``x`` (type ``t``).

        Sub-byte types are masked to their low ``t.bits`` bits; BOOL gives 0/1 as uint8.
        """
        raise self._not_provided("bit views")

    def from_bits(self, u: Any, t: TypeSpec) -> Any:
        """Reinterpret an integer array of ``t``'s storage width as type ``t``: unsigned, or
        the view :meth:`int_bits` computes on (uint8 for the sub-byte types, from
        :meth:`narrow`)."""
        raise self._not_provided("bit views")

    def _not_provided(self, what: str) -> NotImplementedError:
        return NotImplementedError(
            f"the {self.name} backend provides no {what}: its engine does not use them"
        )

    def astype(self, x: Any, t: TypeSpec) -> Any:
        """The library's own conversion to ``t`` (only used where it equals the rule)."""
        return self.xp.astype(x, self.library_dtype(t))

    def uint(self, bits: int) -> Any:
        """The unsigned integer dtype of ``bits`` width."""
        return getattr(self.xp, f"uint{bits}")

    def int_bits(self, x: Any, t: TypeSpec) -> Any:
        """The storage of ``x`` (a type of 16 bits or more) as integers of its width that the
        library does arithmetic, shifts and comparisons on: unsigned (:meth:`bits`), or the
        signed view of the same width where it has no unsigned arithmetic."""
        return self.bits(x, t)

    def narrow(self, u: Any, bits: int) -> Any:
        """Integers whose values fit in ``bits`` bits as an integer array of that width, for
        :meth:`from_bits` (unsigned; or the signed view where :meth:`int_bits` is signed)."""
        return self.xp.astype(u, self.uint(bits))

    def flag(self, mask: Any, like: Any) -> Any:
        """A boolean array as 0/1 integers to combine with the integer array ``like``."""
        return self.xp.astype(mask, like.dtype)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        """``a`` where ``cond`` else ``b``; either may be a Python scalar, which takes the
        other's dtype."""
        xp = self.xp
        if not hasattr(a, "dtype"):
            a = xp.asarray(a, dtype=b.dtype)
        if not hasattr(b, "dtype"):
            b = xp.asarray(b, dtype=a.dtype)
        return xp.where(cond, a, b)

    def clz(self, u: Any) -> Any:
        """Leading zero bits of each element of an unsigned integer array (its own dtype).

        By halving, with shifts, comparisons and ``where`` only; a library with an instruction
        for it (``lax.clz``) overrides this.
        """
        xp = self.xp
        width = xp.iinfo(u.dtype).bits
        count = xp.zeros_like(u)
        step = width // 2
        while step:
            high = u >> step
            empty = high == 0
            count = xp.where(empty, count + step, count)
            u = xp.where(empty, u, high)
            step //= 2
        return xp.where(u == 0, count + 1, count)

    def device_table(self, table: np.ndarray, like: Any) -> Any:
        """The host lookup table ``table`` as an array of this library on ``like``'s device."""
        raise self._not_provided("lookup tables")

    def pattern_table(self, source: TypeSpec, target: TypeSpec, mode: Mode, like: Any) -> Any:
        """:func:`~castlike.spec.tables.pattern_table` on ``like``'s device (``mode`` is
        effective for ``target``)."""
        from .spec.tables import pattern_table

        return self.device_table(pattern_table(source, target, mode), like)

    def class_table(self, target: TypeSpec, mode: Mode, like: Any) -> Any:
        """:func:`~castlike.spec.tables.float32_class_table` on ``like``'s device."""
        from .spec.tables import float32_class_table

        return self.device_table(float32_class_table(target, mode), like)

    def pattern_index(self, x: Any, t: TypeSpec) -> Any:
        """The index of each element of ``x`` (type ``t``) into a :meth:`pattern_table`."""
        return self.bits(x, t)

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

    def like_on(self, device: str) -> Any:
        """A zero-size array of this library on ``device`` (a name such as ``"cpu"``,
        ``"cuda"`` or ``"cuda:1"``), to pass as :meth:`from_numpy`'s ``like``; None where
        the library's own default placement is that device.  Raises ValueError where the
        library has no such device, or cannot reach it here.  This default knows the host
        alone."""
        if device == "cpu":
            return None
        raise ValueError(f"{self.name} holds its arrays on the host (cpu), not on {device!r}")

    def repeat_cast(self, plan: Any, *, packed: bool = False) -> Any:
        """A function casting any array of ``plan.source`` as ``plan`` says (and packing the
        result, with ``packed``), with no further validation, for the frontend to reuse on
        repeated calls; None where there is none.  The function returns None for an input it
        declines, which then takes the full path."""
        return None

    # -- packed layouts (castlike.spec.packing) ------------------------------------------------
    def packed_source(self, x: Any) -> tuple[Any, TypeSpec, int] | None:
        """For an array whose dtype holds a sub-byte type packed (torch's
        ``float4_e2m1fn_x2``): its bytes as uint8 (shape ``(..., m)``), the type, and the
        elements per row.  None for every other array (the default)."""
        return None

    def packed_type_of(self, dtype: Any) -> OnnxType | None:
        """The sub-byte type that one of the library's packed dtypes holds (torch's
        ``float4_e2m1fn_x2``: FLOAT4E2M1), or None."""
        return None

    def holds_packed(self, t: TypeSpec) -> bool:
        """Whether a cast to ``t`` packed can be carried out and held: bytes, and the bit
        patterns of ``t`` (a library that cannot hold ``t`` one per byte may still compute
        them: torch's FLOAT4E2M1)."""
        return self.packs and self.library_dtype(t) is not None

    def packed_result(self, data: Any, t: TypeSpec) -> Any:
        """Packed bytes (uint8, rows along the last axis) of type ``t`` as the array the
        caller gets: the bytes themselves, unless the library has a packed dtype for ``t``."""
        return data

    def cast_strings(self, x: Any, plan: Any, *, errors: str, like: Any) -> Any:
        """A cast from or to STRING (R9) done the library's own way, or None for the default:
        numbers brought to the host, formatted or parsed there, and brought back.  A library
        of lazy blocks (Dask) formats block by block, so that the result stays lazy."""
        return None

    # -- the engine ---------------------------------------------------------------------------
    def engine(self) -> Any:
        """The :class:`castlike._engine.Engine` bound to this adapter (subclasses may return a
        specialised one).  Typed loosely: the engine imports this module, not the reverse."""
        from ._engine import Engine

        return Engine(self)
