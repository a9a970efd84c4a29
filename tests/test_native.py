"""The native kernels against the pure-NumPy engine, bit for bit, at every CPU level built.

The exhaustive and curated modules already compare the default path (native where a kernel
exists) with the oracle; here every kernel of every level this CPU runs is compared with the
pure engine on every pattern of the small sources and on curated plus random inputs of the
wide ones, and the properties of the native path are checked: threads, array layouts, a
hostile floating-point environment, the switches, and that a rule changed in the spec reaches
the kernels.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
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
    kernel_variant,
    kernel_variants,
    memory_layouts,
    mode_id,
    numeric_types,
    random_inputs,
    rounding_inputs,
)

LEVELS = _native.available_levels()
pytestmark = [
    pytest.mark.skipif(
        not LEVELS, reason="castlike's native extension is not built (pip install -e . builds it)"
    ),
    pytest.mark.numpy_session,
]

TYPES = numeric_types()
#: The floats of 8 bits or fewer, and the targets whose kernels have SIMD steps (from FLOAT and
#: DOUBLE).
_SMALL_FLOATS = [t.name for t in TYPES if t.is_float and t.storage_bits == 8]
_SIMD_TARGETS = [*_SMALL_FLOATS, "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32"]
_SIMD_TARGETS += ["INT64", "UINT64", "INT4", "UINT4", "INT2", "UINT2", "BFLOAT16", "FLOAT16"]
# The sources whose kernels run SIMD steps: the floats into every SIMD target, and the 16- and
# 32-bit integers (clamped into FLOAT's exact range in the steps) into the small floats and
# FLOAT16 (and some into BFLOAT16, below).
_STEP_SOURCES = ("FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16")
_STEP_INTEGERS = ("INT16", "UINT16", "INT32", "UINT32")
_STEP_CASES = [(s, t) for s in _STEP_SOURCES for t in _SIMD_TARGETS]
_STEP_CASES += [(s, t) for s in _STEP_INTEGERS for t in _SMALL_FLOATS]
# The integers of 8 to 32 bits into FLOAT16 (clamped, exact in FLOAT), and those of 8 and 16
# bits into BFLOAT16, run the halves' own steps on them.
_STEP_CASES += [(s, "FLOAT16") for s in ("INT8", "UINT8", *_STEP_INTEGERS)]
_STEP_CASES += [(s, "BFLOAT16") for s in ("INT8", "UINT8", "INT16", "UINT16")]
# The wider integers into BFLOAT16 (and the 64-bit ones into FLOAT16): blocks of DOUBLE or
# FLOAT bits through those sources' steps.
_STEP_CASES += [(s, "BFLOAT16") for s in ("INT32", "UINT32", "INT64", "UINT64")]
_STEP_CASES += [(s, "FLOAT16") for s in ("INT64", "UINT64")]


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


@pytest.fixture(scope="module", params=kernel_variants())
def level_module(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    """Each level's module, and the AVX-512 one with its AVX512-BF16 steps off where this CPU
    has them (for the whole worker process while its tests run: any cast made meanwhile gives
    the same bits by the integer steps)."""
    with kernel_variant(request.param) as module:
        yield module


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
    ("FLOAT", "FLOAT8E8M0"),
    ("DOUBLE", "FLOAT8E5M2FNUZ"),
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
    cases = [("FLOAT", t) for t in ("FLOAT16", "BFLOAT16", "INT4", "INT32", *_SMALL_FLOATS)]
    cases += [("DOUBLE", t) for t in ("FLOAT", "FLOAT16", "BFLOAT16", *_SMALL_FLOATS)]
    cases += [("INT64", t) for t in ("FLOAT", "DOUBLE", "BFLOAT16", "FLOAT8E8M0")]
    cases += [("UINT64", "FLOAT"), ("INT32", "FLOAT16"), ("UINT32", "BFLOAT16")]
    cases += [("INT64", "FLOAT16")]
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


@pytest.mark.parametrize("rounding", [0, 1, 2, 3])
def test_hostile_environment_at_every_level(rounding: int, level_module: ModuleType) -> None:
    """The SIMD kernels of every level (the rounding they borrow from the hardware included:
    AVX2 sets MXCSR to round toward zero around one step and back) give the same bits under
    FTZ/DAZ and every rounding mode as without."""
    # And the one-byte sources into DOUBLE: AVX-512 widens their FLOAT entries after the lookup.
    cases = [*_STEP_CASES, ("DOUBLE", "FLOAT"), *[(s, "DOUBLE") for s in _SMALL_FLOATS]]
    calls = []
    for s, t in cases:
        source, target = spec_of(s), spec_of(t)
        x = np.ascontiguousarray(_inputs(source))
        kernel = routes.kernel_for(level_module, source, target, Mode())
        calls.append((kernel, x, target, _native_cast(kernel, x, target).tobytes()))
    try:
        saved = level_module._set_fp_environment(True, rounding)
    except NotImplementedError:
        pytest.skip("no floating-point control word on this architecture")
    try:
        got = [_native_cast(kernel, x, target).tobytes() for kernel, x, target, _ in calls]
    finally:
        level_module._restore_fp_environment(saved)
    for (*_, bits), hostile, case in zip(calls, got, cases, strict=True):
        assert hostile == bits, case


# -- the small floats by arithmetic ------------------------------------------------------------


@pytest.mark.parametrize("source_name", ["FLOAT", "DOUBLE"])
def test_small_floats_take_the_arithmetic_kernels(source_name: str) -> None:
    """FLOAT and DOUBLE to every float of 8 bits or fewer, in every mode, run the arithmetic
    kernels (so that the equality tests above hold them), except FLOAT8E8M0 where the profile
    follows onnx's helper (and its DOUBLE sources rounded to nearest FLOAT first, which the
    pure engine casts)."""
    source = spec_of(source_name)
    others = []
    for name in _SMALL_FLOATS:
        target = spec_of(name)
        for mode in _modes(source, target):
            found = routes.route(source, target, mode.effective_for(target))
            kernel = None if found is None else found[0]
            expected = "e8m0" if name == "FLOAT8E8M0" else "small_float"
            helper = name == "FLOAT8E8M0" and mode.profile.rules.e8m0_by_onnx_helper
            if kernel != f"{expected}:{_TYPE_KEYS[source_name]}:u8" and not helper:
                others.append(f"{name} {mode_id(mode)}: {kernel}")
    assert others == []


_TYPE_KEYS = {"FLOAT": "f32", "DOUBLE": "f64"}


@lru_cache(maxsize=4)
def _pool(source_name: str, size: int, *, rounding: bool = False) -> np.ndarray:
    """Read-only contiguous inputs: random bit patterns, or values that stress rounding."""
    make, seed = (rounding_inputs, 13) if rounding else (random_inputs, 5)
    pool = np.ascontiguousarray(make(spec_of(source_name), size, seed=seed))
    pool.flags.writeable = False
    return pool


@pytest.mark.parametrize(("source_name", "target_name"), _STEP_CASES)
def test_simd_tails_and_alignments(
    source_name: str, target_name: str, level_module: ModuleType
) -> None:
    """Every tail length of the SIMD steps (up to 64 elements a step) and misaligned starts of
    both buffers; then beyond 8 MiB of output (and beyond the size from which 1- and 2-byte
    results stream, this CPU's second-level cache), where the stores stream after a head that
    aligns the output (below it, the head aligns the source), at an output misaligned by one
    element, with the last-level cache set on either side of the cast (the light kernels into
    bytes and 2-byte integers from FLOAT and DOUBLE, and DOUBLE -> FLOAT16, stream only past
    it, the others past a quarter of it).  The halves and the integers run the FLOAT families'
    steps on values made FLOAT in the steps (AVX2) or a block at a time."""
    source, target = spec_of(source_name), spec_of(target_name)
    mode = Mode(saturate=False) if target_name == "FLOAT8E5M2" else Mode()
    kernel = routes.kernel_for(level_module, source, target, mode)
    out_dtype = np.dtype(NUMPY_DTYPES[OnnxType(target.code)])
    limit = max(8 << 20, level_module.stream_bytes() + 4096)
    big = limit // out_dtype.itemsize + 77
    pool = _pool(source_name, limit + 300)
    x_raw = np.zeros(pool.size + 64, dtype=pool.dtype)
    out_raw = np.zeros(big + 64, dtype=out_dtype)
    # The big cast twice: some kernels stream only where the whole cast exceeds the last-level
    # cache, so once with a cache of one byte (streamed) and once with one that holds any cast.
    small = [(n, k, None) for n in range(0, 150) for k in (0, 1, 3)]
    for n, k, cache in [*small, (big, 1, 1), (big, 1, 1 << 62)]:
        x = x_raw[k : k + n]
        x[...] = pool[k : k + n]
        out = out_raw[k : k + n]
        out.view(np.uint8)[...] = 0xA5  # no result of an earlier round can pass for this one's
        before = level_module._set_last_level_cache_bytes(cache) if cache else None
        try:
            kernel(x, out, 1)
        finally:
            if before is not None:
                level_module._set_last_level_cache_bytes(before)
        expected = NUMPY.bits(_pure(x, source, target, mode), target).astype(np.uint64)
        mismatch = compare_bits(out, expected, source, target, x)
        where = f"n={n}, offset {k}, last-level cache {cache}"
        assert mismatch is None, f"{where}: {mismatch.describe(source, target)}"


def _listed_last_level_cache() -> int:
    """The bytes of CPU 0's highest cache level as Linux's sysfs lists it (0: none listed)."""
    caches = Path("/sys/devices/system/cpu/cpu0/cache")
    listed: dict[int, int] = {}
    for index in sorted(caches.glob("index*")) if caches.is_dir() else []:
        try:
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if size.endswith("K") and size[:-1].isdigit():
            listed.setdefault(level, int(size[:-1]) << 10)
    return listed[max(listed)] if listed else 0


def test_the_last_level_cache_is_the_one_linux_lists(level_module: ModuleType) -> None:
    """The bound past which the light kernels into bytes and 2-byte integers stream is the
    last-level cache as Linux lists it (glibc's sysconf can name the host's whole cache in a
    virtual machine); the testing hook sets it for the process and gives back the value
    before."""
    listed = _listed_last_level_cache()
    assert level_module.last_level_cache_bytes() == listed
    before = level_module._set_last_level_cache_bytes(12345)
    try:
        assert before == listed
        assert level_module.last_level_cache_bytes() == 12345
    finally:
        level_module._set_last_level_cache_bytes(before)
    with pytest.raises(OverflowError):
        level_module._set_last_level_cache_bytes(-1)
    assert level_module.last_level_cache_bytes() == listed


#: The wide sources into every target whose kernel rounds them.
_ROUNDING_CASES = [("DOUBLE", t) for t in ("FLOAT", *_SIMD_TARGETS)]
_ROUNDING_CASES += [
    (s, t)
    for s in ("INT64", "UINT64")
    for t in ("FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16", *_SMALL_FLOATS)
]


@pytest.mark.parametrize(("source_name", "target_name"), _ROUNDING_CASES)
def test_rounding_at_every_bit(
    source_name: str, target_name: str, level_module: ModuleType
) -> None:
    """DOUBLE's and the 64-bit integers' kernels, in every mode, on values that put a tie or a
    value just off one at every bit (castlike.testing.rounding_inputs: DOUBLE exponents across
    every small type's range, FLOAT's subnormals and its overflow; integers of every length),
    where random bits almost never land.  AVX2 rounds DOUBLE to odd in its integer bits for
    FLOAT16, BFLOAT16 and the small floats, and the baseline and AVX2 builds make 64-bit
    integers DOUBLE from their exact 32-bit halves; each must give the pure engine's bits."""
    source, target = spec_of(source_name), spec_of(target_name)
    x = _pool(source_name, 1 << 16, rounding=True)
    for mode in _modes(source, target):
        kernel = routes.kernel_for(level_module, source, target, mode)
        if kernel is None:
            continue  # the pure engine casts it: nothing native to compare
        expected = NUMPY.bits(_pure(x, source, target, mode), target).astype(np.uint64)
        mismatch = compare_bits(_native_cast(kernel, x, target), expected, source, target, x)
        assert mismatch is None, f"{mode_id(mode)}: {mismatch.describe(source, target)}"


def _e8m0_thresholds() -> np.ndarray:
    """Every DOUBLE power of two, 1.5 times it, and their neighbours, of both signs, with the
    special values and FLOAT's largest: every threshold of FLOAT8E8M0's round modes and range."""
    powers = np.ldexp(1.0, np.arange(-1074, 1024))
    base = np.concatenate([powers, powers[1:] * 1.5])
    values = np.concatenate(
        [
            base,
            np.nextafter(base, np.inf),
            np.nextafter(base, -np.inf),
            np.float64(np.finfo(np.float32).max)[None],
        ]
    )
    specials = np.array([0.0, np.inf, np.nan])
    values = np.concatenate([values, specials])
    return np.concatenate([values, -values])


def test_e8m0_from_double_at_every_threshold(level_module: ModuleType) -> None:
    """DOUBLE -> FLOAT8E8M0 steps in DOUBLE's own lanes (no FLOAT bits first) at every power of
    two, 1.5 times it and one unit either side, in every mode: where the 64-bit arithmetic
    (the borrow of `bits - 1` at an exact power, the clamp at 2**128, the range's ends) would
    go wrong, a random input almost never lands."""
    source, target = spec_of("DOUBLE"), spec_of("FLOAT8E8M0")
    # Every element in the SIMD steps at least once: the inputs and again shifted by a step's
    # worth, so that each value lands in another lane.
    x = _e8m0_thresholds()
    x = np.ascontiguousarray(np.concatenate([x, x[37:], x[:37]]))
    for mode in _modes(source, target):
        kernel = routes.kernel_for(level_module, source, target, mode)
        if kernel is None:
            continue  # onnx's helper: the class table casts it
        expected = NUMPY.bits(_pure(x, source, target, mode), target).astype(np.uint64)
        mismatch = compare_bits(_native_cast(kernel, x, target), expected, source, target, x)
        assert mismatch is None, f"{mode_id(mode)}: {mismatch.describe(source, target)}"


# (keyword changed, message): each a small_float kernel's argument that would make its
# arithmetic undefined or its results not bytes.
_BAD_SMALL_FLOAT = [
    ({"mantissa_bits": 0}, "mantissa_bits must be 1 to 10, got 0"),
    ({"mantissa_bits": 23}, "mantissa_bits must be 1 to 10, got 23"),
    ({"hi": 448.1}, "hi (the clamp) must be a positive finite FLOAT value, got 448.1"),
    ({"hi": float("inf")}, "hi (the clamp) must be a positive finite FLOAT value"),
    ({"hi": -448.0}, "hi (the clamp) must be a positive finite FLOAT value"),
    ({"min_exponent": -127}, "min_exponent must be -126 to 127, got -127"),
    ({"min_exponent": 120}, "round at 2**140, beyond FLOAT's range"),
    ({"hi": 2.0**120}, "round at 2**140, beyond FLOAT's range"),
    ({"cap_code": 0x7D}, "cap_code must be from the clamp's code 126 to 255, got 125"),
    ({"cap_code": 256}, "cap_code must be from the clamp's code 126 to 255, got 256"),
    ({"sign_mask": -1}, "sign_mask must be 0 to 255, got -1"),
    ({"zero_results": (0, 256)}, "zero_results[1] must be 0 to 255, got 256"),
    ({"cap_results": (-3, 0)}, "cap_results[0] must be 0 to 255, got -3"),
]


@pytest.mark.parametrize(("change", "message"), _BAD_SMALL_FLOAT, ids=lambda v: str(v)[:40])
def test_small_float_kernel_refuses_bad_constants(change: dict[str, object], message: str) -> None:
    module = _native.module()
    assert module is not None
    found = routes.route(spec_of("FLOAT"), spec_of("FLOAT8E4M3FN"), Mode())
    assert found is not None
    name, params = found
    module.Kernel(name, **params)  # the routed constants are accepted
    with pytest.raises(ValueError, match=re.escape(message)) as refused:
        module.Kernel(name, **{**params, **change})
    assert str(refused.value).startswith(f"{name}: ")
    with pytest.raises(ValueError, match="mantissa_bits must be 1 to 10, got 0"):
        module.Kernel(name)  # nothing given


@pytest.mark.parametrize("target_name", ["FLOAT16", "FLOAT8E4M3FN"])
@pytest.mark.parametrize(("ilo", "ihi"), [(-(2**24) - 1, 0), (0, 2**24 + 1), (5, 5)])
def test_integer_clip_must_be_exact_in_float(target_name: str, ilo: int, ihi: int) -> None:
    """The kernels that convert a clamped INT32 to FLOAT in their steps (into FLOAT16, and the
    FLOAT families) refuse a clip that FLOAT cannot hold exactly, or an empty one."""
    module = _native.module()
    assert module is not None
    found = routes.route(spec_of("INT32"), spec_of(target_name), Mode())
    assert found is not None
    name, params = found
    module.Kernel(name, **params)  # the routed clip is accepted
    with pytest.raises(ValueError, match=r"ilo and ihi must lie within \+-2\*\*24|ilo < ihi"):
        module.Kernel(name, **{**params, "ilo": ilo, "ihi": ihi})


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


_HALVES = ["FLOAT16", "BFLOAT16"]
#: What FLOAT16 and BFLOAT16 take through the FLOAT kernels in the spec and legacy profiles.
_THROUGH_FLOAT_TARGETS = [*_SMALL_FLOATS, *[t for t in _SIMD_TARGETS if "INT" in t]]
_THROUGH_FLOAT_TARGETS += ["INT64", "UINT64", "FLOAT16", "BFLOAT16"]


@pytest.mark.parametrize("source_name", _HALVES)
@pytest.mark.parametrize("profile", [Profile.SPEC, Profile.LEGACY], ids=lambda p: p.value)
def test_halves_take_the_float_kernels(
    source_name: str, profile: Profile, level_module: ModuleType
) -> None:
    """FLOAT16 and BFLOAT16 run the FLOAT kernels on their widened values (or, on AVX-512, the
    small floats' own 16-bit steps) wherever that gives the spec's table (routes checks all
    65,536 patterns first).  In these profiles it does for every target but BOOL, the type
    itself and FLOAT8E8M0 under onnx's helper (legacy; the FLOAT kernel is a class gather there,
    no faster than the table's): a kernel gone wrong would fall back to the gather silently,
    and fail here, at every level."""
    module = level_module
    source = spec_of(source_name)
    gathered = []
    for name in _THROUGH_FLOAT_TARGETS:
        target = spec_of(name)
        if target == source:
            continue
        for mode in _modes(source, target):
            helper = name == "FLOAT8E8M0" and mode.profile.rules.e8m0_by_onnx_helper
            if mode.profile is not profile or helper:
                continue
            kernel = routes.kernel_for(module, source, target, mode)
            if kernel is None or kernel.name.startswith("gather"):
                gathered.append(f"{name} {mode_id(mode)}: {kernel and kernel.name}")
    assert gathered == []


_WIDE_INTEGERS = ["INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64"]


@pytest.mark.parametrize("source_name", _WIDE_INTEGERS)
def test_wide_integers_take_the_float_kernels_into_the_small_floats(source_name: str) -> None:
    """Integers of 16 bits or more run the FLOAT arithmetic kernels into every small float, in
    every mode whose FLOAT route is arithmetic (all but FLOAT8E8M0 under onnx's helper, and the
    integer-nearest routes the pure engine casts): the class gather is what a lost route would
    fall back to, silently; here it fails."""
    module = _native.module()
    source = spec_of(source_name)
    missed = []
    for name in _SMALL_FLOATS:
        target = spec_of(name)
        for mode in _modes(source, target):
            helper = name == "FLOAT8E8M0" and mode.profile.rules.e8m0_by_onnx_helper
            kernel = routes.kernel_for(module, source, target, mode)
            if helper or kernel is None:
                continue
            family = "e8m0" if name == "FLOAT8E8M0" else "small_float"
            if kernel.name != f"{family}:{routes._type_key(source)}:u8":
                missed.append(f"{name} {mode_id(mode)}: {kernel.name}")
    assert missed == []


def test_a_half_kernel_that_disagrees_with_the_table_is_not_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """If the FLOAT route's constants did not fit a half (here: INT8's upper bound moved to
    100), the check against the table refuses the kernel and the gather casts, correctly."""
    module = _native.module()
    source, target = spec_of("BFLOAT16"), spec_of("INT8")
    real_route = routes.route

    def moved_bound(s: TypeSpec, t: TypeSpec, mode: Mode) -> object:
        found = real_route(s, t, mode)
        if s == spec_of("FLOAT") and found is not None:
            name, params = found
            return name, {**params, "hi": 100.0}
        return found

    with monkeypatch.context() as m, fresh_caches():
        m.setattr(routes, "route", moved_bound)
        kernel = routes.kernel_for(module, source, target, Mode())
        assert kernel.name == "gather:u16:u8"
        x = np.array([1, 120, 300, -300], dtype=np.float32)
        halves = (x.view(np.uint32) >> 16).astype(np.uint16)
        assert _native_cast(kernel, halves, target).tolist() == [1, 120, 127, -128]
    assert routes.kernel_for(module, source, target, Mode()).name == "float_to_int:bf16:i8"


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

    module = _native.module()
    assert module is not None
    # The AVX-512 kernels use AVX512-BF16 wherever the CPU has it: on, as the module starts
    # (level_module's variant may have turned it off in this worker meanwhile).
    was_on = module._bfloat16_instructions()
    if was_on is False and module.cpu_features()["avx512bf16"]:
        module._bfloat16_instructions(True)
    try:
        assert main(["info", "--json"]) == 0
    finally:
        if was_on is False:
            module._bfloat16_instructions(False)
    info = json.loads(capsys.readouterr().out)
    assert info["path"] == "native"
    assert info["level"] == module.variant
    assert info["threads"] == castlike.get_num_threads()
    bf16 = info["level"] == "avx512" and info["cpu_features"]["avx512bf16"]
    assert info["extra_instructions"] == (["avx512bf16"] if bf16 else [])
