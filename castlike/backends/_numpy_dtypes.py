"""The NumPy (and ml_dtypes) dtype of every ONNX type, shared by the backends that move data to
and from NumPy (the NumPy backend itself, torch and JAX's host conversions, the tests).

ml_dtypes is imported only when one of its types is first needed: importing it costs hundreds
of milliseconds (0.7), far more than a first cast, and a dtype of ml_dtypes cannot reach
castlike before ml_dtypes has been imported by someone.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import numpy as np

from ..spec.types import OnnxType

__all__ = ["NUMPY_DTYPES", "is_string_dtype", "onnx_type_of_numpy_dtype"]

_T = OnnxType


def is_string_dtype(dtype: np.dtype[Any]) -> bool:
    """Whether a NumPy dtype holds strings (R9): StringDType, ``U``, ``S`` or object."""
    return dtype.kind in "USOT"


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


def onnx_type_of_numpy_dtype(dtype: Any) -> OnnxType | None:
    """The ONNX type of a NumPy/ml_dtypes dtype (any byte order; STRING for the string kinds),
    or None."""
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        return None
    if not dt.isnative:
        dt = dt.newbyteorder("=")
    if is_string_dtype(dt):
        return _T.STRING
    found = _BY_NUMPY_DTYPE.get(dt)
    if found is None and "ml_dtypes" in sys.modules:  # only then can dt be one of its dtypes
        found = _by_ml_dtype().get(dt)
    return found
