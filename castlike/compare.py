"""Where the libraries you have differ from the ONNX rule, and why.

For each installed library's *own* conversion (ml_dtypes ``astype``, torch ``.to`` eager and,
on request, under ``torch.compile``, jax ``astype`` eager and under ``jax.jit``, the
onnxruntime ``Cast`` kernel, and ``onnx.reference``), :func:`compare` casts the same inputs as
``castlike parity`` (every bit pattern of the 8- and 16-bit types, the curated values of the
32- and 64-bit ones) and compares the bits with castlike's (the ``spec`` profile, which the
parity tests prove equal to the exact oracle).  Every differing element is put down to one
cause:

``NaN encoding``
    the input is NaN, or both results are NaNs with different bits;
``saturation``
    the input is infinite or beyond the target's largest value (max vs Inf vs NaN);
``double rounding``
    a 32/64-bit source rounded through FLOAT first gives the library's answer (not counted for
    FLOAT8E8M0 targets, where libraries round by modes of their own);
``subnormal flush``
    a subnormal input, or a nonzero result, became zero;
``tie rounding``
    the input lies exactly halfway between two target values;
``out-of-range integers``
    NaN, Inf, or a value beyond an integer target's range (the text calls it undefined);
``other``
    anything else.

Each (library, pair, mode, cause) gets a count and one example with a line of code that
reproduces the library's side.  IEEE targets of 16 bits or more compare NaN as "is NaN" (rule
R3 leaves their payloads open).  The command line front end is ``castlike compare``.

Examples
--------
>>> from castlike.compare import compare
>>> from castlike.spec.types import spec_of
>>> report = compare(["numpy"], sources=[spec_of("FLOAT8E4M3FN")], targets=[spec_of("FLOAT4E2M1")])
>>> sorted({d.cause for d in report.differences})
['NaN encoding', 'saturation']
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.metadata
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import castlike

from .backends import adapter_named
from .backends.numpy import ADAPTER as NUMPY
from .spec.reference import Exact, decode, round_to_format
from .spec.rules import SATURATE_TYPES, WIDE_SOURCES, Mode
from .spec.types import Kind, OnnxType, Special, TypeSpec
from .testing import compare_bits, inputs_for, numeric_types

__all__ = [
    "CAUSES",
    "LIBRARIES",
    "CompareReport",
    "Difference",
    "Example",
    "available_libraries",
    "compare",
    "modes_for",
    "summarize",
]

_T = OnnxType
CAUSES = (
    "NaN encoding",
    "saturation",
    "double rounding",
    "subnormal flush",
    "tie rounding",
    "out-of-range integers",
    "other",
)
#: The opset of the ONNX models run by onnxruntime and onnx.reference.
_ONNX_OPSET = 25


# == what each library is asked to do ==========================================================


def _storage_int(t: TypeSpec) -> str:
    return f"uint{t.storage_bits}"


def _np_name(t: TypeSpec) -> str:
    dtype = NUMPY.library_dtype(t)
    name = str(dtype)
    return f"np.{name}" if hasattr(np, name) and t.bits >= 8 else f"ml_dtypes.{name}"


def _np_input(bits: int, t: TypeSpec) -> str:
    return f"np.array([{bits:#x}], np.{_storage_int(t)}).view({_np_name(t)})"


def _numpy_run(x: np.ndarray, source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    return x.astype(NUMPY.library_dtype(target))


def _numpy_repro(bits: int, source: TypeSpec, target: TypeSpec, mode: Mode) -> str:
    return f"{_np_input(bits, source)}.astype({_np_name(target)})"


def _torch_dtype(t: TypeSpec) -> str:
    return str(adapter_named("torch").library_dtype(t))


def _dtype_of(library: str, t: TypeSpec) -> Any:
    dtype = adapter_named(library).library_dtype(t)
    if dtype is None:
        raise TypeError(f"{library} has no dtype for {t.name}")
    return dtype


def _torch_run(x: np.ndarray, source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    torch = adapter_named("torch")
    return torch.to_numpy(torch.from_numpy(x).to(_dtype_of("torch", target)))


_TORCH_VIEW = {8: "torch.uint8", 16: "torch.int16", 32: "torch.int32", 64: "torch.int64"}


def _torch_input(bits: int, t: TypeSpec) -> str:
    width = t.storage_bits
    signed = bits - (1 << width) if width > 8 and bits >> (width - 1) else bits
    return f"torch.tensor([{signed}], dtype={_TORCH_VIEW[width]}).view({_torch_dtype(t)})"


def _torch_repro(bits: int, source: TypeSpec, target: TypeSpec, mode: Mode) -> str:
    return f"{_torch_input(bits, source)}.to({_torch_dtype(target)})"


def _torch_compile_run(x: np.ndarray, source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    import torch as _torch

    torch = adapter_named("torch")
    dtype = _dtype_of("torch", target)
    # A new function per pair: one graph each, not a recompilation of one function.
    fn = _torch.compile(lambda t: t.to(dtype), fullgraph=True, dynamic=False)
    return torch.to_numpy(fn(torch.from_numpy(x)))


def _torch_compile_repro(bits: int, source: TypeSpec, target: TypeSpec, mode: Mode) -> str:
    return (
        f"torch.compile(lambda t: t.to({_torch_dtype(target)}), fullgraph=True)"
        f"({_torch_input(bits, source)})"
    )


def _jax_run(x: np.ndarray, source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    jax = adapter_named("jax")
    return jax.to_numpy(jax.from_numpy(x).astype(_dtype_of("jax", target)))


def _jax_repro(bits: int, source: TypeSpec, target: TypeSpec, mode: Mode) -> str:
    return f"jnp.asarray({_np_input(bits, source)}).astype({_np_name(target)})"


def _jit_run(x: np.ndarray, source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    import jax as _jax

    jax = adapter_named("jax")
    dtype = _dtype_of("jax", target)
    return jax.to_numpy(_jax.jit(lambda a: a.astype(dtype))(jax.from_numpy(x)))


def _jit_repro(bits: int, source: TypeSpec, target: TypeSpec, mode: Mode) -> str:
    return (
        f"jax.jit(lambda a: a.astype({_np_name(target)}))(jnp.asarray({_np_input(bits, source)}))"
    )


def _cast_model(source: TypeSpec, target: TypeSpec, mode: Mode) -> Any:
    from onnx import helper

    attrs: dict[str, Any] = {"to": target.code}
    if _T(target.code) in SATURATE_TYPES:
        attrs["saturate"] = int(mode.saturate)
    if target.code == _T.FLOAT8E8M0:
        attrs["round_mode"] = mode.round_mode.value
    x = helper.make_tensor_value_info("x", source.code, [None])
    y = helper.make_tensor_value_info("y", target.code, [None])
    graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], **attrs)], "cast", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _ONNX_OPSET)])
    model.ir_version = 11
    return model


def _onnx_attrs(target: TypeSpec, mode: Mode) -> str:
    text = f"to={target.name}"
    if _T(target.code) in SATURATE_TYPES:
        text += f", saturate={int(mode.saturate)}"
    if target.code == _T.FLOAT8E8M0:
        text += f", round_mode={mode.round_mode.value!r}"
    return text


def _ort_value(x: np.ndarray, t: TypeSpec) -> Any:
    import onnxruntime as ort

    from .onnx import _pack

    bits = NUMPY.bits(x, t)
    if t.bits < 8:  # onnxruntime reads sub-byte tensors packed, as the ONNX wire format
        packed = np.zeros(bits.size, np.uint8)
        data = np.frombuffer(_pack(bits, t), np.uint8)
        packed[: data.size] = data
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(packed, t.code)
    if t.kind is Kind.FLOAT and t.code not in (_T.FLOAT, _T.DOUBLE, _T.FLOAT16):
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(bits), t.code)
    return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x))


def _ort_bits(value: Any, t: TypeSpec, count: int) -> np.ndarray:
    """The element bits of an onnxruntime output, read from its buffer (numpy has no dtype
    for bfloat16, int4 or e8m0 in onnxruntime's eyes)."""
    from .onnx import _unpack

    size = -(-count * t.bits // 8)
    buffer = memoryview((ctypes.c_uint8 * size).from_address(value.data_ptr())).cast("B")
    raw = np.frombuffer(buffer, np.uint8).copy()
    if t.bits < 8:
        return _unpack(raw, t, count)
    return raw.view(f"<u{t.storage_bits // 8}")


def _ort_run(x: np.ndarray, source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        _cast_model(source, target, mode).SerializeToString(),
        options,
        providers=["CPUExecutionProvider"],
    )
    (out,) = session.run_with_ort_values(["y"], {"x": _ort_value(x, source)})
    return NUMPY.from_bits(_ort_bits(out, target, x.size), target)


def _ort_repro(bits: int, source: TypeSpec, target: TypeSpec, mode: Mode) -> str:
    return f"onnxruntime Cast({_onnx_attrs(target, mode)}) on the {source.name} bits {bits:#x}"


def _reference_run(x: np.ndarray, source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    (y,) = ReferenceEvaluator(_cast_model(source, target, mode)).run(None, {"x": x})
    return NUMPY.from_bits(NUMPY.bits(np.asarray(y).reshape(-1), target), target)


def _reference_repro(bits: int, source: TypeSpec, target: TypeSpec, mode: Mode) -> str:
    return f"onnx.reference Cast({_onnx_attrs(target, mode)}) on {_np_input(bits, source)}"


@dataclass(frozen=True)
class _Library:
    module: str
    distribution: str
    what: str
    run: Callable[[np.ndarray, TypeSpec, TypeSpec, Mode], np.ndarray]
    repro: Callable[[int, TypeSpec, TypeSpec, Mode], str]
    #: Whether the conversion takes ``saturate``/``round_mode`` (the ONNX operators do).
    takes_options: bool = False
    #: Part of the default selection (torch.compile costs a compilation per pair).
    default: bool = True
    #: Other distributions whose release changes the results (onnx.reference casts through
    #: ml_dtypes, whose conversions changed in 0.7): their versions are reported too.
    also: tuple[str, ...] = ()


#: The conversions :func:`compare` knows, by name.
LIBRARIES: dict[str, _Library] = {
    "numpy": _Library(
        "ml_dtypes", "ml_dtypes", "ml_dtypes astype", _numpy_run, _numpy_repro, also=("numpy",)
    ),
    "torch": _Library("torch", "torch", "torch .to (eager)", _torch_run, _torch_repro),
    "torch.compile": _Library(
        "torch",
        "torch",
        "torch .to under torch.compile",
        _torch_compile_run,
        _torch_compile_repro,
        default=False,
    ),
    "jax": _Library("jax", "jax", "jax astype (eager)", _jax_run, _jax_repro),
    "jax.jit": _Library("jax", "jax", "jax astype under jax.jit", _jit_run, _jit_repro),
    "onnxruntime": _Library(
        "onnxruntime", "onnxruntime", "onnxruntime Cast", _ort_run, _ort_repro, True
    ),
    "onnx.reference": _Library(
        "onnx.reference",
        "onnx",
        "onnx.reference Cast",
        _reference_run,
        _reference_repro,
        True,
        also=("ml_dtypes", "numpy"),
    ),
}


def available_libraries(*, include_slow: bool = False) -> list[str]:
    """The conversions whose library imports here (torch.compile only with ``include_slow``)."""
    found = []
    for name, lib in LIBRARIES.items():
        if not (lib.default or include_slow):
            continue
        try:
            importlib.import_module(lib.module)
        except Exception:  # any failure to import means "not installed"
            continue
        found.append(name)
    return found


def modes_for(target: TypeSpec) -> list[Mode]:
    """The castlike modes a pair is compared under: saturate on and off where it applies."""
    if _T(target.code) in SATURATE_TYPES:
        return [Mode(saturate=True), Mode(saturate=False)]
    return [Mode()]


def _mode_label(mode: Mode, target: TypeSpec) -> str:
    if _T(target.code) not in SATURATE_TYPES:
        return "-"
    text = f"saturate={int(mode.saturate)}"
    if target.code == _T.FLOAT8E8M0:
        text += f", round_mode={mode.round_mode.value}"
    return text


# == causes ======================================================================================


def _is_max(value: Exact, t: TypeSpec) -> bool:
    return value.kind == "finite" and value.magnitude == t.fmt.max_value


def _cause(
    x: Exact,
    source: TypeSpec,
    target: TypeSpec,
    expected: int,
    actual: int,
    via_float: int | None,
) -> str:
    """The cause of one differing element (see the module docstring)."""
    e, a = decode(expected, target), decode(actual, target)
    if target.kind is not Kind.FLOAT:
        if x.kind != "finite":
            return "out-of-range integers"
        v = x.signed_value
        if source.kind is Kind.FLOAT and target.kind is not Kind.BOOL:
            rounded = round(v) if target.is_sub_byte else int(v)
            if not target.int_min <= rounded <= target.int_max:
                return "out-of-range integers"
            if target.is_sub_byte and (2 * v).denominator == 1 and v.denominator != 1:
                return "tie rounding"
        elif not target.int_min <= v <= target.int_max:
            return "out-of-range integers"
        return "other"
    fmt = target.fmt
    if x.is_nan or (e.is_nan and a.is_nan):
        return "NaN encoding"
    beyond = x.is_inf or (x.kind == "finite" and x.magnitude > fmt.max_value)
    if fmt.special is Special.E8M0 and x.kind == "finite":
        # Zero and values below 2^-127 saturate too (R6), or turn into NaN.
        beyond = beyond or x.magnitude < fmt.min_normal
    if beyond or ({e.kind, a.kind} & {"inf", "nan"} and (_is_max(e, target) or _is_max(a, target))):
        return "saturation"
    # FLOAT8E8M0: a library rounds by a mode of its own (ml_dtypes: to nearest), which a value
    # rounded through FLOAT can match by chance; its differences are "other".
    if via_float is not None and actual == via_float and fmt.special is not Special.E8M0:
        return "double rounding"
    subnormal = source.kind is Kind.FLOAT and x.kind == "finite" and x.magnitude != 0
    subnormal = subnormal and x.magnitude < source.fmt.min_normal
    if (a.is_zero and not e.is_zero) or (subnormal and (a.is_zero or e.is_zero)):
        return "subnormal flush"
    finite = x.kind == "finite" and x.magnitude != 0 and fmt.special is not Special.E8M0
    if finite and round_to_format(x.magnitude, fmt).tie:
        return "tie rounding"
    return "other"


# == the report ==================================================================================


@dataclass(frozen=True)
class Example:
    """One differing element: the input, castlike's and the library's results, and a line of
    code that reproduces the library's result."""

    input: str
    castlike: str
    library: str
    repro: str

    def describe(self) -> str:
        return f"{self.input} -> {self.library}; castlike {self.castlike}"


@dataclass(frozen=True)
class Difference:
    """The elements of one (library, pair, mode) that differ for one cause."""

    library: str
    source: str
    target: str
    mode: str
    cause: str
    count: int
    example: Example

    def to_json(self) -> dict[str, Any]:
        return {
            "library": self.library,
            "source": self.source,
            "target": self.target,
            "mode": self.mode,
            "cause": self.cause,
            "count": self.count,
            "example": vars(self.example),
        }


@dataclass
class CompareReport:
    """Every difference found, and what was compared."""

    #: name -> what it runs and the version of its package.
    libraries: dict[str, str]
    #: name -> (pairs compared, pairs the library cannot cast, elements compared).
    checked: dict[str, tuple[int, int, int]]
    differences: list[Difference] = field(default_factory=list)
    #: name -> "SOURCE -> TARGET: why" for the pairs it cannot cast.
    unsupported: dict[str, list[str]] = field(default_factory=dict)

    def counts(self) -> dict[str, dict[str, int]]:
        """Per library: differing elements per cause (summed over pairs and modes)."""
        out = {name: dict.fromkeys(CAUSES, 0) for name in self.libraries}
        for d in self.differences:
            out[d.library][d.cause] += d.count
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "castlike": castlike.__version__,
            "libraries": self.libraries,
            "checked": {
                name: {"pairs": p, "unsupported_pairs": u, "elements": n}
                for name, (p, u, n) in self.checked.items()
            },
            "counts": self.counts(),
            "differences": [d.to_json() for d in self.differences],
            "unsupported": self.unsupported,
        }


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _show(bits: int, t: TypeSpec) -> str:
    from .cli._common import show_bits, show_in

    return f"{show_bits(bits, t)} ({show_in(decode(bits, t), t)})"


def compare(
    libraries: Sequence[str] | None = None,
    *,
    sources: Sequence[TypeSpec] | None = None,
    targets: Sequence[TypeSpec] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CompareReport:
    """Compare each library's own conversion with castlike's, element by element.

    Parameters
    ----------
    libraries : sequence of str, optional
        Names of :data:`LIBRARIES` (default :func:`available_libraries`).
    sources, targets : sequence of TypeSpec, optional
        Restrict the pairs (default: every numeric type on both sides).
    progress : callable, optional
        ``f(done, total)`` after each (library, pair).

    Returns
    -------
    CompareReport
        One :class:`Difference` per (library, pair, mode, cause), with a count and an example.
    """
    names = list(libraries) if libraries is not None else available_libraries()
    for name in names:
        if name not in LIBRARIES:
            raise ValueError(f"unknown library {name!r}; expected one of {', '.join(LIBRARIES)}")
    sources = list(sources or numeric_types())
    targets = list(targets or numeric_types())
    report = CompareReport(
        {
            n: f"{LIBRARIES[n].what} ("
            + ", ".join(
                f"{d} {_version(d)}" for d in (LIBRARIES[n].distribution, *LIBRARIES[n].also)
            )
            + ")"
            for n in names
        },
        {},
    )
    total, done = len(names) * len(sources) * len(targets), 0
    counters = {n: [0, 0, 0] for n in names}
    for source in sources:
        x = inputs_for(source, "all" if source.bits <= 16 else "curated")
        values: dict[int, Exact] = {}
        for target in targets:
            expected = {
                m: NUMPY.bits(castlike.cast(x, target.name, saturate=m.saturate), target)
                for m in modes_for(target)
            }
            via_float = None
            if source.code in WIDE_SOURCES and target.bits < 32:
                via_float = NUMPY.bits(
                    castlike.cast(castlike.cast(x, "FLOAT"), target.name), target
                )
            for name in names:
                lib = LIBRARIES[name]
                try:
                    result = {
                        m: _checked(lib.run, x, source, target, m)
                        for m in (modes_for(target) if lib.takes_options else [Mode()])
                    }
                except Exception as exc:  # the library has no such conversion
                    counters[name][1] += 1
                    reason = str(exc).strip().splitlines()[0][:160] if str(exc) else ""
                    report.unsupported.setdefault(name, []).append(
                        f"{source.name} -> {target.name}: {type(exc).__name__}: {reason}"
                    )
                    done += 1
                    if progress:
                        progress(done, total)
                    continue
                counters[name][0] += 1
                counters[name][2] += x.size
                for mode, want in expected.items():
                    # A conversion without options gives one answer for every mode.
                    got = result[mode] if lib.takes_options else result[Mode()]
                    mismatch = compare_bits(got, want, source, target, x)
                    if mismatch is None:
                        continue
                    _group(report, name, lib, source, target, mode, mismatch, values, via_float)
                done += 1
                if progress:
                    progress(done, total)
    report.checked = {n: (c[0], c[1], c[2]) for n, c in counters.items()}
    return report


def _checked(
    run: Callable[[np.ndarray, TypeSpec, TypeSpec, Mode], np.ndarray],
    x: np.ndarray,
    source: TypeSpec,
    target: TypeSpec,
    mode: Mode,
) -> np.ndarray:
    """A library's result as a flat NumPy array of ``target``; TypeError when it is not one."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        # Overflow and invalid-value warnings are the very behaviour being measured.
        warnings.simplefilter("ignore")
        y = np.asarray(run(x, source, target, mode)).reshape(-1)
    found = NUMPY.onnx_type_of(y.dtype)
    if found != target.code or y.size != x.size:
        raise TypeError(f"returned {y.size} elements of {y.dtype}, not {x.size} of {target.name}")
    return y


def _group(
    report: CompareReport,
    name: str,
    lib: _Library,
    source: TypeSpec,
    target: TypeSpec,
    mode: Mode,
    mismatch: Any,
    values: dict[int, Exact],
    via_float: np.ndarray | None,
) -> None:
    """Sort one (library, pair, mode)'s differing elements by cause."""
    by_cause: dict[str, list[int]] = {}
    for k in range(mismatch.count):
        bits_in = int(mismatch.input_bits[k])
        if bits_in not in values:
            values[bits_in] = decode(bits_in, source)
        alt = None if via_float is None else int(via_float[int(mismatch.indices[k])])
        cause = _cause(
            values[bits_in],
            source,
            target,
            int(mismatch.expected[k]),
            int(mismatch.actual[k]),
            alt,
        )
        by_cause.setdefault(cause, []).append(k)
    for cause in CAUSES:
        ks = by_cause.get(cause)
        if not ks:
            continue
        k = ks[0]
        bits_in = int(mismatch.input_bits[k])
        example = Example(
            input=f"{source.name} {_show(bits_in, source)}",
            castlike=_show(int(mismatch.expected[k]), target),
            library=_show(int(mismatch.actual[k]), target),
            repro=lib.repro(bits_in, source, target, mode),
        )
        report.differences.append(
            Difference(
                name,
                source.name,
                target.name,
                _mode_label(mode, target),
                cause,
                len(ks),
                example,
            )
        )


def summarize(data: dict[str, Any]) -> dict[str, Any]:
    """A :meth:`CompareReport.to_json` reduced to one entry per (library, cause).

    Each kept entry is the (pair, mode) with the most differing elements, with ``entries``:
    how many (pair, mode) entries the cause has for that library.  The counts per cause and
    what was checked are kept whole; ``unsupported`` is dropped.
    """
    best: dict[tuple[str, str], dict[str, Any]] = {}
    entries: dict[tuple[str, str], int] = {}
    for d in data["differences"]:
        key = (d["library"], d["cause"])
        entries[key] = entries.get(key, 0) + 1
        if key not in best or d["count"] > best[key]["count"]:
            best[key] = d
    kept = [{**d, "entries": entries[key]} for key, d in best.items()]
    rest = {k: v for k, v in data.items() if k not in ("differences", "unsupported")}
    return {**rest, "differences": kept, "summarized": True}
