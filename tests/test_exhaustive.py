"""Every bit pattern of every source of 16 bits or fewer, cast to every numeric target in every
mode, equals the exact oracle, bit for bit, on every backend under test."""

from __future__ import annotations

from pathlib import Path

import pytest

import castlike
from castlike.backends import adapter_named
from castlike.errors import BackendTypeError
from castlike.spec.rules import Mode
from castlike.spec.types import TypeSpec
from castlike.testing import (
    OracleJob,
    all_modes,
    assert_cast_equal,
    exhaustive_inputs,
    mode_id,
    numeric_types,
    oracle_bits,
    precompute,
)

SOURCES = [t for t in numeric_types() if t.bits <= 16]
TARGETS = numeric_types()
MODES = all_modes()

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def exhaustive_cache(oracle_cache: Path) -> Path:
    """Compute every oracle answer this module needs once, on all cores, before the tests."""
    jobs = [OracleJob(s, t, m, "all") for s in SOURCES for t in TARGETS for m in MODES]
    precompute(jobs, oracle_cache)
    return oracle_cache


def _name(t: TypeSpec) -> str:
    return t.name


@pytest.mark.parametrize("mode", MODES, ids=mode_id)
@pytest.mark.parametrize("target", TARGETS, ids=_name)
@pytest.mark.parametrize("source", SOURCES, ids=_name)
def test_every_pattern(
    source: TypeSpec, target: TypeSpec, mode: Mode, backend: str, exhaustive_cache: Path
) -> None:
    inputs = exhaustive_inputs(source)
    adapter = adapter_named(backend)
    options = {
        "saturate": mode.saturate,
        "round_mode": mode.round_mode.value,
        "profile": mode.profile.value,
    }
    if adapter.native_dtype(source) is None:
        # No array of the backend can have this type (R10): the backend refuses to make one.
        with pytest.raises(BackendTypeError, match=source.name):
            adapter.from_numpy(inputs[:1])
        return
    if adapter.native_dtype(target) is None:
        with pytest.raises(BackendTypeError, match=target.name):
            castlike.cast(adapter.from_numpy(inputs[:1]), target.name, **options)
        return
    expected = oracle_bits(
        source, target, mode, inputs, cache_dir=exhaustive_cache, cache_key="all"
    )
    x = adapter.from_numpy(inputs)
    result = castlike.cast(x, target.name, **options)
    assert_cast_equal(
        result,
        expected,
        source,
        target,
        inputs,
        expected_dtype=adapter.native_dtype(target),
        expected_shape=inputs.shape,
    )
