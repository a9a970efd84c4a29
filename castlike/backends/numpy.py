"""NumPy backend: numpy dtypes plus ml_dtypes for the exotic ONNX types.

ml_dtypes is imported only when a cast involves one of its types: importing it costs hundreds of
milliseconds (0.7), far more than a first cast, and a dtype of ml_dtypes cannot reach castlike
before ml_dtypes has been imported by someone.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import numpy as np

from .. import _native
from .._engine import Engine
from .._native.routes import kernel_for
from ..spec.rules import Mode
from ..spec.tables import DOUBLE_CLASS_BITS, byte_table, double_class_table
from ..spec.types import TYPES, Kind, OnnxType, TypeSpec
from ._base import Adapter

__all__ = ["ADAPTER", "NUMPY_DTYPES", "NumpyAdapter", "NumpyEngine"]

_T = OnnxType

#: The ONNX types NumPy holds itself.
_NUMPY_OWN: dict[OnnxType, np.dtype[Any]] = {
    _T.FLOAT: np.dtype(np.float32),
    _T.UINT8: np.dtype(np.uint8),
    _T.INT8: np.dtype(np.int8),
    _T.UINT16: np.dtype(np.uint16),
    _T.INT16: np.dtype(np.int16),
    _T.INT32: np.dtype(np.int32),
    _T.INT64: np.dtype(np.int64),
    _T.BOOL: np.dtype(np.bool_),
    _T.FLOAT16: np.dtype(np.float16),
    _T.DOUBLE: np.dtype(np.float64),
    _T.UINT32: np.dtype(np.uint32),
    _T.UINT64: np.dtype(np.uint64),
}
#: The ml_dtypes names of the others.
_ML_DTYPES_NAMES: dict[OnnxType, str] = {
    _T.BFLOAT16: "bfloat16",
    _T.FLOAT8E4M3FN: "float8_e4m3fn",
    _T.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    _T.FLOAT8E5M2: "float8_e5m2",
    _T.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    _T.UINT4: "uint4",
    _T.INT4: "int4",
    _T.FLOAT4E2M1: "float4_e2m1fn",
    _T.FLOAT8E8M0: "float8_e8m0fnu",
    _T.UINT2: "uint2",
    _T.INT2: "int2",
    _T.FLOAT6E2M3: "float6_e2m3fn",
    _T.FLOAT6E3M2: "float6_e3m2fn",
}
_BY_NUMPY_DTYPE = {dtype: t for t, dtype in _NUMPY_OWN.items()}


@cache
def _ml_dtypes_dtypes() -> dict[OnnxType, np.dtype[Any]]:
    import ml_dtypes

    return {t: np.dtype(getattr(ml_dtypes, name)) for t, name in _ML_DTYPES_NAMES.items()}


@cache
def _by_ml_dtype() -> dict[np.dtype[Any], OnnxType]:
    return {dtype: t for t, dtype in _ml_dtypes_dtypes().items()}


class _NumpyDtypes(Mapping[OnnxType, "np.dtype[Any]"]):
    """The NumPy/ml_dtypes dtype of every numeric ONNX type, importing ml_dtypes on the first
    lookup of one of its types (membership and the keys need no import)."""

    _keys = tuple(sorted([*_NUMPY_OWN, *_ML_DTYPES_NAMES]))

    def __getitem__(self, t: OnnxType) -> np.dtype[Any]:
        own = _NUMPY_OWN.get(t)
        return own if own is not None else _ml_dtypes_dtypes()[t]

    def __contains__(self, t: object) -> bool:
        return t in _NUMPY_OWN or t in _ML_DTYPES_NAMES

    def __iter__(self) -> Iterator[OnnxType]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


#: The NumPy/ml_dtypes dtype of every numeric ONNX type (STRING is handled by castlike.strings).
NUMPY_DTYPES: Mapping[OnnxType, np.dtype[Any]] = _NumpyDtypes()


def _onnx_type_of_numpy_dtype(dt: np.dtype[Any]) -> OnnxType | None:
    found = _BY_NUMPY_DTYPE.get(dt)
    if found is None and "ml_dtypes" in sys.modules:  # only then can dt be one of its dtypes
        found = _by_ml_dtype().get(dt)
    return found


_UINTS: dict[int, np.dtype[Any]] = {bits: np.dtype(f"uint{bits}") for bits in (8, 16, 32, 64)}

_WIDE = (_T.FLOAT, _T.DOUBLE, _T.INT32, _T.UINT32, _T.INT64, _T.UINT64)
#: Where NumPy's (and ml_dtypes') own ``astype`` is the rule (see ``Adapter.native_pairs``):
#: its conversions of the wide types to FLOAT, DOUBLE and FLOAT16 are correctly rounded C
#: casts (an integer beyond FLOAT16's range overflows whatever the intermediate), ml_dtypes
#: rounds FLOAT -> BFLOAT16 to nearest even, and FLOAT16/BFLOAT16 widen exactly.
NATIVE_PAIRS: frozenset[tuple[int, int]] = frozenset(
    {(int(s), int(t)) for s in _WIDE for t in (_T.FLOAT, _T.DOUBLE, _T.FLOAT16) if s != t}
    | {(int(_T.FLOAT), int(_T.BFLOAT16))}
    | {(int(s), int(t)) for s in (_T.FLOAT16, _T.BFLOAT16) for t in (_T.FLOAT, _T.DOUBLE)}
)


def is_string_dtype(dtype: np.dtype[Any]) -> bool:
    """Whether a NumPy dtype holds strings (R9): StringDType, ``U``, ``S`` or object."""
    return dtype.kind in "USOT"


class NumpyAdapter(Adapter):
    """NumPy arrays (and NumPy scalars) with ml_dtypes types."""

    name = "numpy"
    # NumPy 2 itself: array-api-compat's wrapper adds nothing the engine uses, and importing
    # it costs ~100 ms (see castlike._frontend._namespace).
    xp = np
    native_pairs = NATIVE_PAIRS

    def native_dtype(self, t: TypeSpec) -> np.dtype[Any] | None:
        if t.code == _T.STRING:
            return np.dtypes.StringDType()
        return NUMPY_DTYPES.get(_T(t.code))

    def onnx_type_of(self, dtype: Any) -> OnnxType | None:
        try:
            dt = np.dtype(dtype)
        except (TypeError, ValueError):
            return None
        if not dt.isnative:
            dt = dt.newbyteorder("=")
        if is_string_dtype(dt):
            return _T.STRING
        return _onnx_type_of_numpy_dtype(dt)

    def uint(self, bits: int) -> np.dtype[Any]:
        return _UINTS[bits]

    def bits(self, x: Any, t: TypeSpec) -> np.ndarray:
        u = np.asarray(x).view(_UINTS[t.storage_bits])
        if t.is_sub_byte:
            return u & np.uint8((1 << t.bits) - 1)
        if t.kind is Kind.BOOL:
            # R8: a bool whose byte is not 0 or 1 (foreign memory) is True, as NumPy reads it.
            return (u != 0).view(np.uint8)
        return u

    def pattern_table(self, source: TypeSpec, target: TypeSpec, mode: Mode, like: Any) -> Any:
        if source.kind is Kind.BOOL:  # indexed by the byte itself (see pattern_index)
            return byte_table(source, target, mode)
        return super().pattern_table(source, target, mode, like)

    def pattern_index(self, x: Any, t: TypeSpec) -> np.ndarray:
        if t.kind is Kind.BOOL:
            return np.asarray(x).view(np.uint8)  # any byte: the table has 256 entries
        return self.bits(x, t)

    def from_bits(self, u: Any, t: TypeSpec) -> np.ndarray:
        storage = _UINTS[t.storage_bits]
        return np.asarray(u).astype(storage, copy=False).view(NUMPY_DTYPES[_T(t.code)])

    def astype(self, x: Any, t: TypeSpec) -> np.ndarray:
        return np.asarray(x).astype(NUMPY_DTYPES[_T(t.code)])

    def device_table(self, table: np.ndarray, like: Any) -> np.ndarray:
        return table

    def clip(self, x: Any, low: float, high: float) -> np.ndarray:
        # NumPy's own: array-api-compat's wrapper costs ~10 us a call, a third of a small cast.
        return np.clip(x, low, high)

    def take(self, table: Any, index: Any) -> np.ndarray:
        index = np.asarray(index)
        if index.dtype == np.uint64:
            # NumPy 2.0's take refuses uint64 indices (later releases cast them); a table's
            # indices are far below 2**63, so the signed view is the same numbers, free.
            index = index.view(np.int64)
        return np.take(table, index)

    def from_numpy(self, array: np.ndarray, like: Any = None) -> np.ndarray:
        return np.asarray(array)

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def engine(self) -> Engine:
        return NumpyEngine(self)

    def repeat_cast(self, plan: Any) -> Any:
        native = _native.module()
        if native is None:
            return None
        kernel = kernel_for(native, plan.source, plan.target, plan.mode)
        if kernel is None:
            return None
        target = plan.target

        def run(x: np.ndarray) -> np.ndarray:
            if not x.dtype.isnative:
                distinct = _distinct(x)  # before the copy to native order
                if distinct is not None:
                    return _repeated(run(distinct), x.shape)
                x = x.astype(x.dtype.newbyteorder("="))
            return _run_kernel(kernel, x, target)

        return run


class NumpyEngine(Engine):
    """The shared rules, run by the native kernels where they cover the cast.

    What it overrides, and why: :meth:`cast` (the native kernels first; a broadcast array's
    distinct elements only; byte-swapped input to native order; large wide arrays block by
    block in the caches), :meth:`from_wide` (NumPy's floating-point warnings silenced: NaN
    and Inf are handled by the rules explicitly) and :meth:`to_small_float` (one gather from
    the DOUBLE class table, and integers clipped to +-2**24 then exact in FLOAT: fewer passes
    than the shared step, on NumPy's uint64 arithmetic).  The exhaustive and curated tests
    hold them to the same bits.
    """

    #: Elements per block for the wide paths: their temporaries then stay in the CPU caches.
    BLOCK = 1 << 16

    def cast(self, x: Any, plan: Any) -> Any:
        x = np.asarray(x)
        distinct = _distinct(x)
        if distinct is not None:  # a broadcast array: each distinct element once
            return _repeated(self.cast(distinct, plan), x.shape)
        if not x.dtype.isnative:  # byte-swapped data (a Dask block, say): native order first
            x = x.astype(x.dtype.newbyteorder("="))
        source, target = plan.source, plan.target
        native = _native.module()
        if native is not None:
            kernel = kernel_for(native, source, target, plan.mode)
            if kernel is not None:
                return _run_kernel(kernel, x, target)
        return self.cast_pure(x, plan)

    def cast_pure(self, x: np.ndarray, plan: Any) -> Any:
        """The cast by NumPy operations only (the reference for the native kernels)."""
        source, target = plan.source, plan.target
        with np.errstate(all="ignore"):
            single_pass = source.storage_bits <= 16 or _T(target.code) in _NATIVE_TARGETS
            if single_pass or x.size <= 2 * self.BLOCK:
                return super().cast(x, plan)
            # Wide sources: several passes each; run them block by block in the caches.
            flat = np.ascontiguousarray(x).reshape(-1)
            out = np.empty(flat.shape, dtype=NUMPY_DTYPES[_T(target.code)])
            for start in range(0, flat.size, self.BLOCK):
                block = flat[start : start + self.BLOCK]
                out[start : start + self.BLOCK] = super().cast(block, plan)
            return out.reshape(x.shape)

    def from_wide(self, x: Any, source: TypeSpec, target: TypeSpec, mode: Any) -> Any:
        with np.errstate(all="ignore"):
            return super().from_wide(x, source, target, mode)

    def to_small_float(
        self, x: Any, source: TypeSpec, target: TypeSpec, mode: Any, odd: bool
    ) -> Any:
        if source.code == _T.DOUBLE and odd:
            # One gather from the DOUBLE class table (see castlike.spec.tables).
            bits = x.view(np.uint64)
            index = (bits >> np.uint64(DOUBLE_CLASS_BITS)) << np.uint64(1)
            index |= (bits & np.uint64((1 << DOUBLE_CLASS_BITS) - 1)) != 0
            table = double_class_table(target, mode.effective_for(target))
            return self.a.from_bits(self.a.take(table, index), target)
        if source.is_integer and target.fmt.max_value < 2**24:
            # Every integer beyond +-2**24 is beyond the target's max, so clipping there keeps
            # the result, and the clipped integer is exact in FLOAT.
            # (A bound the source holds: NumPy 2.0 refuses -2**24 for an unsigned array.)
            low = max(source.int_min, -(1 << 24))
            clipped = np.clip(x, low, 1 << 24).astype(np.float32)
            index = self.float32_class_index(clipped.view(np.uint32))
            return self.a.from_bits(self.a.take(self.class_table(target, mode, x), index), target)
        return super().to_small_float(x, source, target, mode, odd)


def _distinct(x: np.ndarray) -> np.ndarray | None:
    """The distinct elements of a broadcast array: ``x`` with every axis of stride 0 (and
    length 2 or more) taken at length 1, a view; None where ``x`` has no such axis.

    Casting these and repeating the result costs memory and time for the result only, where
    the kernels' contiguous copy of a broadcast input would be as large as the input it
    stands for (``np.broadcast_to`` of a row to 10**7 rows, say).
    """
    if 0 not in x.strides or x.size <= 1:  # the usual case, decided by one tuple search
        return None
    if not any(stride == 0 and n > 1 for stride, n in zip(x.strides, x.shape, strict=True)):
        return None
    return x[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in x.strides)]


def _repeated(cast: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The cast of :func:`_distinct`'s elements repeated to ``shape``: a new C-contiguous,
    writeable array, as NumPy's ``astype`` of a broadcast array gives."""
    out = np.empty(shape, dtype=cast.dtype)
    np.copyto(out, cast)
    return out


def _run_kernel(kernel: Any, x: np.ndarray, target: TypeSpec) -> np.ndarray:
    """Run a native kernel on ``x`` into a new array of ``target``'s dtype."""
    if not (x.flags.c_contiguous and x.flags.aligned):
        # A broadcast array is never C-contiguous: checked here, at no cost to the others.
        distinct = _distinct(x)
        if distinct is not None:
            return _repeated(_run_kernel(kernel, distinct, target), x.shape)
        x = np.array(x, order="C")  # one aligned, contiguous copy; the kernels read it once
    out = np.empty(x.shape, dtype=NUMPY_DTYPES[_T(target.code)])
    kernel(x, out, _native.get_num_threads())
    return out


#: Targets a wide source reaches in one native pass (a table gather, astype or comparison).
_NATIVE_TARGETS = (_T.FLOAT, _T.DOUBLE, _T.FLOAT16, _T.BOOL)


#: The one NumPy adapter (adapters hold no per-call state).
ADAPTER = NumpyAdapter()

# Every numeric type must have a NumPy dtype: ml_dtypes provides the exotic ones.
assert all(t in NUMPY_DTYPES for t in TYPES if t != _T.STRING)
