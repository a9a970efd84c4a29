"""What each backend declares of its library, checked against the oracle.

An adapter declares the pairs where its library's own conversion is the rule
(``Adapter.library_pairs``) and the float8 conversions whose specials the engine repairs
(``Adapter.float8_plans``).  The routes then trust them; these tests do not.  For each declared
pair on each backend under test, the route that uses the library's conversion (run by the
engine directly, so that no native kernel or other path stands in for it) is compared with
the oracle on every pattern of a source of 16 bits or fewer, or on the curated wide inputs, in
every mode where the route uses it.  A pair declared wrongly fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import BACKENDS

from castlike.backends import adapter_named
from castlike.spec.float8_repairs import plan_for
from castlike.spec.route import Family
from castlike.spec.rules import Mode
from castlike.spec.types import TYPES, OnnxType, TypeSpec, spec_of
from castlike.testing import (
    all_modes,
    assert_cast_equal,
    curated_inputs,
    exhaustive_inputs,
    mode_id,
    oracle_bits,
)

MODES = all_modes()
_FLOAT = spec_of(OnnxType.FLOAT)


def _inputs(source: TypeSpec) -> tuple[np.ndarray, str]:
    if source.bits <= 16:
        return exhaustive_inputs(source), "all"
    return curated_inputs(source), "curated"


def _declared_pairs() -> list[tuple[str, TypeSpec, TypeSpec]]:
    return [
        (backend, TYPES[OnnxType(s)], TYPES[OnnxType(t)])
        for backend in BACKENDS
        for s, t in sorted(adapter_named(backend).library_pairs)
    ]


def _declared_float8() -> list[Any]:
    cases = set()
    for backend in BACKENDS:
        for key, plan in adapter_named(backend).float8_plans.items():
            if plan is not None:
                cases.add((backend, key[0]))
    if not cases:
        reason = "no backend under test declares a float8 conversion (float8_plans)"
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="none")]
    return [(backend, TYPES[OnnxType(code)]) for backend, code in sorted(cases)]


def _case_id(case: tuple[str, TypeSpec, TypeSpec]) -> str:
    backend, source, target = case
    return f"{backend}-{source.name}-{target.name}"


def _check(
    backend: str,
    source: TypeSpec,
    target: TypeSpec,
    mode: Mode,
    result: object,
    inputs: np.ndarray,
    key: str,
    cache: Path,
) -> None:
    expected = oracle_bits(source, target, mode, inputs, cache_dir=cache, cache_key=key)
    adapter = adapter_named(backend)
    try:
        assert_cast_equal(
            result,
            expected,
            source,
            target,
            inputs,
            expected_dtype=adapter.library_dtype(target),
            expected_shape=inputs.shape,
        )
    except AssertionError as exc:
        raise AssertionError(
            f"{backend} declares {source.name} -> {target.name} "
            f"(mode {mode_id(mode)}) wrongly:\n{exc}"
        ) from None


def test_every_backend_declares_something() -> None:
    """The declarations are not empty by accident (numpy, torch and jax each declare pairs)."""
    for backend in BACKENDS:
        if backend in ("numpy", "torch", "jax"):
            assert adapter_named(backend).library_pairs, backend


@pytest.mark.parametrize("case", _declared_pairs(), ids=_case_id)
def test_declared_library_pair_is_the_rule(
    case: tuple[str, TypeSpec, TypeSpec], oracle_cache: Path
) -> None:
    backend, source, target = case
    adapter = adapter_named(backend)
    if adapter.library_dtype(source) is None or adapter.library_dtype(target) is None:
        pytest.skip(f"{backend} cannot hold {source.name} or {target.name} now (R10)")
    engine = adapter.engine()
    inputs, key = _inputs(source)
    x = adapter.from_numpy(inputs)
    library = (Family.LIBRARY, Family.LOW_BITS)
    routes = [(m, engine.route(source, target, m)) for m in MODES]
    used = [(m, r) for m, r in routes if r.family in library]
    assert used, "a declared pair the routes never use"
    for mode, route in used:
        with np.errstate(all="ignore"):  # as NumPy's engine runs (overflow is the rule's Inf)
            result = engine.run(x, route)
        _check(backend, source, target, mode, result, inputs, key, oracle_cache)


@pytest.mark.parametrize("case", _declared_float8(), ids=lambda c: f"{c[0]}-FLOAT-{c[1].name}")
def test_declared_float8_conversion_with_its_repairs_is_the_rule(
    case: tuple[str, TypeSpec], oracle_cache: Path
) -> None:
    """The library's FLOAT -> float8 conversion plus the engine's repair of its specials."""
    backend, target = case
    adapter = adapter_named(backend)
    engine = adapter.engine()
    inputs, key = _inputs(_FLOAT)
    x = adapter.from_numpy(inputs)
    plans = adapter.float8_plans
    used = [(m, plan_for(plans, target, m)) for m in MODES]
    used = [(m, p) for m, p in used if p is not None]
    assert used
    for mode, plan in used:
        with np.errstate(all="ignore"):
            result = engine.float8_by_library(x, target, plan)
        _check(backend, _FLOAT, target, mode, result, inputs, key, oracle_cache)
