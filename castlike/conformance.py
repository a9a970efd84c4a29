"""ONNX conformance: run the ONNX node tests of Cast and CastLike on castlike's backends.

The cases come from the installed onnx (generated, as ``onnx.backend.test`` does), from
node-test directories (``model.onnx`` + ``test_data_set_0``) and from the data inside older
onnx wheels.  Each case runs on each selected backend, and its output is compared **bit for
bit** with the expected output:

* under the profile the data's onnx version encodes (R12): ``reference`` for onnx >= 1.19,
  ``legacy`` for onnx <= 1.18.  A difference here is a *failure*.
* under ``spec`` (castlike's default, the operator text).  A difference here is reported as a
  *difference* (the rules of R12 that explain it are named), never as a failure.

A case whose input or output type the backend cannot hold (R10) is *not representable*; a
STRING case before :mod:`castlike.strings` exists is *pending*.

The command line front end is ``castlike conformance`` (:mod:`castlike.cli.conformance`).
"""

from __future__ import annotations

import enum
import importlib.util
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from .backends import adapter_named
from .backends._numpy_dtypes import is_string_dtype
from .backends.numpy import ADAPTER as NUMPY
from .errors import BackendTypeError
from .spec.opsets import Op, version_for
from .spec.profiles import installed_ml_dtypes, resolve_profile
from .spec.rules import Mode, Profile, ProfileRules, RoundMode, _relevant_knobs, knob_effect
from .spec.types import TYPES, OnnxType, TypeSpec
from .testing import compare_bits, to_host

__all__ = [
    "CaseSet",
    "ConformanceCase",
    "ElementDiff",
    "Outcome",
    "Report",
    "Status",
    "collect_cases",
    "profile_for_model",
    "profile_for_onnx_version",
    "run_case",
    "run_conformance",
    "strings_available",
]

_T = OnnxType
#: The first onnx release whose node-test data follow the ``reference`` profile (R12).
REFERENCE_SINCE = (1, 19)
#: The newest default-domain opset of onnx 1.18 (data declaring it or less is ONNX <= 1.18).
LEGACY_MAX_OPSET = 23


class Status(enum.Enum):
    """The outcome of one case on one backend, under the data's profile."""

    PASS = "pass"
    FAIL = "fail"
    NOT_REPRESENTABLE = "not representable"
    PENDING = "pending"


@dataclass(frozen=True)
class ConformanceCase:
    """One node test and the profile its data encodes."""

    #: The node test's name, e.g. ``test_cast_FLOAT_to_FLOAT8E4M3FN``.
    name: str
    #: Where it came from: ``onnx 1.23.2``, ``onnx 1.14.1 wheel``, ``data DIR``.
    origin: str
    #: The profile under which castlike must reproduce it bit for bit.
    profile: Profile
    #: The case itself (a :class:`castlike.onnx_data.NodeCase`).
    node_case: Any = field(compare=False, repr=False)

    @property
    def label(self) -> str:
        """``origin: name``, unique across sources."""
        return f"{self.origin}: {self.name}"


@dataclass(frozen=True)
class CaseSet:
    """The cases of one source of test data."""

    origin: str
    profile: Profile
    cases: tuple[ConformanceCase, ...]
    #: What produced the expected outputs: the onnx (and ml_dtypes) that generated them here,
    #: or where they were stored.
    expected_by: str = ""


@dataclass(frozen=True)
class ElementDiff:
    """One differing element: its flat index, input, expected and actual value (hex or text)."""

    index: int
    input: str
    expected: str
    actual: str

    def describe(self) -> str:
        return (
            f"  [{self.index}] input {self.input} -> expected {self.expected}, actual {self.actual}"
        )


@dataclass
class Comparison:
    """A run of one case under one profile: equal, or the differing elements."""

    count: int = 0
    diffs: list[ElementDiff] = field(default_factory=list)
    error: str | None = None

    @property
    def equal(self) -> bool:
        return self.error is None and self.count == 0


