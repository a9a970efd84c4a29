"""The JAX backend under its transformations: every case under ``jax.jit`` (the exhaustive 8/16-bit
patterns and the curated wide inputs, against the oracle), ``jax.vmap``, devices and sharding,
the 64-bit refusal without ``jax_enable_x64``, and the XLA quirks castlike corrects.

The same cases run eagerly in ``test_exhaustive.py`` and ``test_curated.py`` (``backend=jax``).
Run with ``JAX_ENABLE_X64=1`` (the jax nox session sets it); without it the 64-bit cases check
the refusal instead, and :func:`test_suite_runs_with_x64` says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed: the JAX backend tests need it")
if os.environ.get("CASTLIKE_TEST_BACKENDS") and "jax" not in os.environ[
    "CASTLIKE_TEST_BACKENDS"
].split(","):
    pytest.skip("CASTLIKE_TEST_BACKENDS does not select jax", allow_module_level=True)

import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
from conftest import Precompute  # noqa: E402

import castlike  # noqa: E402
from castlike.backends import adapter_named  # noqa: E402
from castlike.backends.jax import x64_enabled  # noqa: E402
from castlike.errors import BackendTypeError, CastError  # noqa: E402
from castlike.spec.profiles import resolve_profile  # noqa: E402
from castlike.spec.rules import Mode  # noqa: E402
from castlike.spec.types import Kind, OnnxType, TypeSpec, spec_of  # noqa: E402
from castlike.testing import (  # noqa: E402
    all_modes,
    assert_cast_equal,
    curated_inputs,
    inputs_for,
    mode_id,
    numeric_types,
    oracle_bits,
)

ADAPTER = adapter_named("jax")
MODES = all_modes()
TARGETS = numeric_types()
# FLOAT6 sources cannot exist as JAX arrays (test_exhaustive checks the refusal).
SMALL_SOURCES = [
    t for t in numeric_types() if t.bits <= 16 and ADAPTER.library_dtype(t) is not None
]
WIDE_SOURCES = [t for t in numeric_types() if t.bits > 16]
REPO = Path(__file__).resolve().parent.parent


def _name(t: TypeSpec) -> str:
    return t.name


def _options(mode: Mode) -> dict[str, Any]:
    return {
        "saturate": mode.saturate,
        "round_mode": mode.round_mode.value,
        "profile": mode.profile.value,
    }


@lru_cache(maxsize=4)
def _jitted_all_modes(source: TypeSpec, target: TypeSpec, key: str) -> dict[str, Any]:
    """The cast of ``inputs_for(source, key)`` to ``target`` in every mode, by ONE ``jax.jit``
    program (one compilation per pair, 18 traced casts), keyed by :func:`mode_id`."""
    x = ADAPTER.from_numpy(inputs_for(source, key))

    def every_mode(y: Any) -> dict[str, Any]:
        return {mode_id(m): castlike.cast(y, target.name, **_options(m)) for m in MODES}

    results: dict[str, Any] = jax.jit(every_mode)(x)
    return results


def _check_jitted(source: TypeSpec, target: TypeSpec, mode: Mode, cache: Path, key: str) -> None:
    inputs = inputs_for(source, key)
    if ADAPTER.library_dtype(target) is None:
        # Refused while tracing, never a silent change of type (R10).
        options = _options(mode)
        with pytest.raises(BackendTypeError, match=target.name):
            jax.jit(lambda y: castlike.cast(y, target.name, **options))(ADAPTER.from_numpy(inputs))
        return
    expected = oracle_bits(source, target, mode, inputs, cache_dir=cache, cache_key=key)
    result = _jitted_all_modes(source, target, key)[mode_id(mode)]
    assert isinstance(result, jax.Array)
    assert_cast_equal(
        result,
        expected,
        source,
        target,
        inputs,
        expected_dtype=ADAPTER.library_dtype(target),
        expected_shape=inputs.shape,
    )


# -- every case under jax.jit ------------------------------------------------------------------


@pytest.fixture(scope="module")
def exhaustive_cache(precomputed: Precompute) -> Path:
    return precomputed(SMALL_SOURCES, TARGETS, MODES, "all", start_method="spawn")


@pytest.fixture(scope="module")
def curated_cache(precomputed: Precompute) -> Path:
    return precomputed(WIDE_SOURCES, TARGETS, MODES, "curated", start_method="spawn")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES, ids=mode_id)
@pytest.mark.parametrize("target", TARGETS, ids=_name)
@pytest.mark.parametrize("source", SMALL_SOURCES, ids=_name)
def test_every_pattern_jit(
    source: TypeSpec, target: TypeSpec, mode: Mode, exhaustive_cache: Path
) -> None:
    _check_jitted(source, target, mode, exhaustive_cache, "all")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES, ids=mode_id)
@pytest.mark.parametrize("target", TARGETS, ids=_name)
@pytest.mark.parametrize("source", WIDE_SOURCES, ids=_name)
def test_curated_jit(source: TypeSpec, target: TypeSpec, mode: Mode, curated_cache: Path) -> None:
    if ADAPTER.library_dtype(source) is None:
        with pytest.raises(BackendTypeError, match=source.name):
            ADAPTER.from_numpy(curated_inputs(source))
        return
    _check_jitted(source, target, mode, curated_cache, "curated")


def test_suite_runs_with_x64() -> None:
    """The 64-bit cases above only check the refusal when x64 is off; say so loudly."""
    if not x64_enabled():
        pytest.skip("JAX_ENABLE_X64 is not set: 64-bit cases checked only the refusal")
    assert ADAPTER.library_dtype(spec_of(OnnxType.DOUBLE)) == np.dtype(np.float64)


# -- a worked example ----------------------------------------------------------------------------


def test_done_when_example() -> None:
    out = jax.jit(lambda x: castlike.cast(x, "INT4"))(jnp.array([9.0, 2.5, 3.5, -9.0]))
    assert out.dtype == jnp.int4
    assert np.asarray(out).astype(np.int8).tolist() == [-7, 2, 4, 7]


# -- XLA quirks castlike corrects, one named case each, eagerly and under jit ---------------------

RUNNERS: dict[str, Callable[..., Any]] = {
    "eager": lambda x, to, **kw: castlike.cast(x, to, **kw),
    "jit": lambda x, to, **kw: jax.jit(lambda y: castlike.cast(y, to, **kw))(x),
}


def _bits(x: Any) -> list[int]:
    host = np.asarray(x)
    t = spec_of(castlike.onnx_type(host.dtype))
    return [int(b) for b in adapter_named("numpy").bits(host.reshape(-1), t)]


needs_x64 = pytest.mark.skipif(not x64_enabled(), reason="needs JAX_ENABLE_X64=1 (64-bit types)")

# (id, input numpy array, target, options, expected result bits)
QUIRKS = [
    # XLA:CPU flushes subnormal FLOAT to zero in conversions and comparisons.
    pytest.param(
        np.array([1e-40, -1e-45], np.float32),
        "DOUBLE",
        {},
        [0x37A16C2000000000, 0xB6A0000000000000],
        id="subnormal-FLOAT-to-DOUBLE",
        marks=needs_x64,
    ),
    pytest.param(
        np.array([1e-40, -1e-45, -0.0], np.float32),
        "BOOL",
        {},
        [1, 1, 0],
        id="subnormal-FLOAT-to-BOOL",
    ),
    pytest.param(
        np.array([2.0**-140, -(2.0**-149)], np.float64),
        "FLOAT",
        {},
        [0x00000200, 0x80000001],
        id="DOUBLE-to-subnormal-FLOAT",
        marks=needs_x64,
    ),
    # R6: x < 0 -> NaN, even for a negative subnormal XLA compares as -0 (the legacy profile
    # rounds through FLOAT first and keeps R6's choice for negative inputs).
    pytest.param(
        np.array([-1e-310], np.float64),
        "FLOAT8E8M0",
        {"profile": "legacy"},
        [0xFF],
        id="negative-subnormal-DOUBLE-to-E8M0",
        marks=needs_x64,
    ),
    # JAX rounds DOUBLE -> BFLOAT16 / FLOAT16 twice, through FLOAT.
    pytest.param(
        np.array([1 + 2**-8 + 2**-30], np.float64),
        "BFLOAT16",
        {},
        [0x3F81],
        id="DOUBLE-to-BFLOAT16-once",
        marks=needs_x64,
    ),
    pytest.param(
        np.array([1 + 2**-11 + 2**-40], np.float64),
        "FLOAT16",
        {},
        [0x3C01],
        id="DOUBLE-to-FLOAT16-once",
        marks=needs_x64,
    ),
    # XLA clamps FLOAT -> INT4 where R7 rounds half to even and wraps.
    pytest.param(
        np.array([9.0, 2.5, 3.5, -9.0, np.nan, np.inf], np.float32),
        "INT4",
        {},
        [0x9, 0x2, 0x4, 0x7, 0, 0],
        id="FLOAT-to-INT4-wraps",
    ),
    pytest.param(np.array([-1.0, 5.5], np.float32), "UINT2", {}, [3, 2], id="FLOAT-to-UINT2-wraps"),
    # Saturating R7 and NaN -> 0 (XLA happens to agree here; kept as a regression check).
    pytest.param(
        np.array([300.0, -300.0, np.nan, -2.7], np.float32),
        "INT8",
        {},
        [0x7F, 0x80, 0, 0xFE],
        id="FLOAT-to-INT8-saturates",
    ),
    # XLA maps FLOAT4E2M1 +-6.0 to INT_MAX / INT_MIN.
    pytest.param(
        np.array([6.0, -6.0, 1.5], ml_dtypes.float4_e2m1fn),
        "INT32",
        {},
        [6, 0xFFFFFFFA, 1],
        id="FLOAT4E2M1-to-INT32",
    ),
    # jnp.clip casts its bounds to the source type: a float8 source must not be clipped.
    pytest.param(
        np.array([448.0, -448.0, 1.0], ml_dtypes.float8_e4m3fn),
        "INT16",
        {},
        [448, 0xFE40, 1],
        id="FLOAT8E4M3FN-to-INT16",
    ),
    # Under jit XLA's clip (max/min) drops a NaN's sign; R4 keeps it (0xFF).
    pytest.param(
        np.array([0xFFC00000, 0x7FC00000], np.uint32).view(np.float32),
        "FLOAT8E4M3FN",
        {},
        [0xFF, 0x7F],
        id="negative-NaN-FLOAT-to-FLOAT8E4M3FN",
    ),
    pytest.param(
        np.array([0xFE00, 0x7E00], np.uint16).view(np.float16),
        "FLOAT8E5M2",
        {},
        [0xFE, 0x7E],
        id="negative-NaN-FLOAT16-to-FLOAT8E5M2",
    ),
    pytest.param(
        np.array([2**63 - 1024, 2.0**63, -(2.0**63)], np.float64),
        "INT64",
        {},
        [2**63 - 1024, 2**63 - 1, 2**63],
        id="DOUBLE-to-INT64-edges",
        marks=needs_x64,
    ),
    pytest.param(
        np.array([2**64 - 1, 2**63 + 2**39 + 1], np.uint64),
        "FLOAT8E4M3FN",
        {},
        [0x7E, 0x7E],
        id="UINT64-to-FLOAT8-saturates",
        marks=needs_x64,
    ),
    # Rounding through FLOAT first would make this a tie and round it down.
    pytest.param(
        np.array([2**24 + 2**16 + 1, -(2**24 + 2**16 + 1)], np.int32),
        "BFLOAT16",
        {},
        [0x4B81, 0xCB81],
        id="INT32-to-BFLOAT16-once",
    ),
]


@pytest.mark.parametrize("runner", list(RUNNERS))
@pytest.mark.parametrize(("values", "to", "options", "expected"), QUIRKS)
def test_xla_quirk_corrected(
    runner: str, values: np.ndarray, to: str, options: dict[str, Any], expected: list[int]
) -> None:
    out = RUNNERS[runner](ADAPTER.from_numpy(values), to, **options)
    assert out.dtype == ADAPTER.library_dtype(spec_of(castlike.onnx_type(to)))
    assert _bits(out) == expected


# -- what XLA:GPU does differently, checked on any device ------------------------------------------

#: The canonical NaN XLA:GPU writes in its float conversions (jax 0.11.2, an H200): all ones
#: below the sign, whatever the input NaN's sign and payload.
_CANONICAL_NAN = {16: 0x7FFF, 32: 0x7FFF_FFFF, 64: 0x7FFF_FFFF_FFFF_FFFF}
#: Float sources of 16 bits or fewer into the IEEE types: the pairs whose NaN XLA may write.
NAN_PAIRS = [
    (s, t)
    for s in SMALL_SOURCES
    if s.is_float and s.fmt.has_nan
    for t in TARGETS
    if t.code in (OnnxType.FLOAT16, OnnxType.BFLOAT16, OnnxType.FLOAT, OnnxType.DOUBLE)
    and s != t
    and ADAPTER.library_dtype(t) is not None
]


def _canonicalising_astype(x: Any, t: TypeSpec) -> Any:
    """The adapter's conversion as XLA:GPU does it: every NaN result the canonical NaN."""
    out = x.astype(ADAPTER.library_dtype(t))
    if not t.is_float:
        return out
    canonical = ADAPTER.from_bits(jnp.asarray(_CANONICAL_NAN[t.bits], ADAPTER.uint(t.bits)), t)
    return jnp.where(out != out, canonical, out)


