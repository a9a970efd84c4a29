"""Dask specifics: results stay lazy, keep their chunks, and equal the NumPy results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import castlike

da = pytest.importorskip("dask.array", reason="dask is not installed (castlike[dask])")


def test_result_is_lazy_and_keeps_chunks() -> None:
    x = da.linspace(-600, 600, 10_001, chunks=1_000).astype(np.float32)
    y = castlike.cast(x, "FLOAT8E4M3FN", saturate=False)
    assert isinstance(y, da.Array)
    assert y.chunks == x.chunks
    assert y.dtype == castlike.backends.adapter_named("numpy").library_dtype(
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


def test_the_adapter_writes_only_what_its_engine_uses() -> None:
    """Dask's engine casts each block with the NumPy backend: the Dask adapter has no bit
    primitives or tables of its own, and says so when asked for one."""
    adapter = castlike.backends.adapter_named("dask")
    x = da.ones(4, chunks=2, dtype=np.float32)
    t = castlike.spec.spec_of("FLOAT")
    for call in (lambda: adapter.bits(x, t), lambda: adapter.device_table(np.zeros(2), x)):
        with pytest.raises(NotImplementedError, match="the dask backend provides no"):
            call()
    assert castlike.cast(x, "FLOAT16").compute().tolist() == [1.0] * 4


def test_cast_like_with_dask_arrays() -> None:
    x = da.from_array(np.array([1.5, 2.5, 3.5]), chunks=2)
    like = da.zeros(1, dtype=np.int8)
    y = castlike.cast_like(x, like)
    assert isinstance(y, da.Array) and y.compute().tolist() == [1, 2, 3]
    with pytest.raises(castlike.CastTypeError, match=r"pass like\.dtype"):
        castlike.cast_like(np.array([1.0]), like)


# == The layout matrix: every kind of Dask array casts as its NumPy values do ====================

#: Sources and targets of the matrix (STRING targets: the formatting reads each block's bits,
#: so a block in the wrong byte order would give other text).
MATRIX_SOURCES = ["FLOAT", "DOUBLE", "FLOAT16", "INT32", "INT64", "FLOAT8E4M3FN", "BOOL"]
MATRIX_TARGETS = ["FLOAT8E4M3FN", "INT4", "UINT8", "FLOAT16", "STRING"]


def _matrix_values(source: str) -> np.ndarray:
    rng = np.random.default_rng(17)
    if source == "BOOL":  # storage bytes other than 0/1, as memory from elsewhere may hold (R8)
        return rng.integers(0, 256, (6, 8)).astype(np.uint8).view(np.bool_)
    values = rng.standard_normal((6, 8)) * 10.0 ** rng.integers(-6, 6, (6, 8))
    values.reshape(-1)[:5] = [np.nan, np.inf, -np.inf, -0.0, 448.0]
    dtype = castlike.cast(np.zeros(1), source).dtype
    if np.dtype(dtype).kind in "iub":
        return np.clip(np.nan_to_num(values), -1000, 1000).astype(dtype)
    return castlike.cast(values, source)


def _dask_layouts(x: np.ndarray, tmp_path: Path) -> dict[str, tuple[Any, np.ndarray]]:
    """Dask arrays of ``x``'s values (or a part of them), each with the NumPy values it holds."""
    rows = da.from_array(np.arange(x.shape[0]), chunks=2) % 2 == 0
    layouts: dict[str, tuple[Any, np.ndarray]] = {
        "chunks on one axis": (da.from_array(x, chunks=(2, 8)), x),
        "2-D chunks": (da.from_array(x, chunks=(4, 3)), x),
        "transposed": (da.from_array(x, chunks=(4, 3)).T, x.T),
        "negative steps": (da.from_array(x, chunks=(4, 3))[::-1, ::-2], x[::-1, ::-2]),
        "unknown chunk sizes": (da.from_array(x, chunks=(2, 8))[rows], x[::2]),
        "0-d": (da.from_array(x, chunks=(4, 3))[2, 3], x[2, 3]),
        "empty": (da.from_array(x, chunks=(4, 3))[:0], x[:0]),
    }
    if x.dtype.kind in "fiu" and x.dtype.itemsize > 1 and x.dtype.type.__module__ == "numpy":
        big = x.astype(x.dtype.newbyteorder(">"))
        layouts["big-endian chunks"] = (da.from_array(big, chunks=(2, 3)), x)
        path = tmp_path / "big.bin"
        memmap = np.memmap(path, dtype=big.dtype, mode="w+", shape=x.shape)
        memmap[...] = big
        memmap.flush()
        mapped = np.memmap(path, dtype=big.dtype, mode="r", shape=x.shape)
        layouts["big-endian memmapped file"] = (da.from_array(mapped, chunks=(3, 4)), x)
    return layouts


