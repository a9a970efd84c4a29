"""A broadcast input (stride 0 along some axis) is cast on its distinct elements.

``np.broadcast_to`` of a small array to a large shape once cost a contiguous copy of the whole
input before the cast (95 MiB of temporaries for a 19 MiB FLOAT8 result).  Now the distinct
elements (the array with its 0-stride axes at length 1) are cast and the result repeated: the
memory is the result's, and the result is what NumPy's ``astype`` gives, a new C-contiguous
writeable array, bit for bit the cast of the same array made contiguous.
"""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import castlike
from castlike import _fastpath, _native
from castlike.spec.types import TYPES
from castlike.testing import fresh_caches

#: Sources and targets of every kernel family (gathers, class tables, conversions, integers).
PAIRS = [
    ("FLOAT", "FLOAT8E4M3FN"),
    ("FLOAT", "FLOAT16"),
    ("FLOAT", "INT4"),
    ("DOUBLE", "BFLOAT16"),
    ("DOUBLE", "FLOAT8E8M0"),
    ("INT64", "FLOAT"),
    ("FLOAT16", "FLOAT"),
    ("FLOAT8E5M2", "FLOAT16"),
    ("UINT2", "INT8"),
    ("BOOL", "DOUBLE"),
    ("INT32", "STRING"),
    ("FLOAT", "FLOAT"),
]


def _values(source: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
    if TYPES[castlike.OnnxType[source]].is_integer:
        values = np.clip(values, -100, 100)
    return np.ascontiguousarray(castlike.cast(values, source))


#: Broadcast views of a base array of shape (4, 5, 6), by what is broadcast.
LAYOUTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "a row to many rows": lambda a: np.broadcast_to(a[0, 0], (7, 6)),
    "a scalar to a matrix": lambda a: np.broadcast_to(a[1, 2, 3], (5, 9)),
    "a middle axis": lambda a: np.broadcast_to(a[:, :1, :], (4, 8, 6)),
    "the last axis": lambda a: np.broadcast_to(a[:, :, :1], (4, 5, 3)),
    "two axes": lambda a: np.broadcast_to(a[:1, 2:3, :], (3, 4, 6)),
    "a new leading axis": lambda a: np.broadcast_to(a, (2, 4, 5, 6)),
    "a strided core": lambda a: np.broadcast_to(a[:, ::2, ::-3], (3, 4, 3, 2)),
    "a transposed core": lambda a: np.broadcast_to(a[0].T[:, None, :], (6, 3, 5)),
    "a length-1 axis of stride 0": lambda a: a[:, None, :, 1],
    "empty": lambda a: np.broadcast_to(a[0, 0, :0], (3, 0)),
}


def _bytes(result: Any) -> Any:
    if result.dtype.kind in "OT":
        return result.tolist()
    return result.tobytes()


@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_broadcast_equals_its_contiguous_copy(source: str, target: str) -> None:
    base = _values(source, (4, 5, 6))
    for name, layout in LAYOUTS.items():
        x = layout(base)
        before = np.array(x).tobytes()
        for call in ("first", "remembered"):
            result = castlike.cast(x, target)
            expected = castlike.cast(np.ascontiguousarray(x), target)
            assert result.shape == x.shape and result.dtype == expected.dtype, (name, call)
            assert result.flags.c_contiguous and result.flags.writeable, (name, call)
            assert not np.shares_memory(result, base), (name, call)
            assert _bytes(result) == _bytes(expected), (name, call)
        assert np.array(x).tobytes() == before, f"{name}: the input changed"


def test_the_result_is_no_view() -> None:
    """Writing one element of the result changes that element only."""
    x = np.broadcast_to(np.float32([1.5, 2.5]), (3, 2))
    result = castlike.cast(x, "FLOAT16")
    result[0, 0] = 7
    assert result.tolist() == [[7, 2.5], [1.5, 2.5], [1.5, 2.5]]


def _extra_memory(x: np.ndarray, target: str) -> tuple[int, int]:
    """(peak bytes allocated during the cast, the result's bytes)."""
    tracemalloc.start()
    try:
        result = castlike.cast(x, target)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result.nbytes


