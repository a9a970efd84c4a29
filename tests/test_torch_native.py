"""PyTorch CPU tensors in eager mode go through the native kernels; the torch-op path (forced
with ``CASTLIKE_TORCH_NATIVE=0``) must give the same bits, on every layout."""

from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch native-path tests need PyTorch")

import castlike  # noqa: E402
from castlike import _native  # noqa: E402
from castlike.backends import adapter_named  # noqa: E402
from castlike.spec.types import TYPES, OnnxType  # noqa: E402
from castlike.testing import (  # noqa: E402
    compare_bits,
    curated_inputs,
    exhaustive_inputs,
    random_inputs,
)

pytestmark = pytest.mark.skipif(
    _native.module() is None, reason="castlike's native extension is not built or is disabled"
)

TORCH = adapter_named("torch")


def test_the_sanitized_build_under_nox_sanitize() -> None:
    """``nox -s sanitize`` runs this module with CASTLIKE_TEST_SANITIZED=1 after the native
    tests: then the kernels that read the tensors' memory (``repeat_tensor`` included) must be
    that session's sanitized build, not the checkout's."""
    if os.environ.get("CASTLIKE_TEST_SANITIZED") != "1":
        pytest.skip("not under nox -s sanitize (CASTLIKE_TEST_SANITIZED=1)")
    assert _native.module().sanitized  # type: ignore[union-attr]


SOURCES = [t for t in TYPES.values() if t.is_numeric and TORCH.library_dtype(t) is not None]
TARGETS = SOURCES


def _inputs(source_name: str) -> np.ndarray:
    t = TYPES[OnnxType[source_name]]
    return exhaustive_inputs(t) if t.bits <= 16 else curated_inputs(t)


def _torch_op_path(monkeypatch: pytest.MonkeyPatch, x: torch.Tensor, target: str) -> object:
    with monkeypatch.context() as m:
        m.setenv("CASTLIKE_TORCH_NATIVE", "0")
        return castlike.cast(x, target)


