"""Packed layouts: ``cast(..., packed=True)``, ``unpack`` and packed sources, on every backend.

The expected bytes come from a reference written here from the ONNX text (onnx.proto,
``raw_data``): a row's elements as one little-endian integer, element ``i`` at bit ``i *
bits``, written out in ``ceil(n * bits / 8)`` bytes.  Nothing of castlike's packing is used to
compute them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import castlike
from castlike.backends import adapter_named
from castlike.spec.packing import LAYOUTS
from castlike.spec.types import TYPES, OnnxType, TypeSpec
from castlike.testing import random_inputs, to_host

_T = OnnxType
PACKED = [TYPES[t] for t in LAYOUTS]
NUMPY = adapter_named("numpy")


def _name(t: TypeSpec) -> str:
    return t.name


def reference_pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """ONNX's packing of each row of ``codes`` (unsigned element bit patterns)."""
    *lead, n = codes.shape
    length = -(-n * bits // 8)
    rows = codes.reshape(-1, n)
    out = np.zeros((rows.shape[0], length), np.uint8)
    for r, row in enumerate(rows):
        stream = sum(int(c) << (i * bits) for i, c in enumerate(row))
        out[r] = np.frombuffer(stream.to_bytes(length, "little"), np.uint8)
    return out.reshape(*lead, length)


def expected_packed(x: np.ndarray, t: TypeSpec, **options: Any) -> np.ndarray:
    """The packed bytes of the (unpacked, NumPy) cast of ``x`` to ``t``."""
    y = castlike.cast(x, t.name, **options)
    return reference_pack(NUMPY.bits(y, t), t.bits)


def host_bytes(y: Any) -> np.ndarray:
    """A packed result as NumPy bytes (a torch float4_e2m1fn_x2 tensor through its bytes)."""
    if type(y).__module__.startswith("torch") and "float4" in str(y.dtype):
        import torch

        y = y.view(torch.uint8)
    return to_host(y)


def _floats(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """FLOAT values across the sub-byte types' ranges, with ties, NaN, Inf and -0."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    flat = x.reshape(-1)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.25, 2.5, -7.5, 1e9], np.float32)
    flat[: min(flat.size, specials.size)] = specials[: flat.size]
    return x


def _holds_one_per_byte(backend: str, t: TypeSpec) -> bool:
    return adapter_named(backend).library_dtype(t) is not None


def _packs(backend: str) -> bool:
    return backend != "array-api-strict"


# -- the bytes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 9, 17])
@pytest.mark.parametrize("t", PACKED, ids=_name)
def test_packed_rows_are_onnx_bytes(backend: str, t: TypeSpec, n: int) -> None:
    x = _floats((3, n), seed=n)
    adapter = adapter_named(backend)
    if not _packs(backend):
        with pytest.raises(castlike.BackendTypeError, match="cannot compute"):
            castlike.cast(adapter.from_numpy(x), t.name, packed=True)
        return
    y = castlike.cast(adapter.from_numpy(x), t.name, packed=True)
    assert type(y) is type(adapter.from_numpy(x))
    layout = LAYOUTS[_T(t.code)]
    assert tuple(y.shape) == (3, layout.packed_length(n))
    got = host_bytes(y)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, expected_packed(x, t))
    if n % layout.group == 0:  # whole groups: each row equals ONNX's packing of that row
        for r in range(3):
            assert (
                got[r].tobytes()
                == reference_pack(NUMPY.bits(castlike.cast(x[r], t.name), t), t.bits).tobytes()
            )


@pytest.mark.parametrize("t", PACKED, ids=_name)
def test_round_trip(backend: str, t: TypeSpec) -> None:
    """``unpack(cast(x, T, packed=True), T, n) == cast(x, T)``, bit for bit."""
    if not _packs(backend):
        pytest.skip("array-api-strict: the generic backend computes no sub-byte bit patterns")
    adapter = adapter_named(backend)
    for n in (1, 3, 4, 9):
        x = adapter.from_numpy(_floats((2, 3, n), seed=n))
        packed = castlike.cast(x, t.name, packed=True)
        if not _holds_one_per_byte(backend, t):
            with pytest.raises(castlike.BackendTypeError, match=t.name):
                castlike.unpack(packed, t.name, n)
            continue
        back = castlike.unpack(packed, t.name, n)
        want = castlike.cast(x, t.name)
        assert back.dtype == want.dtype and tuple(back.shape) == tuple(want.shape)
        np.testing.assert_array_equal(NUMPY.bits(to_host(back), t), NUMPY.bits(to_host(want), t))


SOURCES = [
    "FLOAT",
    "DOUBLE",
    "FLOAT16",
    "BFLOAT16",
    "INT32",
    "INT64",
    "INT8",
    "UINT8",
    "BOOL",
    "FLOAT8E4M3FN",
    "INT4",
    "FLOAT4E2M1",
]


@pytest.mark.parametrize("source", SOURCES)
def test_every_source(backend: str, source: str) -> None:
    """Every source family into INT4, FLOAT4E2M1, UINT2 and FLOAT6E3M2, packed."""
    s = TYPES[_T[source]]
    adapter = adapter_named(backend)
    if not _packs(backend):
        pytest.skip("array-api-strict: the generic backend computes no sub-byte bit patterns")
    if not _holds_one_per_byte(backend, s):
        pytest.skip(f"{backend} holds no {source} one per byte")
    x_host = random_inputs(s, 7 * 11, seed=3).reshape(7, 11)
    x = adapter.from_numpy(x_host)
    for name in ("INT4", "FLOAT4E2M1", "UINT2", "FLOAT6E3M2"):
        t = TYPES[_T[name]]
        got = host_bytes(castlike.cast(x, name, packed=True))
        np.testing.assert_array_equal(got, expected_packed(x_host, t), err_msg=f"{source}->{name}")


@pytest.mark.parametrize(
    "options",
    [{"profile": "legacy"}, {"profile": "reference"}, {"opset": 25}, {"saturate": False}],
    ids=str,
)
def test_options_apply_as_unpacked(backend: str, options: dict[str, Any]) -> None:
    if not _packs(backend):
        pytest.skip("array-api-strict: the generic backend computes no sub-byte bit patterns")
    adapter = adapter_named(backend)
    wide = "DOUBLE" if _holds_one_per_byte(backend, TYPES[_T.DOUBLE]) else "FLOAT"  # JAX x32
    x_host = np.array([[1e10, -1e10, 7.5, -8.5, np.nan, 2.5, 3.5, 1 + 2**-30]])
    x_host = x_host.astype(np.float64 if wide == "DOUBLE" else np.float32)
    for name in ("INT4", "UINT4", "INT2", "FLOAT4E2M1"):
        t = TYPES[_T[name]]
        got = host_bytes(castlike.cast(adapter.from_numpy(x_host), name, packed=True, **options))
        np.testing.assert_array_equal(got, expected_packed(x_host, t, **options))


@pytest.mark.numpy_session
def test_memory_layouts_and_byte_order() -> None:
    """Non-contiguous, negative-stride, broadcast and big-endian inputs pack as their
    contiguous copies do; the input is not modified."""
    base = _floats((6, 10), seed=7)
    cases = {
        "transposed": base.T,
        "every other column": base[:, ::2],
        "reversed": base[::-1, ::-1],
        "broadcast": np.broadcast_to(base[0], (5, 10)),
        "big-endian": base.astype(">f4"),
        "big-endian double": base.astype(">f8"),
    }
    for label, x in cases.items():
        before = x.copy()
        for name in ("INT4", "FLOAT6E2M3", "UINT2"):
            t = TYPES[_T[name]]
            got = castlike.cast(x, name, packed=True)
            want = expected_packed(np.ascontiguousarray(x.astype(x.dtype.newbyteorder("="))), t)
            np.testing.assert_array_equal(got, want, err_msg=f"{label} -> {name}")
        np.testing.assert_array_equal(x, before)


@pytest.mark.numpy_session
def test_large_rows_on_threads_equal_the_composed_path() -> None:
    """The one-pass packing and unpacking against the unpacked cast's bits packed by the
    reference, on rows long enough for the thread pool, of every layout, with and without
    row padding."""
    from castlike.backends.numpy import NumpyEngine
    from castlike.spec.opsets import Op
    from castlike.spec.plan import resolve

    engine = NUMPY.engine()
    composed = super(NumpyEngine, engine)
    for rows, n in ((300, 1000), (301, 999)):
        x = _floats((rows, n), seed=n)
        for t in PACKED:
            plan = resolve(Op.CAST, TYPES[_T.FLOAT], t)
            got = castlike.cast(x, t.name, packed=True)
            want = composed.cast_packed(x, plan, source_row=None, pack=False)
            np.testing.assert_array_equal(got, reference_pack(NUMPY.bits(want, t), t.bits))
            back_plan = resolve(Op.CAST, t, TYPES[_T.FLOAT])
            unpacked = engine.cast_packed(got, back_plan, source_row=n, pack=False)
            np.testing.assert_array_equal(
                unpacked.view(np.uint32), castlike.cast(want, "FLOAT").view(np.uint32)
            )


@pytest.mark.numpy_session
def test_zero_sized() -> None:
    for shape in ((0,), (3, 0), (0, 5)):
        y = castlike.cast(np.zeros(shape, np.float32), "INT4", packed=True)
        assert y.shape == (*shape[:-1], -(-shape[-1] // 2)) and y.dtype == np.uint8
        assert castlike.unpack(y, "INT4", shape[-1]).shape == shape


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.numpy_session
def test_packed_refusals() -> None:
    x = np.ones((2, 3), np.float32)
    with pytest.raises(castlike.CastValueError, match="takes whole bytes already"):
        castlike.cast(x, "FLOAT8E4M3FN", packed=True)
    with pytest.raises(castlike.CastValueError, match="0-d"):
        castlike.cast(np.float32(1.0), "INT4", packed=True)
    with pytest.raises(castlike.CastValueError, match="0-d"):
        castlike.cast(1.0, "INT4", packed=True)
    with pytest.raises(castlike.CastValueError, match="packed must be True or False"):
        castlike.cast(x, "INT4", packed="yes")
    with pytest.raises(castlike.CastValueError, match="packed must be True or False"):
        castlike.cast_like(x, "INT4", packed=1)
    with pytest.raises(castlike.CastValueError, match="mask has no packed form"):
        castlike.cast(np.ma.masked_array(x), "INT4", packed=True)


@pytest.mark.numpy_session
def test_unpack_refusals() -> None:
    data = np.zeros((2, 2), np.uint8)
    with pytest.raises(castlike.CastValueError, match="not a packed type"):
        castlike.unpack(data, "INT8", 2)
    with pytest.raises(castlike.CastValueError, match="take 3 byte"):
        castlike.unpack(data, "INT4", 5)
    with pytest.raises(castlike.CastValueError, match="an int >= 0"):
        castlike.unpack(data, "INT4", -1)
    with pytest.raises(castlike.CastValueError, match="an int >= 0"):
        castlike.unpack(data, "INT4", 2.0)
    with pytest.raises(castlike.CastTypeError, match="bytes"):
        castlike.unpack(data.astype(np.int16), "INT4", 4)
    with pytest.raises(castlike.CastValueError, match="0-d"):
        castlike.unpack(np.uint8(3), "INT4", 2)
    assert castlike.unpack(data, "INT4", 3).shape == (2, 3)  # the last nibble is not read
    assert castlike.unpack(np.array([[0xF1, 0x0E]], np.uint8), "INT4", 3).tolist() == [[1, -1, -2]]


@pytest.mark.numpy_session
def test_strings_pack() -> None:
    y = castlike.cast(np.array([["1", "-2", "7", "nan"]]), "INT4", packed=True)
    assert y.tolist() == [[0xE1, 0x07]]


# -- Dask --------------------------------------------------------------------------------------


def test_dask_rechunks_a_split_byte() -> None:
    da = pytest.importorskip("dask.array", reason="dask is not installed (castlike[dask])")
    x_host = _floats((4, 23), seed=5)
    for chunks in ((2, 5), (4, 7), (3, 23), (1, 1)):
        x = da.from_array(x_host, chunks=chunks)
        for t in PACKED:
            y = castlike.cast(x, t.name, packed=True)
            assert isinstance(y, da.Array)
            layout = LAYOUTS[_T(t.code)]
            assert all(c % layout.group_bytes == 0 for c in y.chunks[-1][:-1])
            np.testing.assert_array_equal(y.compute(), expected_packed(x_host, t))
            back = castlike.unpack(da.from_array(y.compute(), chunks=(3, 2)), t.name, 23)
            assert isinstance(back, da.Array)
            np.testing.assert_array_equal(
                NUMPY.bits(back.compute(), t), NUMPY.bits(castlike.cast(x_host, t.name), t)
            )
    unknown = da.from_array(x_host, chunks=(2, 5))
    unknown = unknown[unknown[:, 0] != 12345.0]  # unknown chunk sizes along the first axis
    np.testing.assert_array_equal(
        castlike.cast(unknown, "INT4", packed=True).compute(),
        expected_packed(x_host, TYPES[_T.INT4]),
    )
    unknown_last = da.from_array(x_host.reshape(-1), chunks=5)
    unknown_last = unknown_last[unknown_last != 12345.0]  # unknown along the last axis
    with pytest.raises(castlike.CastValueError, match="compute_chunk_sizes"):
        castlike.cast(unknown_last, "INT4", packed=True)


# -- torch ---------------------------------------------------------------------------------------


def test_torch_float4_x2() -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (castlike[torch])")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip(f"torch {torch.__version__} has no float4_e2m1fn_x2")
    x_host = _floats((3, 8), seed=11)
    x = torch.from_numpy(x_host)
    y = castlike.cast(x, "FLOAT4E2M1", packed=True)
    assert y.dtype == torch.float4_e2m1fn_x2 and tuple(y.shape) == (3, 4)
    want = expected_packed(x_host, TYPES[_T.FLOAT4E2M1])
    np.testing.assert_array_equal(y.view(torch.uint8).numpy(), want)
    # The dtype as the target, and an x2 tensor as like, ask for the packed result.
    assert torch.equal(
        castlike.cast(x, torch.float4_e2m1fn_x2).view(torch.uint8), y.view(torch.uint8)
    )
    assert torch.equal(castlike.cast_like(x, y).view(torch.uint8), y.view(torch.uint8))
    # An x2 tensor is a FLOAT4E2M1 source, its last axis twice as long.
    back = castlike.cast(y, "FLOAT")
    assert tuple(back.shape) == (3, 8)
    np.testing.assert_array_equal(
        back.numpy(), castlike.cast(castlike.cast(x_host, "FLOAT4E2M1"), "FLOAT")
    )
    # ... into another packed type, through the kernels.
    repacked = castlike.cast(y, "INT2", packed=True)
    np.testing.assert_array_equal(
        repacked.numpy(),
        expected_packed(castlike.cast(x_host, "FLOAT4E2M1"), TYPES[_T.INT2]),
    )
    with pytest.raises(castlike.BackendTypeError, match="cast it to a number type first"):
        castlike.cast(y, "STRING")
    with pytest.raises(castlike.BackendTypeError, match="FLOAT4E2M1"):
        castlike.unpack(y, "FLOAT4E2M1", 8)
    with pytest.raises(castlike.CastTypeError, match="holds FLOAT4E2M1 packed, not INT4"):
        castlike.unpack(y, "INT4", 8)
    # The torch-op path (no native kernels) gives the same bytes.
    from castlike.backends.torch import TorchEngine

    engine = adapter_named("torch").engine()
    plan = castlike.spec.plan.resolve(
        castlike.spec.opsets.Op.CAST, TYPES[_T.FLOAT], TYPES[_T.FLOAT4E2M1]
    )
    composed = super(TorchEngine, engine).cast_packed(x, plan, source_row=None, pack=True)
    np.testing.assert_array_equal(composed.numpy(), want)


@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_torch_compile() -> None:
    """Under torch.compile(fullgraph=True) the packed casts run as one opaque operator (CPU)
    and give the eager bytes; an x2 source too."""
    torch = pytest.importorskip("torch", reason="torch is not installed (castlike[torch])")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip(f"torch {torch.__version__} has no float4_e2m1fn_x2")
    x = torch.from_numpy(_floats((4, 10), seed=13))
    for name in ("INT4", "FLOAT4E2M1", "FLOAT6E2M3"):
        compiled = torch.compile(
            lambda a, name=name: castlike.cast(a, name, packed=True), fullgraph=True
        )
        got, want = compiled(x), castlike.cast(x, name, packed=True)
        assert got.dtype == want.dtype
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), name
    packed = castlike.cast(x, "FLOAT4E2M1", packed=True)
    unpack_cast = torch.compile(lambda a: castlike.cast(a, "FLOAT"), fullgraph=True)
    assert torch.equal(unpack_cast(packed), castlike.cast(packed, "FLOAT"))


@pytest.mark.numpy_session
def test_repeat_calls_skip_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A packed cast seen before runs its remembered kernel (as unpacked casts do): the same
    bytes without the engine; inputs it declines (0-d, here) still meet the full path."""
    from castlike.backends.numpy import NumpyEngine

    x = _floats((3, 7), seed=2)
    first = castlike.cast(x, "FLOAT4E2M1", packed=True)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the engine ran")

    monkeypatch.setattr(NumpyEngine, "cast_packed", refuse)
    np.testing.assert_array_equal(castlike.cast(x, "FLOAT4E2M1", packed=True), first)
    strided = x[:, ::2]  # the same dtype: the remembered kernel, on a contiguous copy
    np.testing.assert_array_equal(
        castlike.cast(strided, "FLOAT4E2M1", packed=True),
        expected_packed(np.ascontiguousarray(strided), TYPES[_T.FLOAT4E2M1]),
    )
    with pytest.raises(castlike.CastValueError, match="0-d"):
        castlike.cast(np.float32(1.0), "FLOAT4E2M1", packed=True)


def test_torch_repeat_calls_skip_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed (castlike[torch])")
    from castlike.backends.torch import TorchEngine

    x = torch.from_numpy(_floats((3, 7), seed=4))
    first = castlike.cast(x, "INT2", packed=True)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the engine ran")

    monkeypatch.setattr(TorchEngine, "cast_packed", refuse)
    again = castlike.cast(x, "INT2", packed=True)
    assert torch.equal(again, first)
    assert again.data_ptr() != first.data_ptr()
    np.testing.assert_array_equal(again.numpy(), expected_packed(x.numpy(), TYPES[_T.INT2]))


def test_jax_jit() -> None:
    """Under jax.jit the packed cast composes from jnp operations: the same bytes."""
    jax = pytest.importorskip("jax", reason="jax is not installed (castlike[jax])")
    x_host = _floats((3, 9), seed=17)
    for name in ("INT4", "FLOAT4E2M1", "FLOAT6E2M3", "UINT2"):
        compiled = jax.jit(lambda a, name=name: castlike.cast(a, name, packed=True))
        got = np.asarray(compiled(jax.numpy.asarray(x_host)))
        np.testing.assert_array_equal(got, expected_packed(x_host, TYPES[_T[name]]), err_msg=name)
