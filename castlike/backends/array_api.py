"""The generic Array-API backend: any namespace array-api-compat knows that has no own adapter.

It holds the standard's dtypes only: BOOL, INT8-INT64, UINT8-UINT64, FLOAT, DOUBLE, and FLOAT16
where the namespace has ``float16`` (the standard makes it optional).  Every other ONNX type,
STRING included, is refused with a :class:`~castlike.errors.BackendTypeError` that names the
library and the alternative (R10).

Every step uses the standard's functions only: no NumPy conversion, no ``__array__``, no
DLPack.  The standard has no bit reinterpretation, so where the shared engine reads bits, the
steps here compute with values instead:

* integers to integers keep the low bits (R8) by masks and shifts of the value by powers of two,
  so that every ``astype`` they do converts a value the target holds;
* floats to integers truncate with ``trunc``, clip to bounds exact in the source format, and
  convert the (then exact) integer-valued float (R7);
* INT64/UINT64 to DOUBLE add two halves each exact in DOUBLE (one rounding); to FLOAT they are
  first rounded *to odd* into DOUBLE by an exact TwoSum, the last mantissa bit's parity read as
  ``remainder(|s| / ulp(s), 2)`` and the step to the odd neighbour made with ``nextafter``;
* FLOAT16 results come from FLOAT values that are exact or rounded to odd.

What it relies on beyond the standard's text (which leaves these implementation-defined), held
to the oracle by the exhaustive and curated tests on array-api-strict:

1. ``astype`` of a value the target dtype holds exactly gives that value;
2. ``astype`` from float64 to float32, and from float32 to float16, rounds to nearest even
   (IEEE 754 ``convertFormat``) for values within the target's finite range;
3. ``+ - * /``, ``nextafter`` and ``remainder`` are IEEE 754 operations, subnormals included.

NaN and values beyond a target's range never reach ``astype`` or the arithmetic (they are
replaced first, and NaN is the target's NaN after: R3 leaves its payload and sign open from
sources wider than 8 bits), so no library warning or undefined conversion is involved.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .._adapter import Adapter
from .._engine import Engine
from ..errors import BackendTypeError
from ..spec.types import Kind, OnnxType, TypeSpec, spec_of

if TYPE_CHECKING:
    from ..spec.plan import Plan
    from ..spec.route import Route

__all__ = [
    "REQUIRED_FUNCTIONS",
    "STANDARD_TYPES",
    "ArrayApiAdapter",
    "ArrayApiEngine",
    "adapter_for_namespace",
    "strict_adapter",
]

_T = OnnxType

#: The ONNX types of the standard's dtypes, with the dtype's name in the namespace.  FLOAT16 is
#: held only where the namespace has ``float16``.
STANDARD_TYPES: dict[OnnxType, str] = {
    _T.BOOL: "bool",
    _T.INT8: "int8",
    _T.INT16: "int16",
    _T.INT32: "int32",
    _T.INT64: "int64",
    _T.UINT8: "uint8",
    _T.UINT16: "uint16",
    _T.UINT32: "uint32",
    _T.UINT64: "uint64",
    _T.FLOAT16: "float16",
    _T.FLOAT: "float32",
    _T.DOUBLE: "float64",
}

_FLOAT = spec_of(_T.FLOAT)
_DOUBLE = spec_of(_T.DOUBLE)
_FLOAT16 = spec_of(_T.FLOAT16)
#: The smallest magnitudes that round to Inf in FLOAT and FLOAT16 (max + half an ulp: the tie
#: goes to the even Inf).
_FLOAT_OVERFLOW = float(_FLOAT.fmt.nearest_overflow)
_FLOAT16_OVERFLOW = float(_FLOAT16.fmt.nearest_overflow)
#: An integer clipped to +-this keeps its FLOAT16 result (this one and beyond are Inf) and is
#: exact in FLOAT.
_FLOAT16_INT_CLIP = _FLOAT16.fmt.overflow_integer


class ArrayApiAdapter(Adapter):
    """The standard's dtypes of one Array-API namespace ``xp``.

    Parameters
    ----------
    xp : namespace
        The library's Array-API namespace (as :func:`array_api_compat.array_namespace` gives).
    name : str, optional
        The backend's name in messages (default: the namespace's ``__name__``).
    """

    #: Strings live in NumPy arrays (R9), and this backend moves no data between libraries.
    moves_strings_through_numpy = False
    #: The standard has no bit reinterpretation: the routes take the value-based steps below.
    bit_views = False

    def __init__(self, xp: Any, name: str | None = None) -> None:
        self.xp = xp
        self.name = name or str(getattr(xp, "__name__", type(xp).__name__))
        self._dtypes: dict[OnnxType, Any] = {}
        for code, attribute in STANDARD_TYPES.items():
            dtype = getattr(xp, attribute, None)
            if dtype is not None:
                self._dtypes[code] = dtype

    # -- types -----------------------------------------------------------------------------
    def library_dtype(self, t: TypeSpec) -> Any | None:
        return self._dtypes.get(_T(t.code))

    def onnx_type_of(self, dtype: Any) -> OnnxType | None:
        for code, own in self._dtypes.items():
            # Only the namespace's own dtype objects: comparing them with other libraries'
            # objects is not defined by the standard (array-api-strict warns).
            if dtype is own or (type(dtype) is type(own) and dtype == own):
                return code
        return None

    def cannot_hold_hint(self, t: TypeSpec) -> str:
        code = _T(t.code)
        if code is _T.STRING:
            return (
                f"castlike's generic Array-API backend casts {self.name} arrays with the "
                "standard's functions only, and strings are NumPy arrays (R9); cast a NumPy "
                f"array instead: castlike.cast(numpy.from_dlpack(x), {t.name!r})"
            )
        if code is _T.FLOAT16:
            what = f"{self.name} has no float16 (the standard makes it optional)"
        else:
            what = (
                "the Array API standard has no such dtype (its dtypes are bool, int8-int64, "
                "uint8-uint64, float32, float64 and an optional float16)"
            )
        return (
            f"{what}; cast a NumPy array instead (ml_dtypes holds every ONNX type): "
            f"castlike.cast(numpy.from_dlpack(x), {t.name!r})"
        )

    def require(self, t: TypeSpec) -> Any:
        """The dtype holding ``t``, or a BackendTypeError naming the library (R10)."""
        dtype = self.library_dtype(t)
        if dtype is None:
            raise BackendTypeError(f"{self.name} cannot hold {t.name}; {self.cannot_hold_hint(t)}")
        return dtype

    def astype(self, x: Any, t: TypeSpec) -> Any:
        return self.xp.astype(x, self.require(t))

    # -- no bit views in the standard -------------------------------------------------------
    def bits(self, x: Any, t: TypeSpec) -> Any:
        raise BackendTypeError(
            f"{self.name}: the Array API standard has no bit reinterpretation; "
            "castlike's generic backend computes with values (ArrayApiEngine)"
        )

    def from_bits(self, u: Any, t: TypeSpec) -> Any:
        return self.bits(u, t)

    def device_table(self, table: np.ndarray, like: Any) -> Any:
        raise BackendTypeError(
            f"{self.name}: castlike's generic backend uses no lookup table (ArrayApiEngine)"
        )

    # -- moving data (tests and the parity command only; never inside a cast) -----------------
    def from_numpy(self, array: np.ndarray, like: Any = None) -> Any:
        array = np.asarray(array)
        if array.dtype.kind in "USOT":
            raise BackendTypeError(f"{self.name} cannot hold STRING")
        from .numpy import ADAPTER as NUMPY

        found = NUMPY.onnx_type_of(array.dtype)
        t = spec_of(found) if found is not None else None
        if t is None or self.library_dtype(t) is None:
            name = t.name if t is not None else str(array.dtype)
            raise BackendTypeError(f"{self.name} cannot hold {name}")
        native = array.astype(array.dtype.newbyteorder("="), order="C")  # a copy, as DLPack needs
        out = self.xp.from_dlpack(native)
        if like is not None:
            out = self.xp.asarray(out, device=like.device)
        return out

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.array(np.from_dlpack(x), copy=True)

    def engine(self) -> Engine:
        return ArrayApiEngine(self)


class ArrayApiEngine(Engine):
    """The rules for the standard's dtypes, by the standard's functions (see the module)."""

    a: ArrayApiAdapter

    def cast(self, x: Any, plan: Plan) -> Any:
        source, target, mode = plan.source, plan.target, plan.mode
        if source.code == _T.FLOAT16:
            # Exact in FLOAT; from there FLOAT's rules give FLOAT16's results (one rounding).
            x, source = self.float_astype(x, _FLOAT), _FLOAT
        if source.kind is Kind.BOOL:
            if target.kind is Kind.BOOL:
                # Not astype: a copy keeps a byte that is not 0 or 1 (foreign memory), where a
                # comparison gives the True of the library's own reading (R8: nonzero).
                return self.xp.not_equal(x, False)
            return self.a.astype(x, target)  # True -> 1, False -> 0: the standard says so
        return self.run(x, self.route(source, target, mode))

    def nonzero(self, x: Any, route: Route) -> Any:
        return x != (0.0 if route.source.is_float else 0)

    # -- integers ----------------------------------------------------------------------------
    def saturating_truncation(self, x: Any, route: Route) -> Any:
        """R7 on a truncated value whose NaN is the route's result: the engine's clip then
        converts an integer the target holds."""
        xp = self.xp
        x = xp.where(x != x, xp.zeros_like(x), x)  # NaN -> 0 (R7), before any arithmetic
        return super().saturating_truncation(xp.trunc(x), route)

    def integer_to_integer(self, x: Any, target: TypeSpec) -> Any:
        """R8: the low ``target.bits`` bits in two's complement, by value arithmetic."""
        source = self._type_of(x)
        xp = self.xp
        sb, tb = source.bits, target.bits
        s_signed, t_signed = source.int_min < 0, target.int_min < 0
        holds_all = (s_signed == t_signed and tb >= sb) or (not s_signed and t_signed and tb > sb)
        if holds_all:
            return self.a.astype(x, target)
        half = 1 << (tb - 1)
        if tb > sb:  # a signed source into a wider unsigned target: widen exactly first
            x = self.a.astype(x, spec_of(_signed_of(tb)))
            s_signed = True
        elif tb < sb:  # the low bits, as a value in [0, 2**tb) of the source dtype
            x = x & ((1 << tb) - 1)
            s_signed = False
            if not t_signed:
                return self.a.astype(x, target)
        # Same width, other signedness: move by half the range into [0, half), which both
        # dtypes hold, convert, and move back in the target.  where() picks an operand that
        # cannot overflow for the lanes it discards.
        if s_signed:  # -> unsigned: negative x becomes x + 2**tb
            negative = x < 0
            low = xp.where(negative, x, xp.full_like(x, -1))
            y = self.a.astype(xp.where(negative, (low + (half - 1)) + 1, x), target)
            return xp.where(negative, y + half, y)
        high = x >= half  # unsigned -> signed: x >= 2**(tb-1) becomes x - 2**tb
        top = xp.where(high, x, xp.full_like(x, half))
        y = self.a.astype(xp.where(high, top - half, x), target)
        return xp.where(high, (y - (half - 1)) - 1, y)

    def _type_of(self, x: Any) -> TypeSpec:
        found = self.a.onnx_type_of(x.dtype)
        assert found is not None, x.dtype
        return spec_of(found)

    # -- IEEE targets --------------------------------------------------------------------------
    def ieee(self, x: Any, route: Route) -> Any:
        """FLOAT, DOUBLE and FLOAT16 targets, each with one rounding from the source value."""
        source, target = route.source, route.target
        code = _T(target.code)
        if code is _T.FLOAT16:
            return self._to_float16(x, source)
        if source.is_integer:
            if source.bits == 64:
                if code is _T.DOUBLE:
                    return self._int64_to_double(x)[0]
                return self.a.astype(self.odd_double_of_int64(x), _FLOAT)
            x = self.a.astype(x, _DOUBLE)  # exact for 32 bits and fewer
            source = _DOUBLE
        if code is _T.DOUBLE or source.code == _T.FLOAT:
            return self.float_astype(x, target)  # exact (a copy for FLOAT -> FLOAT)
        return self._narrow(x, _FLOAT, _FLOAT_OVERFLOW)

    def float_astype(self, x: Any, target: TypeSpec) -> Any:
        """``astype`` of floats with NaN kept out of it: a NaN (a signalling one, say) is
        replaced by 0 first and is the target's NaN after (R3 leaves its payload open from
        these sources), so that no library converts, or warns about, a NaN."""
        xp = self.xp
        nan = x != x
        out = self.a.astype(xp.where(nan, xp.zeros_like(x), x), target)
        return xp.where(nan, xp.full_like(out, math.nan), out)

    def _to_float16(self, x: Any, source: TypeSpec) -> Any:
        xp = self.xp
        if source.is_integer:
            # From FLOAT16's overflow on every integer gives +-Inf; clipped, it is exact in FLOAT.
            low = max(source.int_min, -_FLOAT16_INT_CLIP)
            x = self.a.astype(xp.clip(x, low, min(source.int_max, _FLOAT16_INT_CLIP)), _FLOAT)
        elif source.code == _T.DOUBLE:
            big = xp.abs(x) >= _FLOAT16_OVERFLOW
            finite = xp.where(big, xp.zeros_like(x), x)
            odd = self.odd_float_of_double(finite)  # FLOAT16's single rounding survives it
            return self._overflow_to_inf(big, x, self.float_astype(odd, _FLOAT16))
        return self._narrow(x, _FLOAT16, _FLOAT16_OVERFLOW)

    def _narrow(self, x: Any, target: TypeSpec, overflow: float) -> Any:
        """``x`` (DOUBLE or FLOAT) to the narrower float ``target`` by ``astype``, which only
        ever sees values within the target's range (beyond it: +-Inf, as IEEE rounding)."""
        xp = self.xp
        big = xp.abs(x) >= overflow  # False for NaN
        inside = self.float_astype(xp.where(big, xp.zeros_like(x), x), target)
        return self._overflow_to_inf(big, x, inside)

    def _overflow_to_inf(self, big: Any, x: Any, result: Any) -> Any:
        xp = self.xp
        inf = xp.full_like(result, math.inf)
        return xp.where(big, xp.where(x < 0, -inf, inf), result)

    # -- rounding to odd, by values ------------------------------------------------------------
    def _int64_to_double(self, x: Any) -> tuple[Any, Any]:
        """INT64/UINT64 ``x`` as DOUBLE rounded to nearest, and the exact error (TwoSum)."""
        a = self.a.astype(x >> 32, _DOUBLE) * 4294967296.0  # exact: 32 bits times 2**32
        b = self.a.astype(x & 0xFFFFFFFF, _DOUBLE)  # exact
        s = a + b  # the one rounding of x
        bb = s - a
        err = (a - (s - bb)) + (b - bb)
        return s, err

    def odd_double_of_int64(self, x: Any) -> Any:
        """INT64/UINT64 -> DOUBLE rounded to odd: the nearest DOUBLE, or where the sum was
        inexact and that has an even last bit, its neighbour toward the exact value."""
        xp = self.xp
        s, err = self._int64_to_double(x)
        toward = xp.where(err > 0, xp.full_like(s, math.inf), xp.full_like(s, -math.inf))
        return xp.where((err != 0) & ~self._odd_last_bit(s), xp.nextafter(s, toward), s)

    def odd_float_of_double(self, x: Any) -> Any:
        """Finite DOUBLE within FLOAT's range -> FLOAT rounded to odd (NaN stays a NaN)."""
        xp = self.xp
        nan = x != x
        x = xp.where(nan, xp.zeros_like(x), x)
        nearest = self.a.astype(x, _FLOAT)
        back = self.a.astype(nearest, _DOUBLE)
        inf = xp.full_like(nearest, math.inf)
        toward = xp.where(x > back, inf, -inf)
        stepped = xp.nextafter(nearest, toward)
        odd = xp.where((back != x) & ~self._odd_last_bit(nearest), stepped, nearest)
        return xp.where(nan, xp.full_like(odd, math.nan), odd)

    def _odd_last_bit(self, v: Any) -> Any:
        """Whether the last mantissa bit of the finite floats ``v`` is set: ``|v| / ulp(v)`` is
        an integer (a division by a power of two is exact), odd or even."""
        xp = self.xp
        magnitude = xp.abs(v)
        ulp = xp.nextafter(magnitude, xp.full_like(v, math.inf)) - magnitude
        return xp.remainder(magnitude / ulp, 2.0) != 0


