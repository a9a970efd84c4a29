"""Pieces shared by the subcommands: cast options, reading values, showing values."""

from __future__ import annotations

import argparse
from fractions import Fraction
from typing import Any

from ..errors import CastValueError
from ..spec.opsets import Op
from ..spec.plan import Plan, resolve
from ..spec.reference import Exact, cast_value
from ..spec.rules import SATURATE_TYPES, Mode, Profile, RoundMode
from ..spec.types import Kind, OnnxType, TypeSpec, spec_of

_DOUBLE = spec_of(OnnxType.DOUBLE)


def add_cast_options(parser: argparse.ArgumentParser) -> None:
    """``--to --from --no-saturate --round-mode --opset --profile``."""
    parser.add_argument("--to", required=True, metavar="TYPE", help="target ONNX type name or code")
    parser.add_argument(
        "--from",
        dest="source",
        default="DOUBLE",
        metavar="TYPE",
        help="type the values are held in before the cast (default DOUBLE, as a Python float)",
    )
    parser.add_argument(
        "--no-saturate", dest="saturate", action="store_false", help="saturate=0 (Cast-19+)"
    )
    parser.add_argument(
        "--round-mode",
        default="up",
        choices=[r.value for r in RoundMode],
        help="round_mode for FLOAT8E8M0 targets (Cast-24+)",
    )
    parser.add_argument("--opset", type=int, default=None, help="opset to validate against")
    parser.add_argument(
        "--profile",
        default="spec",
        choices=[p.value for p in Profile],
        help="spec (the operator text), reference (onnx.reference) or legacy (onnx <= 1.18)",
    )


def plan_from_args(args: argparse.Namespace) -> Plan:
    """Validate the options of a cast given on the command line."""
    from .._frontend import resolve_type

    return resolve(
        Op.CAST,
        resolve_type(args.source),
        resolve_type(args.to),
        saturate=args.saturate,
        round_mode=args.round_mode,
        opset=args.opset,
        profile=args.profile,
    )


def parse_value(text: str, source: TypeSpec) -> int:
    """The bits of ``source`` that hold the value written ``text``.

    ``0x...`` is taken as a raw bit pattern of ``source``.  Otherwise the text is read as an
    exact decimal (or nan / inf) and rounded once into a float ``source``; an integer source
    needs an integer in its range.
    """
    raw = text.strip()
    if raw.lower().startswith("0x"):
        try:
            bits = int(raw, 16)
        except ValueError:
            raise CastValueError(f"{text!r} is not a hexadecimal bit pattern") from None
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
    """An exact value from decimal text (``1e-3``, ``-0.0``, ``nan``, ``-inf``)."""
    low = text.lower().lstrip("+")
    negative = low.startswith("-")
    body = low.lstrip("-")
    if body in ("nan",):
        return Exact.nan(negative)
    if body in ("inf", "infinity"):
        return Exact.inf(negative)
    try:
        q = Fraction(body)
    except (ValueError, ZeroDivisionError):
        raise CastValueError(f"{text!r} is not a number") from None
    return Exact("finite", negative, q)


def show(value: Exact) -> str:
    """A value for people: integers as integers, other finite values as the exact float."""
    if value.kind != "finite":
        return str(value)
    q = value.signed_value
    if q.denominator == 1:
        text = str(q.numerator)
        return "-0" if value.negative and q == 0 else text
    return repr(float(q)) if float(q) == q else f"{q.numerator}/{q.denominator}"


def show_bits(bits: int, t: TypeSpec) -> str:
    """``0x1D``: hexadecimal with as many digits as the type's width needs."""
    return f"0x{bits:0{max(1, (t.bits + 3) // 4)}X}"


def describe_plan(plan: Plan) -> str:
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
        raise CastValueError(
            "this command prints tables with rich: pip install 'castlike[cli]'"
        ) from None
    return Console()
