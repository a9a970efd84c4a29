"""The PyTorch backend beyond the shared exhaustive/curated tests: ``torch.compile`` against the
oracle, devices (meta, CUDA), dtypes, shapes and strides, aliasing, autograd, the types torch
cannot hold, and the torch quirks castlike corrects.

The exhaustive 8/16-bit patterns and the curated wide inputs run eagerly in
``test_exhaustive.py`` and ``test_curated.py`` (``backend=torch``); here representative pairs
of both run under ``torch.compile(fullgraph=True)``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the torch tests need it")
if os.environ.get("CASTLIKE_TEST_BACKENDS") and "torch" not in os.environ[
    "CASTLIKE_TEST_BACKENDS"
].split(","):
    pytest.skip("CASTLIKE_TEST_BACKENDS does not select torch", allow_module_level=True)

import ml_dtypes  # noqa: E402

import castlike  # noqa: E402
from castlike.backends import _torch_compile, adapter_named  # noqa: E402
from castlike.backends import torch as torch_backend  # noqa: E402
from castlike.errors import BackendTypeError, CastError  # noqa: E402
from castlike.spec.opsets import Op  # noqa: E402
from castlike.spec.plan import resolve  # noqa: E402
from castlike.spec.rules import Mode  # noqa: E402
from castlike.spec.types import OnnxType, TypeSpec, spec_of  # noqa: E402
from castlike.testing import (  # noqa: E402
    assert_cast_equal,
    compare_bits,
    inputs_for,
    numeric_types,
    oracle_bits,
)

ADAPTER = adapter_named("torch")
REPO = Path(__file__).resolve().parent.parent
HOLDABLE = [t for t in numeric_types() if ADAPTER.library_dtype(t) is not None]
UNHOLDABLE = [t for t in numeric_types() if ADAPTER.library_dtype(t) is None]


def _ignoring_compile_warnings(test: Any) -> Any:
    """The suite turns warnings into errors; compiled tests ignore exactly the two that
    torch.compile itself raises here, neither about castlike's code:

    * array-api-compat caches its namespace lookups with ``functools.lru_cache``, and Dynamo
      warns that it traces such functions without the cache (harmless: they are pure
      functions of a class);
    * importing Inductor runs ``torch.jit.script_method``, which torch 2.13 deprecates.
    """
    for message in (
        "ignore:Dynamo detected a call to a `functools.lru_cache`",
        "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning",
    ):
        test = pytest.mark.filterwarnings(message)(test)
    return test


def _bits(x: Any) -> np.ndarray:
    t = spec_of(castlike.onnx_type(x.dtype).name)
    return adapter_named("numpy").bits(ADAPTER.to_numpy(x).reshape(-1), t)


def _mode(source: TypeSpec, target: TypeSpec, **options: Any) -> Mode:
    """The mode castlike resolves for these options (the opset decides the FNUZ Inf rule)."""
    return resolve(Op.CAST, source, target, **options).mode


# -- the torch backend's promises -------------------------------------------------------------


@pytest.mark.parametrize(
    ("saturate", "expected"), [(False, [0x7F, 0x7F, 0x7F]), (True, [0x7E, 0x7E, 0x7F])]
)
def test_float8e4m3fn_overflow_inf_nan(saturate: bool, expected: list[int]) -> None:
    x = torch.tensor([1e6, float("inf"), float("nan")])
    y = castlike.cast(x, "FLOAT8E4M3FN", saturate=saturate)
    assert y.dtype == torch.float8_e4m3fn
    assert y.view(torch.uint8).tolist() == expected


@pytest.mark.parametrize("target", UNHOLDABLE, ids=lambda t: t.name)
def test_unholdable_target_names_torch_and_type(target: TypeSpec) -> None:
    with pytest.raises(BackendTypeError) as info:
        castlike.cast(torch.zeros(3), target.name)
    assert isinstance(info.value, CastError)
    assert isinstance(info.value, TypeError)
    message = str(info.value)
    assert "torch" in message
    assert target.name in message
    assert "NumPy" in message  # what to do instead (R10)


def test_unholdable_source_is_refused() -> None:
    host = np.zeros(3, ml_dtypes.float4_e2m1fn)
    with pytest.raises(BackendTypeError, match=r"torch cannot hold FLOAT4E2M1"):
        ADAPTER.from_numpy(host)


def test_cannot_hold_exactly_the_float4_and_float6_types() -> None:
    """Every ONNX type but these three has a torch dtype (torch 2.13); R10 refuses them."""
    assert {OnnxType(t.code) for t in UNHOLDABLE} == {
        OnnxType.FLOAT4E2M1,
        OnnxType.FLOAT6E2M3,
        OnnxType.FLOAT6E3M2,
    }


# -- dtypes, shapes, strides, aliasing -------------------------------------------------------------


@pytest.mark.parametrize("target", HOLDABLE, ids=lambda t: t.name)
def test_torch_dtype_names_the_target(target: TypeSpec) -> None:
    dtype = ADAPTER.library_dtype(target)
    assert castlike.onnx_type(dtype) == OnnxType(target.code)
    y = castlike.cast(torch.tensor([1.5, -2.0, 300.0]), dtype)
    assert y.dtype == dtype
    like = torch.empty(2, dtype=dtype)  # torch.zeros has no kernel for the shell dtypes
    assert castlike.cast_like(torch.tensor([1.0]), like).dtype == dtype


# One pair per path of the torch engine: gather, exact widening, integer, float8 by torch's
# rounding (each repair), class table, bfloat16, IEEE, sub-byte, 64-bit integers.
PATHS = [
    ("FLOAT16", "FLOAT8E4M3FN", {"saturate": False}),
    ("FLOAT8E5M2", "FLOAT", {}),
    ("INT4", "UINT2", {}),
    ("INT16", "INT64", {}),
    ("BOOL", "FLOAT8E8M0", {}),
    ("FLOAT", "FLOAT8E4M3FN", {}),
    ("FLOAT", "FLOAT8E4M3FN", {"saturate": False}),
    ("FLOAT", "FLOAT8E5M2", {}),
    ("FLOAT", "FLOAT8E4M3FNUZ", {"opset": 21}),
    ("FLOAT", "FLOAT8E8M0", {"round_mode": "nearest"}),
    ("FLOAT", "BFLOAT16", {"profile": "legacy"}),
    ("FLOAT", "INT32", {}),
    ("FLOAT", "UINT4", {}),
    ("DOUBLE", "FLOAT16", {}),
    ("DOUBLE", "FLOAT8E8M0", {}),
    ("DOUBLE", "BFLOAT16", {}),
    ("INT64", "FLOAT", {}),
    ("UINT64", "FLOAT8E8M0", {"profile": "reference"}),
    ("UINT32", "BOOL", {}),
]


def _path_id(case: tuple[str, str, dict[str, Any]]) -> str:
    source, target, options = case
    extra = "-".join(f"{k}={v}" for k, v in options.items())
    return f"{source}-{target}" + (f"-{extra}" if extra else "")


def _inputs(source: str) -> np.ndarray:
    t = spec_of(source)
    return inputs_for(t, "all" if t.bits <= 16 else "curated")


@pytest.mark.parametrize("case", PATHS, ids=_path_id)
def test_shapes_and_strides_keep_the_bits(case: tuple[str, str, dict[str, Any]]) -> None:
    """0-d, empty and non-contiguous inputs: same shape out, same bits as the NumPy backend."""
    source, target, options = case
    host = _inputs(source)
    host = np.resize(host, -(-host.size // 48) * 48)  # repeated up to a multiple of 48
    block = ADAPTER.from_numpy(host).reshape(3, 4, -1)
    for x in (block.transpose(0, 2), block[:, ::2, 1:], block[0, 0, 0], block[:0]):
        y = castlike.cast(x, target, **options)
        assert y.shape == x.shape
        assert y.device == x.device
        host_x = ADAPTER.to_numpy(x)
        expected = castlike.cast(host_x, target, **options)
        t = spec_of(target)
        expected_bits = adapter_named("numpy").bits(expected.reshape(-1), t)
        mismatch = compare_bits(y, expected_bits, spec_of(source), t, host_x)
        assert mismatch is None, mismatch.describe(spec_of(source), t)


@pytest.mark.parametrize("case", PATHS, ids=_path_id)
def test_blocked_non_contiguous_tensors_keep_the_bits(
    case: tuple[str, str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The eager engine's blocked path (small blocks here, to keep the test short), on a
    transposed tensor whose size is not a multiple of a block."""
    monkeypatch.setattr(torch_backend.TorchEngine, "BLOCK", 4096)
    monkeypatch.setattr(torch_backend.TorchEngine, "BLOCKED_FROM", 3 * 4096)
    source, target, options = case
    s, t = spec_of(source), spec_of(target)
    count = 2 * (4096 * 5 + 7)
    x = ADAPTER.from_numpy(np.resize(_inputs(source), count)).reshape(2, -1).T
    y = castlike.cast(x, target, **options)
    assert y.shape == x.shape
    host_x = ADAPTER.to_numpy(x)
    expected = castlike.cast(host_x, target, **options)
    mismatch = compare_bits(y, adapter_named("numpy").bits(expected.reshape(-1), t), s, t, host_x)
    assert mismatch is None, mismatch.describe(s, t)