def _signed_of(bits: int) -> OnnxType:
    return {8: _T.INT8, 16: _T.INT16, 32: _T.INT32, 64: _T.INT64}[bits]


#: Generic adapters made so far, by namespace (a namespace is a module, hashable).
_BY_NAMESPACE: dict[Any, ArrayApiAdapter] = {}


#: The standard's functions the generic engine calls.
REQUIRED_FUNCTIONS = (
    "abs",
    "astype",
    "clip",
    "full_like",
    "nextafter",
    "remainder",
    "trunc",
    "where",
    "zeros_like",
)


def adapter_for_namespace(xp: Any) -> ArrayApiAdapter:
    """The generic adapter of the Array-API namespace ``xp`` (one per namespace).

    Raises
    ------
    BackendTypeError
        ``xp`` lacks a function the generic engine calls, or every standard dtype: it is no
        Array-API namespace castlike can use, and needs a backend of its own.
    """
    adapter = _BY_NAMESPACE.get(xp)
    if adapter is None:
        missing = [f for f in REQUIRED_FUNCTIONS if not callable(getattr(xp, f, None))]
        if missing or not any(hasattr(xp, name) for name in STANDARD_TYPES.values()):
            name = getattr(xp, "__name__", "?")
            kind = f"{type(xp).__module__}.{type(xp).__qualname__}"
            lacks = ", ".join(missing) if missing else "the standard's dtypes"
            raise BackendTypeError(
                f"castlike has no backend for the array namespace {name!r} (a {kind}), and "
                f"it is not an Array-API namespace castlike's generic backend can use (it "
                f"lacks {lacks}); register a backend for it (castlike.backends.register)"
            )
        adapter = _BY_NAMESPACE[xp] = ArrayApiAdapter(xp)
    return adapter


def generic_adapters() -> list[ArrayApiAdapter]:
    """The generic adapters made so far (for dtype lookups of the libraries in use)."""
    return list(_BY_NAMESPACE.values())


def strict_adapter() -> ArrayApiAdapter:
    """The adapter of array-api-strict (the registry's entry for it); imports it, so only
    called once the caller has."""
    import array_api_strict

    adapter = _BY_NAMESPACE.get(array_api_strict)
    if adapter is None or adapter.name != "array-api-strict":
        adapter = _BY_NAMESPACE[array_api_strict] = ArrayApiAdapter(
            array_api_strict, name="array-api-strict"
        )
    return adapter
