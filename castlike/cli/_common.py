"""Pieces shared by the subcommands: cast options, reading values, showing values, hints."""

from __future__ import annotations

import argparse
import sys
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

from ..errors import CastValueError
from ..spec.opsets import Op
from ..spec.plan import Plan, resolve
from ..spec.reference import (
    SPEC_GRAMMAR,
    SPEC_WHITESPACE,
    Exact,
    cast_value,
    floor_log2,
    read_decimal,
)
from ..spec.rules import SATURATE_TYPES, Mode, RoundMode
from ..spec.types import Kind, OnnxType, Special, TypeSpec, spec_of

_DOUBLE = spec_of(OnnxType.DOUBLE)
#: Exact values longer than this are shown rounded (a 300-digit integer helps nobody).
_LONGEST_EXACT = 24


def install_hint(extra: str) -> str:
    """How to install an extra, with the constraints file the repository's CPU installs use."""
    return (
        f"pip install 'castlike[{extra}]' (from a clone: "
        f"pip install -c constraints.txt -e '.[{extra}]')"
    )


def builtin_backend_names() -> str:
    """The built-in backends' names, for help texts (the registry is not read in full here:
    entry points are read only when a name asks for them)."""
    from ..backends._registry import BUILTIN_BACKENDS

    return ", ".join(info.name for info in BUILTIN_BACKENDS)


def requested_backends(requested: list[str]) -> list[str] | str:
    """The backends named on the command line, imported, or an error message: a name the
    registry does not know, or one whose library is not installed."""
    import importlib

    from ..backends import backend_info
    from ..errors import BackendTypeError

    names = list(dict.fromkeys(requested))
    for name in names:
        try:
            info = backend_info(name)
        except BackendTypeError as exc:
            return str(exc)
        try:
            importlib.import_module(info.module)
        except ImportError:
            hint = install_hint(info.extra) if info.extra else f"pip install {info.module}"
            return f"{name} is not installed: {hint}"
    return names


#: Backend names longer than this get a short column header (tables keep to 80 columns).
_LONGEST_HEADER = 8


def backend_headers(names: list[str]) -> tuple[list[str], list[str]]:
    """Column headers for backends, and the legend lines of the shortened ones: a long
    hyphenated name becomes its last part ("array-api-strict" -> "strict")."""
    headers: list[str] = []
    legend: list[str] = []
    for name in names:
        short = name
        if len(name) > _LONGEST_HEADER:
            short = name.rsplit("-", 1)[-1][:_LONGEST_HEADER]
            if short in headers or short in names:
                short = f"b{len(headers) + 1}"
            legend.append(f"{short}: the {name} backend")
        headers.append(short)
    return headers, legend


def type_from_text(text: str) -> TypeSpec:
    """The type named on the command line: an ONNX name or a ``TensorProto`` code (``17``)."""
    from .._frontend import resolve_type

    raw = text.strip()
    return resolve_type(int(raw) if raw.isdigit() else raw)


def add_cast_options(parser: argparse.ArgumentParser) -> None:
    """``--to --from --no-saturate --round-mode --opset --profile``."""
    parser.add_argument(
        "--to", required=True, metavar="TYPE", help="target: ONNX type name or TensorProto code"
    )
    parser.add_argument(
        "--from",
        dest="source",
        default="DOUBLE",
        metavar="TYPE",
        help="type the values are held in before the cast (default DOUBLE, as a Python float)",
    )
    parser.add_argument(
        "--no-saturate",
        dest="saturate",
        action="store_false",
        help="saturate=0 (Cast-19+; only float8 and FLOAT8E8M0 targets use it)",
    )
    parser.add_argument(
        "--round-mode",
        default=None,
        choices=[r.value for r in RoundMode],
        help="round_mode (Cast-24+; only FLOAT8E8M0 targets use it; default up)",
    )
    parser.add_argument("--opset", type=int, default=None, help="opset to validate against")
    parser.add_argument(
        "--profile",
        default="spec",
        help="spec (the operator text), reference (onnx.reference with the installed ml_dtypes), "
        "reference:ml_dtypes-X.Y (with ml_dtypes X.Y) or legacy (onnx <= 1.18)",
    )


def plan_from_args(args: argparse.Namespace) -> Plan:
    """Validate the options of a cast given on the command line.

    ``saturate`` and ``round_mode`` on a target that does not use them are accepted, as ONNX
    accepts and ignores them; :func:`note_ignored_options` says so once the cast succeeded.
    """
    source, target = type_from_text(args.source), type_from_text(args.to)
    plan = resolve(
        Op.CAST,
        source,
        target,
        saturate=args.saturate,
        round_mode=args.round_mode or RoundMode.UP.value,
        opset=args.opset,
        profile=args.profile,
    )
    return plan


def note_ignored_options(args: argparse.Namespace, plan: Plan) -> None:
    """A note on stderr for each option the target ignores (after the work, so that an error
    stays the only line on stderr)."""
    target = plan.target
    code = OnnxType(target.code)
    if not args.saturate and code not in SATURATE_TYPES:
        note(f"saturate has no effect on {target.name} (only float8 and FLOAT8E8M0 targets use it)")
    if args.round_mode is not None and code is not OnnxType.FLOAT8E8M0:
        note(f"round_mode has no effect on {target.name} (only FLOAT8E8M0 targets use it)")


def note(text: str) -> None:
    """A remark on stderr that does not stop the command."""
    print(f"castlike: note: {text}", file=sys.stderr)


