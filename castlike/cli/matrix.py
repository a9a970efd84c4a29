"""``castlike matrix``: which (source, target) pairs an operator version allows.

The grid is 70 columns wide: one character per target, codes written in two header rows
(tens, then units), so that it fits an 80-column terminal and reads the same in a log.
"""

from __future__ import annotations

import argparse
import sys

from ..spec.opsets import Op
from ..spec.plan import _check_opset
from ..spec.types import TYPES, OnnxType


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "matrix",
        help="print the allowed type pairs of Cast or CastLike at an opset",
        description="Rows are source types, columns target types (by TensorProto code, read "
        "downwards); a mark means the version allows the pair.",
    )
    parser.add_argument("--op", choices=[o.value for o in Op], default="Cast")
    parser.add_argument("--opset", type=int, default=None, help="opset (default: the latest)")
    parser.set_defaults(func=run)


def matrix_lines(op: Op, opset: int | None, *, mark: str = "x", blank: str = ".") -> list[str]:
    """The grid as lines of plain text (OpsetError for an opset castlike does not know)."""
    version = _check_opset(op, opset)
    allowed = version.types
    types = list(TYPES.values())
    width = max(len(f"{t.code:>2} {t.name}") for t in types)
    where = f"opset {opset}" if opset is not None else "the latest opset"
    lines = [
        f"{version.label} at {where}: source (rows) -> target (columns, by code)",
        " " * (width + 2) + " ".join(str(t.code // 10) if t.code >= 10 else " " for t in types),
        " " * (width + 2) + " ".join(str(t.code % 10) for t in types),
    ]
    for s in types:
        cells = " ".join(
            mark if OnnxType(s.code) in allowed and OnnxType(t.code) in allowed else blank
            for t in types
        )
        lines.append(f"{f'{s.code:>2} {s.name}':<{width}}  {cells}")
    attributes = ", ".join(sorted(version.attributes)) or "none"
    lines.append(f"{mark}: allowed.  Attributes besides 'to': {attributes}; {len(allowed)} types")
    return lines


def run(args: argparse.Namespace) -> int:
    lines = matrix_lines(Op(args.op), args.opset)
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.markup import escape

        console = Console(highlight=False)
        for line in lines:
            console.print(escape(line).replace(" x", " [green]x[/]").replace(" .", " [dim].[/]"))
    else:
        print("\n".join(lines))
    return 0