@dataclass
class Outcome:
    """One case on one backend."""

    case: ConformanceCase
    backend: str
    status: Status
    #: Why (for fail, not representable, pending).
    message: str = ""
    #: The run under the data's profile (None when not run).
    profile_run: Comparison | None = None
    #: The run under ``spec`` (None when not run).
    spec_run: Comparison | None = None
    #: The R12 rules (ProfileRules fields) that can explain a spec difference for this pair.
    spec_rules: tuple[str, ...] = ()
    source: str = ""
    target: str = ""

    @property
    def spec_differs(self) -> bool:
        return self.spec_run is not None and not self.spec_run.equal

    def to_json(self) -> dict[str, Any]:
        def run(c: Comparison | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return {
                "equal": c.equal,
                "mismatches": c.count,
                "error": c.error,
                "elements": [vars(d) for d in c.diffs],
            }

        return {
            "case": self.case.name,
            "origin": self.case.origin,
            "profile": self.case.profile.value,
            "backend": self.backend,
            "source": self.source,
            "target": self.target,
            "status": self.status.value,
            "message": self.message,
            "profile_run": run(self.profile_run),
            "spec": None if self.spec_run is None else ("differs" if self.spec_differs else "same"),
            "spec_run": run(self.spec_run),
            "spec_rules": list(self.spec_rules),
        }


@dataclass
class Report:
    """Every outcome of a conformance run."""

    backends: list[str]
    outcomes: list[Outcome]
    sources: list[CaseSet]

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status is Status.FAIL]

    @property
    def spec_differences(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status is Status.PASS and o.spec_differs]

    def counts(self) -> dict[str, dict[str, int]]:
        """Per backend: how many cases of each status.

        ``"spec differs"`` is not a status of its own: it counts the passing cases (already in
        ``"pass"``) whose output differs under the default spec profile.
        """
        out: dict[str, dict[str, int]] = {}
        for backend in self.backends:
            row = {s.value: 0 for s in Status}
            row["spec differs"] = 0
            for o in self.outcomes:
                if o.backend == backend:
                    row[o.status.value] += 1
                    row["spec differs"] += int(o.status is Status.PASS and o.spec_differs)
            out[backend] = row
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "backends": self.backends,
            "sources": [
                {
                    "origin": s.origin,
                    "profile": s.profile.value,
                    "cases": len(s.cases),
                    "expected_by": s.expected_by,
                }
                for s in self.sources
            ],
            "summary": self.counts(),
            "failures": len(self.failures),
            "outcomes": [o.to_json() for o in self.outcomes],
        }


# -- collecting cases ---------------------------------------------------------------------------


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", version)[:2]
    if len(parts) < 2:
        raise ValueError(f"not an onnx version: {version!r}")
    return tuple(int(p) for p in parts)


def profile_for_onnx_version(version: str, *, generated_here: bool = False) -> Profile:
    """The profile an onnx release's node-test data encode (R12).

    ``legacy`` for onnx <= 1.18 (BFLOAT16 by truncation, and the other rules of that era).
    For onnx >= 1.19, whose ``onnx.reference`` casts through ml_dtypes, a ``reference``
    family: that of the installed onnx and ml_dtypes where the expected outputs were
    ``generated_here`` (the installed onnx's generators ran in this process), else that of
    onnx ``version`` with ml_dtypes 0.5-0.6, the releases current when onnx stored node-test
    files in its wheels.
    """
    if _version_tuple(version) < REFERENCE_SINCE:
        return Profile.LEGACY
    if generated_here:
        return resolve_profile("reference")
    major, minor = _version_tuple(version)[:2]
    return resolve_profile(f"reference:onnx-{major}.{minor}:ml_dtypes-{_STORED_DATA_ML_DTYPES}")


#: The ml_dtypes family of the node-test files stored in onnx >= 1.19 wheels.
_STORED_DATA_ML_DTYPES = "0.5"


