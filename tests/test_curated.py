"""Curated inputs of the wide types (FLOAT, DOUBLE, 32/64-bit integers): ties of every target,
+-max and the overflow boundary, subnormals, 2**24/2**53/2**63/2**64 neighbours, NaN, +-Inf, -0,
plus random patterns; every numeric target, every mode, every backend, against the oracle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import Precompute
from oracle_check import check_against_oracle

import castlike
from castlike.backends import adapter_named
from castlike.spec.rules import Mode
from castlike.spec.types import TypeSpec
from castlike.testing import (
    all_modes,
    assert_cast_equal,
    curated_inputs,
    mode_id,
    numeric_types,
    oracle_bits,
)

SOURCES = [t for t in numeric_types() if t.bits > 16]
TARGETS = numeric_types()
MODES = all_modes()

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def curated_cache(precomputed: Precompute) -> Path:
    return precomputed(SOURCES, TARGETS, MODES, "curated")


def _name(t: TypeSpec) -> str:
    return t.name


@pytest.mark.parametrize("mode", MODES, ids=mode_id)
@pytest.mark.parametrize("target", TARGETS, ids=_name)
@pytest.mark.parametrize("source", SOURCES, ids=_name)
def test_curated(
    source: TypeSpec, target: TypeSpec, mode: Mode, backend: str, curated_cache: Path
) -> None:
    inputs = curated_inputs(source)
    check_against_oracle(source, target, mode, backend, inputs, curated_cache, "curated")


@pytest.mark.parametrize("target", TARGETS, ids=_name)
@pytest.mark.parametrize("source", SOURCES, ids=_name)
def test_large_arrays(
    source: TypeSpec, target: TypeSpec, backend: str, curated_cache: Path
) -> None:
    """Arrays large enough for a backend's blocked or chunked paths, in two shapes."""
    adapter = adapter_named(backend)
    if adapter.library_dtype(source) is None or adapter.library_dtype(target) is None:
        pytest.skip(f"{backend} cannot hold {source.name} or {target.name} (R10)")
    mode = Mode()
    base = curated_inputs(source)
    expected_base = oracle_bits(
        source, target, mode, base, cache_dir=curated_cache, cache_key="curated"
    )
    repeat = -(-300_001 // base.size)  # more than four blocks of 2**16, not a multiple of one
    inputs = np.tile(base, repeat)[:300_001]
    expected = np.tile(expected_base, repeat)[:300_001]
    for shape in ((300_001,), (3, 100_000)):
        count = int(np.prod(shape))
        x = adapter.from_numpy(inputs[:count].reshape(shape))
        result = castlike.cast(x, target.name)
        assert_cast_equal(
            result,
            expected[:count],
            source,
            target,
            inputs[:count],
            expected_dtype=adapter.library_dtype(target),
            expected_shape=shape,
        )
