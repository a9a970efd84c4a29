"""``castlike cast VALUE... --to TYPE``: cast values and show the result bits."""

from __future__ import annotations

import argparse

import numpy as np

from .._frontend import cast
from ..backends.numpy import ADAPTER as NUMPY
from ..spec.reference import decode
from ._common import add_cast_options, describe_plan, parse_value, plan_from_args, show, show_bits


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "cast",
        help="cast values and print the results with their bits",
        description="Cast each VALUE (decimal, nan, inf, or 0x... bits of --from) with the "
        "NumPy backend; print the input as held in the source type, the result and its bits.",
    )
    parser.add_argument("values", nargs="+", metavar="VALUE")
    add_cast_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    source, target, mode = plan.source, plan.target, plan.mode
    bits = [parse_value(v, source) for v in args.values]
    storage = np.dtype(f"uint{source.storage_bits}")
    x = NUMPY.from_bits(np.array(bits, dtype=storage), source)
    y = cast(
        x,
        target.name,
        saturate=mode.saturate,
        round_mode=mode.round_mode.value,
        opset=plan.opset,
        profile=mode.profile.value,
    )
    out_bits = [int(b) for b in NUMPY.bits(y, target)]
    print(describe_plan(plan))
    width = max(len(v) for v in args.values)
    for text, b_in, b_out in zip(args.values, bits, out_bits, strict=True):
        held = show(decode(b_in, source))
        result = show(decode(b_out, target))
        print(
            f"{text:>{width}}  {source.name} {held} ({show_bits(b_in, source)})"
            f"  ->  {target.name} {result} ({show_bits(b_out, target)})"
        )
    return 0
