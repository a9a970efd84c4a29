"""The generic Array-API backend (castlike.backends.array_api) beyond array-api-strict.

array-api-strict (a backend of the suite: ``CASTLIKE_TEST_BACKENDS=array-api-strict``) has no
float16, so the FLOAT16 steps are checked here on a namespace that has it: array-api-compat's
NumPy namespace, driven through the generic adapter and engine (as castlike would drive any
namespace without an adapter of its own), against the oracle, bit for bit.
"""

from __future__ import annotations

import math
from pathlib import Path

import array_api_compat.numpy as compat_numpy
import numpy as np
import pytest

from castlike.backends.array_api import STANDARD_TYPES, ArrayApiAdapter, adapter_for_namespace
from castlike.errors import BackendTypeError
from castlike.spec.opsets import Op
from castlike.spec.plan import resolve
from castlike.spec.types import TYPES, OnnxType, TypeSpec
from castlike.testing import assert_cast_equal, curated_inputs, exhaustive_inputs, oracle_bits

_T = OnnxType
GENERIC = ArrayApiAdapter(compat_numpy, name="generic-numpy")
STANDARD = [TYPES[t] for t in STANDARD_TYPES]


def _cast(x: np.ndarray, source: TypeSpec, target: TypeSpec) -> np.ndarray:
    plan = resolve(Op.CAST, source, target)
    return np.asarray(GENERIC.engine().cast(GENERIC.from_numpy(x), plan))


def _name(t: TypeSpec) -> str:
    return t.name


@pytest.mark.parametrize("target", STANDARD, ids=_name)
def test_every_float16_pattern(target: TypeSpec, oracle_cache: Path) -> None:
    source = TYPES[_T.FLOAT16]
    inputs = exhaustive_inputs(source)
    expected = oracle_bits(
        source,
        target,
        resolve(Op.CAST, source, target).mode,
        inputs,
        cache_dir=oracle_cache,
        cache_key="all",
    )
    result = _cast(inputs, source, target)
    assert_cast_equal(result, expected, source, target, inputs, expected_shape=inputs.shape)


@pytest.mark.parametrize("source", STANDARD, ids=_name)
def test_every_standard_source_to_float16(source: TypeSpec, oracle_cache: Path) -> None:
    target = TYPES[_T.FLOAT16]
    key = "all" if source.bits <= 16 else "curated"
    inputs = exhaustive_inputs(source) if key == "all" else curated_inputs(source)
    expected = oracle_bits(
        source,
        target,
        resolve(Op.CAST, source, target).mode,
        inputs,
        cache_dir=oracle_cache,
        cache_key=key,
    )
    result = _cast(inputs, source, target)
    assert_cast_equal(result, expected, source, target, inputs, expected_shape=inputs.shape)


def test_the_generic_adapter_holds_the_standard_dtypes_only() -> None:
    held = {t.name for t in TYPES.values() if GENERIC.library_dtype(t) is not None}
    assert held == {TYPES[t].name for t in STANDARD_TYPES}
    with pytest.raises(BackendTypeError, match="generic-numpy cannot hold BFLOAT16"):
        GENERIC.from_numpy(np.zeros(1, TYPES[_T.BFLOAT16].name.lower()))


def test_no_bit_views_and_no_tables() -> None:
    x = GENERIC.from_numpy(np.ones(2, np.float32))
    with pytest.raises(BackendTypeError, match="no bit reinterpretation"):
        GENERIC.bits(x, TYPES[_T.FLOAT])
    with pytest.raises(BackendTypeError, match="no lookup table"):
        GENERIC.device_table(np.zeros(2, np.uint8), x)


def test_one_adapter_per_namespace() -> None:
    assert adapter_for_namespace(compat_numpy) is adapter_for_namespace(compat_numpy)
    assert math.isinf(float(_cast(np.array([1e300]), TYPES[_T.DOUBLE], TYPES[_T.FLOAT])[0]))


UNREGISTERED = """
import castlike, castlike.backends as registry
import array_api_strict as xp

# As for a library castlike's registry does not list: array-api-strict taken out of it.
registry._DISPATCH = tuple(e for e in registry._DISPATCH if e[0].name != "array-api-strict")
y = castlike.cast(xp.asarray([1.5, -2.7, 300.0], dtype=xp.float32), "UINT8")
adapter = registry.adapter_for(xp)
print(type(adapter).__name__, adapter.name, y.dtype == xp.uint8, y.device == xp.asarray(0).device)
import numpy as np
print(np.from_dlpack(y).tolist())
"""


def test_a_namespace_no_backend_claims_gets_the_generic_backend() -> None:
    pytest.importorskip("array_api_strict", reason="array-api-strict is not installed")
    from test_registry import run_python

    assert run_python(UNREGISTERED).split() == [
        "ArrayApiAdapter",
        "array_api_strict",
        "True",
        "True",
        "[1,",
        "0,",
        "255]",
    ]