def profile_for_model(model: Any) -> Profile:
    """A best guess of the profile for node-test data of unknown origin (``--data DIR``).

    The default-domain opset a test model declares is that of the onnx release which wrote it
    (the node tests use the newest opset): 23 or less means onnx <= 1.18, hence ``legacy``;
    newer data is taken to come from the ml_dtypes installed here (``reference``).
    """
    opset = max(
        (int(i.version) for i in model.opset_import if i.domain in ("", "ai.onnx")), default=0
    )
    return Profile.LEGACY if opset <= LEGACY_MAX_OPSET else resolve_profile("reference")


def _node_dirs(root: Path) -> list[Path]:
    """``root`` itself if it is a node-test directory, else its ``test_cast*`` subdirectories."""
    if (root / "model.onnx").exists():
        return [root]
    if not root.is_dir():
        raise FileNotFoundError(f"no node-test data in {root}")
    found = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("test_cast"))
    if not found:
        raise FileNotFoundError(f"{root} holds no test_cast* node-test directories")
    return found


def collect_cases(
    *,
    installed: bool = True,
    data: Iterable[str | Path] = (),
    onnx_versions: Iterable[str] = (),
    data_profile: Profile | None = None,
    cache_dir: Path | None = None,
) -> list[CaseSet]:
    """Gather the node tests of Cast and CastLike.

    Parameters
    ----------
    installed : bool
        The cases the installed onnx generates (its version picks the profile).
    data : iterable of path
        Node-test directories, or directories holding ``test_cast*`` ones.  The profile is
        ``data_profile`` if given, else guessed per model by :func:`profile_for_model`.
    onnx_versions : iterable of str
        onnx releases whose wheel data to use (downloaded once, cached, see
        :func:`castlike.onnx_data.wheel_node_dirs`).
    data_profile : Profile, optional
        Overrides the guess for ``data``.
    cache_dir : path, optional
        Cache root for the wheels (default :func:`castlike.testing.default_cache_dir`).
    """
    import onnx

    from .onnx_data import installed_cases, load_node_dir, wheel_node_dirs

    sets: list[CaseSet] = []
    if installed:
        origin = f"onnx {onnx.__version__}"
        profile = profile_for_onnx_version(onnx.__version__, generated_here=True)
        cases = tuple(ConformanceCase(c.name, origin, profile, c) for c in installed_cases())
        ml = installed_ml_dtypes() or "(not installed)"
        by = f"generated here by onnx {onnx.__version__}'s test generators, ml_dtypes {ml}"
        sets.append(CaseSet(origin, profile, cases, by))
    for version in onnx_versions:
        origin = f"onnx {version} wheel"
        profile = profile_for_onnx_version(version)
        dirs = wheel_node_dirs(version, cache_dir)
        cases = tuple(
            ConformanceCase(d.name, origin, profile, load_node_dir(d, origin)) for d in dirs
        )
        sets.append(CaseSet(origin, profile, cases, f"stored in the onnx {version} wheel"))
    for root in data:
        origin = f"data {root}"
        loaded = [load_node_dir(d, origin) for d in _node_dirs(Path(root))]
        by_profile: dict[Profile, list[ConformanceCase]] = {}
        for c in loaded:
            profile = data_profile or profile_for_model(c.model)
            by_profile.setdefault(profile, []).append(ConformanceCase(c.name, origin, profile, c))
        for profile, items in by_profile.items():
            sets.append(CaseSet(origin, profile, tuple(items), f"stored in {root}"))
    return sets


# -- running one case ---------------------------------------------------------------------------


def strings_available() -> bool:
    """Whether castlike's string rules (R9, ``castlike.strings``) are installed."""
    return importlib.util.find_spec("castlike.strings") is not None


def _declared_types(case: Any) -> tuple[list[int], int]:
    """Element types of the graph's inputs and of its output (as the model declares them)."""
    model = case.model
    if model is not None:
        ins = [
            int(i.type.tensor_type.elem_type) or t.data_type
            for i, t in zip(model.graph.input, case.inputs, strict=True)
        ]
        out = int(model.graph.output[0].type.tensor_type.elem_type) or case.outputs[0].data_type
        return ins, out
    return [int(t.data_type) for t in case.inputs], int(case.outputs[0].data_type)


