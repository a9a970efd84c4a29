"""Dask specifics: results stay lazy, keep their chunks, and equal the NumPy results."""

from __future__ import annotations

import numpy as np
import pytest

import castlike

da = pytest.importorskip("dask.array", reason="dask is not installed (castlike[dask])")


def test_result_is_lazy_and_keeps_chunks() -> None:
    x = da.linspace(-600, 600, 10_001, chunks=1_000).astype(np.float32)
    y = castlike.cast(x, "FLOAT8E4M3FN", saturate=False)
    assert isinstance(y, da.Array)
    assert y.chunks == x.chunks
    assert y.dtype == castlike.backends.adapter_named("numpy").native_dtype(
        castlike.spec.spec_of("FLOAT8E4M3FN")
    )
    expected = castlike.cast(x.compute(), "FLOAT8E4M3FN", saturate=False)
    np.testing.assert_array_equal(y.compute().view(np.uint8), expected.view(np.uint8))


def test_nothing_is_computed_until_asked() -> None:
    calls = []

    def source_block(block):
        calls.append(block.shape)
        return block

    x = da.ones((4, 6), chunks=(2, 3), dtype=np.float64).map_blocks(source_block)
    y = castlike.cast(x, "INT4")
    # dask may call the function on tiny stand-ins to infer metadata, never on a real chunk
    assert (2, 3) not in calls
    assert y.compute().tolist() == [[1] * 6] * 4
    assert calls.count((2, 3)) == 4


def test_cast_like_with_dask_arrays() -> None:
    x = da.from_array(np.array([1.5, 2.5, 3.5]), chunks=2)
    like = da.zeros(1, dtype=np.int8)
    y = castlike.cast_like(x, like)
    assert isinstance(y, da.Array) and y.compute().tolist() == [1, 2, 3]
    with pytest.raises(castlike.CastTypeError, match=r"pass like\.dtype"):
        castlike.cast_like(np.array([1.0]), like)