@pytest.mark.parametrize("target", [t.name for t in TARGETS])
@pytest.mark.parametrize("source", [t.name for t in SOURCES])
def test_native_equals_torch_ops(source: str, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    host = _inputs(source)
    x = TORCH.from_numpy(host)
    native = castlike.cast(x, target)
    ops = _torch_op_path(monkeypatch, x, target)
    s, t = TYPES[OnnxType[source]], TYPES[OnnxType[target]]
    assert native.dtype == ops.dtype and native.shape == ops.shape  # type: ignore[attr-defined]
    assert not native.requires_grad
    expected = adapter_named("numpy").bits(TORCH.to_numpy(ops), t).astype(np.uint64)
    mismatch = compare_bits(native, expected, s, t, host)
    assert mismatch is None, mismatch.describe(s, t)


@pytest.mark.parametrize(
    ("source", "target"),
    [("FLOAT", "FLOAT8E4M3FN"), ("FLOAT", "INT4"), ("DOUBLE", "BFLOAT16"), ("FLOAT16", "FLOAT")],
)
def test_layouts(source: str, target: str) -> None:
    host = np.ascontiguousarray(_inputs(source))[: 2 * 3 * 4 * 5 * 6]
    base = TORCH.from_numpy(host).reshape(2, 3, 4 * 5 * 6 // 4, 4)
    layouts = {
        "view": base[1],
        "strided": base[:, ::2, 1::3],
        "transposed": base.transpose(0, 3),
        "channels-last": base.contiguous(memory_format=torch.channels_last),
        "zero-d": base[0, 0, 0, 0],
        "empty": base[:0],
    }
    for name, x in layouts.items():
        result = castlike.cast(x, target)
        expected = castlike.cast(x.contiguous(), target)
        assert result.shape == x.shape, name
        t = TYPES[OnnxType[target]]
        a = adapter_named("numpy").bits(TORCH.to_numpy(result), t)
        b = adapter_named("numpy").bits(TORCH.to_numpy(expected), t)
        assert np.array_equal(a, b), name
        if name in ("transposed", "channels-last"):  # a dense layout is kept, as .to() keeps it
            assert result.stride() == x.stride(), name


def test_requires_grad_input() -> None:
    """A cast rounds, so it has no gradient: its result does not require grad, and a backward
    pass through a graph that uses it reaches the input only by the other ops."""
    x = torch.linspace(-3, 3, 11, requires_grad=True)
    y = castlike.cast(x, "FLOAT8E4M3FN")
    assert not y.requires_grad and y.grad_fn is None
    loss = (x * 2.0).sum() + y.float().sum()
    loss.backward()
    assert x.grad is not None and torch.equal(x.grad, torch.full_like(x, 2.0))


#: The one operation each compiled cast is: the opaque native operator, or (where torch's own
#: conversion is the rule, repaired or not, and Inductor fuses it into one loop in vectors: the
#: float8 targets on CPUs where torch runs AVX-512) torch's ``to``.
#: The operations of each compiled cast's graph (views aside): castlike's operator for each
#: (FLOAT8E4M3FN with saturation too: a clamp and the conversion since torch 2.11 was found to
#: write NaN beyond max, which the operator does in one pass).
_COMPILED_OP = {
    "FLOAT8E4M3FN": ["castlike.native_cast"],
    "INT4": ["castlike.native_cast"],
    "FLOAT8E8M0": ["castlike.native_cast"],
    "BFLOAT16": ["castlike.native_cast"],
    "INT8": ["castlike.native_cast"],
    "BOOL": ["castlike.native_cast"],
}


_DEFAULTS = (True, "up", None, "spec", "raise", False)


def test_compiled_native_casts_are_decided_outside_the_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under torch.compile, a CPU cast that the full path would send to castlike::native_cast
    is decided once per (dtype, to, options) outside the trace (a constant to Dynamo, so the
    compiled function guards on none of castlike's module state): the operator's arguments
    are the plan's.  Everything else declines to the full path, which traces as before."""
    from castlike.backends import torch as backend

    signature = backend._compiled_signature
    assert signature(torch.float32, "FLOAT16", _DEFAULTS) == (
        OnnxType.FLOAT, OnnxType.FLOAT16, True, "up", "spec", False
    )  # fmt: skip
    # The options as the kernel sees them: effective for the target, the FNUZ rule of opset 19.
    fnuz = (True, "up", 19, "legacy", "raise", False)
    assert signature(torch.float16, "FLOAT8E4M3FNUZ", fnuz) == (
        OnnxType.FLOAT16, OnnxType.FLOAT8E4M3FNUZ, True, "up", "legacy", True
    )  # fmt: skip
    assert (
        signature(torch.float16, "FLOAT8E4M3FNUZ", (True, "up", 24, "legacy", "raise", False))[-1]
        is False
    )
    assert signature(torch.float32, torch.bfloat16, _DEFAULTS)[1] == OnnxType.BFLOAT16
    # A clamp and the conversion (FLOAT8E4M3FN with saturation): the operator, whether or not
    # Inductor converts to float8 in vectors.
    for vectors in (True, False):
        monkeypatch.setattr(backend, "_INDUCTOR_FLOAT8_IN_VECTORS", vectors)
        assert signature(torch.float32, "FLOAT8E4M3FN", _DEFAULTS)[1] == OnnxType.FLOAT8E4M3FN
    # A saturating truncation and a comparison: the operator (Inductor's loops measured slower).
    assert signature(torch.float32, "INT8", _DEFAULTS)[1] == OnnxType.INT8
    assert signature(torch.float32, "BOOL", _DEFAULTS)[1] == OnnxType.BOOL
    assert signature(torch.float32, "STRING", _DEFAULTS) is None
    assert signature(torch.float32, "INT4", (*_DEFAULTS[:5], True)) is None  # packed
    for bad in [(1, "up", None, "spec", "raise", False), (*_DEFAULTS[:3], "nope", "raise", False)]:
        assert signature(torch.float32, "FLOAT16", bad) is None  # the full path raises
    assert signature(torch.float32, "FLOAT9", _DEFAULTS) is None


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
def test_a_first_compiled_cast_leaves_the_frontend_caches_to_the_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As in a fresh process, the frontend's per-type caches are empty when Dynamo traces.  The
    decision outside the trace must not fill them: an entry added while Dynamo traces a
    function that reads them too broke the guards it builds on them (a dtype target beside a
    cast_like, found by running test_torch's compiled cast_like test alone)."""
    from castlike import _frontend

    monkeypatch.setattr(_frontend, "_ARRAY_TYPES", {})
    monkeypatch.setattr(_frontend, "_NAMESPACES", {})
    x = torch.linspace(-3, 3, 11)
    like = torch.zeros(2, dtype=torch.bfloat16)

    def casts(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # Two native casts with different options in one graph, beside the full path's.
        return (
            castlike.cast(a, torch.float16),
            castlike.cast_like(a, b),
            castlike.cast(a, "FLOAT8E4M3FN"),
            castlike.cast(a.double() * 1e3, "FLOAT8E4M3FN", saturate=False),
        )

    torch.compiler.reset()
    got = torch.compile(casts, fullgraph=True)(x, like)
    for compiled, eager in zip(got, casts(x, like), strict=True):
        assert compiled.dtype == eager.dtype
        assert torch.equal(compiled.view(torch.uint8), eager.view(torch.uint8))


def test_a_torch_dtype_is_asked_of_torch_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ONNX type of a torch dtype (a ``cast_like`` target, a dtype ``to``) comes from the
    torch adapter only, loading no other: with JAX or Dask imported but never used with
    castlike, loading their adapters inside a compiled function is an import, which Dynamo
    cannot trace (``fullgraph=True`` failed on ``cast_like`` so)."""
    from castlike import backends

    asked: list[str] = []
    real = backends.adapter_named

    def recorded(name: str) -> Any:
        asked.append(name)
        return real(name)

    monkeypatch.setattr(backends, "adapter_named", recorded)
    for dtype in (torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.int8, torch.bool):
        assert backends.packed_type_of_dtype(dtype) is None
        assert backends.onnx_type_of_dtype(dtype) is not None
    packed = getattr(torch, "float4_e2m1fn_x2", None)
    if packed is not None:
        assert backends.packed_type_of_dtype(packed) is OnnxType.FLOAT4E2M1
    assert set(asked) == {"torch"}


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
@pytest.mark.parametrize(
    ("source", "target", "options"),
    [
        ("FLOAT", "FLOAT16", {}),
        ("DOUBLE", "FLOAT8E4M3FN", {"saturate": False}),
        ("FLOAT16", "FLOAT8E4M3FNUZ", {"opset": 19, "saturate": False}),
        ("BFLOAT16", "FLOAT8E8M0", {"round_mode": "nearest"}),
        ("FLOAT8E4M3FN", "FLOAT", {}),
        ("FLOAT", "INT4", {"profile": "legacy"}),
    ],
)
def test_compiled_native_casts_equal_eager(
    source: str, target: str, options: dict[str, Any]
) -> None:
    x = TORCH.from_numpy(_inputs(source))
    torch.compiler.reset()
    f = torch.compile(lambda a: castlike.cast(a, target, **options), fullgraph=True)
    got, want = f(x), castlike.cast(x, target, **options)
    assert got.dtype == want.dtype
    assert TORCH.to_numpy(got).tobytes() == TORCH.to_numpy(want).tobytes()


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("target", list(_COMPILED_OP))
def test_compiled_cast_is_one_op_and_does_not_recompile(target: str) -> None:
    from torch._dynamo.utils import counters

    # The graph Dynamo hands to the compiler: the cast is one operation (views aside).
    graphs: list[Any] = []

    def record(gm: Any, example_inputs: Any) -> Any:
        graphs.append(gm.graph)
        return gm.forward

    torch.compiler.reset()
    x = torch.linspace(-500, 500, 4097, dtype=torch.float32)
    torch.compile(lambda a: castlike.cast(a, target), fullgraph=True, backend=record)(x)
    views = {"detach", "castlike.bytes_as"}
    ops = [
        n.target.__name__ if str(n.target).startswith("<built-in") else str(n.target)
        for graph in graphs
        for n in graph.nodes
        if n.op in ("call_function", "call_method") and str(n.target) not in views
    ]
    assert ops == _COMPILED_OP[target]

    torch.compiler.reset()
    counters.clear()
    f = torch.compile(lambda a: castlike.cast(a, target), fullgraph=True)
    first = f(x)
    # The first call fills castlike's per-type caches (plain dicts Dynamo guards on), so the
    # second compiles once more; from then on the graph is reused.
    f(x)
    graphs = counters["stats"]["unique_graphs"]
    for _ in range(5):
        again = f(x)
    assert counters["stats"]["unique_graphs"] == graphs
    t = TYPES[OnnxType[target]]
    eager = castlike.cast(x, target)
    numpy_bits = adapter_named("numpy").bits
    for got in (first, again):
        assert got.dtype == eager.dtype
        assert np.array_equal(
            numpy_bits(TORCH.to_numpy(got), t), numpy_bits(TORCH.to_numpy(eager), t)
        )


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("scalar_code", [False, True], ids=["vector", "scalar"])
@pytest.mark.parametrize("flush_to_zero", [False, True], ids=["ieee", "ftz"])
@pytest.mark.parametrize(
    ("source", "target"), [("FLOAT16", "FLOAT"), ("BFLOAT16", "FLOAT"), ("FLOAT16", "DOUBLE")]
)
def test_compiled_half_widening_is_one_fused_loop(
    source: str, target: str, flush_to_zero: bool, scalar_code: bool
) -> None:
    """A compiled CPU cast of a half into FLOAT (of FLOAT16 into DOUBLE) is torch's ``to``
    with its NaNs made quiet, which Inductor fuses with the ops around it into one loop; on
    every half pattern it gives the native kernel's bits, in Inductor's vector code and in its
    scalar code, with the caller's flush-to-zero (and denormals-are-zero) set or not."""
    from torch._inductor import config as inductor_config
    from torch._inductor.utils import run_and_get_code

    from castlike.backends import torch as backend

    dtype = TORCH.library_dtype(TYPES[OnnxType[target]])
    bits = torch.int32 if target == "FLOAT" else torch.int64
    signature = backend._compiled_signature(getattr(torch, source.lower()), target, _DEFAULTS)
    assert signature == (dtype, True)
    host = exhaustive_inputs(TYPES[OnnxType[source]])
    x = TORCH.from_numpy(host)
    eager = castlike.cast(x, target).view(bits)  # the native kernel's bits
    # An op after it that flush-to-zero leaves alone (it clears the sign bit).
    magnitude = castlike.cast(x, target).abs().view(bits)
    torch.compiler.reset()
    torch.set_flush_denormal(flush_to_zero)
    try:
        with inductor_config.patch({"cpp.simdlen": 1 if scalar_code else None}):
            got, codes = run_and_get_code(
                torch.compile(lambda a: castlike.cast(a, target), fullgraph=True), x
            )
            fused, fused_codes = run_and_get_code(
                torch.compile(lambda a: castlike.cast(a, target).abs(), fullgraph=True), x
            )
    finally:
        torch.set_flush_denormal(False)
    assert got.dtype == dtype
    assert torch.equal(got.view(bits), eager)
    assert torch.equal(fused.view(bits), magnitude)
    assert "native_cast" not in codes[0] and ("Vectorized" in codes[0]) is not scalar_code
    # The cast and abs: one loop (Inductor's C++ kernels are its extern "C" functions).
    assert fused_codes[0].count('extern "C"') == 1


#: Integer sources whose compiled CPU cast is torch's plain ``.to`` (no value rounds),
#: with a target of each kind: a float that holds them all, a wider and a narrower integer.
_EXACT_TO = [
    ("INT8", "FLOAT16"),
    ("UINT8", "FLOAT"),
    ("INT16", "DOUBLE"),
    ("INT32", "DOUBLE"),
    ("INT8", "INT64"),
    ("INT64", "INT32"),
    ("INT32", "UINT8"),
]


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.parametrize(("source", "target"), _EXACT_TO)
def test_compiled_exact_integer_casts_are_one_fused_loop(source: str, target: str) -> None:
    """A compiled CPU cast of an integer into a type that holds its value (or into an integer
    kept to its low bits) is torch's ``.to``, which Inductor fuses with the op after it: the
    native kernel's bits on every pattern of the 8- and 16-bit sources, and on random and edge
    values of the wider ones."""
    from torch._inductor.utils import run_and_get_code

    from castlike.backends import torch as backend

    t = TYPES[OnnxType[target]]
    dtype = TORCH.library_dtype(t)
    signature = backend._compiled_signature(getattr(torch, source.lower()), target, _DEFAULTS)
    assert signature == (dtype, False)
    s = TYPES[OnnxType[source]]
    if s.bits <= 16:
        host = exhaustive_inputs(s)
    else:
        host = np.concatenate([curated_inputs(s), random_inputs(s, 1 << 16, seed=5)])
    x = TORCH.from_numpy(host)
    eager = castlike.cast(x, target)  # the native kernel
    assert eager.dtype == dtype
    twice = castlike.cast(x, target) * 2 if t.is_float else castlike.cast(x, target) ^ 1
    torch.compiler.reset()
    got, codes = run_and_get_code(
        torch.compile(lambda a: castlike.cast(a, target), fullgraph=True), x
    )
    then = (lambda y: y * 2) if t.is_float else (lambda y: y ^ 1)
    fused, fused_codes = run_and_get_code(
        torch.compile(lambda a: then(castlike.cast(a, target)), fullgraph=True), x
    )
    numpy_bits = adapter_named("numpy").bits
    for result, expected in ((got, eager), (fused, twice)):
        assert result.dtype == dtype
        assert np.array_equal(
            numpy_bits(TORCH.to_numpy(result), t), numpy_bits(TORCH.to_numpy(expected), t)
        )
    assert "native_cast" not in codes[0]
    assert fused_codes[0].count('extern "C"') == 1


def test_rounding_and_unsigned_integer_casts_keep_the_operator() -> None:
    """Integer casts that round (INT32 -> FLOAT, INT16 -> FLOAT16) keep the native operator
    under torch.compile (Inductor's conversion would round as the caller's floating-point
    environment says), and so do torch's uint16/32/64 (few operations there) and BOOL (whose
    bytes other than 0 and 1 the operator reads as True)."""
    from castlike.backends import torch as backend

    for dtype, target in [
        (torch.int32, "FLOAT"),
        (torch.int64, "FLOAT"),
        (torch.int16, "FLOAT16"),
        (torch.uint32, "INT64"),
        (torch.int32, "UINT16"),
        (torch.bool, "FLOAT"),
        (torch.bool, "INT32"),
    ]:
        signature = backend._compiled_signature(dtype, target, _DEFAULTS)
        assert signature is not None and len(signature) == 6, (dtype, target)


# -- the repeat-call path ----------------------------------------------------------------------


def _tensor_keys() -> list[tuple[Any, ...]]:
    from castlike import _fastpath

    return [key for key in _fastpath._CASTS if isinstance(key[0], tuple)]


@pytest.fixture
def _forget_repeats() -> Any:
    from castlike import _fastpath

    _fastpath.clear()
    yield
    _fastpath.clear()


@pytest.mark.usefixtures("_forget_repeats")
def test_repeat_calls_on_cpu_tensors_run_the_remembered_kernel() -> None:
    x = torch.linspace(-500, 500, 1001, dtype=torch.float32)
    first = castlike.cast(x, "FLOAT8E4M3FN", saturate=False)
    assert len(_tensor_keys()) == 1
    again = castlike.cast(x, "FLOAT8E4M3FN", saturate=False)
    assert again is not first and again.dtype == first.dtype
    assert torch.equal(again.view(torch.uint8), first.view(torch.uint8))
    again.view(torch.uint8).zero_()  # a new tensor each call
    third = castlike.cast(x, "FLOAT8E4M3FN", saturate=False)
    assert torch.equal(third.view(torch.uint8), first.view(torch.uint8))
    # Another layout of the same dtype takes the remembered kernel and keeps its layout.
    y = torch.randn(2, 3, 4, 5).mul(100).to(memory_format=torch.channels_last)
    out = castlike.cast(y, "FLOAT8E4M3FN", saturate=False)
    assert out.stride() == y.stride()
    expected = castlike.cast(y.contiguous(), "FLOAT8E4M3FN", saturate=False)
    assert torch.equal(out.contiguous().view(torch.uint8), expected.view(torch.uint8))
    assert len(_tensor_keys()) == 1


@pytest.mark.usefixtures("_forget_repeats")
def test_a_torch_dtype_target_takes_the_repeat_path() -> None:
    """``cast(x, torch.float8_e5m2)`` is remembered as ``cast(x, "FLOAT8E5M2")`` is (each
    under its own key), and a packed dtype's remembered run still packs."""
    x = torch.linspace(-60000, 60000, 999, dtype=torch.float32)
    by_name = castlike.cast(x, "FLOAT8E5M2")
    for _ in range(2):
        by_dtype = castlike.cast(x, torch.float8_e5m2)
        assert torch.equal(by_dtype.view(torch.uint8), by_name.view(torch.uint8))
    assert len(_tensor_keys()) == 2
    if hasattr(torch, "float4_e2m1fn_x2"):
        row = torch.tensor([[0.5, -6.0, 1.0]], dtype=torch.float32)
        packed = [castlike.cast(row, torch.float4_e2m1fn_x2) for _ in range(2)]
        assert packed[0].dtype == packed[1].dtype == torch.float4_e2m1fn_x2
        assert packed[0].shape == packed[1].shape == (1, 2)
        assert torch.equal(packed[0].view(torch.uint8), packed[1].view(torch.uint8))
        assert len(_tensor_keys()) == 3
        # CastLike with a packed like: its own key, the same packed result every call.
        like = torch.zeros(1, 1, dtype=torch.float4_e2m1fn_x2)
        liked = [castlike.cast_like(row, like) for _ in range(2)]
        assert len(_tensor_keys()) == 4
        for result in liked:
            assert result.dtype == torch.float4_e2m1fn_x2
            assert torch.equal(result.view(torch.uint8), packed[0].view(torch.uint8))


@pytest.mark.usefixtures("_forget_repeats")
def test_the_repeat_path_declines_what_its_kernel_run_does_not_cover(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from castlike.backends import _torch_compile

    x = torch.tensor([1.5, 300.0, -2.25, float("nan")])
    expected = castlike.cast(x, "INT8")  # remembered
    assert len(_tensor_keys()) == 1
    # An expanded tensor: cast on its distinct elements by the full path.
    wide = x[:1].expand(4096)
    assert castlike.cast(wide, "INT8").tolist() == [1] * 4096
    # A tensor that requires grad: the result never does.
    grad = x.clone().requires_grad_(True)
    result = castlike.cast(grad, "INT8")
    assert not result.requires_grad and torch.equal(result, expected)
    # The kernels switched off after the cast was remembered: the torch-op path.
    with monkeypatch.context() as m:
        m.setenv("CASTLIKE_TORCH_NATIVE", "0")

        def no_kernel(*args: Any) -> Any:
            raise AssertionError("the native kernel ran with CASTLIKE_TORCH_NATIVE=0")

        m.setattr(_torch_compile, "run_native", no_kernel)
        assert torch.equal(castlike.cast(x, "INT8"), expected)
    # A tensor on another device (meta here): the kernels run on host memory, never remembered.
    meta = castlike.cast(torch.empty(4, device="meta"), "INT8")
    assert meta.device.type == "meta" and meta.dtype == torch.int8
    assert castlike.cast(torch.empty(4, device="meta"), "INT8").device.type == "meta"
    # A subclass (a Parameter) takes the full path and is not remembered under its own type.
    param = torch.nn.Parameter(x.clone())
    assert torch.equal(castlike.cast(param, "INT8"), expected)
    assert len(_tensor_keys()) == 1


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.usefixtures("_forget_repeats")
def test_a_compiled_cast_neither_reads_nor_fills_the_repeat_path() -> None:
    x = torch.linspace(-500, 500, 257, dtype=torch.float32)
    torch.compiler.reset()
    f = torch.compile(lambda a: castlike.cast(a, "FLOAT8E5M2"), fullgraph=True)
    compiled_bits = f(x).view(torch.uint8)
    f(x)
    assert _tensor_keys() == []
    eager = castlike.cast(x, "FLOAT8E5M2")  # remembered now
    assert len(_tensor_keys()) == 1
    assert torch.equal(f(x).view(torch.uint8), compiled_bits)
    assert torch.equal(eager.view(torch.uint8), compiled_bits)


def test_the_switch_follows_every_write_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``CASTLIKE_TORCH_NATIVE`` is read on every cast, by a lookup in ``os.environ``'s own
    storage: setting, changing and deleting it, and replacing ``os.environ`` itself, each take
    effect on the next cast."""
    import os

    from castlike.backends import _torch_compile

    monkeypatch.delenv("CASTLIKE_TORCH_NATIVE", raising=False)
    assert _torch_compile.native_enabled()
    monkeypatch.setenv("CASTLIKE_TORCH_NATIVE", "0")
    assert not _torch_compile.native_enabled()
    monkeypatch.setenv("CASTLIKE_TORCH_NATIVE", "1")
    assert _torch_compile.native_enabled()
    os.environ["CASTLIKE_TORCH_NATIVE"] = "0"
    assert not _torch_compile.native_enabled()
    os.environ.pop("CASTLIKE_TORCH_NATIVE")
    assert _torch_compile.native_enabled()
    monkeypatch.setattr(os, "environ", {"CASTLIKE_TORCH_NATIVE": "0"})
    assert not _torch_compile.native_enabled()
    monkeypatch.setattr(os, "environ", {})
    assert _torch_compile.native_enabled()


def _float8_kernel() -> Any:
    from castlike.backends import _torch_compile
    from castlike.spec.rules import Mode

    spec = TYPES[OnnxType.FLOAT]
    kernel = _torch_compile.native_kernel(spec, TYPES[OnnxType.FLOAT8E4M3FN], Mode())
    assert kernel is not None
    return kernel


def _kernel_bits(kernel: Any, x: torch.Tensor) -> bytes:
    out = np.empty(x.numel(), np.uint8)
    kernel(x.contiguous().view(torch.int32).numpy().reshape(-1), out, 1)
    return out.tobytes()


def test_repeat_tensor_casts_a_plain_tensor_in_one_call() -> None:
    """``kernel.repeat_tensor``, the repeat path's one C call for CPU tensors, gives the
    kernel's bits in a new tensor of the dtype asked, on every shape, and on threads."""
    kernel = _float8_kernel()

    def no_fallback(x: Any) -> Any:
        raise AssertionError(f"fell back on {x!r}")

    base = torch.randn(1 << 21).mul(300)
    shapes = [(3, 5, 7), (0,), (4, 0), (), (1 << 21,)]
    for shape in shapes:
        n = int(np.prod(shape))
        x = base[:n].reshape(shape)
        before = castlike.get_num_threads()
        for threads in (1, 2):
            castlike.set_num_threads(threads)
            try:
                got = kernel.repeat_tensor(torch.float8_e4m3fn, no_fallback, x)
            finally:
                castlike.set_num_threads(before)
            assert type(got) is torch.Tensor and got.dtype == torch.float8_e4m3fn
            assert got.shape == x.shape and got.is_contiguous()
            assert got.view(torch.uint8).numpy().tobytes() == _kernel_bits(kernel, x)
    # A view that starts inside its storage (aligned to its elements) is read in place.
    tail = base[3:40]
    got = kernel.repeat_tensor(torch.uint8, no_fallback, tail)
    assert got.numpy().tobytes() == _kernel_bits(kernel, tail)


def test_repeat_tensor_leaves_every_other_input_to_its_fallback() -> None:
    kernel = _float8_kernel()
    plain = torch.randn(2, 3, 4, 5)
    complex_values = torch.randn(8, dtype=torch.complex64)

    class Mode(torch.overrides.TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            return func(*args, **(kwargs or {}))

    others: dict[str, Any] = {
        "a list": [1.0, 2.0],
        "a NumPy array": np.zeros(4, np.float32),
        "a subclass": torch.nn.Parameter(plain.clone()),
        "channels_last": plain.to(memory_format=torch.channels_last),
        "strided": plain.reshape(-1)[::2],
        "expanded": plain.reshape(-1)[:1].expand(16),
        "meta": torch.empty(4, device="meta"),
        "negated (conj().imag)": complex_values.conj().imag,
        "a ZeroTensor": torch._efficientzerotensor(4),
        "misaligned": torch.from_numpy(np.zeros(65, np.uint8)[1:].view(np.float32)),
    }
    for name, x in others.items():
        seen: list[Any] = []

        def fallback(a: Any, seen: list[Any] = seen) -> str:
            seen.append(a)
            return "fell back"

        assert kernel.repeat_tensor(torch.float8_e4m3fn, fallback, x) == "fell back", name
        assert len(seen) == 1 and seen[0] is x, name
    # Under a __torch_function__ mode, which could answer data_ptr() as it likes.
    seen_under_mode: list[Any] = []
    with Mode():
        found = kernel.repeat_tensor(torch.uint8, lambda a: seen_under_mode.append(a) or 1, plain)
    assert found == 1 and seen_under_mode == [plain]


def test_repeat_tensor_refuses_bad_arguments() -> None:
    kernel = _float8_kernel()
    x = torch.zeros(4)
    with pytest.raises(TypeError, match="takes 3 positional arguments"):
        kernel.repeat_tensor(torch.uint8, None)
    with pytest.raises(ValueError, match="dtype does not fit the kernel"):
        kernel.repeat_tensor(torch.float32, None, x)  # 4-byte results for a 1-byte kernel
    with pytest.raises(TypeError):
        kernel.repeat_tensor("not a dtype", None, x)
    assert x.count_nonzero() == 0  # the input is never written


@pytest.mark.usefixtures("_forget_repeats")
@pytest.mark.parametrize("target", ["FLOAT", "FLOAT16", "FLOAT8E4M3FN", "INT8", "STRING"])
def test_lazily_negated_and_zero_tensors_cast_their_values(target: str) -> None:
    """A tensor with the neg bit (``c.conj().imag``) holds its values' negatives in memory,
    and a ZeroTensor holds no memory: the first and the repeated cast read the values."""
    c = torch.tensor([1 + 2j, 3 - 4.5j, -0.25 + 0j], dtype=torch.complex64)
    negated = c.conj().imag
    assert negated.is_neg()
    expected = castlike.cast(negated.resolve_neg(), target)
    zero = torch._efficientzerotensor(3)
    zeros = castlike.cast(torch.zeros(3), target)
    for _ in range(2):  # the full path, then the repeat path
        for x, want in ((negated, expected), (zero, zeros)):
            got = castlike.cast(x, target)
            if target == "STRING":
                assert got.tolist() == want.tolist()
            else:
                assert not got.is_neg() and got.dtype == want.dtype
                assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


def _vm_flags_at(address: int) -> list[str]:
    """The VmFlags (Linux's /proc/self/smaps) of this process's mapping that holds
    ``address``."""
    with open("/proc/self/smaps") as smaps:
        inside = False
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(part, 16) for part in head.split("-"))
                inside = start <= address < end
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


_THP = "/sys/kernel/mm/transparent_hugepage/enabled"
_NEEDS_THP = pytest.mark.skipif(
    not (os.path.exists("/proc/self/smaps") and os.path.exists(_THP)),
    reason="needs Linux with transparent huge pages (/proc/self/smaps and " + _THP + ")",
)


@_NEEDS_THP
@pytest.mark.parametrize(
    "how",
    [
        "repeat",  # the repeat path's one C call (repeat_tensor)
        "first",  # the full path's kernel run (run_on_bits)
        "strided",  # a transposed input: run_on_bits' other branch
        "packed",  # the packing kernel's new rows (run_packing_kernel)
        "unpacked",  # packed FLOAT4E2M1 in, FLOATs out (run_packed)
    ],
)
@pytest.mark.usefixtures("_forget_repeats")
def test_new_outputs_ask_for_huge_pages(how: str) -> None:
    """A torch result that a kernel fills is new memory of torch's allocator, which asks for no
    huge pages: castlike asks, as NumPy does for its own arrays of 4 MiB or more (the first
    touch otherwise faults once per 4 KiB page, most of a large cast's time).  Each result here
    is 40 MiB, which glibc maps anew at every allocation (above its largest threshold for mmap,
    32 MiB): no earlier advice can have marked that memory."""
    elements = 10 << 20
    options: dict[str, Any] = {}
    if how == "packed":
        x, target = torch.ones(8 * elements, dtype=torch.int8), "INT4"  # 40 MiB of nibbles
        options["packed"] = True
    elif how == "unpacked":
        x, target = torch.full((elements // 2,), 0x21, dtype=torch.uint8), "FLOAT"
        x = x.view(torch.float4_e2m1fn_x2)  # read as FLOAT4E2M1, two elements a byte
    else:
        x, target = torch.ones(elements, dtype=torch.float32), "INT32"
        if how == "strided":
            x = x.reshape(1024, -1).t()
    castlike.cast(x[:8], target, **options)  # remembered: the next call repeats it
    if how == "first":
        castlike.testing.clear_caches()
    got = castlike.cast(x, target, **options)
    nbytes = got.numel() * got.element_size()
    assert nbytes == 40 << 20
    assert "hg" in _vm_flags_at(got.data_ptr() + nbytes // 2)


@_NEEDS_THP
def test_advise_huge_pages_asks_for_new_memory_of_4_mib_or_more_only() -> None:
    """The advice is for new memory, as NumPy gives it: 4 MiB or more whose middle page is not
    yet in memory.  Memory in use already (a freed tensor's, that glibc gave out again) faults
    no more, and is left as it is; so are smaller outputs.  A new block whose start an
    allocator wrote (AddressSanitizer fills the first 4 KiB) is still new."""
    module = _native.module()
    assert module is not None

    def flags_after_advice(memory: mmap.mmap) -> list[str]:
        view = np.frombuffer(memory, np.uint8)  # released before the map closes
        module.advise_huge_pages(view)
        return _vm_flags_at(view.ctypes.data + view.size // 2)

    small_size = (4 << 20) - 4096
    with (
        mmap.mmap(-1, 8 << 20) as new,
        mmap.mmap(-1, 8 << 20) as used,
        mmap.mmap(-1, small_size) as small,
        mmap.mmap(-1, 8 << 20) as headed,
    ):
        used.write(b"\1" * len(used))  # every page in memory
        headed.write(b"\1" * 4096)  # an allocator's mark at the start (ASan fills 4 KiB)
        flags = [flags_after_advice(m) for m in (new, used, small, headed)]
    assert "hg" in flags[0]
    assert "hg" not in flags[1]
    assert "hg" not in flags[2]
    assert "hg" in flags[3]


def test_advise_huge_pages_takes_writable_buffers_only() -> None:
    module = _native.module()
    assert module is not None
    module.advise_huge_pages(bytearray(16))  # small: nothing to ask
    module.advise_huge_pages(np.empty(0, np.uint8))
    with pytest.raises(BufferError):
        module.advise_huge_pages(b"read-only")
    with pytest.raises(TypeError):
        module.advise_huge_pages(None)