def _mode_of(case: Any, source: TypeSpec, target: TypeSpec) -> Mode:
    """The node's options as a spec-profile :class:`Mode` (for naming the rules of R12)."""
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in case.node.attribute}
    op = Op.CAST_LIKE if case.node.op_type == "CastLike" else Op.CAST
    version = version_for(op, case.opset)
    round_mode = attrs.get("round_mode", b"up")
    if isinstance(round_mode, bytes):
        round_mode = round_mode.decode()
    return Mode(
        saturate=bool(attrs.get("saturate", 1)),
        round_mode=RoundMode(str(round_mode)),
        profile=Profile.SPEC,
        inf_to_fnuz_is_nan=bool(version and version.inf_to_fnuz_is_nan),
    ).effective_for(target)


def differing_rules(
    source: TypeSpec, target: TypeSpec, mode: Mode, profile: Profile
) -> tuple[str, ...]:
    """The R12 rules (``ProfileRules`` fields) in which ``profile`` and ``spec`` differ and
    which can change a ``source`` -> ``target`` cast under ``mode``."""
    relevant = _relevant_knobs(source, target, mode)
    return tuple(
        f.name
        for f in fields(ProfileRules)
        if f.name in relevant
        and knob_effect(Profile.SPEC, f.name, source, target)
        != knob_effect(profile, f.name, source, target)
    )


def _hex(bits: int, t: TypeSpec) -> str:
    return f"0x{int(bits):0{max(1, (t.bits + 3) // 4)}X}"


def _show_input(x: np.ndarray, index: int, source: TypeSpec) -> str:
    flat = x.reshape(-1)
    if source.code == _T.STRING:
        return repr(str(flat[index]))
    return _hex(int(NUMPY.bits(flat[index : index + 1], source)[0]), source)