@pytest.mark.parametrize("case", PATHS, ids=_path_id)
def test_input_is_never_modified_nor_aliased(case: tuple[str, str, dict[str, Any]]) -> None:
    source, target, options = case
    x = ADAPTER.from_numpy(_inputs(source))
    before = _bits(x).copy()
    y = castlike.cast(x, target, **options)
    assert np.array_equal(_bits(x), before)
    assert y.data_ptr() != x.data_ptr()


@pytest.mark.parametrize("name", ["FLOAT", "DOUBLE", "INT64", "INT4", "FLOAT8E4M3FN", "BOOL"])
def test_cast_to_own_type_is_a_copy(name: str) -> None:
    x = ADAPTER.from_numpy(_inputs(name)[:64])
    y = castlike.cast(x, name)
    assert y.dtype == x.dtype
    assert y.data_ptr() != x.data_ptr()
    y.view(torch.uint8).zero_()
    assert _bits(x).any()


# -- autograd --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target", ["INT32", "BOOL", "INT4", "FLOAT8E4M3FN", "FLOAT8E8M0", "FLOAT16", "DOUBLE"]
)
def test_result_never_requires_grad(target: str) -> None:
    """Casts round, so they are not differentiable: no grad for any target (docs/torch.rst)."""
    x = torch.linspace(-3.0, 3.0, 7, requires_grad=True)
    y = castlike.cast(x, target)
    assert not y.requires_grad
    assert y.grad_fn is None
    (x * 2).sum().backward()  # the input's own graph is untouched
    assert x.grad is not None
    assert torch.equal(x.grad, torch.full_like(x, 2.0))