@pytest.mark.parametrize("runner", list(RUNNERS))
@pytest.mark.parametrize(("source", "target"), NAN_PAIRS, ids=lambda t: t.name)
def test_nan_not_taken_from_xla(
    source: TypeSpec, target: TypeSpec, runner: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R3's NaN (sign kept; payload top bits between IEEE types) with a conversion that writes
    the canonical NaN, as XLA:GPU's does: castlike writes the NaN, never takes XLA's."""
    monkeypatch.setattr(ADAPTER, "astype", _canonicalising_astype)
    monkeypatch.setattr("castlike.backends.jax._COMPILED", {})  # traced with the patch
    host = inputs_for(source, "all")
    expected = _bits(castlike.cast(host, target.name))
    nan = [i for i, b in enumerate(_bits(host)) if source.fmt.is_nan_bits(b)]
    assert nan, "every pattern includes the NaNs"
    out = _bits(RUNNERS[runner](ADAPTER.from_numpy(host), target.name))
    assert [out[i] for i in nan] == [expected[i] for i in nan]
    assert out == expected


def test_canonicalising_astype_is_what_xla_gpu_does() -> None:
    """The stand-in above loses what the tests need it to lose (a NaN's sign and payload)."""
    x = ADAPTER.from_numpy(np.array([0xFD, 0x7F], np.uint8).view(ml_dtypes.float8_e5m2))
    assert _bits(_canonicalising_astype(x, spec_of(OnnxType.FLOAT16))) == [0x7FFF, 0x7FFF]


def _input_consumers(jaxpr: Any) -> list[Any]:
    """The equations of ``jaxpr`` (top level) that read its first input."""
    first = jaxpr.jaxpr.invars[0]
    return [e for e in jaxpr.jaxpr.eqns if any(v is first for v in e.invars)]


@pytest.mark.parametrize(
    "target", [t for t in TARGETS if ADAPTER.library_dtype(t) is not None], ids=_name
)
@pytest.mark.parametrize(
    "source", [t for t in SMALL_SOURCES if t.is_integer and t.is_sub_byte], ids=_name
)
@pytest.mark.parametrize("packed", [False, True])
def test_sub_byte_source_widened_first(source: TypeSpec, target: TypeSpec, packed: bool) -> None:
    """An INT2/UINT2/INT4/UINT4 array is only ever converted to int8/uint8, the 2-bit ones
    behind an optimization barrier (XLA:GPU lost the top bit of INT2/UINT2 in its other
    conversions), and the bits of the cast under jit are still the rule's."""
    if packed and not target.is_sub_byte:
        pytest.skip("packed results are for sub-byte targets")
    host = inputs_for(source, "all")
    options = {"packed": True} if packed else {}

    def cast(y: Any) -> Any:
        return castlike.cast(y, target.name, **options)

    jaxpr = jax.make_jaxpr(cast)(ADAPTER.from_numpy(host))
    consumers = _input_consumers(jaxpr)
    assert consumers
    wide = np.dtype(np.int8 if source.kind is Kind.SIGNED else np.uint8)
    for eqn in consumers:
        assert eqn.primitive.name == "convert_element_type", eqn
        assert np.dtype(eqn.params["new_dtype"]) == wide, eqn
        if source.bits == 2:
            # Behind a barrier: under jit XLA folds widen-then-narrow into the direct
            # conversion (measured on XLA:GPU: UINT2 -> uint8 -> UINT4 lost the top bit).
            widened = eqn.outvars[0]
            after = [e for e in jaxpr.jaxpr.eqns if any(v is widened for v in e.invars)]
            assert [e.primitive.name for e in after] == ["optimization_barrier"], after
    out = np.asarray(jax.jit(cast)(ADAPTER.from_numpy(host)))
    expected = np.asarray(cast(host))
    assert out.dtype == expected.dtype
    assert out.view(np.uint8).tolist() == expected.view(np.uint8).tolist()


# -- vmap, jit options, shapes, dtypes ------------------------------------------------------------

VMAP_CASES = [
    ("FLOAT", "INT4", "spec"),
    ("FLOAT", "FLOAT8E4M3FN", "spec"),
    ("FLOAT", "FLOAT16", "spec"),
    ("FLOAT", "FLOAT4E2M1", "reference"),
    ("INT32", "FLOAT8E8M0", "spec"),
    ("DOUBLE", "BFLOAT16", "spec"),
    ("DOUBLE", "FLOAT", "spec"),
    ("INT64", "FLOAT16", "spec"),
    ("UINT64", "FLOAT8E5M2FNUZ", "reference"),
]


@pytest.mark.parametrize(("source_name", "target_name", "profile"), VMAP_CASES)
@pytest.mark.parametrize("wrap", ["vmap", "jit-vmap", "vmap-jit"])
def test_vmap(
    source_name: str, target_name: str, profile: str, wrap: str, curated_cache: Path
) -> None:
    source, target = spec_of(source_name), spec_of(target_name)
    if ADAPTER.library_dtype(source) is None:
        pytest.skip(f"needs JAX_ENABLE_X64=1 for {source_name}")
    inputs = curated_inputs(source)
    n = inputs.size - inputs.size % 8
    batch = inputs[:n].reshape(8, -1)

    def one(row: Any) -> Any:
        return castlike.cast(row, target_name, profile=profile)

    fn = {
        "vmap": jax.vmap(one),
        "jit-vmap": jax.jit(jax.vmap(one)),
        "vmap-jit": jax.vmap(jax.jit(one)),
    }[wrap]
    result = fn(ADAPTER.from_numpy(batch))
    mode = Mode(profile=resolve_profile(profile))
    expected = oracle_bits(
        source, target, mode, inputs, cache_dir=curated_cache, cache_key="curated"
    )
    assert_cast_equal(
        result,
        expected[:n],
        source,
        target,
        batch,
        expected_dtype=ADAPTER.library_dtype(target),
        expected_shape=batch.shape,
    )


def test_jit_with_static_options() -> None:
    cast = jax.jit(castlike.cast, static_argnums=1, static_argnames=("saturate", "round_mode"))
    x = jnp.array([1.0, 1.5, 3.0, 1e-40, 0.0], jnp.float32)
    nearest = cast(x, "FLOAT8E8M0", round_mode="nearest")
    assert _bits(nearest) == [127, 128, 129, 0, 0]
    nosat = cast(x, "FLOAT8E8M0", saturate=False, round_mode="down")
    assert _bits(nosat) == [127, 127, 128, 0xFF, 0xFF]


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (2, 3, 4)])
@pytest.mark.parametrize(("source", "to"), [("FLOAT16", "FLOAT8E4M3FN"), ("FLOAT", "INT4")])
@pytest.mark.parametrize("runner", list(RUNNERS))
def test_shapes(shape: tuple[int, ...], source: str, to: str, runner: str) -> None:
    host = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) * 0.75
    x = ADAPTER.from_numpy(host.astype(ADAPTER.library_dtype(spec_of(source))))
    out = RUNNERS[runner](x, to)
    assert out.shape == shape
    assert isinstance(out, jax.Array)
    reference = castlike.cast(np.asarray(x), to)
    assert _bits(out) == _bits(reference)


