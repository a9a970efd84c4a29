"""Every bit pattern of every source of 16 bits or fewer, cast to every numeric target in every
mode, equals the exact oracle, bit for bit, on every backend under test."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Precompute
from oracle_check import check_against_oracle

from castlike.spec.rules import Mode
from castlike.spec.types import TypeSpec
from castlike.testing import (
    all_modes,
    exhaustive_inputs,
    mode_id,
    numeric_types,
)

SOURCES = [t for t in numeric_types() if t.bits <= 16]
TARGETS = numeric_types()
MODES = all_modes()

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def exhaustive_cache(precomputed: Precompute) -> Path:
    return precomputed(SOURCES, TARGETS, MODES, "all")


def _name(t: TypeSpec) -> str:
    return t.name


@pytest.mark.parametrize("mode", MODES, ids=mode_id)
@pytest.mark.parametrize("target", TARGETS, ids=_name)
@pytest.mark.parametrize("source", SOURCES, ids=_name)
def test_every_pattern(
    source: TypeSpec, target: TypeSpec, mode: Mode, backend: str, exhaustive_cache: Path
) -> None:
    inputs = exhaustive_inputs(source)
    check_against_oracle(source, target, mode, backend, inputs, exhaustive_cache, "all")
