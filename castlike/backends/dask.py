"""Dask backend: the NumPy engine applied block by block, so the result stays lazy.

A Dask array's chunks are NumPy arrays with the same dtypes (ml_dtypes included), so the cast
of a Dask array is ``map_blocks`` of the NumPy cast: nothing is computed until the caller asks.
"""

from __future__ import annotations

from typing import Any

import array_api_compat.dask.array as xp_dask
import dask.array as da
import numpy as np

from .._engine import Engine
from ..spec.types import OnnxType, TypeSpec
from ._base import Adapter
from .numpy import ADAPTER as NUMPY

__all__ = ["ADAPTER", "DaskAdapter", "DaskEngine"]


class DaskAdapter(Adapter):
    """Dask arrays of NumPy chunks."""

    name = "dask"
    xp = xp_dask

    def native_dtype(self, t: TypeSpec) -> Any | None:
        return NUMPY.native_dtype(t)

    def onnx_type_of(self, dtype: Any) -> OnnxType | None:
        return NUMPY.onnx_type_of(dtype)

    def bits(self, x: Any, t: TypeSpec) -> Any:
        storage = np.dtype(f"uint{t.storage_bits}")
        return x.map_blocks(NUMPY.bits, t, dtype=storage)

    def from_bits(self, u: Any, t: TypeSpec) -> Any:
        return u.map_blocks(NUMPY.from_bits, t, dtype=NUMPY.native_dtype(t))

    def device_table(self, table: np.ndarray, like: Any) -> np.ndarray:
        return table

    def take(self, table: Any, index: Any) -> Any:
        return index.map_blocks(lambda block: np.take(table, block), dtype=table.dtype)

    def from_numpy(self, array: np.ndarray, like: Any = None) -> Any:
        array = np.asarray(array)
        if like is not None and like.shape == array.shape:
            chunks = like.chunks
        else:  # a few chunks along the first axis, so that block-wise code is exercised
            chunks = (max(1, -(-array.shape[0] // 4)), *array.shape[1:]) if array.ndim else ()
        return da.from_array(array, chunks=chunks)

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.asarray(x.compute())

    def engine(self) -> Engine:
        return DaskEngine(self)


class DaskEngine(Engine):
    """Every cast is the NumPy engine's cast of each block (the rules are not repeated)."""

    def cast(self, x: Any, plan: Any) -> Any:
        numpy_engine = NUMPY.engine()
        return x.map_blocks(numpy_engine.cast, plan, dtype=NUMPY.native_dtype(plan.target))


#: The one Dask adapter.
ADAPTER = DaskAdapter()