@pytest.mark.parametrize("t", [t for t in numeric_types()], ids=_name)
def test_dtype_objects(t: TypeSpec) -> None:
    """A jax.numpy dtype names its ONNX type (R1); casting to it gives that dtype or refuses."""
    dtype = np.dtype(
        {"FLOAT6E2M3": jnp.float6_e2m3fn, "FLOAT6E3M2": jnp.float6_e3m2fn}.get(
            t.name, adapter_named("numpy").library_dtype(t)
        )
    )
    assert castlike.onnx_type(dtype) == t.code
    x = jnp.array([1.0, 2.0], jnp.float32)
    if ADAPTER.library_dtype(t) is None:
        with pytest.raises(BackendTypeError, match=t.name):
            castlike.cast(x, dtype)
        return
    assert castlike.cast(x, dtype).dtype == dtype
    like = ADAPTER.from_numpy(np.zeros(1, dtype))
    assert castlike.cast_like(x, like).dtype == dtype
    assert castlike.onnx_type(like) == t.code


def test_float6_refused_with_advice() -> None:
    x = jnp.array([1.0, 2.0], jnp.float32)
    for name in ("FLOAT6E2M3", "FLOAT6E3M2"):
        with pytest.raises(BackendTypeError, match=f"cannot hold {name}.*NumPy"):
            castlike.cast(x, name)
        with pytest.raises(BackendTypeError, match=name):
            ADAPTER.from_numpy(np.zeros(2, adapter_named("numpy").library_dtype(spec_of(name))))


