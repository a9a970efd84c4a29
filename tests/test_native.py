"""The native kernels against the pure-NumPy engine, bit for bit, at every CPU level built.

The exhaustive and curated modules already compare the default path (native where a kernel
exists) with the oracle; here every kernel of every level this CPU runs is compared with the
pure engine on every pattern of the small sources and on curated plus random inputs of the
wide ones, and the properties of the native path are checked: threads, array layouts, a
hostile floating-point environment, the switches, and that a rule changed in the spec reaches
the kernels.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from dataclasses import replace
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

import castlike
from castlike import _native
from castlike._native import routes
from castlike.backends.numpy import ADAPTER as NUMPY
from castlike.backends.numpy import NUMPY_DTYPES
from castlike.spec.rules import PROFILES, Mode, Profile, canonical_mode
from castlike.spec.types import OnnxType, TypeSpec, spec_of
from castlike.testing import (
    all_modes,
    compare_bits,
    curated_inputs,
    exhaustive_inputs,
    fresh_caches,
    memory_layouts,
    mode_id,
    numeric_types,
    random_inputs,
)

LEVELS = _native.available_levels()
pytestmark = pytest.mark.skipif(
    not LEVELS, reason="castlike's native extension is not built (pip install -e . builds it)"
)

TYPES = numeric_types()


def _modes(source: TypeSpec, target: TypeSpec) -> list[Mode]:
    """The distinct modes of a pair, the opset-19 FNUZ rule included."""
    modes = all_modes() + [replace(m, inf_to_fnuz_is_nan=True) for m in all_modes()]
    seen: dict[Mode, None] = {}
    for m in modes:
        seen.setdefault(canonical_mode(m, source, target), None)
    return list(seen)


def _inputs(source: TypeSpec) -> np.ndarray:
    if source.bits <= 16:
        return exhaustive_inputs(source)
    return np.concatenate([curated_inputs(source), random_inputs(source, 1 << 16, seed=7)])


def _cases() -> list[tuple[TypeSpec, TypeSpec, Mode]]:
    return [(s, t, m) for s in TYPES for t in TYPES for m in _modes(s, t)]


def _case_id(case: tuple[TypeSpec, TypeSpec, Mode]) -> str:
    s, t, m = case
    return f"{s.name}-{t.name}-{mode_id(m)}"


@pytest.fixture(scope="module", params=LEVELS)
def level_module(request: pytest.FixtureRequest) -> ModuleType:
    return importlib.import_module(f"castlike._native._{request.param}")


def _pure(x: np.ndarray, source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    plan = SimpleNamespace(source=source, target=target, mode=mode)
    result: np.ndarray = NUMPY.engine().cast_pure(x, plan)
    return result


def _native_cast(kernel: object, x: np.ndarray, target: TypeSpec, threads: int = 1) -> np.ndarray:
    out = np.empty(x.shape, dtype=NUMPY_DTYPES[OnnxType(target.code)])
    kernel(np.ascontiguousarray(x), out, threads)  # type: ignore[operator]
    return out


@pytest.mark.parametrize("case", _cases(), ids=_case_id)
def test_kernel_equals_pure_engine(
    case: tuple[TypeSpec, TypeSpec, Mode], level_module: ModuleType
) -> None:
    source, target, mode = case
    kernel = routes.kernel_for(level_module, source, target, mode)
    if kernel is None:
        pytest.skip("no native kernel for this cast (the pure engine casts it; see the docs)")
    x = _inputs(source)
    expected = NUMPY.bits(_pure(x, source, target, mode), target).astype(np.uint64)
    mismatch = compare_bits(_native_cast(kernel, x, target), expected, source, target, x)
    assert mismatch is None, mismatch.describe(source, target)


def test_every_wide_16_bit_integer_or_bool_source_has_a_kernel() -> None:
    """FLOAT, DOUBLE, FLOAT16, BFLOAT16, integers and BOOL to every numeric target, in the spec
    profile, all take the native path."""
    module = _native.module()
    assert module is not None
    sources = [t for t in TYPES if t.code in _WIDE_OR_16 or t.is_integer or t.name == "BOOL"]
    missing = [
        f"{s.name}->{t.name}"
        for s in sources
        for t in TYPES
        for m in _modes(s, t)
        if m.profile is Profile.SPEC and routes.kernel_for(module, s, t, m) is None
    ]
    assert missing == []


_WIDE_OR_16 = {OnnxType.FLOAT, OnnxType.DOUBLE, OnnxType.FLOAT16, OnnxType.BFLOAT16}

# -- threads, layouts, environment ---------------------------------------------------------------

_THREAD_CASES = [
    ("FLOAT", "FLOAT8E4M3FN"),
    ("FLOAT", "FLOAT16"),
    ("DOUBLE", "BFLOAT16"),
    ("FLOAT", "INT4"),
    ("INT64", "FLOAT8E8M0"),
    ("FLOAT16", "FLOAT"),
]


@pytest.mark.parametrize(("source_name", "target_name"), _THREAD_CASES)
def test_threads_give_the_same_bits(source_name: str, target_name: str) -> None:
    module = _native.module()
    assert module is not None
    source, target = spec_of(source_name), spec_of(target_name)
    kernel = routes.kernel_for(module, source, target, Mode())
    x = random_inputs(source, (1 << 20) + 12345, seed=3)
    one = _native_cast(kernel, x, target, threads=1)
    for threads in (2, 3, 8):
        many = _native_cast(kernel, x, target, threads=threads)
        assert np.array_equal(NUMPY.bits(one, target), NUMPY.bits(many, target))


@pytest.mark.parametrize(("source_name", "target_name"), _THREAD_CASES)
def test_layouts_equal_a_contiguous_copy(source_name: str, target_name: str) -> None:
    source = spec_of(source_name)
    base = np.ascontiguousarray(random_inputs(source, 4096, seed=11))
    for name, x in memory_layouts(base).items():
        before = x.tobytes()
        result = castlike.cast(x, target_name)
        copy = np.array(x, order="C").astype(x.dtype.newbyteorder("="))
        expected = castlike.cast(copy, target_name)
        assert result.shape == x.shape, name
        assert result.tobytes() == expected.tobytes(), name
        assert x.tobytes() == before, f"{name}: the input was modified"


@pytest.mark.parametrize("rounding", [0, 1, 2, 3])
def test_hostile_floating_point_environment(rounding: int) -> None:
    """FTZ/DAZ and every rounding mode set by the caller change no bit."""
    module = _native.module()
    assert module is not None
    cases = [("FLOAT", t) for t in ("FLOAT16", "BFLOAT16", "FLOAT8E4M3FN", "INT4", "INT32")]
    cases += [("DOUBLE", t) for t in ("FLOAT", "FLOAT16", "BFLOAT16", "FLOAT8E5M2")]
    cases += [("INT64", t) for t in ("FLOAT", "DOUBLE", "BFLOAT16", "FLOAT8E8M0")]
    cases += [("UINT64", "FLOAT"), ("INT32", "FLOAT16")]
    expected = {}
    for s, t in cases:
        x = _inputs(spec_of(s))
        expected[s, t] = (x, castlike.cast(x, t).tobytes())
    try:
        saved = module._set_fp_environment(True, rounding)
    except NotImplementedError:
        pytest.skip("no floating-point control word on this architecture")
    try:
        got = {(s, t): castlike.cast(x, t).tobytes() for (s, t), (x, _) in expected.items()}
    finally:
        module._restore_fp_environment(saved)
    for key, (_, bits) in expected.items():
        assert got[key] == bits, key


# -- one source of truth ---------------------------------------------------------------------------


def test_a_rule_changed_in_the_spec_reaches_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Change the FLOAT8E5M2 NaN encoding in the spec profile: the native path follows."""
    module = _native.module()
    assert module is not None
    x = np.array([np.nan, -np.nan, 1.0], dtype=np.float32)
    source, target = spec_of("FLOAT"), spec_of("FLOAT8E5M2")

    def native_bits() -> list[int]:
        kernel = routes.kernel_for(module, source, target, Mode())
        return _native_cast(kernel, x, target).view(np.uint8).tolist()

    assert native_bits() == [0x7E, 0xFE, 0x3C]
    spec_rules = replace(PROFILES[Profile.SPEC], float8e5m2_nan=0x7D)
    with monkeypatch.context() as m, fresh_caches():
        m.setitem(PROFILES, Profile.SPEC, spec_rules)
        assert native_bits() == [0x7D, 0xFD, 0x3C]
    assert native_bits() == [0x7E, 0xFE, 0x3C]


