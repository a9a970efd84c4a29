"""Dask backend: the NumPy engine applied block by block, so the result stays lazy.

A Dask array's chunks are NumPy arrays with the same dtypes (ml_dtypes included), so the cast
of a Dask array is ``map_blocks`` of the NumPy cast: nothing is computed until the caller asks.
Casts from and to STRING are ``map_blocks`` of the string functions the same way.
"""

from __future__ import annotations

from typing import Any

import array_api_compat.dask.array as xp_dask
import dask.array as da
import numpy as np

from .._engine import Engine
from ..spec.types import Kind, OnnxType, TypeSpec
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

    def cast_strings(self, x: Any, plan: Any, *, errors: str, like: Any) -> Any:
        from .. import strings  # the string code loads only for string casts

        source, target = plan.source, plan.target
        if target.kind is Kind.STRING:
            kind = strings.output_kind(like)
            if source.kind is Kind.STRING and kind in "SU":
                kind = "T"  # a fixed width would depend on every block's longest string
            text = strings.block_text_dtype(source, kind)
            return x.map_blocks(strings.format_block, plan, kind, dtype=text, meta=_meta(x, text))

        def number_block(block: np.ndarray, block_info: Any = None) -> np.ndarray:
            origin = None  # where the block starts, for error messages about the whole array
            if block_info and block_info.get(0):
                origin = tuple(start for start, _ in block_info[0]["array-location"])
            return strings.parse_block(block, plan, errors, origin)

        numbers = NUMPY.native_dtype(target)
        result = x.map_blocks(number_block, dtype=numbers, meta=_meta(x, numbers))
        if strings.is_other_library(like) and not isinstance(like, da.Array):
            # The numbers go into like's library (R9), which has no lazy arrays to hold them.
            return strings.deliver_numbers(np.asarray(result.compute()), plan, like)
        return result


def _meta(x: Any, dtype: Any) -> np.ndarray:
    """An empty NumPy array of the result's type: given to ``map_blocks`` so that Dask does
    not run the cast on made-up data to find it out."""
    return np.empty((0,) * x.ndim, dtype=dtype)


class DaskEngine(Engine):
    """Every cast is the NumPy engine's cast of each block (the rules are not repeated)."""

    def cast(self, x: Any, plan: Any) -> Any:
        numpy_engine = NUMPY.engine()
        return x.map_blocks(numpy_engine.cast, plan, dtype=NUMPY.native_dtype(plan.target))


#: The one Dask adapter.
ADAPTER = DaskAdapter()
