"""Tables that read anywhere: rich on a terminal, aligned plain text in pipes and CI logs.

Cells never lose characters: rich folds a cell that does not fit (``overflow="fold"``, no
ellipsis), and plain text keeps every value whole.  Callers keep their tables within 80
columns by choosing short headers (explained in a legend) and few columns.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["is_terminal", "plain_table", "print_table"]


def is_terminal() -> bool:
    """Whether stdout is an interactive terminal (not a pipe, a file or a CI log)."""
    return sys.stdout.isatty()


def plain_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str = "",
    legend: Sequence[str] = (),
    right: frozenset[int] = frozenset(),
) -> str:
    """The table as aligned text: columns two spaces apart, ``right`` columns right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    out = [title] if title else []
    out += [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    out += list(legend)
    return "\n".join(out)


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str = "",
    legend: Sequence[str] = (),
    right: frozenset[int] = frozenset(),
    console: Any = None,
) -> None:
    """Print a table: rich on a terminal, :func:`plain_table` otherwise."""
    if not is_terminal() and console is None:
        print(plain_table(headers, rows, title=title, legend=legend, right=right))
        print()
        return
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    table = Table(
        title=title or None, box=box.SIMPLE_HEAD, header_style="bold", title_justify="left"
    )
    for i, h in enumerate(headers):
        table.add_column(h, justify="right" if i in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*(escape(c) for c in row))
    console.print(table)
    for text in legend:
        console.print(text, markup=False, highlight=False)
    console.print()
