"""NumPy backend: numpy dtypes plus ml_dtypes for the exotic ONNX types."""

from __future__ import annotations

from typing import Any

import array_api_compat.numpy as xp_numpy
import ml_dtypes
import numpy as np

from .._engine import Engine
from ..spec.types import TYPES, OnnxType, TypeSpec
from ._base import Adapter

__all__ = ["ADAPTER", "NUMPY_DTYPES", "NumpyAdapter", "NumpyEngine"]

_T = OnnxType

#: The NumPy/ml_dtypes dtype of every numeric ONNX type (STRING is handled by castlike.strings).
NUMPY_DTYPES: dict[OnnxType, np.dtype[Any]] = {
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
    _T.BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    _T.FLOAT8E4M3FN: np.dtype(ml_dtypes.float8_e4m3fn),
    _T.FLOAT8E4M3FNUZ: np.dtype(ml_dtypes.float8_e4m3fnuz),
    _T.FLOAT8E5M2: np.dtype(ml_dtypes.float8_e5m2),
    _T.FLOAT8E5M2FNUZ: np.dtype(ml_dtypes.float8_e5m2fnuz),
    _T.UINT4: np.dtype(ml_dtypes.uint4),
    _T.INT4: np.dtype(ml_dtypes.int4),
    _T.FLOAT4E2M1: np.dtype(ml_dtypes.float4_e2m1fn),
    _T.FLOAT8E8M0: np.dtype(ml_dtypes.float8_e8m0fnu),
    _T.UINT2: np.dtype(ml_dtypes.uint2),
    _T.INT2: np.dtype(ml_dtypes.int2),
    _T.FLOAT6E2M3: np.dtype(ml_dtypes.float6_e2m3fn),
    _T.FLOAT6E3M2: np.dtype(ml_dtypes.float6_e3m2fn),
}
_BY_DTYPE = {dtype: t for t, dtype in NUMPY_DTYPES.items()}
_UINTS = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}


def is_string_dtype(dtype: np.dtype[Any]) -> bool:
    """Whether a NumPy dtype holds strings (R9): StringDType, ``U``, ``S`` or object."""
    return dtype.kind in "USOT"


class NumpyAdapter(Adapter):
    """NumPy arrays (and NumPy scalars) with ml_dtypes types."""

    name = "numpy"
    xp = xp_numpy

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
        return _BY_DTYPE.get(dt)

    def uint(self, bits: int) -> np.dtype[Any]:
        return _UINTS[bits]

    def bits(self, x: Any, t: TypeSpec) -> np.ndarray:
        u = np.asarray(x).view(_UINTS[t.storage_bits])
        if t.is_sub_byte:
            return u & np.uint8((1 << t.bits) - 1)
        return u

    def from_bits(self, u: Any, t: TypeSpec) -> np.ndarray:
        storage = _UINTS[t.storage_bits]
        return np.asarray(u).astype(storage, copy=False).view(NUMPY_DTYPES[_T(t.code)])

    def astype(self, x: Any, t: TypeSpec) -> np.ndarray:
        return np.asarray(x).astype(NUMPY_DTYPES[_T(t.code)])

    def device_table(self, table: np.ndarray, like: Any) -> np.ndarray:
        return table

    def take(self, table: Any, index: Any) -> np.ndarray:
        return np.take(table, index)

    def from_numpy(self, array: np.ndarray, like: Any = None) -> np.ndarray:
        return np.asarray(array)

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def engine(self) -> Engine:
        return NumpyEngine(self)


class NumpyEngine(Engine):
    """The shared rules, with NumPy's floating-point warnings silenced.

    NaN and Inf are handled by the rules explicitly; the warnings NumPy would print for
    ``remainder(inf)`` or ``astype`` of a clipped value are noise to a caller.
    """

    def cast(self, x: Any, plan: Any) -> Any:
        with np.errstate(all="ignore"):
            return super().cast(x, plan)

    def from_wide(self, x: Any, source: TypeSpec, target: TypeSpec, mode: Any) -> Any:
        with np.errstate(all="ignore"):
            return super().from_wide(x, source, target, mode)


#: The one NumPy adapter (adapters hold no per-call state).
ADAPTER = NumpyAdapter()

# Every numeric type must have a NumPy dtype: ml_dtypes provides the exotic ones.
assert all(t in NUMPY_DTYPES for t in TYPES if t != _T.STRING)
