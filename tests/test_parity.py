"""The parity and conformance machinery (``castlike parity``, ``castlike conformance``) on
small subsets, and proof that both catch a deliberate one-bit error in one backend."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from castlike.backends import adapter_named, moves_strings
from castlike.cli import main
from castlike.parity import CellStatus, checks_for, input_keys, run_parity
from castlike.spec.rules import Profile
from castlike.spec.types import TYPES, OnnxType, TypeSpec
from castlike.testing import fresh_caches, inputs_for

pytestmark = pytest.mark.parity

_T = OnnxType
SOURCES = [TYPES[_T.FLOAT8E4M3FN], TYPES[_T.INT4], TYPES[_T.FLOAT]]
TARGETS = [TYPES[_T.FLOAT8E5M2FNUZ], TYPES[_T.UINT2], TYPES[_T.BFLOAT16], TYPES[_T.FLOAT4E2M1]]


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def test_checks_cover_every_mode_and_the_old_fnuz_rule() -> None:
    fnuz = checks_for(TYPES[_T.FLOAT], TYPES[_T.FLOAT8E4M3FNUZ])
    plain = checks_for(TYPES[_T.FLOAT], TYPES[_T.FLOAT8E4M3FN])
    profiles = len(Profile)  # spec, the reference families, legacy
    assert len(plain) == profiles * 2 * 3  # x saturate on/off x 3 round modes
    assert len(fnuz) == len(plain) + profiles  # + Cast-23 with saturate on, every profile
    assert {c.opset for c in fnuz} == {None, 23}
    # Cast-23 has no INT2: no opset-23 checks for it.
    assert {c.opset for c in checks_for(TYPES[_T.INT2], TYPES[_T.FLOAT8E4M3FNUZ])} == {None}


def test_input_keys() -> None:
    f16, f32, i8 = TYPES[_T.FLOAT16], TYPES[_T.FLOAT], TYPES[_T.INT8]
    assert input_keys(i8, exhaustive=False, seed=1, n_random=9) == ["all"]
    assert input_keys(f16, exhaustive=True, seed=1, n_random=9) == ["all"]
    assert input_keys(f16, exhaustive=False, seed=1, n_random=9) == ["random-9-1"]
    assert input_keys(f32, exhaustive=True, seed=1, n_random=9) == ["curated", "random-9-1"]


def test_parity_on_a_subset(backend: str, oracle_cache: Path) -> None:
    report = run_parity(
        [backend], sources=SOURCES, targets=TARGETS, cache_dir=oracle_cache, n_random=256, seed=3
    )
    assert report.ok, "\n".join(
        [m.text for k in report.failed for m in report.cells[k].mismatches]
        + [report.cells[k].reason for k in report.failed]
    )
    adapter = adapter_named(backend)
    for s in SOURCES:
        keys = input_keys(s, exhaustive=False, seed=3, n_random=256)
        size = sum(inputs_for(s, k).size for k in keys)
        for t in TARGETS:
            cell = report.cell(s, t, backend)
            one_per_byte = adapter.library_dtype(t) is not None
            packed = t.is_sub_byte and adapter.holds_packed(t)
            if adapter.library_dtype(s) is not None and (one_per_byte or packed):
                assert cell.status is CellStatus.PASS
                assert cell.checks == len(checks_for(s, t))
                assert cell.elements == size
                want = ("one per byte",) * one_per_byte + ("packed",) * packed
                assert cell.layouts == want
            else:
                assert cell.status is CellStatus.NOT_REPRESENTABLE
                assert backend in cell.reason
    data = report.to_json()
    assert data["ok"] is True
    assert len(data["pairs"]) == len(SOURCES) * len(TARGETS)


def test_parity_places_the_inputs_on_the_device(backend: str, oracle_cache: Path) -> None:
    """``device="cpu"`` is a place every backend has: the same verdicts, and the report says
    where the inputs were."""
    report = run_parity(
        [backend], sources=SOURCES[:1], targets=TARGETS[:2], cache_dir=oracle_cache, device="cpu"
    )
    assert report.ok, [report.cells[k].reason for k in report.failed]
    assert report.to_json()["device"] == "cpu"


def test_parity_refuses_a_device_before_any_work(tmp_path: Path) -> None:
    """A device that a backend cannot reach stops the run before the oracle fills its cache."""
    with pytest.raises(ValueError, match="numpy holds its arrays on the host"):
        run_parity(["numpy"], sources=SOURCES[:1], cache_dir=tmp_path, device="cuda")
    assert not any(tmp_path.iterdir())


def test_a_result_off_its_inputs_device_is_an_error(
    monkeypatch: pytest.MonkeyPatch, oracle_cache: Path
) -> None:
    """A cast whose result leaves the input's device is an error in the report, whatever its
    bits: a wrapper puts one pair's results on torch's meta device."""
    pytest.importorskip("torch", reason="the check needs torch (a second device: meta)")
    import castlike

    source, target = TYPES[_T.FLOAT8E4M3FN], TYPES[_T.BFLOAT16]
    real = castlike.cast

    def moving(x: Any, to: Any, **options: Any) -> Any:
        out = real(x, to, **options)
        return out.to("meta") if to == target.name else out

    monkeypatch.setattr(castlike, "cast", moving)
    report = run_parity(
        ["torch"], sources=[source], targets=[target], cache_dir=oracle_cache, device="cpu"
    )
    cell = report.cell(source, target, "torch")
    assert cell.status is CellStatus.ERROR
    assert "the result is on meta, its input on cpu" in cell.reason


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or not _cuda_available(),
    reason="no CUDA device on this machine (or no torch)",
)
def test_parity_on_a_cuda_device(oracle_cache: Path) -> None:
    """Torch's casts on a CUDA device (the torch-op path) against the oracle."""
    report = run_parity(
        ["torch"], sources=SOURCES, targets=TARGETS, cache_dir=oracle_cache, device="cuda"
    )
    assert report.ok, [report.cells[k].reason for k in report.failed] + [
        m.text for k in report.failed for m in report.cells[k].mismatches
    ]