@pytest.fixture
def pure_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The native kernels switched off for one test."""
    with monkeypatch.context() as m, fresh_caches():
        m.setattr(_native, "module", lambda: None)
        yield


@pytest.mark.parametrize("path", ["native", "pure engine"])
@pytest.mark.parametrize("target", ["FLOAT8E4M3FN", "FLOAT16"])
def test_memory_is_the_result_not_the_input(
    target: str, path: str, request: pytest.FixtureRequest
) -> None:
    """A row broadcast to 4000 rows.  A contiguous copy of the input alone would be 16 MB
    (four times the FLOAT8 result, twice the FLOAT16 one)."""
    if path == "pure engine":
        request.getfixturevalue("pure_engine")
    else:
        _fastpath.clear()
    row = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    x = np.broadcast_to(row, (4000, 1000))
    castlike.cast(x[:2], "FLOAT")  # tables and kernels built outside the measure
    castlike.cast(np.ones(3, np.float32), target)
    _fastpath.clear()
    for call in ("first", "remembered"):
        peak, result = _extra_memory(x, target)
        assert peak <= result + (1 << 20), f"{call}: {peak / 2**20:.1f} MiB for {result} bytes"


@pytest.mark.parametrize("target", ["FLOAT8E4M3FN", "FLOAT", "BFLOAT16"])
@pytest.mark.usefixtures("pure_engine")
def test_wide_sources_of_the_pure_engine(target: str) -> None:
    """DOUBLE and INT64 on the pure engine's blocked path (arrays beyond two blocks)."""
    for source in ("DOUBLE", "INT64"):
        x = np.broadcast_to(_values(source, (1, 3, 1)), (50_000, 3, 2))
        got = castlike.cast(x, target)
        assert got.tobytes() == castlike.cast(np.ascontiguousarray(x), target).tobytes()


# -- torch and Dask ------------------------------------------------------------------------------


def _selected(name: str) -> bool:
    chosen = os.environ.get("CASTLIKE_TEST_BACKENDS")
    return not chosen or name in chosen.split(",")


@pytest.mark.skipif(not _selected("torch"), reason="CASTLIKE_TEST_BACKENDS does not select torch")
@pytest.mark.parametrize("native", ["1", "0"])
def test_expanded_torch_tensors(native: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``expand`` gives stride 0: the cast sees the distinct elements only (the native kernel
    and the torch ops alike), and the result is contiguous and equal to the contiguous cast."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    from castlike._engine import Engine
    from castlike.backends import _torch_compile

    monkeypatch.setenv("CASTLIKE_TORCH_NATIVE", native)
    seen: list[int] = []  # the elements each path was given
    run_native, engine_run = _torch_compile.run_native, Engine.run

    def counting_kernel(kernel: Any, x: Any, *args: Any) -> Any:
        seen.append(x.numel())
        return run_native(kernel, x, *args)

    def counting_engine(self: Engine, x: Any, route: Any) -> Any:
        seen.append(x.numel())
        return engine_run(self, x, route)

    monkeypatch.setattr(_torch_compile, "run_native", counting_kernel)
    monkeypatch.setattr(Engine, "run", counting_engine)
    row = torch.from_numpy(_values("FLOAT", (1, 1000)))
    x = row.expand(4000, 1000)
    for target in ("FLOAT8E4M3FN", "FLOAT16", "INT4", "UINT64", "BOOL"):
        seen.clear()
        result = castlike.cast(x, target)
        assert seen == [1000], target
        expected = castlike.cast(x.contiguous(), target)
        assert result.shape == x.shape and result.dtype == expected.dtype
        assert result.is_contiguous()
        width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
        bits = width[result.element_size()]
        assert torch.equal(result.view(bits), expected.view(bits)), target


@pytest.mark.skipif(not _selected("dask"), reason="CASTLIKE_TEST_BACKENDS does not select dask")
def test_broadcast_dask_arrays() -> None:
    da = pytest.importorskip("dask.array", reason="dask is not installed")
    x = da.broadcast_to(da.from_array(_values("DOUBLE", (1, 600)), chunks=200), (900, 600))
    got = castlike.cast(x, "FLOAT8E5M2")
    assert got.compute().tobytes() == castlike.cast(np.asarray(x), "FLOAT8E5M2").tobytes()