def test_input_not_modified() -> None:
    host = np.array([1.5, -2.5, 1e-40, np.nan, 1e10], np.float32)
    x = ADAPTER.from_numpy(host)
    for to in ("INT4", "FLOAT8E4M3FN", "FLOAT16", "BOOL", "INT8"):
        castlike.cast(x, to)
        jax.jit(lambda y, to=to: castlike.cast(y, to))(x)
    assert not x.is_deleted()  # never donated
    assert np.asarray(x).view(np.uint32).tolist() == host.view(np.uint32).tolist()


def test_same_type_is_identity() -> None:
    x = jnp.array([1e-40, -0.0, 3.0], jnp.float32)
    out = castlike.cast(x, "FLOAT")
    assert out.dtype == jnp.float32
    assert _bits(out) == _bits(x)


def test_traced_to_string_is_a_clear_error() -> None:
    pytest.importorskip("castlike.strings", reason="castlike.strings (R9) is not written yet")
    with pytest.raises(CastError, match="traced"):
        jax.jit(lambda x: castlike.cast(x, "STRING"))(jnp.array([1.5], jnp.float32))


def test_to_numpy_of_a_tracer_is_a_clear_error() -> None:
    def f(x: Any) -> Any:
        ADAPTER.to_numpy(x)
        return x

    with pytest.raises(BackendTypeError, match="traced"):
        jax.jit(f)(jnp.zeros(2))