# -- a deliberate one-bit error --------------------------------------------------------------


class _FlipOneBit:
    """An engine wrapper that flips the lowest bit of element 0 of one pair's results."""

    def __init__(self, engine: Any, adapter: Any, source: TypeSpec, target: TypeSpec) -> None:
        self.engine, self.adapter, self.source, self.target = engine, adapter, source, target

    def cast(self, x: Any, plan: Any) -> Any:
        out = self.engine.cast(x, plan)
        if (plan.source.code, plan.target.code) != (self.source.code, self.target.code):
            return out
        host = np.array(self.adapter.to_numpy(out))  # a writable copy
        flat = host.reshape(-1).view(f"uint{plan.target.storage_bits}")
        flat[0] ^= 1
        return self.adapter.from_numpy(host)


def _holds_float8(backend: str) -> bool:
    return adapter_named(backend).library_dtype(TYPES[_T.FLOAT8E4M3FN]) is not None


def _broken_pair(backend: str) -> tuple[TypeSpec, TypeSpec]:
    if _holds_float8(backend):
        return TYPES[_T.FLOAT], TYPES[_T.FLOAT8E4M3FN]
    return TYPES[_T.DOUBLE], TYPES[_T.FLOAT]


def test_worker_processes_give_the_same_report(oracle_cache: Path) -> None:
    """``processes=2`` splits the source types between two spawned workers: the same cells, in
    the same order, and the progress reaches the total."""
    names = [OnnxType.INT4, OnnxType.FLOAT8E4M3FN, OnnxType.FLOAT16, OnnxType.FLOAT]
    sources = [TYPES[n] for n in names]
    targets = [TYPES[n] for n in (OnnxType.FLOAT8E5M2, OnnxType.INT8, OnnxType.FLOAT16)]
    reports = {}
    for processes in (1, 2):
        seen: list[tuple[int, int]] = []
        reports[processes] = run_parity(
            ["numpy"],
            sources=sources,
            targets=targets,
            cache_dir=oracle_cache,
            n_random=256,
            processes=processes,
            progress=lambda done, total, seen=seen: seen.append((done, total)),
        )
        assert seen and seen[-1][0] == seen[-1][1]
    one, two = (reports[p].to_json() for p in (1, 2))
    for data in (one, two):
        del data["seconds"], data["oracle_seconds"]
    assert one == two
    assert list(reports[1].cells) == list(reports[2].cells)
    assert reports[2].ok


