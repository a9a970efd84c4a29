"""``castlike explain VALUE --to TYPE``: the rule that decides one cast, then the detail.

The output speaks in the target's terms: the result, the rule that fired, the input as the
source type holds it, and then only what the rule looked at: the two neighbouring target
values and the tie for a rounding, the target's range for a value beyond it.  Values are
shown short (``2^127``, ``1.0000000000000001e+300``), never as hundreds of digits.
"""

from __future__ import annotations

import argparse
from fractions import Fraction

from ..errors import CastValueError
from ..spec import strings as spec_strings
from ..spec.plan import Plan
from ..spec.reference import SPEC_GRAMMAR, Exact, Explanation, cast_bits, decode, explain
from ..spec.rules import FLOAT8_TYPES as FLOAT8
from ..spec.types import Kind, OnnxType, Special, TypeSpec, spec_of
from ._common import (
    add_cast_options,
    describe_plan,
    note_ignored_options,
    parse_value,
    plan_from_args,
    read_exact,
    short_number,
    show,
    show_bits,
    show_exact,
    show_in,
)

_DOUBLE = spec_of(OnnxType.DOUBLE)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "explain",
        help="show how the rules cast one value",
        description="Print the result, the rule that decides it, the value as held in the "
        "source type, and the detail the rule used: the neighbouring target values and the "
        "tie for a rounding, the target's range for a value beyond it.",
    )
    parser.add_argument("value", metavar="VALUE")
    add_cast_options(parser)
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also print the cast's route on NumPy: its family, steps and parameters, and "
        "the native kernel that carries it out",
    )
    parser.set_defaults(func=run)


def _line(label: str, text: str) -> str:
    return f"{label:<12} {text}"


def _result(bits: int, t: TypeSpec) -> str:
    return f"{t.name} {show_in(decode(bits, t), t)} ({show_bits(bits, t)})"


def rule_label(rule: str, target: TypeSpec) -> str:
    """The oracle's rule text with the number of the rule it belongs to (R3, R4 or R5)."""
    if rule.startswith("R") or target.kind is not Kind.FLOAT:
        return rule
    special = target.fmt.special
    if special is Special.FINITE:
        return f"R5 {rule}"
    if OnnxType(target.code) in FLOAT8:
        return f"R4 {rule}"
    return f"R3 {rule}"


def _range_text(t: TypeSpec) -> str:
    fmt = t.fmt
    top = show_in(Exact("finite", False, fmt.max_value), t)
    if fmt.special is Special.E8M0:
        bottom = show_in(Exact("finite", False, fmt.min_normal), t)
        return f"{t.name} holds {bottom} to {top}"
    return f"{t.name} holds -{top} to {top}"


def _detail(why: Explanation, target: TypeSpec) -> list[str]:
    """What the rule looked at, in the target's terms."""
    r = why.rounding
    if target.kind is not Kind.FLOAT:
        return []
    fmt = target.fmt
    x = why.rounded_value
    if fmt.special is Special.E8M0 and why.rule.startswith(("R6 x > ", "R6 x < ")):
        # R6 judges the range on x itself, before any rounding: no neighbours to show.
        side = "above" if x.magnitude > fmt.max_value else "below"
        return [_line("range", f"{_range_text(target)}; x = {show(x)} is {side}")]
    if r is None:
        return []
    beyond = "range" in why.rule or "> max" in why.rule
    if beyond:
        if fmt.special is Special.E8M0:
            side = "above" if x.magnitude > fmt.max_value else "below"
            return [_line("range", f"{_range_text(target)}; x = {show(x)} is {side}")]
        return [
            _line(
                "range",
                f"{_range_text(target)}; x = {show(x)} rounds to {short_number(r.result)}, "
                "beyond it",
            )
        ]
    if r.exact:
        return [_line("rounding", f"exact: {target.name} holds x")]
    state = "a tie" if r.tie else "not a tie"
    upper = show_in(Exact("finite", False, r.upper), target)
    past = (
        f" ({upper} > max: [x] is judged after rounding)"
        if fmt.special is not Special.E8M0 and r.upper > fmt.max_value
        else ""
    )
    return [
        _line(
            "neighbours",
            f"{show_in(Exact('finite', False, r.lower), target)} <= |x| <= {upper}{past}",
        ),
        _line("rounding", f"{state}; chose {show_in(Exact('finite', False, r.result), target)}"),
    ]


