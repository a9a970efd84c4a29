"""``castlike matrix``: which (source, target) pairs an operator version allows."""

from __future__ import annotations

import argparse

from ..errors import OpsetError
from ..spec.opsets import Op, version_for
from ..spec.types import TYPES, OnnxType
from ._common import require_rich


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "matrix",
        help="print the allowed type pairs of Cast or CastLike at an opset",
        description="Rows are source types, columns target types (by TensorProto code); a "
        "mark means the version allows the pair.",
    )
    parser.add_argument("--op", choices=[o.value for o in Op], default="Cast")
    parser.add_argument("--opset", type=int, default=None, help="opset (default: the latest)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    console = require_rich()
    op = Op(args.op)
    version = version_for(op, args.opset)
    if version is None:
        raise OpsetError(f"{op.value} does not exist in opset {args.opset}")
    allowed = version.types
    where = f"opset {args.opset}" if args.opset is not None else "the latest opset"
    table = Table(
        title=f"{version.label} at {where}: allowed source (rows) -> target (columns) pairs",
        header_style="bold",
        show_lines=False,
    )
    table.add_column("source \\ target", no_wrap=True)
    types = list(TYPES.values())
    for t in types:
        table.add_column(str(t.code), justify="center", no_wrap=True)
    for s in types:
        cells = [
            "[green]✓[/]"
            if OnnxType(s.code) in allowed and OnnxType(t.code) in allowed
            else "[dim]·[/]"
            for t in types
        ]
        table.add_row(f"{s.code:>2} {s.name}", *cells)
    console.print(table)
    attributes = ", ".join(sorted(version.attributes)) or "none"
    console.print(f"attributes besides 'to': {attributes}; {len(allowed)} types allowed")
    return 0