@pytest.fixture
def broken_backend(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, TypeSpec, TypeSpec]]:
    """The backend under test, with FLOAT -> FLOAT8E4M3FN element 0 off by one bit (DOUBLE ->
    FLOAT where the library cannot hold FLOAT8E4M3FN, as the standard's dtypes cannot)."""
    adapter = adapter_named(backend)
    source, target = _broken_pair(backend)
    real_engine = adapter.engine

    def engine() -> Any:
        return _FlipOneBit(real_engine(), adapter, source, target)

    with monkeypatch.context() as m, fresh_caches():
        m.setattr(adapter, "engine", engine)
        yield backend, source, target


def test_parity_catches_one_flipped_bit(
    broken_backend: tuple[str, TypeSpec, TypeSpec], oracle_cache: Path
) -> None:
    backend, source, target = broken_backend
    report = run_parity(
        ["numpy", backend] if backend != "numpy" else ["numpy"],
        sources=[source],
        targets=[target],
        cache_dir=oracle_cache,
        n_random=64,
    )
    assert not report.ok
    assert report.failed == [(source.name, target.name, backend)]
    cell = report.cell(source, target, backend)
    assert cell.status is CellStatus.MISMATCH
    assert len(cell.mismatches) == len(checks_for(source, target))  # every mode, one element
    for m in cell.mismatches:
        assert m.count == 1
        (input_bits, expected, actual) = m.examples[0]
        assert int(expected, 16) ^ int(actual, 16) == 1
        assert f"{source.name} -> {target.name}" in m.text
        assert f"input {input_bits} -> expected {expected}, actual {actual}" in m.text
    if backend != "numpy":  # the other backend, fed the same inputs, still passes
        assert report.cell(source, target, "numpy").status is CellStatus.PASS