def _compare(
    result: Any,
    expected: np.ndarray,
    x: np.ndarray,
    source: TypeSpec,
    target: TypeSpec,
    limit: int,
) -> Comparison:
    """Compare a backend's result with the expected output: bits, or text for STRING."""
    host = to_host(result)
    if tuple(host.shape) != tuple(expected.shape):
        return Comparison(error=f"shape {tuple(host.shape)} != expected {tuple(expected.shape)}")
    if target.code == _T.STRING:
        if not is_string_dtype(host.dtype):
            return Comparison(error=f"a {host.dtype} array where strings were expected")
        got = [str(v) for v in host.reshape(-1).tolist()]
        want = [str(v) for v in expected.reshape(-1).tolist()]
        idx = [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
        diffs = [
            ElementDiff(i, _show_input(x, i, source), repr(want[i]), repr(got[i]))
            for i in idx[:limit]
        ]
        return Comparison(len(idx), diffs)
    try:
        got_type = NUMPY.onnx_type_of(host.dtype)
    except TypeError:  # pragma: no cover - defensive
        got_type = None
    if got_type != _T(target.code):
        return Comparison(error=f"dtype {host.dtype} where {target.name} was expected")
    expected_bits = NUMPY.bits(expected.reshape(-1), target)
    # compare_bits wants the inputs' bits for its report; strings have none, so the expected
    # array stands in and the inputs are shown from ``x`` below.
    stand_in_source, stand_in = (target, expected) if source.code == _T.STRING else (source, x)
    # NaN into IEEE targets as "is NaN": the ONNX data's NaN signs differ between onnx versions
    # (the 1.14.1 wheel has +NaN for FNUZ 0x80 -> FLOAT, where R3 gives -NaN).
    mismatch = compare_bits(host, expected_bits, stand_in_source, target, stand_in, exact_nan=False)
    if mismatch is None:
        return Comparison()
    diffs = [
        ElementDiff(int(i), _show_input(x, int(i), source), _hex(e, target), _hex(a, target))
        for i, e, a in zip(
            mismatch.indices[:limit],
            mismatch.expected[:limit],
            mismatch.actual[:limit],
            strict=True,
        )
    ]
    return Comparison(mismatch.count, diffs)


def _run(
    case: Any, inputs: list[np.ndarray], backend: str, profile: Profile
) -> tuple[Any, str | None]:
    from .onnx import run_node

    node_or_model = case.model if case.model is not None else case.node
    values: Sequence[Any] = inputs if case.model is not None else inputs[: len(case.node.input)]
    opset = None if case.model is not None else case.opset
    try:
        (result,) = run_node(
            node_or_model, values, opset=opset, backend=backend, profile=profile.value
        )
    except BackendTypeError:
        raise
    except Exception as exc:  # a crash is this case's verdict (a failure), not the run's end
        return None, f"{type(exc).__name__}: {exc}"
    return result, None


def run_case(case: ConformanceCase, backend: str, *, limit: int = 8) -> Outcome:
    """Run one case on one backend under its data's profile and under ``spec``."""
    from .onnx import as_declared, to_array

    nc = case.node_case
    in_types, out_type = _declared_types(nc)
    source, target = TYPES[_T(in_types[0])], TYPES[_T(out_type)]
    outcome = Outcome(case, backend, Status.PASS, source=source.name, target=target.name)
    if _T.STRING in (_T(source.code), _T(target.code)) and not strings_available():
        outcome.status = Status.PENDING
        outcome.message = "STRING casts need castlike.strings (R9), not installed yet"
        return outcome
    adapter = adapter_named(backend)
    for t in (source, target):
        if t.code != _T.STRING and adapter.library_dtype(t) is None:
            outcome.status = Status.NOT_REPRESENTABLE
            outcome.message = f"{backend} cannot hold {t.name}"
            return outcome
    inputs = [as_declared(to_array(t), d) for t, d in zip(nc.inputs, in_types, strict=True)]
    expected = as_declared(to_array(nc.outputs[0]), out_type)
    runs: dict[Profile, Comparison] = {}
    for profile in dict.fromkeys((case.profile, Profile.SPEC)):
        try:
            result, error = _run(nc, inputs, backend, profile)
        except BackendTypeError as exc:
            outcome.status = Status.NOT_REPRESENTABLE
            outcome.message = str(exc)
            return outcome
        if error is not None:
            runs[profile] = Comparison(error=error)
        else:
            runs[profile] = _compare(result, expected, inputs[0], source, target, limit)
    outcome.profile_run = runs[case.profile]
    outcome.spec_run = runs[Profile.SPEC]
    if not outcome.profile_run.equal:
        outcome.status = Status.FAIL
        outcome.message = describe(outcome, outcome.profile_run, case.profile)
    if outcome.spec_differs:
        mode = _mode_of(nc, source, target)
        outcome.spec_rules = differing_rules(source, target, mode, case.profile)
    return outcome


def describe(outcome: Outcome, run: Comparison, profile: Profile) -> str:
    """A readable account of a run that did not reproduce the expected output."""
    head = (
        f"{outcome.case.label} on {outcome.backend} ({outcome.source} -> {outcome.target}, "
        f"profile {profile.value})"
    )
    if run.error is not None:
        return f"{head}: {run.error}"
    more = f"\n  ... and {run.count - len(run.diffs)} more" if run.count > len(run.diffs) else ""
    return (
        f"{head}: {run.count} mismatching element(s):\n"
        + "\n".join(d.describe() for d in run.diffs)
        + more
    )


def run_conformance(
    sets: Sequence[CaseSet],
    backends: Sequence[str],
    *,
    progress: Callable[[Outcome], None] | None = None,
) -> Report:
    """Run every case of ``sets`` on every backend (by name); ``progress`` sees each outcome."""
    outcomes = []
    for case_set in sets:
        for case in case_set.cases:
            for backend in backends:
                outcome = run_case(case, backend)
                outcomes.append(outcome)
                if progress is not None:
                    progress(outcome)
    return Report(list(backends), outcomes, list(sets))
