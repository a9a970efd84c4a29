"""``profile="reference"`` against the installed ``onnx.reference``, bit for bit (R12).

onnx.reference casts through ml_dtypes, and ml_dtypes changed its casts between releases: the
``reference`` name follows the installed one's behaviour family.  These tests run a Cast node
through :class:`onnx.reference.ReferenceEvaluator` on random and edge inputs (every pattern of
the 8- and 16-bit sources, the curated and random FLOAT, DOUBLE and integer inputs), into every
numeric type the installed onnx has, in every mode, and compare every element with castlike.

They run on the newest ml_dtypes (the default nox sessions) and on the lowest that
pyproject.toml allows (``nox -s oldest``).

Compared everywhere onnx.reference answers deterministically.  Left out, each by a named rule
(:func:`_platform_dependent`):

* NaN, Inf and out-of-range floats into the 8- to 64-bit integers where the conversion is
  NumPy's (from FLOAT16, FLOAT, DOUBLE) or, before ml_dtypes 0.7, a C++ conversion whose result
  the C++ standard leaves undefined (from ml_dtypes' float types); R7's castlike choices apply
  there in every profile;
* before ml_dtypes 0.7, +-Inf of ml_dtypes' float types into INT4/UINT4/INT2/UINT2 (the same
  undefined conversion);
* the NaN payloads of the IEEE targets (R3: not part of the contract), compared as "is NaN";
* FLOAT8E5M2 -> FLOAT8E5M2 without saturation, where onnx.reference copies a NaN's payload
  (0x7D, 0x7F) and castlike gives the format's NaN (docs/profiles.rst lists it).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="comparing with onnx.reference needs onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import castlike  # noqa: E402
from castlike.backends.numpy import ADAPTER as NUMPY  # noqa: E402
from castlike.spec.profiles import (  # noqa: E402
    installed_ml_dtypes,
    reference_profile,
    resolve_profile,
)
from castlike.spec.rules import ML_DTYPES_FLOATS, SATURATE_TYPES, Mode, RoundMode  # noqa: E402
from castlike.spec.types import Kind, OnnxType, TypeSpec, spec_of  # noqa: E402
from castlike.testing import (  # noqa: E402
    curated_inputs,
    exhaustive_inputs,
    numeric_types,
    random_inputs,
)

pytestmark = pytest.mark.numpy_session

_T = OnnxType
PROFILE = resolve_profile("reference")
RULES = Mode(profile=PROFILE).profile.rules
BEFORE_0_7 = RULES.ml_dtypes_float_to_int != "zero_beyond_range"

SOURCES = [
    "FLOAT",
    "DOUBLE",
    "FLOAT16",
    "BFLOAT16",
    "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ",
    "FLOAT8E5M2",
    "FLOAT8E5M2FNUZ",
    "FLOAT8E8M0",
    "FLOAT4E2M1",
    "INT8",
    "INT32",
    "INT64",
    "UINT64",
]
#: The numeric types the installed onnx knows (FLOAT6* arrived with Cast-28).
TARGETS = [t for t in numeric_types() if t.name in TensorProto.DataType.keys()]  # noqa: SIM118


def _inputs(source: TypeSpec) -> np.ndarray:
    if source.bits <= 16:
        return exhaustive_inputs(source)
    return np.concatenate([curated_inputs(source), random_inputs(source, 20_000, seed=19)])


def _modes(target: TypeSpec) -> list[dict[str, Any]]:
    if target.code == _T.FLOAT8E8M0:
        return [{"saturate": s, "round_mode": r.value} for s in (True, False) for r in RoundMode]
    if target.code in SATURATE_TYPES:
        return [{"saturate": True}, {"saturate": False}]
    return [{}]


def _reference(x: np.ndarray, source: TypeSpec, target: TypeSpec, options: dict) -> np.ndarray:
    """onnx.reference's Cast of ``x`` at the newest opset the installed onnx defines."""
    attrs = {"to": int(target.code), **options}
    if "saturate" in attrs:
        attrs["saturate"] = int(attrs["saturate"])
    node = helper.make_node("Cast", ["x"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "cast",
        [helper.make_tensor_value_info("x", int(source.code), None)],
        [helper.make_tensor_value_info("y", int(target.code), None)],
    )
    opset = onnx.defs.onnx_opset_version()
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        # ml_dtypes 0.7 warns on invalid casts, and NumPy on overflow: both are what we test.
        warnings.simplefilter("ignore")
        (y,) = ReferenceEvaluator(model).run(None, {"x": x})
    return np.asarray(y)


def _platform_dependent(x: np.ndarray, source: TypeSpec, target: TypeSpec) -> np.ndarray:
    """The elements whose onnx.reference result depends on the platform (module docstring)."""
    out = np.zeros(x.shape, dtype=bool)
    if not (source.is_float and target.is_integer and target.kind is not Kind.BOOL):
        return out
    with np.errstate(all="ignore"):
        value = x.astype(np.float64)
        whole = np.trunc(value)
    # int_min and int_max + 1 are powers of two: exact in DOUBLE, unlike int_max itself.
    beyond = ~np.isfinite(value) | (whole < target.int_min) | (whole >= target.int_max + 1.0)
    if not target.is_sub_byte:
        if source.code not in ML_DTYPES_FLOATS or BEFORE_0_7:
            out |= beyond
    elif BEFORE_0_7 and source.code in ML_DTYPES_FLOATS:
        out |= np.isinf(value)
    return out


def _cases() -> list[Any]:
    cases = []
    for s in SOURCES:
        for t in TARGETS:
            for options in _modes(t):
                label = "-".join(f"{k}={v}" for k, v in options.items()) or "default"
                cases.append(pytest.param(s, t.name, options, id=f"{s}-{t.name}-{label}"))
    return cases


@pytest.mark.parametrize(("source_name", "target_name", "options"), _cases())
def test_reference_profile_is_onnx_reference(
    source_name: str, target_name: str, options: dict[str, Any]
) -> None:
    source, target = spec_of(source_name), spec_of(target_name)
    x = _inputs(source)
    try:
        expected = _reference(x, source, target, options)
    except Exception as exc:  # an ml_dtypes without this cast: nothing to reproduce
        pytest.skip(f"onnx.reference cannot cast {source_name} -> {target_name}: {exc}")
    got = castlike.cast(x, target_name, profile="reference", **options)
    want_bits = NUMPY.bits(expected, target).reshape(-1)
    got_bits = NUMPY.bits(np.asarray(got), target).reshape(-1)
    ignore = _platform_dependent(x, source, target).reshape(-1)
    if target.is_float and target.bits >= 16:  # R3: a NaN is a NaN between the IEEE types
        with np.errstate(all="ignore"):
            ignore |= np.isnan(np.asarray(got).astype(np.float64)).reshape(-1) & np.isnan(
                expected.astype(np.float64)
            ).reshape(-1)
    if source.code == target.code == _T.FLOAT8E5M2 and not options.get("saturate", True):
        ignore |= np.isnan(x.astype(np.float32))  # the payload copy (module docstring)
    bad = np.nonzero((got_bits != want_bits) & ~ignore)[0]
    assert bad.size == 0, (
        f"{bad.size} of {x.size} elements differ from onnx.reference (ml_dtypes "
        f"{installed_ml_dtypes()}, profile {PROFILE.value}); first: "
        + ", ".join(
            f"[{i}] {x.reshape(-1)[i]!r} -> onnx 0x{int(want_bits[i]):X}, "
            f"castlike 0x{int(got_bits[i]):X}"
            for i in bad[:5]
        )
    )


def test_reference_names_the_installed_families() -> None:
    """``"reference"`` is the profile of the installed onnx and ml_dtypes."""
    assert PROFILE is reference_profile(onnx.__version__, installed_ml_dtypes() or "")
    ml = installed_ml_dtypes() or ""
    assert PROFILE.value.endswith(f"ml_dtypes-{'0.7' if ml.startswith('0.7') else '0.5'}")
    assert ("onnx-1.19" in PROFILE.value) == (onnx.__version__.split(".")[1] in ("19", "20", "21"))