@pytest.mark.parametrize("target", MATRIX_TARGETS)
@pytest.mark.parametrize("source", MATRIX_SOURCES)
def test_layout_matrix(source: str, target: str, tmp_path: Path) -> None:
    x = _matrix_values(source)
    for name, (lazy, values) in _dask_layouts(x, tmp_path).items():
        result = castlike.cast(lazy, target)
        assert isinstance(result, da.Array), name
        got = result.compute()
        values = np.array(values, order="C")
        if values.dtype == np.bool_:  # what the bytes mean: nonzero is True (R8)
            values = values.view(np.uint8) != 0
        expected = castlike.cast(values, target)
        assert got.shape == np.shape(expected), name
        if target == "STRING":
            assert got.dtype == np.dtypes.StringDType(), name
            assert got.tolist() == np.asarray(expected).tolist(), name
        else:
            assert got.dtype == np.asarray(expected).dtype, name
            assert got.tobytes() == np.asarray(expected).tobytes(), name


def test_big_endian_chunks_to_string_are_their_values() -> None:
    # The block functions once formatted the raw (byte-swapped) bits: 1.5 gave '6.8965e-41'.
    x = da.from_array(np.array([1.5, 0.1], ">f4"), chunks=1)
    assert castlike.cast(x, "STRING").compute().tolist() == ["1.5", "0.1"]
    like = np.array(["a"])  # a fixed-width result formats the same way
    assert castlike.cast_like(x, like).compute().tolist() == ["1.5", "0.1"]


@pytest.mark.parametrize("dtype", [">U8", "<U8", "S8", object, np.dtypes.StringDType()])
def test_string_sources_of_every_layout(dtype: Any) -> None:
    texts = np.array(["1.5", "-2", "nan", "1e3", " 7 ", "0.1"] * 4).reshape(4, 6)
    strings = texts.astype(dtype) if dtype is not object else texts.astype(object)
    expected = castlike.cast(texts, "FLOAT")
    lazy = da.from_array(strings, chunks=(3, 4))
    rows = da.from_array(np.arange(4), chunks=2) % 2 == 0
    for name, view, values in [
        ("2-D chunks", lazy, expected),
        ("transposed", lazy.T, expected.T),
        ("unknown chunk sizes", lazy[rows], expected[::2]),
    ]:
        got = castlike.cast(view, "FLOAT").compute()
        assert got.tobytes() == np.ascontiguousarray(values).tobytes(), name


@pytest.mark.parametrize("target", ["FLOAT8E4M3FN", "FLOAT16", "INT4", "BFLOAT16", "INT32"])
@pytest.mark.parametrize("dtype", [">f2", ">f4", ">f8", ">u2", ">i8"])
def test_byte_swapped_dask_blocks(dtype: str, target: str) -> None:
    """Dask hands its blocks to the NumPy engine (and its kernels) as they are: byte-swapped
    ones too."""
    x = np.array([1.0, 500.0, 2.5, 0.1, 7.0, 60000.0]).astype(dtype)
    lazy = castlike.cast(da.from_array(x, chunks=2), target)
    expected = castlike.cast(x.astype(x.dtype.newbyteorder("=")), target)
    assert lazy.compute().tobytes() == expected.tobytes()