# -- devices and sharding --------------------------------------------------------------------------


@pytest.mark.parametrize("to", ["FLOAT8E4M3FN", "INT4", "BFLOAT16", "FLOAT16", "INT8"])
@pytest.mark.parametrize("source", ["FLOAT", "FLOAT16"])
@pytest.mark.parametrize("runner", list(RUNNERS))
def test_device_kept(to: str, source: str, runner: str) -> None:
    device = jax.devices()[-1]
    host = np.linspace(-5, 5, 11).astype(ADAPTER.library_dtype(spec_of(source)))
    x = jax.device_put(host, device)
    out = RUNNERS[runner](x, to)
    assert out.devices() == {device}
    assert out.committed


def _run_python(code: str, env: dict[str, str]) -> str:
    """Run ``code`` in a fresh interpreter (so JAX's flags really take effect); its stdout."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    full_env.update(env)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout


def test_sharding_kept() -> None:
    """On 4 host devices: a sharded input gives a result with the same sharding, bits exact."""
    out = _run_python(
        """
        import jax, jax.numpy as jnp, numpy as np, castlike
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        assert len(jax.devices()) == 4, jax.devices()
        mesh = Mesh(np.array(jax.devices()), ("d",))
        sharding = NamedSharding(mesh, P("d", None))
        host = (np.arange(64 * 6, dtype=np.float32).reshape(64, 6) - 100) * 0.37
        checked = 0
        for source in (np.float32, np.float16, np.float64, np.int64):
            x = jax.device_put(host.astype(source), sharding)
            for to in ("INT4", "FLOAT8E4M3FN", "BFLOAT16", "FLOAT16", "INT8", "BOOL", "DOUBLE",
                       "FLOAT8E8M0"):
                expected = castlike.cast(host.astype(source), to)
                for fn in (castlike.cast, jax.jit(castlike.cast, static_argnums=1)):
                    y = fn(x, to)
                    assert y.sharding.is_equivalent_to(sharding, 2), (source, to, y.sharding)
                    assert np.array_equal(np.asarray(y).view(np.uint8),
                                          expected.view(np.uint8)), (source, to)
                    checked += 1
        print("checked", checked)
        device = jax.devices()[2]
        x = jax.device_put(host, device)
        for to in ("INT4", "FLOAT8E4M3FN", "FLOAT16"):
            for fn in (castlike.cast, jax.jit(castlike.cast, static_argnums=1)):
                assert fn(x, to).devices() == {device}
                assert fn(x.astype(jnp.bfloat16), to).devices() == {device}
        print("device kept")
        # Strings cast like a JAX array come back on like's devices (R9, R10).
        x = jax.device_put(host, sharding)
        same_shape = castlike.cast_like(host.astype(str), x)
        assert same_shape.sharding.is_equivalent_to(sharding, 2)
        other = castlike.cast_like(np.array(["1.5", "-2"]), x)
        assert other.devices() == set(jax.devices()), other.devices()
        assert np.asarray(other).tolist() == [1.5, -2.0]
        print("strings placed")
        """,
        {
            "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
            "JAX_ENABLE_X64": "1",
            # Host devices: on a machine with a GPU, JAX's default backend is the GPU (1 device).
            "JAX_PLATFORMS": "cpu",
        },
    )
    assert "checked 64" in out
    assert "device kept" in out
    assert "strings placed" in out


# -- 64-bit types without jax_enable_x64 ----------------------------------------------------------


def test_x64_off_refuses_64_bit_types(curated_cache: Path) -> None:
    """With x64 off (a fresh interpreter): 64-bit targets and `like`s are a CastError naming the
    flag, eagerly and under jit; every 32-bit source and target still gives the oracle's bits."""
    out = _run_python(
        f"""
        import jax, jax.numpy as jnp, numpy as np, castlike
        from pathlib import Path
        from castlike.errors import BackendTypeError, CastError
        from castlike.backends import adapter_named
        from castlike.spec.rules import Mode, Profile
        from castlike.spec.types import spec_of
        from castlike.testing import assert_cast_equal, curated_inputs, numeric_types, oracle_bits
        assert not jax.config.jax_enable_x64
        x = jnp.array([1.5, -2.5, 1e-40], jnp.float32)
        refused = 0
        for to in ("DOUBLE", "INT64", "UINT64", 11, 7, 13, np.float64, np.int64, np.uint64,
                   jnp.float64, jnp.int64, jnp.uint64, np.dtype("float64")):
            for call in (castlike.cast, castlike.cast_like):
                for fn in (lambda a: call(a, to), jax.jit(lambda a: call(a, to))):
                    try:
                        fn(x)
                    except BackendTypeError as exc:
                        assert isinstance(exc, CastError) and isinstance(exc, TypeError)
                        assert "jax_enable_x64" in str(exc) and "JAX_ENABLE_X64=1" in str(exc), exc
                        refused += 1
                    else:
                        raise AssertionError(f"no error for {{to!r}}")
        try:
            adapter_named("jax").from_numpy(np.zeros(2, np.float64))
        except BackendTypeError:
            refused += 1
        print("refused", refused)
        jax_adapter = adapter_named("jax")
        cache = Path({str(curated_cache)!r})
        compared = 0
        for source in ("FLOAT", "INT32", "UINT32"):
            s = spec_of(source)
            inputs = curated_inputs(s)
            x = jax_adapter.from_numpy(inputs)
            for t in numeric_types():
                if jax_adapter.library_dtype(t) is None:
                    continue
                for profile in (Profile.SPEC, Profile.REFERENCE_ML_DTYPES_0_5,
                                Profile.REFERENCE_ML_DTYPES_0_7):
                    mode = Mode(profile=profile)
                    expected = oracle_bits(s, t, mode, inputs, cache_dir=cache,
                                           cache_key="curated")
                    for fn in (castlike.cast, jax.jit(castlike.cast, static_argnums=1,
                                                      static_argnames="profile")):
                        result = fn(x, t.name, profile=profile.value)
                        assert_cast_equal(result, expected, s, t, inputs,
                                          expected_dtype=jax_adapter.library_dtype(t))
                        compared += 1
        print("compared", compared)
        """,
        {"JAX_ENABLE_X64": "0"},
    )
    assert "refused 53" in out, out
    assert "compared 360" in out, out


def test_castlike_never_imports_jax() -> None:
    out = _run_python(
        """
        import sys, numpy as np, castlike
        castlike.cast(np.array([1.5, 2.5]), "INT4")
        castlike.cast(np.array([1.5, 2.5]), np.float32)
        print("jax" in sys.modules, "castlike.backends.jax" in sys.modules)
        """,
        {},
    )
    assert out.split() == ["False", "False"]