def _numeric(args: argparse.Namespace, plan: Plan) -> list[str]:
    source, target = plan.source, plan.target
    bits_in = parse_value(args.value, source)
    held = decode(bits_in, source)
    lines = []
    if target.is_numeric:
        why = explain(held, source, target, plan.mode)
        # The bits of the pattern itself: a NaN's payload follows R3's policy between the
        # IEEE types (an exact value has no payload).
        bits = cast_bits(bits_in, source, target, plan.mode)
        rule = rule_label(why.rule, target)
        if bits != why.bits:
            rule = "R3 a NaN between IEEE types: quieted, its sign and payload top bits kept"
        lines += [_line("result", _result(bits, target)), _line("rule", rule)]
    else:
        style = plan.mode.profile.rules.strings
        text = spec_strings.format_bits(bits_in, source, style)
        rule = (
            f"R9 the shortest decimal that reads back to the same {source.name}"
            if style == "spec"
            else "R12 reference: the text of numpy's astype(str)"
        )
        lines += [_line("result", f"STRING {text!r}"), _line("rule", rule)]
    held_text = f"{source.name} {show_in(held, source)} ({show_bits(bits_in, source)})"
    if args.value.lower().startswith("0x"):
        lines.append(_line("input", held_text))
    else:
        written = read_exact(args.value)
        exact = show_exact(held) if written != held else None
        lines.append(
            _line(
                "input",
                f"{args.value} -> {held_text}" + (f", exactly {exact}" if exact else ""),
            )
        )
    if target.is_numeric:
        if why.rounded_value != held:
            lines.append(
                _line(
                    "pre-rounded", f"{show(why.rounded_value)} (profile {plan.mode.profile.value})"
                )
            )
        lines += _detail(why, target)
    return lines


def _from_string(args: argparse.Namespace, plan: Plan) -> list[str]:
    target, mode = plan.target, plan.mode
    if not target.is_numeric:
        return [
            _line("result", f"STRING {args.value!r}"),
            _line("rule", "STRING -> STRING keeps the text"),
        ]
    bits = spec_strings.string_to_bits(args.value, target, mode)
    if bits is None:
        raise CastValueError(f"{args.value!r} is not a number: R9's grammar is {SPEC_GRAMMAR}")
    lines = [_line("result", _result(bits, target))]
    value = spec_strings.parse(args.value, mode.profile.rules.strings)
    if value is None:  # "true" / "false" into BOOL
        return [
            *lines,
            _line("rule", "R9 'true' / 'false' -> BOOL"),
            _line("input", repr(args.value)),
        ]
    why = explain(value, _DOUBLE, target, mode)
    exact = show_exact(value)
    lines += [
        _line("rule", f"R9 read the decimal exactly, then {rule_label(why.rule, target)}"),
        _line(
            "input",
            f"STRING {args.value!r} reads "
            + (f"exactly as {exact}" if exact else f"as {show(value)}"),
        ),
    ]
    return lines + _detail(why, target)


def _kept(keep: tuple[float, float, bool]) -> str:
    low, high, inclusive = keep
    op = "<=" if inclusive else "<"
    return f"{short_number(Fraction(low))} {op} x {op} {short_number(Fraction(high))}, else 0"


def route_lines(plan: Plan) -> list[str]:
    """The route of the cast on the NumPy backend, as ``--verbose`` prints it."""
    from .._native import routes as kernel_routes
    from ..backends.numpy import ADAPTER
    from ..spec.route import route_for

    r = route_for(plan.source, plan.target, plan.mode, ADAPTER.capabilities())
    lines = [_line("route", r.family.value), *(_line("", f"- {step}") for step in r.steps)]
    parameters = {
        "saturation": r.saturation,
        "clip": r.clip,
        "rounding": r.rounding if r.family.name == "SUB_BYTE" else None,
        "kept": None if r.keep is None else _kept(r.keep),
        "NaN result": None if r.nan_result is None else f"0x{r.nan_result:X}",
        "NaN policy": "quiet, sign and payload top bits kept" if r.nan_policy else None,
    }
    lines += [_line("", f"{k}: {v}") for k, v in parameters.items() if v is not None]
    kernel = kernel_routes.route(plan.source, plan.target, plan.mode.effective_for(plan.target))
    lines.append(_line("kernel", kernel[0] if kernel else "none: the pure NumPy engine"))
    return lines


def run(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    body = _numeric(args, plan) if plan.source.is_numeric else _from_string(args, plan)
    if getattr(args, "verbose", False) and plan.source.is_numeric and plan.target.is_numeric:
        body += route_lines(plan)
    note_ignored_options(args, plan)
    print("\n".join([describe_plan(plan), *body]))
    return 0
