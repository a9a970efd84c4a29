"""``castlike cast VALUE... --to TYPE``: cast values and show the result bits."""

from __future__ import annotations

import argparse

import numpy as np

from .._frontend import cast
from ..backends.numpy import ADAPTER as NUMPY
from ..spec.plan import Plan
from ..spec.reference import decode
from ..spec.types import TypeSpec
from ._common import (
    add_cast_options,
    describe_plan,
    note_ignored_options,
    parse_value,
    plan_from_args,
    show_bits,
    show_in,
)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "cast",
        help="cast values and print the results with their bits",
        description="Cast each VALUE (decimal, nan, inf, or 0x... bits of --from; any text "
        "with --from STRING) with the NumPy backend; print the input as held in the source "
        "type, the result and its bits.",
    )
    parser.add_argument("values", nargs="+", metavar="VALUE")
    add_cast_options(parser)
    parser.set_defaults(func=run)


def _cast(x: object, plan: Plan) -> object:
    mode = plan.mode
    return cast(
        x,
        plan.target.name,
        saturate=mode.saturate,
        round_mode=mode.round_mode.value,
        opset=plan.opset,
        profile=mode.profile.value,
    )


def _held(bits: int, t: TypeSpec) -> str:
    return f"{t.name} {show_in(decode(bits, t), t)} ({show_bits(bits, t)})"


def run(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    source, target = plan.source, plan.target
    if source.is_numeric:
        bits = [parse_value(v, source) for v in args.values]
        storage = np.dtype(f"uint{source.storage_bits}")
        x = NUMPY.from_bits(np.array(bits, dtype=storage), source)
        inputs = [_held(b, source) for b in bits]
    else:  # the text itself is the STRING value (R9 reads it exactly)
        x = np.array(args.values, dtype=np.dtypes.StringDType())
        inputs = [f"STRING {v!r}" for v in args.values]
    y = _cast(x, plan)
    if target.is_numeric:
        outputs = [_held(int(b), target) for b in NUMPY.bits(y, target)]
    else:
        outputs = [f"STRING {str(s)!r}" for s in np.asarray(y).tolist()]
    note_ignored_options(args, plan)
    print(describe_plan(plan))
    width = max(len(v) for v in args.values)
    held_width = max(len(h) for h in inputs)
    for text, held, result in zip(args.values, inputs, outputs, strict=True):
        print(f"{text:>{width}}  {held:<{held_width}}  ->  {result}")
    return 0
