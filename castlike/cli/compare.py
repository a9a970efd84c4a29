"""``castlike compare``: where the libraries you have differ from the ONNX rule, and why."""

from __future__ import annotations

import argparse
import html
import importlib
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from ._common import install_hint, output_path_error, type_from_text
from ._table import is_terminal, print_table

__all__ = ["register", "render_html", "run"]

HELP = "show where numpy/ml_dtypes, torch, jax, onnxruntime and onnx.reference differ, and why"
DESCRIPTION = """\
Cast the inputs of `castlike parity` (every pattern of the 8- and 16-bit types, the curated
values of the wider ones) with each installed library's own conversion, compare the bits
with castlike's (the spec profile) and sort every difference by cause: NaN encoding,
saturation, double rounding, subnormal flush, tie rounding, out-of-range integers, other.
Prints a count per library and cause, and one reproducible example per (library, cause);
--full lists every (library, pair, mode, cause).  torch.compile is checked only when named
(one compilation per pair)."""

#: Short column names of the causes, explained in the legend.
SHORT = {
    "NaN encoding": "NaN",
    "saturation": "sat",
    "double rounding": "dbl",
    "subnormal flush": "sub",
    "tie rounding": "tie",
    "out-of-range integers": "int",
    "other": "other",
}


def register(subparsers: Any) -> None:
    """Add the ``compare`` subcommand."""
    from ..compare import LIBRARIES

    p = subparsers.add_parser("compare", help=HELP, description=DESCRIPTION)
    p.add_argument(
        "--library",
        action="append",
        choices=list(LIBRARIES),
        metavar="NAME",
        help=f"a library's conversion to check: {', '.join(LIBRARIES)} (repeatable; default: "
        "every installed one but torch.compile)",
    )
    p.add_argument("--source", action="append", metavar="TYPE", help="only these sources")
    p.add_argument("--target", action="append", metavar="TYPE", help="only these targets")
    p.add_argument("--full", action="store_true", help="list every (library, pair, mode, cause)")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the full report as JSON")
    p.add_argument("--html", type=Path, metavar="FILE", help="write the full report as HTML")
    p.set_defaults(func=run)


def _error(message: str) -> int:
    print(f"castlike compare: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """Print the differences; 0 always (a difference is information, not a failure)."""
    from ..compare import LIBRARIES, available_libraries, compare

    bad_path = output_path_error(args.json, args.html)
    if bad_path:
        return _error(bad_path)
    sources = [type_from_text(n) for n in args.source] if args.source else None
    targets = [type_from_text(n) for n in args.target] if args.target else None
    for t in (sources or []) + (targets or []):
        if not t.is_numeric:
            return _error("compare covers the numeric types; STRING has no library conversion")
    names = list(dict.fromkeys(args.library or available_libraries()))
    for name in names:
        try:
            importlib.import_module(LIBRARIES[name].module)
        except ImportError:
            extra = {"numpy": "cli", "onnxruntime": "onnx", "onnx.reference": "onnx"}
            return _error(
                f"{name} is not installed: {install_hint(extra.get(name, name.split('.')[0]))}"
            )
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = Console()
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task(f"(library, pair) on {', '.join(names)}", total=None)
        report = compare(
            names,
            sources=sources,
            targets=targets,
            progress=lambda done, total: progress.update(task, completed=done, total=total),
        )
    _print_report(report, console, full=args.full)
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_json(), indent=1), encoding="utf-8")
        console.print(f"JSON report: {args.json}", soft_wrap=True)
    if args.html is not None:
        render_html(report, args.html)
        console.print(f"HTML report: {args.html}", soft_wrap=True)
    return 0


def summary_rows(report: Any) -> tuple[list[str], list[list[str]], list[str]]:
    """Headers, rows and legend of the per-library, per-cause counts."""
    from ..compare import CAUSES

    counts = report.counts()
    rows = []
    for name in report.libraries:
        pairs, unsupported, _elements = report.checked.get(name, (0, 0, 0))
        rows.append([name, str(pairs), str(unsupported), *(str(counts[name][c]) for c in CAUSES)])
    legend = [
        "pairs: (source, target) pairs cast; n/a: pairs the library cannot cast.",
        "Differing elements per cause, summed over pairs and modes:",
        "  " + ", ".join(f"{SHORT[c]} = {c}" for c in CAUSES[:4]) + ",",
        "  " + ", ".join(f"{SHORT[c]} = {c}" for c in CAUSES[4:]) + ".",
    ]
    return ["library", "pairs", "n/a", *(SHORT[c] for c in CAUSES)], rows, legend


def _print_report(report: Any, console: Any, *, full: bool) -> None:
    from ..compare import CAUSES

    for name, what in report.libraries.items():
        console.print(f"{name}: {what}", soft_wrap=True, highlight=False)
    headers, rows, legend = summary_rows(report)
    print_table(
        headers,
        rows,
        title="Differences from castlike (spec profile)",
        legend=legend,
        right=frozenset(range(1, len(headers))),
        console=console if is_terminal() else None,
    )
    if full:
        shown = list(report.differences)
    else:  # one example per (library, cause): the pair with the most differing elements
        best: dict[tuple[str, str], Any] = {}
        pairs: dict[tuple[str, str], int] = defaultdict(int)
        for d in report.differences:
            key = (d.library, d.cause)
            pairs[key] += 1
            if key not in best or d.count > best[key].count:
                best[key] = d
        order = {name: i for i, name in enumerate(report.libraries)}
        shown = sorted(best.values(), key=lambda d: (order[d.library], CAUSES.index(d.cause)))
    for d in shown:
        where = f"{d.source} -> {d.target}" + (f" ({d.mode})" if d.mode != "-" else "")
        more = ""
        if not full:
            n = sum(1 for e in report.differences if (e.library, e.cause) == (d.library, d.cause))
            more = f"; {n} (pair, mode) entries in all" if n > 1 else ""
        console.print(
            f"{d.library}, {d.cause}: {where}, {d.count} element(s){more}\n"
            f"    {d.example.describe()}\n    {d.example.repro}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if not full and report.differences:
        console.print("--full lists every (library, pair, mode, cause).", highlight=False)


def render_html(report: Any, path: Path) -> None:
    """Write the report as one self-contained HTML file."""
    headers, rows, legend = summary_rows(report)

    def table(head: list[str], body: list[list[str]]) -> str:
        th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
        trs = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body
        )
        return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"

    detail = [
        [
            d.library,
            f"{d.source} -> {d.target}",
            d.mode,
            d.cause,
            str(d.count),
            d.example.describe(),
            d.example.repro,
        ]
        for d in report.differences
    ]
    libraries = "".join(
        f"<li><b>{html.escape(n)}</b>: {html.escape(w)}</li>" for n, w in report.libraries.items()
    )
    document = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>castlike compare</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: .2em .5em; text-align: left; vertical-align: top; }}
td:nth-child(7) {{ font-family: monospace; font-size: 85%; }}
</style></head><body>
<h1>castlike compare</h1>
<p>Each library's own conversion against castlike (the spec profile of the ONNX rules).</p>
<ul>{libraries}</ul>
{table(headers, rows)}
{"".join(f"<p>{html.escape(line)}</p>" for line in legend)}
<h2>Every (library, pair, mode, cause)</h2>
{table(["library", "pair", "mode", "cause", "elements", "example", "reproduce"], detail)}
</body></html>
"""
    Path(path).write_text(document, encoding="utf-8")
