"""R8: a BOOL is 0 or 1 whatever its storage byte holds, on every backend and path.

NumPy, PyTorch and JAX read a bool whose byte is not 0 or 1 as True (such arrays come from
foreign memory: ``np.frombuffer``, DLPack, a ``view`` of uint8 bytes).  castlike once cast the
byte itself (``[0, 1, 2, 255]`` -> INT8 gave ``[0, 1, 2, -1]``, -> FLOAT8E4M3FN 256, ->
STRING an IndexError).  Every cast of such an array must equal, bit for bit, the same cast of
the array whose bytes are 0/1, and leave the input as it was.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import castlike
from castlike import _native
from castlike._native import routes
from castlike.backends import adapter_named, moves_strings
from castlike.backends.numpy import ADAPTER as NUMPY
from castlike.spec.rules import Mode
from castlike.spec.types import TYPES, OnnxType, TypeSpec, spec_of
from castlike.testing import MEMORY_LAYOUTS, all_modes, mode_id, to_host

_T = OnnxType
BOOL = spec_of(_T.BOOL)
#: Bytes foreign memory may hold for a bool, one of each class: 0, 1, even, odd, top bit set.
BYTES = [0, 1, 2, 127, 128, 255, 4, 254]
#: Every ONNX type, STRING included.
TARGETS = [t.name for t in TYPES.values()]
#: The options of every mode (the profiles and the attributes a cast takes).
MODES = [
    {"saturate": m.saturate, "round_mode": m.round_mode.value, "profile": m.profile.value}
    for m in all_modes()
]


def _raw(data: list[int]) -> np.ndarray:
    """A read-only NumPy bool array over the given bytes (np.frombuffer: foreign memory)."""
    return np.frombuffer(bytes(data), dtype=np.bool_)


def _normalised(data: list[int]) -> np.ndarray:
    return np.array([b != 0 for b in data], dtype=np.bool_)


def _on(backend: str, array: np.ndarray) -> Any:
    """``array`` (bool, any bytes) as an array of ``backend`` that keeps its bytes."""
    if backend == "torch":
        import torch

        raw = bytearray(np.ascontiguousarray(array).view(np.uint8).tobytes())
        return torch.frombuffer(raw, dtype=torch.uint8).view(torch.bool)
    if backend == "dask":
        import dask.array as da

        return da.from_array(array, chunks=3)  # blocks of the foreign bytes themselves
    return adapter_named(backend).from_numpy(array)  # a copy of the bytes (checked by callers)


def _kept_bytes(backend: str, x: Any) -> np.ndarray:
    """The storage bytes of a bool array of ``backend``."""
    if backend == "torch":
        import torch

        return np.asarray(x.view(torch.uint8).numpy())
    return np.ascontiguousarray(to_host(x)).view(np.uint8)


def _bits(result: Any, target: str) -> Any:
    """A result as something to compare exactly: bytes of numbers, the list of strings."""
    if target == "STRING":
        return np.asarray(result).tolist()
    host = np.ascontiguousarray(to_host(result))
    return host.dtype, host.shape, host.tobytes()


def _holds(backend: str, target: str) -> bool:
    adapter = adapter_named(backend)
    if target == "STRING":
        return moves_strings(adapter)
    return adapter.library_dtype(spec_of(_T[target])) is not None


@pytest.mark.parametrize("target", TARGETS)
def test_any_nonzero_byte_is_true(backend: str, target: str) -> None:
    """Every (backend, target) pair, in every mode, on bytes 0, 1, 2, 127, 128, 255 ..."""
    if not _holds(backend, target):
        pytest.skip(f"{backend} cannot hold {target} (R10)")
    x = _on(backend, _raw(BYTES))
    if not np.array_equal(_kept_bytes(backend, x), BYTES):
        pytest.skip(f"{backend} does not keep a bool's bytes: nothing to normalise")
    ones = adapter_named(backend).from_numpy(_normalised(BYTES))
    for options in MODES:
        got = castlike.cast(x, target, **options)
        want = castlike.cast(ones, target, **options)
        assert _bits(got, target) == _bits(want, target), f"{backend} -> {target} {options}"
    assert np.array_equal(_kept_bytes(backend, x), BYTES), "the input was modified"


def test_bits_of_a_bool_are_0_or_1(backend: str) -> None:
    """The adapters' ``bits`` primitive (STRING formatting, comparisons and the ONNX writer
    read bools through it) gives 0/1 whatever the byte."""
    adapter = adapter_named(backend)
    if backend == "array-api-strict":
        pytest.skip("the generic Array-API backend has no bit views (the standard has none)")
    if backend == "dask":
        pytest.skip("Dask's adapter has no bit primitives: the NumPy backend casts its blocks")
    x = _on(backend, _raw(BYTES))
    assert to_host(adapter.bits(x, BOOL)).tolist() == [int(b != 0) for b in BYTES]


def test_foreign_bytes_read_as_true() -> None:
    b = _raw([0, 1, 2, 255])
    assert castlike.cast(b, "INT8").tolist() == [0, 1, 1, 1]
    assert castlike.cast(b, "FLOAT").tolist() == [0.0, 1.0, 1.0, 1.0]
    assert castlike.cast(b, "FLOAT8E4M3FN").astype(np.float32).tolist() == [0.0, 1.0, 1.0, 1.0]
    assert castlike.cast(b, "STRING").tolist() == ["0", "1", "1", "1"]
    assert castlike.cast(b, "BOOL").view(np.uint8).tolist() == [0, 1, 1, 1]


# -- the NumPy paths: native kernels (every CPU level), the pure engine, the repeat path ----------

_NUMERIC = [t for t in TYPES.values() if t.is_numeric]


def _every_byte(n: int, seed: int) -> np.ndarray:
    """``n`` bools whose bytes cover 0..255 (each at least once), then random."""
    rng = np.random.default_rng(seed)
    data = np.concatenate([np.arange(256), rng.integers(0, 256, max(0, n - 256))])
    return data.astype(np.uint8).view(np.bool_)


def _plan(target: TypeSpec, mode: Mode) -> Any:
    return SimpleNamespace(source=BOOL, target=target, mode=mode)


@pytest.mark.parametrize("target", _NUMERIC, ids=lambda t: t.name)
def test_numpy_engine_paths(target: TypeSpec) -> None:
    """The pure engine (``CASTLIKE_NATIVE=0``) and the kernel of every CPU level built."""
    x = _every_byte(1000, seed=1)
    ones = x.view(np.uint8) != 0
    before = x.tobytes()
    levels = [importlib.import_module(f"castlike._native._{v}") for v in _native.available_levels()]
    for mode in {m.effective_for(target) for m in all_modes()}:
        want = NUMPY.engine().cast_pure(ones, _plan(target, mode))
        expected = NUMPY.bits(want, target).tobytes()
        pure = NUMPY.engine().cast_pure(x, _plan(target, mode))
        assert NUMPY.bits(pure, target).tobytes() == expected, f"pure {mode_id(mode)}"
        for module in levels:
            kernel = routes.kernel_for(module, BOOL, target, mode)
            assert kernel is not None  # every BOOL cast has a kernel
            out = np.empty(x.shape, dtype=want.dtype)
            kernel(x, out, 2)
            got = NUMPY.bits(out, target).tobytes()
            assert got == expected, f"{module.__name__} {mode_id(mode)}"
    assert x.tobytes() == before


@pytest.mark.skipif(not _native.available_levels(), reason="the native kernels are not built")
@pytest.mark.parametrize("target", ["FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16", "INT64", "UINT4"])
def test_large_arrays_on_threads(target: str) -> None:
    """Arrays the kernels split across threads (from 2**20 elements), and the repeat path
    (the second call with the same arguments)."""
    n = 3 * (1 << 20) + 12345
    x = _every_byte(n, seed=2).reshape(3, -1)
    ones = x.view(np.uint8) != 0
    before = x.tobytes()
    want = castlike.cast(ones, target).tobytes()
    saved = _native.get_num_threads()
    try:
        for threads in (1, 3):
            _native.set_num_threads(threads)
            for _ in range(2):  # the full path, then the remembered one
                assert castlike.cast(x, target).tobytes() == want
    finally:
        _native.set_num_threads(saved)
    assert x.tobytes() == before


def test_odd_layouts() -> None:
    """Bool arrays of foreign bytes in every memory layout."""
    base = _every_byte(6 * 7 * 8, seed=3)
    ones = base.view(np.uint8) != 0
    for name, layout in MEMORY_LAYOUTS.items():
        for target in ("FLOAT", "INT8", "FLOAT8E4M3FN", "STRING", "BOOL"):
            got = castlike.cast(layout(base), target)
            want = castlike.cast(layout(ones), target)
            assert _bits(got, target) == _bits(want, target), f"{name} -> {target}"


# -- torch: with and without the native kernels, eager and compiled ---------------------------


def _torch_selected() -> bool:
    chosen = os.environ.get("CASTLIKE_TEST_BACKENDS")
    return importlib.util.find_spec("torch") is not None and (
        not chosen or "torch" in chosen.split(",")
    )


needs_torch = pytest.mark.skipif(not _torch_selected(), reason="torch is not installed/selected")


def _torch_targets() -> list[str]:
    adapter = adapter_named("torch")
    return [t.name for t in _NUMERIC if adapter.library_dtype(t) is not None]


@needs_torch
@pytest.mark.parametrize("native", ["1", "0"])
def test_torch_without_native_kernels(native: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``CASTLIKE_TORCH_NATIVE=0``: torch's own ops (``.to()``, gathers) read the byte too."""
    monkeypatch.setenv("CASTLIKE_TORCH_NATIVE", native)
    x = _on("torch", _every_byte(512, seed=4))
    ones = adapter_named("torch").from_numpy(_every_byte(512, seed=4).view(np.uint8) != 0)
    for target in _torch_targets():
        for options in MODES:
            got, want = castlike.cast(x, target, **options), castlike.cast(ones, target, **options)
            assert _bits(got, target) == _bits(want, target), f"{target} {options}"


@needs_torch
@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("native", ["1", "0"])
def test_torch_compiled(native: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``torch.compile``: the native operator, or Inductor's own code."""
    import torch

    monkeypatch.setenv("CASTLIKE_TORCH_NATIVE", native)
    targets = _torch_targets()

    def every(t: Any) -> tuple[Any, ...]:
        return tuple(castlike.cast(t, target) for target in targets)

    torch.compiler.reset()
    compiled = torch.compile(every, fullgraph=True)
    data = _every_byte(300, seed=5)
    x = _on("torch", data)
    want = every(adapter_named("torch").from_numpy(data.view(np.uint8) != 0))
    for target, got, expected in zip(targets, compiled(x), want, strict=True):
        assert _bits(got, target) == _bits(expected, target), target
    assert np.array_equal(_kept_bytes("torch", x), data.view(np.uint8))
    torch.compiler.reset()