def parse_value(text: str, source: TypeSpec) -> int:
    """The bits of ``source`` that hold the value written ``text``.

    ``0x...`` is taken as a raw bit pattern of ``source``.  Otherwise the text is read as an
    exact decimal of R9's grammar (or nan / inf, :func:`read_exact`) and rounded once into a
    float ``source``; an integer source needs an integer in its range.
    """
    if not source.is_numeric:
        raise CastValueError("STRING values have no bit pattern")  # callers check first
    raw = text.strip(SPEC_WHITESPACE)
    if raw.lower().startswith("0x"):
        try:
            bits = int(raw, 16)
        except ValueError:
            raise CastValueError(
                f"{text!r} is not a number: neither 0x and hexadecimal digits (the bits of "
                f"--from) nor R9's grammar, {SPEC_GRAMMAR}"
            ) from None
        if bits >> max(source.bits, 1):
            raise CastValueError(f"{text!r} has more than {source.bits} bits ({source.name})")
        return bits
    value = read_exact(raw)
    if source.kind is Kind.FLOAT:
        return cast_value(value, _DOUBLE, source, Mode())
    if value.kind != "finite" or value.magnitude.denominator != 1:
        raise CastValueError(f"{text!r} is not an integer, as {source.name} values are")
    n = int(value.signed_value)
    if source.kind is Kind.BOOL:
        if n not in (0, 1):
            raise CastValueError(f"{text!r}: BOOL values are 0 or 1")
        return n
    if not source.int_min <= n <= source.int_max:
        raise CastValueError(
            f"{text!r} is outside {source.name} ({source.int_min} to {source.int_max})"
        )
    return n & ((1 << source.bits) - 1)


def read_exact(text: str) -> Exact:
    """An exact value from decimal text of R9's grammar (``1e-3``, ``-0.0``, ``nan``,
    ``-inf``), read in time bounded by the text's length whatever its exponent
    (:func:`castlike.spec.reference.read_decimal`, the oracle's reader)."""
    value = read_decimal(text)
    if value is None:
        raise CastValueError(
            f"{text!r} is not a number: write {SPEC_GRAMMAR} (R9's grammar), "
            "or 0x... for the bits of --from"
        )
    return value


def short_number(q: Fraction) -> str:
    """A value for people, at most about 24 characters.

    Small integers as digits, a value that a DOUBLE holds as Python's shortest repr (powers
    of two as ``2^k`` where that is shorter), anything else as ``≈`` and seventeen
    significant digits.
    """
    if q == 0:
        return "0"
    negative, m = q < 0, abs(q)
    sign = "-" if negative else ""
    if m.denominator == 1 and m.numerator < 10**16:
        return f"{sign}{m.numerator}"
    try:
        f = float(m)
    except OverflowError:
        f = float("inf")
    exact_double = f != float("inf") and Fraction(f) == m
    if exact_double and len(repr(f)) <= 12:
        return f"{sign}{f!r}"
    k = floor_log2(m)
    if m == Fraction(2) ** k:
        return f"{sign}2^{k}"
    if exact_double:
        return f"{sign}{f!r}"
    with localcontext() as ctx:
        ctx.prec = 17
        d = Decimal(m.numerator) / Decimal(m.denominator)
    return f"≈{sign}{d:.17g}"


def show(value: Exact) -> str:
    """:func:`short_number` of an exact value, with ``-0``, ``NaN`` and ``Inf``."""
    if value.kind != "finite":
        return str(value)
    if value.magnitude == 0:
        return "-0" if value.negative else "0"
    return short_number(value.signed_value)


def show_exact(value: Exact) -> str | None:
    """The exact fraction when it is short and says more than :func:`show`, else None."""
    text = str(value)
    if value.kind != "finite" or len(text) > _LONGEST_EXACT or text == show(value):
        return None
    return text


def show_in(value: Exact, t: TypeSpec) -> str:
    """A value of type ``t`` in that type's terms (FLOAT8E8M0 values are powers of two)."""
    if t.kind is Kind.FLOAT and t.fmt.special is Special.E8M0 and value.kind == "finite":
        return f"2^{floor_log2(value.magnitude)}"
    return show(value)


def show_bits(bits: int, t: TypeSpec) -> str:
    """``0x1D``: hexadecimal with as many digits as the type's width needs."""
    return f"0x{bits:0{max(1, (t.bits + 3) // 4)}X}"


def describe_plan(plan: Plan) -> str:
    """``Cast-28 DOUBLE -> FLOAT8E4M3FN, saturate=1, profile=spec``: the options in effect."""
    mode = plan.mode
    parts = [plan.describe()]
    if OnnxType(plan.target.code) in SATURATE_TYPES:
        parts.append(f"saturate={int(mode.saturate)}")
    if plan.target.code == OnnxType.FLOAT8E8M0:
        parts.append(f"round_mode={mode.round_mode.value}")
    parts.append(f"profile={mode.profile.value}")
    return ", ".join(parts)


def require_rich() -> Any:
    """The ``rich`` console, or a CastValueError telling how to install it."""
    try:
        from rich.console import Console
    except ModuleNotFoundError:
        raise CastValueError(f"this command needs rich: {install_hint('cli')}") from None
    return Console()


def output_path_error(*paths: Any) -> str | None:
    """Prepare the ``--json``/``--html``/``--png`` paths: create missing parent folders.

    Returns why one of them cannot be written, or None.  Checked before the work starts, so
    that a long run does not end in a traceback.
    """
    from pathlib import Path

    for path in paths:
        if path is None:
            continue
        p = Path(path)
        if p.is_dir():
            return f"{p} is a directory, not a file to write"
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return f"cannot write {p}: {exc.strerror or exc}"
    return None
