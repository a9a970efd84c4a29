"""``castlike compare``: each library's own conversion against castlike, grouped by cause.

Small pair subsets keep these quick; every expected cause is a documented behaviour of the
library (ml_dtypes turns float4 NaN into -0, torch writes E5M2 NaN as 0x7F, ml_dtypes rounds a
DOUBLE through FLOAT, onnxruntime rounds INT4 ties away from zero).
"""

from __future__ import annotations

import importlib.util
import json

import ml_dtypes
import numpy as np
import pytest

import castlike
from castlike.backends.numpy import ADAPTER as NUMPY
from castlike.cli import main
from castlike.compare import CAUSES, LIBRARIES, available_libraries, compare
from castlike.spec.profiles import resolve_profile
from castlike.spec.types import spec_of

E4M3, F4, E5M2, F16, INT4 = (
    spec_of(n) for n in ("FLOAT8E4M3FN", "FLOAT4E2M1", "FLOAT8E5M2", "FLOAT16", "INT4")
)


def needs(module: str):  # type: ignore[no-untyped-def]
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"needs {module} (not installed)"
    )


def _library_bits(repro: str, target) -> int:  # type: ignore[no-untyped-def]
    """Evaluate an example's line of code and return the result's bits."""
    namespace: dict[str, object] = {"np": np, "ml_dtypes": ml_dtypes}
    if "torch" in repro:
        import torch

        namespace["torch"] = torch
        result = eval(repro, namespace)
        return int(NUMPY.bits(castlike.backends.adapter_named("torch").to_numpy(result), target)[0])
    if "jnp" in repro:
        import jax
        import jax.numpy as jnp

        namespace.update(jax=jax, jnp=jnp)
    return int(NUMPY.bits(np.asarray(eval(repro, namespace)), target)[0])


def test_ml_dtypes_float4_nan_is_a_nan_encoding_difference() -> None:
    report = compare(["numpy"], sources=[E4M3], targets=[F4])
    (nan,) = [d for d in report.differences if d.cause == "NaN encoding"]
    assert nan.count == 2  # 0x7F and 0xFF
    assert nan.example.castlike.startswith("0x7 (6)")  # R5: NaN -> +max
    assert _library_bits(nan.example.repro, F4) == int(nan.example.library.split()[0], 16)
    assert report.checked["numpy"] == (1, 0, 256)


def test_double_rounding_through_float_is_named() -> None:
    """ml_dtypes before 0.7 rounds DOUBLE through FLOAT, which compare names; 0.7 rounds once,
    as castlike does, and compare then finds no such difference (the oldest session runs the
    first half, the default sessions the second)."""
    double = spec_of("DOUBLE")
    report = compare(["numpy"], sources=[double], targets=[E4M3])
    causes = {d.cause for d in report.differences}
    if not resolve_profile("reference").rules.wide_sources_via_float:
        assert "double rounding" not in causes
        return
    assert "double rounding" in causes
    d = next(d for d in report.differences if d.cause == "double rounding")
    bits_in = int(d.example.input.split()[1], 16)
    x = np.array([bits_in], np.uint64).view(np.float64)
    via_float = castlike.cast(castlike.cast(x, "FLOAT"), "FLOAT8E4M3FN")
    assert NUMPY.bits(via_float, E4M3)[0] == _library_bits(d.example.repro, E4M3)
    assert NUMPY.bits(castlike.cast(x, "FLOAT8E4M3FN"), E4M3)[0] != via_float.view(np.uint8)[0]


def test_every_difference_counts_and_reproduces() -> None:
    report = compare(["numpy"], sources=[F16], targets=[INT4, E5M2])
    assert report.differences
    counts = report.counts()["numpy"]
    assert sum(counts.values()) == sum(d.count for d in report.differences)
    for d in report.differences:
        assert d.cause in CAUSES and d.count > 0
        target = spec_of(d.target)
        assert _library_bits(d.example.repro, target) == int(d.example.library.split()[0], 16)
    # Each (pair, mode, cause) appears once.
    keys = [(d.source, d.target, d.mode, d.cause) for d in report.differences]
    assert len(keys) == len(set(keys))


@needs("torch")
def test_torch_e5m2_nan_encoding() -> None:
    report = compare(["torch"], sources=[F16], targets=[E5M2])
    nan = [d for d in report.differences if d.cause == "NaN encoding"]
    assert {d.mode for d in nan} == {"saturate=1", "saturate=0"}
    assert all(d.example.library.startswith("0x7F") for d in nan)
    assert _library_bits(nan[0].example.repro, E5M2) == 0x7F


@needs("torch")
def test_a_pair_the_library_cannot_cast_is_listed_not_failed() -> None:
    report = compare(["torch"], sources=[F16], targets=[F4])
    assert report.checked["torch"] == (0, 1, 0)
    assert "FLOAT16 -> FLOAT4E2M1" in report.unsupported["torch"][0]


@needs("jax")
def test_jax_eager_and_jit_agree_here() -> None:
    report = compare(["jax", "jax.jit"], sources=[E4M3], targets=[F4])
    by = {
        lib: {(d.cause, d.count) for d in report.differences if d.library == lib}
        for lib in ("jax", "jax.jit")
    }
    assert by["jax"] == by["jax.jit"] == {("NaN encoding", 2)}


@needs("onnxruntime")
def test_onnxruntime_int4_ties() -> None:
    report = compare(["onnxruntime"], sources=[F16], targets=[INT4])
    if report.unsupported.get("onnxruntime"):  # onnxruntime 1.20 (the oldest) has no such Cast
        assert report.checked["onnxruntime"][1] == 1
        pytest.skip(f"onnxruntime cannot cast FLOAT16 -> INT4: {report.unsupported}")
    tie = next(d for d in report.differences if d.cause == "tie rounding")
    assert tie.example.input == "FLOAT16 0x3800 (0.5)"
    assert tie.example.library == "0x1 (1)" and tie.example.castlike == "0x0 (0)"


def test_unknown_library_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown library"):
        compare(["nope"])


def test_torch_compile_is_opt_in() -> None:
    assert "torch.compile" not in available_libraries()
    assert not LIBRARIES["torch.compile"].default


def test_compare_command_writes_json_and_html(tmp_path, capsys) -> None:
    out_json, out_html = tmp_path / "r" / "c.json", tmp_path / "c.html"
    argv = ["compare", "--library", "numpy", "--source", "FLOAT8E4M3FN", "--target", "23"]
    status = main([*argv, "--json", str(out_json), "--html", str(out_html), "--full"])
    assert status == 0
    out = capsys.readouterr().out
    assert "numpy, NaN encoding: FLOAT8E4M3FN -> FLOAT4E2M1, 2 element(s)" in out
    data = json.loads(out_json.read_text())
    assert data["counts"]["numpy"]["NaN encoding"] == 2
    assert data["differences"][0]["example"]["repro"].startswith("np.array([0x7f]")
    assert "FLOAT8E4M3FN -&gt; FLOAT4E2M1" in out_html.read_text()
