"""The shared engine's own routes, on adapters that declare nothing.

Every backend declares what its library does right (native pairs, float8 plans), so the
engine's fallback routes (rounding to odd, bit arithmetic, the integer-exact routines of
``castlike._exact``) run only where a backend does not declare a shortcut.  These tests run the
plain :class:`~castlike._engine.Engine` on NumPy arrays through three adapters that declare no
pair at all: one computing on unsigned bits, one on the signed view of the same width (as
torch does: ``unsigned_arithmetic = False``), and one declaring ``flushes_subnormals`` (as JAX
does), so that every wide cast goes through the integer-exact routines and the Array-API
default of ``clz``.  Each must equal the oracle on the curated wide inputs, in every mode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import Precompute

from castlike._engine import Engine
from castlike.backends.numpy import NumpyAdapter
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


class _Undeclared(NumpyAdapter):
    """NumPy's primitives, with no library pair declared and no shortcut: the routes' plain
    steps."""

    library_pairs = frozenset()
    wide_class_shortcuts = False


class _Signed(_Undeclared):
    """Bit arithmetic on the signed view, as on a library without unsigned arithmetic."""

    unsigned_arithmetic = False

    def int_bits(self, x: Any, t: TypeSpec) -> np.ndarray:
        if t.storage_bits == 8:
            return super().int_bits(x, t)
        return np.asarray(x).view(f"int{t.storage_bits}")

    def narrow(self, u: Any, bits: int) -> np.ndarray:
        return np.asarray(u).astype(np.uint8 if bits == 8 else f"int{bits}")


class _Flushing(_Undeclared):
    """Declares flushing subnormals: the engine rounds in integers (NumPy does not flush, so
    the integer routines' answers are compared, not a library's)."""

    flushes_subnormals = True


ADAPTERS = {"unsigned": _Undeclared(), "signed": _Signed(), "flushing": _Flushing()}


@pytest.fixture(scope="module")
def curated_cache(precomputed: Precompute) -> Path:
    return precomputed(SOURCES, TARGETS, MODES, "curated")


def _name(t: TypeSpec) -> str:
    return t.name


@pytest.mark.parametrize("target", TARGETS, ids=_name)
@pytest.mark.parametrize("source", SOURCES, ids=_name)
@pytest.mark.parametrize("variant", list(ADAPTERS))
def test_engine_alone_is_the_rule(
    variant: str, source: TypeSpec, target: TypeSpec, curated_cache: Path
) -> None:
    adapter = ADAPTERS[variant]
    engine = Engine(adapter)
    inputs = curated_inputs(source)
    for mode in MODES:
        expected = oracle_bits(
            source, target, mode, inputs, cache_dir=curated_cache, cache_key="curated"
        )
        with np.errstate(all="ignore"):
            result = engine.run(np.asarray(inputs), engine.route(source, target, mode))
        try:
            assert_cast_equal(result, expected, source, target, inputs)
        except AssertionError as exc:
            raise AssertionError(f"{variant} engine, mode {mode_id(mode)}:\n{exc}") from None


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_default_clz_counts_leading_zeros(bits: int) -> None:
    """The Array-API default of ``Adapter.clz`` (by halving) on 0, 1, every power of two and
    its neighbours, and all ones."""
    values = {0, 1, (1 << bits) - 1}
    for k in range(bits):
        values |= {1 << k, (1 << k) - 1, min((1 << k) + 1, (1 << bits) - 1)}
    u = np.array(sorted(values), dtype=f"uint{bits}")
    expected = [bits - int(v).bit_length() for v in sorted(values)]
    got = _Undeclared().clz(u)
    assert got.dtype == u.dtype
    assert got.tolist() == expected