# -- devices ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", PATHS, ids=_path_id)
def test_meta_tensors_never_reach_the_host(case: tuple[str, str, dict[str, Any]]) -> None:
    """Every numeric path runs on ``meta`` tensors, which hold no data: a host round trip
    (``.cpu()``, ``.item()``, ``.numpy()``, a Python branch on values) would raise."""
    source, target, options = case
    x = torch.empty(5, 3, dtype=ADAPTER.library_dtype(spec_of(source)), device="meta")
    y = castlike.cast(x, target, **options)
    assert y.device.type == "meta"
    assert y.dtype == ADAPTER.library_dtype(spec_of(target))
    assert y.shape == x.shape


def test_tables_are_moved_once_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the torch-op path (the native kernels off, as on any device but the CPU), a lookup
    table is built on the host and moved to the device once, then reused."""
    monkeypatch.setenv("CASTLIKE_TORCH_NATIVE", "0")
    built = []
    host_table = _torch_compile._host_table

    def counted(*args: Any) -> Any:
        built.append(args)
        return host_table(*args)

    monkeypatch.setattr(_torch_compile, "_host_table", counted)
    _torch_compile.clear_device_tables()
    x = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn)
    first = castlike.cast(x, "FLOAT8E5M2FNUZ")
    assert len(built) == 1, "the first cast builds the table"
    again = castlike.cast(x, "FLOAT8E5M2FNUZ")
    assert len(built) == 1, "a lookup table was built and moved again"
    assert torch.equal(again.view(torch.uint8), first.view(torch.uint8))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("case", PATHS, ids=_path_id)
def test_cuda_matches_the_oracle_on_the_device(
    case: tuple[str, str, dict[str, Any]], oracle_cache: Path
) -> None:
    source, target, options = case
    s, t = spec_of(source), spec_of(target)
    host = _inputs(source)
    x = ADAPTER.from_numpy(host, like=torch.empty(0, device="cuda"))
    y = castlike.cast(x, target, **options)
    assert y.device == x.device
    assert y.dtype == ADAPTER.library_dtype(t)
    key = "all" if s.bits <= 16 else "curated"
    expected = oracle_bits(
        s, t, _mode(s, t, **options), host, cache_dir=oracle_cache, cache_key=key
    )
    assert_cast_equal(y, expected, s, t, host)


# -- torch.compile ---------------------------------------------------------------------------------

#: Compiled groups: one torch.compile per source (compiling is slow), several targets each,
#: on every pattern (8/16-bit sources) or the curated inputs (wide sources).
COMPILED: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "FLOAT16": [
        ("FLOAT8E4M3FN", {"saturate": False}),
        ("FLOAT8E8M0", {"round_mode": "nearest"}),
        ("INT4", {}),
        ("FLOAT", {}),
        ("UINT16", {}),
        ("BFLOAT16", {}),
        ("BFLOAT16", {"profile": "legacy"}),
    ],
    "BFLOAT16": [("FLOAT8E5M2", {}), ("FLOAT16", {}), ("INT8", {}), ("BOOL", {})],
    "FLOAT8E4M3FN": [("FLOAT8E5M2FNUZ", {}), ("BFLOAT16", {}), ("UINT4", {})],
    "INT4": [("FLOAT8E4M3FN", {}), ("INT8", {})],
    "BOOL": [("FLOAT8E8M0", {}), ("FLOAT16", {})],
    "FLOAT": [
        ("FLOAT8E4M3FN", {}),
        ("FLOAT8E4M3FN", {"saturate": False}),
        ("FLOAT8E5M2", {}),
        ("FLOAT8E5M2", {"saturate": False}),
        ("FLOAT8E5M2", {"profile": "legacy"}),
        ("FLOAT8E4M3FNUZ", {}),
        ("FLOAT8E5M2FNUZ", {"saturate": False}),
        ("FLOAT8E4M3FNUZ", {"opset": 21}),
        ("FLOAT8E8M0", {}),
        ("BFLOAT16", {}),
        ("BFLOAT16", {"profile": "legacy"}),
        ("FLOAT16", {}),
        ("DOUBLE", {}),
        ("INT32", {}),
        ("UINT64", {}),
        ("INT4", {}),
        ("INT4", {"profile": "legacy"}),
        ("BOOL", {}),
    ],
    "DOUBLE": [
        ("FLOAT16", {}),
        ("FLOAT", {}),
        ("BFLOAT16", {}),
        ("FLOAT8E4M3FN", {"saturate": False}),
        ("FLOAT8E5M2", {"profile": "reference"}),
        ("FLOAT8E8M0", {"round_mode": "down"}),
        ("INT64", {}),
        ("UINT32", {}),
        ("UINT2", {"profile": "reference"}),
    ],
    "INT64": [
        ("FLOAT", {}),
        ("FLOAT16", {}),
        ("FLOAT8E5M2FNUZ", {}),
        ("DOUBLE", {}),
        ("UINT4", {}),
    ],
    "UINT64": [
        ("FLOAT", {}),
        ("DOUBLE", {}),
        ("FLOAT8E8M0", {"profile": "reference"}),
        ("INT32", {}),
        ("UINT4", {"profile": "legacy"}),
    ],
    "UINT32": [
        ("FLOAT16", {}),
        ("BOOL", {}),
        ("FLOAT8E4M3FN", {}),
        ("INT2", {"profile": "legacy"}),
    ],
    "INT32": [("FLOAT", {}), ("BFLOAT16", {}), ("UINT8", {})],
}


@_ignoring_compile_warnings
@pytest.mark.parametrize("source", list(COMPILED))
def test_compiled_matches_the_oracle_and_eager(source: str, oracle_cache: Path) -> None:
    s = spec_of(source)
    host = _inputs(source)
    cases = COMPILED[source]

    def many(x: Any) -> tuple[Any, ...]:
        return tuple(castlike.cast(x, target, **options) for target, options in cases)

    torch.compiler.reset()
    compiled = torch.compile(many, fullgraph=True)
    x = ADAPTER.from_numpy(host)
    results = compiled(x)
    key = "all" if s.bits <= 16 else "curated"
    for (target, options), result, eager in zip(cases, results, many(x), strict=True):
        t = spec_of(target)
        mode = _mode(s, t, **options)
        expected = oracle_bits(s, t, mode, host, cache_dir=oracle_cache, cache_key=key)
        # Both against the oracle: so compiled and eager agree bit for bit (NaN as NaN for
        # IEEE targets, whose NaN payloads R3 leaves free).
        for how, got in (("compiled", result), ("eager", eager)):
            try:
                assert_cast_equal(
                    got, expected, s, t, host, expected_dtype=ADAPTER.library_dtype(t)
                )
            except AssertionError as exc:
                raise AssertionError(f"{how} {source} -> {target} {options}: {exc}") from None


@_ignoring_compile_warnings
def test_compiled_cast_like_and_dtype_targets() -> None:
    like = torch.zeros(1, dtype=torch.float8_e5m2)

    def f(x: Any) -> tuple[Any, Any, Any]:
        return (
            castlike.cast_like(x, like, saturate=False),
            castlike.cast(x, torch.int4),
            castlike.cast(x, 22),  # INT4 by its code
        )

    torch.compiler.reset()
    x = torch.tensor([1e6, -2.5, float("nan"), 3.5, 0.1])
    got = torch.compile(f, fullgraph=True)(x)
    want = f(x)
    assert [g.dtype for g in got] == [torch.float8_e5m2, torch.int4, torch.int4]
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g.view(torch.uint8), w.view(torch.uint8))


@_ignoring_compile_warnings
def test_compiled_with_dynamic_shapes() -> None:
    def f(x: Any, h: Any, i: Any) -> tuple[Any, ...]:
        return (
            castlike.cast(x, "FLOAT8E4M3FN", saturate=False),
            castlike.cast(x, "FLOAT8E8M0"),
            castlike.cast(h, "INT4"),
            castlike.cast(i, "UINT2"),
            castlike.cast(x.to(torch.float64), "FLOAT16"),
        )

    torch.compiler.reset()
    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    generator = torch.Generator().manual_seed(0)
    for n in (5, 17, 1000):
        x = torch.randn(n, generator=generator) * 300
        args = (x, x.to(torch.float16), (x * 100).to(torch.int64))
        for got, want in zip(compiled(*args), f(*args), strict=True):
            assert got.dtype == want.dtype
            assert np.array_equal(_bits(got), _bits(want))


@pytest.mark.slow
def test_first_cast_inside_compile_in_a_fresh_process() -> None:
    """The torch adapter is imported during tracing when the first cast is compiled, and the
    cast is decided outside the trace as later ones are: one graph for three calls, and no
    warning about array-api-compat's or castlike's ``lru_cache`` lookups (which only the full
    path traces)."""
    code = textwrap.dedent(
        """
        import sys, warnings
        import torch, castlike
        from torch._dynamo.utils import counters
        assert "castlike.backends.torch" not in sys.modules
        f = torch.compile(lambda x: castlike.cast(x, "FLOAT8E4M3FN", saturate=False),
                          fullgraph=True)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(3):
                y = f(torch.tensor([1e6, 1.0, -0.0]))
        print(sum("lru_cache" in str(w.message) for w in seen), counters["stats"]["unique_graphs"])
        print(y.view(torch.uint8).tolist())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-2:] == ["0 1", "[127, 56, 128]"], out.stdout