def test_parity_command_fails_and_names_the_bits(
    broken_backend: tuple[str, TypeSpec, TypeSpec],
    oracle_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    backend, source, target = broken_backend
    args = ["parity", "--backend", backend, "--source", source.name, "--target", target.name]
    args += ["--random", "64", "--cache-dir", str(oracle_cache), "--json", str(tmp_path / "p.json")]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert f"{source.name} -> {target.name}" in out
    assert "MISMATCH" in out
    cell = json.loads((tmp_path / "p.json").read_text())["pairs"][0]["backends"][backend]
    assert cell["status"] == "mismatch"
    example = cell["mismatches"][0]["examples"][0]
    line = f"input {example['input']} -> expected {example['expected']}, actual {example['actual']}"
    assert line in out
    assert int(example["expected"], 16) ^ int(example["actual"], 16) == 1


def test_parity_command_passes(
    backend: str, oracle_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["parity", "--source", "INT4", "--target", "FLOAT8E8M0", "--target", "INT8"]
    args += ["--cache-dir", str(oracle_cache), "--backend", backend]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "no mismatch" in out


def test_parity_command_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parity", "--source", "NOPE"]) == 2
    assert "unknown ONNX type name" in capsys.readouterr().err
    assert main(["parity", "--source", "STRING"]) == 2
    assert "numeric" in capsys.readouterr().err


def test_html_and_png_show_the_mismatch(
    broken_backend: tuple[str, TypeSpec, TypeSpec], oracle_cache: Path, tmp_path: Path
) -> None:
    from castlike._parity_render import COLOURS, render_html, render_png

    backend, source, target = broken_backend
    others = (_T.INT4, _T.FLOAT4E2M1) if _holds_float8(backend) else (_T.INT32, _T.DOUBLE)
    report = run_parity(
        [backend],
        sources=[source, TYPES[others[0]]],
        targets=[target, TYPES[others[1]]],
        cache_dir=oracle_cache,
        n_random=64,
    )
    render_html(report, tmp_path / "p.html")
    page = (tmp_path / "p.html").read_text()
    assert f"{source.name} -&gt; {target.name} on {backend}: mismatch" in page
    assert "rgb(207,34,46)" in page  # a red stripe
    pil = pytest.importorskip("PIL.Image", reason="--png needs Pillow (castlike[cli])")
    render_png(report, tmp_path / "p.png")
    with pil.open(tmp_path / "p.png") as image:
        colours = {c for _, c in image.convert("RGB").getcolors(maxcolors=1 << 20)}
    assert COLOURS[CellStatus.MISMATCH] in colours
    assert COLOURS[CellStatus.PASS] in colours


# -- conformance -------------------------------------------------------------------------------

needs_onnx = pytest.mark.skipif(
    importlib.util.find_spec("onnx") is None,
    reason="the conformance machinery needs onnx (pip install castlike[onnx])",
)


def _installed(*names: str) -> Any:
    from castlike.conformance import collect_cases

    (case_set,) = collect_cases()
    cases = tuple(c for c in case_set.cases if c.name in names)
    assert len(cases) == len(names)
    return type(case_set)(case_set.origin, case_set.profile, cases)


@needs_onnx
def test_conformance_on_a_subset(backend: str) -> None:
    from castlike.conformance import Status, run_conformance
    from castlike.spec.profiles import resolve_profile

    subset = _installed("test_cast_FLOAT_to_FLOAT4E2M1", "test_castlike_FLOAT16_to_INT4_expanded")
    # Generated here: the family of the installed ml_dtypes.
    assert subset.profile is resolve_profile("reference")
    # ml_dtypes 0.7 zeroes floats beyond INT4's range, where the spec keeps their low bits.
    zeroes = subset.profile.rules.ml_dtypes_float_to_int == "zero_beyond_range"
    report = run_conformance([subset], [backend])
    for o in report.outcomes:
        holds = all(
            adapter_named(o.backend).library_dtype(TYPES[_T[n]]) is not None
            for n in (o.source, o.target)
        )
        assert o.status is (Status.PASS if holds else Status.NOT_REPRESENTABLE), o.message
        if holds and o.case.name == "test_cast_FLOAT_to_FLOAT4E2M1":
            # R12: NaN -> FLOAT4E2M1 is +max by the spec, -0 in onnx.reference.
            assert o.spec_differs
            assert o.spec_rules == ("finite_only_nan",)
            assert [vars(d) for d in o.spec_run.diffs] == [
                {"index": 8, "input": "0x7FC00000", "expected": "0x8", "actual": "0x7"}
            ]
        elif holds and zeroes:
            assert o.spec_differs and "ml_dtypes_float_to_int" in o.spec_rules
        elif holds:
            assert not o.spec_differs


def _write_node_dir(case: Any, root: Path) -> Path:
    from onnx import save

    path = root / case.name
    data = path / "test_data_set_0"
    data.mkdir(parents=True)
    save(case.model, str(path / "model.onnx"))
    for i, t in enumerate(case.inputs):
        (data / f"input_{i}.pb").write_bytes(t.SerializeToString())
    for i, t in enumerate(case.outputs):
        (data / f"output_{i}.pb").write_bytes(t.SerializeToString())
    return path


@needs_onnx
def test_conformance_catches_one_flipped_bit(
    broken_backend: tuple[str, TypeSpec, TypeSpec],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from castlike.conformance import Status, run_conformance
    from castlike.spec.profiles import resolve_profile

    backend, source, target = broken_backend
    broken_case = f"test_cast_{source.name}_to_{target.name}"
    other = "test_cast_FLOAT_to_FLOAT16" if _holds_float8(backend) else "test_cast_FLOAT_to_DOUBLE"
    subset = _installed(broken_case, other)
    report = run_conformance([subset], [backend])
    (failed,) = report.failures
    assert failed.case.name == broken_case
    assert failed.status is Status.FAIL
    (diff,) = failed.profile_run.diffs
    assert int(diff.expected, 16) ^ int(diff.actual, 16) == 1
    assert f"{source.name} -> {target.name}" in failed.message
    assert f"input {diff.input} -> expected {diff.expected}, actual {diff.actual}" in (
        failed.message
    )
    # The command, on the same case written as a node-test directory (--data).
    _write_node_dir(failed.case.node_case, tmp_path)
    args = ["conformance", "--no-installed", "--data", str(tmp_path), "--backend", backend]
    args += ["--json", str(tmp_path / "c.json")]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out
    assert f"input {diff.input} -> expected {diff.expected}, actual {diff.actual}" in out
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["failures"] == 1
    # Data of a newer opset than onnx 1.18's: the reference family installed here.
    assert data["outcomes"][0]["profile"] == resolve_profile("reference").value


@needs_onnx
def test_conformance_command_passes(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = _installed("test_cast_FLOAT16_to_FLOAT4E2M1", "test_castlike_INT4_to_FLOAT_expanded")
    for c in cases.cases:
        _write_node_dir(c.node_case, tmp_path)
    args = ["conformance", "--no-installed", "--data", str(tmp_path)]
    args += ["--data-profile", "reference", "--backend", backend]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "test_cast_FLOAT16_to_FLOAT4E2M1" in out
    if adapter_named(backend).library_dtype(TYPES[_T.FLOAT4E2M1]) is not None:
        assert "finite_only_nan" in out  # the spec difference is reported, not failed
    else:
        assert "n/r" in out


@needs_onnx
def test_conformance_command_rejects_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", "--no-installed"]) == 2
    assert "nothing to run" in capsys.readouterr().err
    assert main(["conformance", "--no-installed", "--data", str(tmp_path)]) == 2
    assert "no test_cast" in capsys.readouterr().err


@needs_onnx
def test_profile_for_version() -> None:
    from castlike.conformance import profile_for_onnx_version
    from castlike.spec.profiles import resolve_profile
    from castlike.spec.rules import Profile

    assert profile_for_onnx_version("1.14.1") is Profile.LEGACY
    assert profile_for_onnx_version("1.18.0") is Profile.LEGACY
    # Files stored in wheels: the ml_dtypes of their day; generated here: the installed one.
    assert profile_for_onnx_version("1.19.0") is Profile.REFERENCE_ONNX_1_19_ML_DTYPES_0_5
    assert profile_for_onnx_version("1.23.2") is Profile.REFERENCE_ML_DTYPES_0_5
    installed = resolve_profile("reference")
    assert profile_for_onnx_version("1.23.2", generated_here=True) is installed
    assert profile_for_onnx_version("2.0.0rc1", generated_here=True) is installed
    assert profile_for_onnx_version("1.18.0", generated_here=True) is Profile.LEGACY


# -- the data of older onnx wheels (legacy profile) -------------------------------------------

_E5M2_NAN = {
    "test_cast_FLOAT16_to_FLOAT8E5M2",
    "test_cast_FLOAT_to_FLOAT8E5M2",
    "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2",
    "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2",
    "test_castlike_FLOAT_to_FLOAT8E5M2",
    "test_castlike_FLOAT_to_FLOAT8E5M2_expanded",
}
_INT4_SATURATION = {
    "test_cast_FLOAT16_to_INT4",
    "test_cast_FLOAT16_to_UINT4",
    "test_cast_FLOAT_to_INT4",
    "test_cast_FLOAT_to_UINT4",
}
_BFLOAT16_TRUNCATION = {
    "test_cast_FLOAT_to_BFLOAT16",
    "test_castlike_FLOAT_to_BFLOAT16",
    "test_castlike_FLOAT_to_BFLOAT16_expanded",
}
_FNUZ_INF = {
    f"test_{op}_{source}_to_FLOAT8{fnuz}FNUZ{suffix}"
    for fnuz in ("E4M3", "E5M2")
    for op, source, suffix in (
        ("cast", "FLOAT", ""),
        ("cast", "FLOAT16", ""),
        ("castlike", "FLOAT", ""),
        ("castlike", "FLOAT", "_expanded"),
    )
}
_EVERY_WHEEL = {
    **{name: ("bfloat16",) for name in _BFLOAT16_TRUNCATION},
    **{name: ("fnuz_inf",) for name in _FNUZ_INF},
    **{name: ("float8e5m2_nan",) for name in _E5M2_NAN},
}
#: Spec-profile differences of each wheel's data, by case and the R12 rule behind it (all
#: listed in docs/conformance.rst).  onnx <= 1.18 saturated float -> INT4/UINT4; 1.14.1's
#: INT4 inputs stay in range.
WHEEL_SPEC_DIFFERENCES = {
    "1.14.1": _EVERY_WHEEL,
    "1.16.2": {**_EVERY_WHEEL, **{name: ("sub_byte_range",) for name in _INT4_SATURATION}},
    "1.18.0": {**_EVERY_WHEEL, **{name: ("sub_byte_range",) for name in _INT4_SATURATION}},
}


@needs_onnx
@pytest.mark.parametrize("version", sorted(WHEEL_SPEC_DIFFERENCES))
def test_wheel_data_with_the_legacy_profile(version: str, backend: str) -> None:
    """Every case of the wheel passes under the legacy profile, STRING and truncating BFLOAT16
    included; the spec profile differs exactly where documented."""
    from castlike.conformance import Status, collect_cases, run_conformance
    from castlike.spec.rules import Profile

    (case_set,) = collect_cases(installed=False, onnx_versions=[version])
    assert case_set.profile is Profile.LEGACY
    report = run_conformance([case_set], [backend])
    by_status: dict[Status, set[str]] = {s: set() for s in Status}
    for o in report.outcomes:
        by_status[o.status].add(o.case.name)
    adapter = adapter_named(backend)
    # Strings are NumPy arrays whatever the library (R9), except on the generic Array-API
    # backend, which moves no data between libraries and refuses STRING.
    strings_held = moves_strings(adapter)
    holdable = {
        o.case.name
        for o in report.outcomes
        if all(
            adapter.library_dtype(TYPES[_T[n]]) is not None or (n == "STRING" and strings_held)
            for n in (o.source, o.target)
        )
    }
    assert by_status[Status.PENDING] == set()  # castlike.strings is part of castlike
    assert by_status[Status.NOT_REPRESENTABLE] == {o.case.name for o in report.outcomes} - holdable
    assert by_status[Status.FAIL] == set()
    strings = {name for name in holdable if "STRING" in name}
    assert len(strings) == (6 if strings_held else 0)
    assert strings <= by_status[Status.PASS]
    if adapter.library_dtype(TYPES[_T.BFLOAT16]) is not None:
        assert by_status[Status.PASS] >= _BFLOAT16_TRUNCATION
    differs = {o.case.name: o.spec_rules for o in report.spec_differences}
    expected = WHEEL_SPEC_DIFFERENCES[version]
    assert differs == {k: v for k, v in expected.items() if k in holdable}


def test_docs_list_the_wheel_differences_and_gaps() -> None:
    text = (Path(__file__).parent.parent / "docs" / "conformance.rst").read_text()
    for name in set().union(*WHEEL_SPEC_DIFFERENCES.values()):
        base = name.removesuffix("_expanded")
        assert base in text, f"docs/conformance.rst does not list {name}"


@pytest.mark.numpy_session
def test_parity_catches_a_wrong_packed_bit(
    monkeypatch: pytest.MonkeyPatch, oracle_cache: Path
) -> None:
    """A packing error that leaves the one-per-byte results right is still a mismatch: the
    packed results are read back by the spec's reference, not by the kernels."""
    adapter = adapter_named("numpy")
    real = type(adapter.engine()).cast_packed

    def flipped(self: Any, x: Any, plan: Any, *, source_row: Any, pack: bool) -> Any:
        out = np.array(real(self, x, plan, source_row=source_row, pack=pack))
        if pack:
            out.reshape(-1)[0] ^= 1
        return out

    monkeypatch.setattr(type(adapter.engine()), "cast_packed", flipped)
    source, target = TYPES[_T.FLOAT], TYPES[_T.INT4]
    # Without the repeat path, which a packed cast earlier in the process (another test's) had
    # left holding a kernel that skips the replaced engine: one check then passed.
    with fresh_caches():
        report = run_parity(["numpy"], sources=[source], targets=[target], cache_dir=oracle_cache)
    cell = report.cell(source, target, "numpy")
    assert cell.status is CellStatus.MISMATCH
    assert cell.layouts == ("one per byte", "packed")
    assert all(m.check.endswith(", packed") for m in cell.mismatches)
    assert len(cell.mismatches) == len(checks_for(source, target))