# -- switches --------------------------------------------------------------------------------------


def _info_in_subprocess(**env: str) -> str:
    code = "import castlike._native as n; i = n.info(); print(i['path'], i['level'])"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    return out.stdout.strip()


def test_native_can_be_disabled() -> None:
    assert _info_in_subprocess(CASTLIKE_NATIVE="0") == "pure NumPy None"


def test_baseline_can_be_forced() -> None:
    assert _info_in_subprocess(CASTLIKE_CPU="baseline") == "native baseline"


def test_num_threads_setting() -> None:
    before = _native.get_num_threads()
    try:
        _native.set_num_threads(3)
        assert _native.get_num_threads() == 3
        with pytest.raises(ValueError, match="at least 1"):
            _native.set_num_threads(0)
    finally:
        _native.set_num_threads(before)


def test_info_command_names_the_path(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from castlike.cli import main

    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["path"] == "native"
    assert info["level"] == _native.module().variant  # type: ignore[union-attr]
    assert info["threads"] == castlike.get_num_threads()


@pytest.mark.parametrize("target", ["FLOAT8E4M3FN", "FLOAT16", "INT4", "BFLOAT16", "INT32"])
@pytest.mark.parametrize("dtype", [">f2", ">f4", ">f8", ">u2", ">i8"])
def test_byte_swapped_dask_blocks(dtype: str, target: str) -> None:
    """Dask hands its blocks to the NumPy engine as they are: byte-swapped ones too."""
    da = pytest.importorskip("dask.array", reason="the Dask test needs dask")
    x = np.array([1.0, 500.0, 2.5, 0.1, 7.0, 60000.0]).astype(dtype)
    lazy = castlike.cast(da.from_array(x, chunks=2), target)
    expected = castlike.cast(x.astype(x.dtype.newbyteorder("=")), target)
    assert lazy.compute().tobytes() == expected.tobytes()