@pytest.mark.slow
def test_backend_imported_first_compiles_once_without_warnings() -> None:
    """docs/torch.rst's advice: with castlike.backends.torch imported before the first compiled
    cast, Dynamo compiles one graph (no second compile at the next call) and warns about no
    lru_cache (it does not trace array-api-compat's lookups)."""
    code = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("always")
        import torch, castlike
        import castlike.backends.torch
        from torch._dynamo.utils import counters
        f = torch.compile(lambda x: castlike.cast(x, "FLOAT16"))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(3):
                y = f(torch.tensor([1.0, 65520.0, -0.0]))
        print(sum("lru_cache" in str(w.message) for w in seen), counters["stats"]["unique_graphs"])
        print(y.view(torch.uint16).tolist())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-2:] == ["0 1", "[15360, 31744, 32768]"], out.stdout


def test_castlike_does_not_import_torch() -> None:
    code = (
        "import sys, numpy as np, castlike; castlike.cast(np.ones(3), 'FLOAT8E4M3FN'); "
        "castlike.cast(np.ones(3), 'INT4'); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# -- torch quirks castlike corrects ----------------------------------------------------------------


def _cast_bits(values: list[float], dtype: Any, target: str, **options: Any) -> list[int]:
    y = castlike.cast(torch.tensor(values, dtype=dtype), target, **options)
    return [int(b) for b in _bits(y)]


def test_double_to_float16_rounds_once() -> None:
    # torch's .to(float16) goes through FLOAT: 1 + 2**-11 + 2**-40 -> 1 + 2**-11 (a tie) -> 1.0.
    assert _cast_bits([1 + 2**-11 + 2**-40, -(1 + 2**-11 + 2**-40)], torch.float64, "FLOAT16") == [
        0x3C01,
        0xBC01,
    ]


def test_double_to_float8_rounds_once() -> None:
    # The same double rounding through FLOAT would give 1.0 (0x38); the rule gives 1.125.
    assert _cast_bits([1 + 2**-4 + 2**-40], torch.float64, "FLOAT8E4M3FN") == [0x39]


def test_float8e5m2_nan_encoding() -> None:
    # torch writes 0x7F / 0xFF; R4 fixes E5M2's NaN as 0x7E / 0xFE.
    nan = float("nan")
    assert _cast_bits([nan, -nan], torch.float32, "FLOAT8E5M2") == [0x7E, 0xFE]
    assert _cast_bits([nan, -nan], torch.float64, "FLOAT8E5M2") == [0x7E, 0xFE]


def test_fnuz_saturates_where_torch_gives_nan() -> None:
    assert _cast_bits([1e6, -float("inf")], torch.float32, "FLOAT8E4M3FNUZ") == [0x7F, 0xFF]
    # Cast-19..23: Inf -> NaN even with saturate (R2); finite overflow still saturates.
    assert _cast_bits([1e6, -float("inf")], torch.float32, "FLOAT8E4M3FNUZ", opset=21) == [
        0x7F,
        0x80,
    ]


def test_e8m0_follows_r6_not_torch() -> None:
    # torch: nearest-even, |x| (sign ignored), 0 -> 2**-127.  R6: round up, x < 0 -> NaN.
    assert _cast_bits([3.0, -1.0, 0.0, 1.0], torch.float32, "FLOAT8E8M0") == [
        0x81,
        0xFF,
        0x00,
        0x7F,
    ]
    assert _cast_bits([0.0], torch.float32, "FLOAT8E8M0", saturate=False) == [0xFF]


def test_float_to_integer_saturates_and_nan_is_zero() -> None:
    values = [float("nan"), 1e20, -1e20, float("inf"), 2.0**31, -(2.0**31), -2.7]
    assert _cast_bits(values, torch.float32, "INT32") == [
        0,
        0x7FFFFFFF,
        0x80000000,
        0x7FFFFFFF,
        0x7FFFFFFF,
        0x80000000,
        0xFFFFFFFE,
    ]
    assert _cast_bits([2.0**64, 2.0**63, -1.0], torch.float64, "UINT64") == [2**64 - 1, 2**63, 0]


def test_uint64_extremes() -> None:
    x = torch.tensor([2**64 - 1, 2**63 + 2**39 + 1], dtype=torch.uint64)
    assert [int(b) for b in _bits(castlike.cast(x, "FLOAT"))] == [0x5F800000, 0x5F000001]
    assert [int(b) for b in _bits(castlike.cast(x, "FLOAT8E4M3FN"))] == [0x7E, 0x7E]
    assert [int(b) for b in _bits(castlike.cast(x, "INT8"))] == [0xFF, 0x01]


# -- torch's FLOAT -> FLOAT8E4M3FN beyond max, whatever the version --------------------------------


@pytest.mark.parametrize("beyond_max", ["saturates", "writes NaN"])
def test_float8e4m3fn_plans_hold_whatever_torch_writes_beyond_max(
    beyond_max: str, monkeypatch: pytest.MonkeyPatch, oracle_cache: Path
) -> None:
    """torch 2.13 saturates FLOAT -> float8_e4m3fn beyond max and for Inf; torch 2.11 writes
    NaN there (eager, CPU and CUDA, measured on an H200).  Under either conversion, the torch
    op path (its float8 conversion plus the plan's repair) gives the rule in every mode."""
    from castlike.spec.float8_repairs import plan_for
    from castlike.testing import all_modes, curated_inputs

    source, target = spec_of("FLOAT"), spec_of("FLOAT8E4M3FN")
    real = torch_backend.TorchAdapter.astype
    written = 0x7E if beyond_max == "saturates" else 0x7F

    def emulated(self: Any, x: Any, t: TypeSpec) -> Any:
        if t.code != target.code or x.dtype != torch.float32:
            return real(self, x, t)
        # In range, torch's own rounding (both versions agree there); beyond max, as told.
        inside = real(self, x.clamp(-448.0, 448.0), t).view(torch.uint8)
        sign = (x.view(torch.int32) < 0).to(torch.uint8) << 7
        beyond = (x.abs() > 464.0) & ~x.isnan()
        return torch.where(beyond, sign | written, inside).view(torch.float8_e4m3fn)

    monkeypatch.setattr(torch_backend.TorchAdapter, "astype", emulated)
    host = curated_inputs(source)
    x = ADAPTER.from_numpy(host)
    engine = ADAPTER.engine()
    checked = 0
    for mode in all_modes():
        plan = plan_for(ADAPTER.float8_plans, target, mode)
        if plan is None:
            continue
        assert plan.repair != "none", "a plan trusts what torch writes beyond max"
        result = engine.float8_by_library(x, target, plan)
        expected = oracle_bits(
            source, target, mode, host, cache_dir=oracle_cache, cache_key="curated"
        )
        assert_cast_equal(result, expected, source, target, host)
        checked += 1
    assert checked >= 2  # the saturating and the NaN modes at least


class _NoUnsignedAnd(torch.overrides.TorchFunctionMode):
    """``&`` on uint16/32/64 tensors raises, as on CUDA (torch 2.11: "bitwise_and_cuda" not
    implemented for 'UInt16')."""

    ANDS = frozenset(
        {torch.Tensor.__and__, torch.Tensor.__rand__, torch.Tensor.bitwise_and, torch.bitwise_and}
    )

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        wide = (torch.uint16, torch.uint32, torch.uint64)
        if func in self.ANDS and any(getattr(a, "dtype", None) in wide for a in args):
            raise NotImplementedError(f"bitwise_and not implemented for {args[0].dtype}")
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("packed", [False, True], ids=["one per byte", "packed"])
@pytest.mark.parametrize("source", ["UINT16", "UINT32", "UINT64"])
def test_wide_unsigned_into_sub_byte_without_unsigned_and(
    source: str, packed: bool, monkeypatch: pytest.MonkeyPatch, oracle_cache: Path
) -> None:
    """The torch op path (every device but the CPU) keeps the low bits of a uint16/32/64
    without ``&`` on those dtypes, which CUDA lacks."""
    monkeypatch.setenv("CASTLIKE_TORCH_NATIVE", "0")
    s = spec_of(source)
    host = inputs_for(s, "curated")
    x = ADAPTER.from_numpy(host)
    for name in ("UINT4", "INT4", "UINT2", "INT2"):
        t = spec_of(name)
        with _NoUnsignedAnd():
            y = castlike.cast(x, name, packed=packed)
        expected = oracle_bits(s, t, Mode(), host, cache_dir=oracle_cache, cache_key="curated")
        if packed:
            from castlike.spec.packing import layout_of, unpack_rows

            layout = layout_of(t)
            assert layout is not None
            codes = unpack_rows(np, ADAPTER.to_numpy(y), layout, host.size)
            assert np.array_equal(codes.astype(np.uint64), expected), name
        else:
            assert_cast_equal(y, expected, s, t, host)
