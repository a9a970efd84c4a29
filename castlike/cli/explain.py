"""``castlike explain VALUE --to TYPE``: the oracle's reasoning for one value."""

from __future__ import annotations

import argparse

from ..spec.reference import decode, explain
from ._common import (
    add_cast_options,
    describe_plan,
    parse_value,
    plan_from_args,
    read_exact,
    show,
    show_bits,
)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "explain",
        help="show how the rules cast one value",
        description="Print the exact value, the value held in the source type, the two "
        "neighbouring target values, whether it is a tie, which rule fired and the result.",
    )
    parser.add_argument("value", metavar="VALUE")
    add_cast_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    source, target = plan.source, plan.target
    bits_in = parse_value(args.value, source)
    held = decode(bits_in, source)
    why = explain(held, source, target, plan.mode)
    lines = [describe_plan(plan)]
    if not args.value.lower().startswith("0x"):
        lines.append(f"written      {args.value}  (exact: {read_exact(args.value)})")
    lines.append(
        f"held as      {source.name} {show(held)} ({show_bits(bits_in, source)}), exact {held}"
    )
    if why.rounded_value != held:
        lines.append(f"pre-rounded  {show(why.rounded_value)} (profile {plan.mode.profile.value})")
    if why.rounding is not None:
        r = why.rounding
        lines.append(f"neighbours   {show_fraction(r.lower)} <= x <= {show_fraction(r.upper)}")
        state = "exact" if r.exact else ("tie" if r.tie else "not a tie")
        lines.append(f"rounding     {state}; chose {show_fraction(r.result)}")
    lines.append(f"rule         {why.rule}")
    result = decode(why.bits, target)
    lines.append(f"result       {target.name} {show(result)} ({show_bits(why.bits, target)})")
    print("\n".join(lines))
    return 0


def show_fraction(q) -> str:  # type: ignore[no-untyped-def]
    from ..spec.reference import Exact

    return show(Exact("finite", q < 0, abs(q)))
