"""``castlike parity``: every installed backend against the exact oracle, bit for bit."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

from .._native import usable_cores
from ..parity import Cell, CellStatus, ParityReport, available_backends, run_parity
from ._common import (
    backend_headers,
    builtin_backend_names,
    install_hint,
    output_path_error,
    requested_backends,
    type_from_text,
)
from ._table import is_terminal, print_table

__all__ = ["register", "run"]

#: The most processes casting on the backends by default: each imports every backend (torch
#: and JAX together take about 0.5 GB), and the run is split by source type.
CAST_PROCESSES = 4

HELP = "check that every backend gives the oracle's bits for every pair and mode"
DESCRIPTION = """\
For every (source, target) pair, every mode (saturate, round_mode, profile, and the Cast-19..23
rule for Inf into FNUZ types) and every installed backend, cast the same inputs and compare the
result bits with the exact oracle's (cached on disk).  Inputs: every pattern of the 8-bit and
smaller types; of the 16-bit types with --exhaustive (else --random patterns); curated values
plus --random patterns of the 32/64-bit types, reproducible from --seed.  Exit status 1 on any
mismatch."""


def register(subparsers: Any) -> None:
    """Add the ``parity`` subcommand."""
    p = subparsers.add_parser("parity", help=HELP, description=DESCRIPTION)
    p.add_argument(
        "--backend",
        action="append",
        metavar="NAME",
        help=f"a backend to check: {builtin_backend_names()} or a registered one (repeatable; "
        "default: every installed one)",
    )
    p.add_argument(
        "--exhaustive", action="store_true", help="every bit pattern of the 16-bit sources"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument(
        "--random",
        type=int,
        default=4096,
        metavar="N",
        help="random bit patterns per wide (and, without --exhaustive, 16-bit) source "
        "(default 4096)",
    )
    p.add_argument("--source", action="append", metavar="TYPE", help="only these sources")
    p.add_argument("--target", action="append", metavar="TYPE", help="only these targets")
    p.add_argument("--html", type=Path, metavar="FILE", help="write the colour matrix as HTML")
    p.add_argument("--png", type=Path, metavar="FILE", help="write the colour matrix as PNG")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the full report as JSON")
    p.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="oracle cache (default $CASTLIKE_CACHE/oracle or ~/.cache/castlike/oracle)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="processes filling the oracle cache (default: all cores) and casting on the "
        f"backends (default: the cores, at most {CAST_PROCESSES}: each imports every backend)",
    )
    p.add_argument(
        "--device",
        metavar="NAME",
        help="place every backend's inputs on this device (cpu, cuda, cuda:1, ...: torch's "
        "device names; JAX's platform names; the others hold arrays on the cpu only) and "
        "check that results stay there (default: each library's default)",
    )
    p.add_argument(
        "--full", action="store_true", help="print every pair, not one row per source type"
    )
    p.set_defaults(func=run)


def _error(message: str) -> int:
    print(f"castlike parity: error: {message}", file=sys.stderr)
    return 2


def _backends(requested: list[str] | None) -> list[str] | str:
    """The backends to run, or an error message."""
    if not requested:
        return available_backends()
    return requested_backends(requested)


def run(args: argparse.Namespace) -> int:
    """Run the check; 0 when every backend matches the oracle, 1 otherwise, 2 on bad input."""
    try:
        from rich.console import Console
    except ImportError:
        return _error(f"the parity command needs rich: {install_hint('cli')}")
    bad_path = output_path_error(args.json, args.html, args.png)
    if bad_path:
        return _error(bad_path)
    if args.random < 0:
        return _error("--random must be 0 or more")
    if args.png is not None:
        try:
            importlib.import_module("PIL")
        except ImportError:
            return _error(f"--png needs Pillow: {install_hint('cli')}")
    if args.jobs is not None and args.jobs < 1:
        return _error("--jobs must be 1 or more")
    sources = [type_from_text(n) for n in args.source] if args.source else None
    targets = [type_from_text(n) for n in args.target] if args.target else None
    for t in (sources or []) + (targets or []):
        if not t.is_numeric:
            return _error("parity covers the numeric types; STRING has its own tests")
    backends = _backends(args.backend)
    if isinstance(backends, str):
        return _error(backends)

    console = Console()
    cache = _cache_dir(args)
    cached_before = _cached_answers(cache)
    try:
        report = _run_with_progress(args, backends, sources, targets, console)
    except ValueError as exc:  # a device a backend cannot reach (checked before any work)
        return _error(str(exc))
    inputs = "exhaustive" if report.exhaustive else f"sampled, seed {report.seed}"
    if report.device is not None:
        inputs += f", on {report.device}"
    what = "every pair" if args.full else "targets per source type"
    headers, rows, legend = matrix_rows(report, full=args.full)
    print_table(
        headers,
        rows,
        title=f"castlike parity ({inputs}): {what} x backend",
        legend=legend,
        console=console if is_terminal() else None,
    )
    _print_failures(report, console)
    for note in report.notes:
        console.print(f"[yellow]note:[/] {note}", soft_wrap=True)
    _print_summary(report, console)
    _print_coverage(report, console, cache, _cached_answers(cache) - cached_before)
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_json(), indent=1), encoding="utf-8")
        console.print(f"JSON report: {args.json}")
    if args.html is not None:
        from .._parity_render import render_html

        render_html(report, args.html)
        console.print(f"HTML matrix: {args.html}")
    if args.png is not None:
        from .._parity_render import render_png

        render_png(report, args.png)
        console.print(f"PNG matrix: {args.png}")
    return 0 if report.ok else 1


def _run_with_progress(
    args: argparse.Namespace,
    backends: list[str],
    sources: Any,
    targets: Any,
    console: Any,
) -> ParityReport:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        oracle_task = None
        backend_task = None

        def on_oracle(done: int, total: int) -> None:
            nonlocal oracle_task
            if oracle_task is None:
                oracle_task = progress.add_task("oracle answers (once, then cached)", total=total)
            progress.update(oracle_task, completed=done)

        def on_backend(done: int, total: int) -> None:
            nonlocal backend_task
            if backend_task is None:
                backend_task = progress.add_task(
                    f"(pair, mode) checks on {len(backends)} backend(s)", total=total
                )
            progress.update(backend_task, completed=done)

        return run_parity(
            backends,
            exhaustive=args.exhaustive,
            seed=args.seed,
            n_random=args.random,
            sources=sources,
            targets=targets,
            cache_dir=args.cache_dir,
            workers=args.jobs,
            processes=args.jobs or min(CAST_PROCESSES, usable_cores()),
            device=args.device,
            oracle_progress=on_oracle,
            progress=on_backend,
        )


def _cell_text(cell: Cell) -> str:
    if cell.status is CellStatus.PASS:
        return "✓"
    if cell.status is CellStatus.NOT_REPRESENTABLE:
        return "n/r"
    if cell.status is CellStatus.ERROR:
        return "error"
    return f"✗ {cell.mismatch_count}"


def _group_text(cells: list[Cell]) -> str:
    """One source row's cells on one backend: targets that fail, pass, or cannot run."""
    passed = sum(c.status is CellStatus.PASS for c in cells)
    nr = sum(c.status is CellStatus.NOT_REPRESENTABLE for c in cells)
    bad = sum(c.status in (CellStatus.MISMATCH, CellStatus.ERROR) for c in cells)
    parts = [f"{bad}✗"] if bad else []
    if passed:
        parts.append(f"{passed}✓")
    if nr:
        parts.append(f"{nr}-")
    return " ".join(parts)


def matrix_rows(
    report: ParityReport, *, full: bool
) -> tuple[list[str], list[list[str]], list[str]]:
    """Headers, rows and legend of the parity table (one row per source, or per pair)."""
    columns, short = backend_headers(report.backends)
    if full:
        rows = [
            [f"{s.name}→{t.name}", *(_cell_text(report.cell(s, t, b)) for b in report.backends)]
            for s in report.sources
            for t in report.targets
        ]
        legend = [
            "✓: every mode gives the oracle's bits",
            "✗ N: N elements differ (listed below); n/r: the backend cannot hold the pair",
            *short,
        ]
        return ["source→target", *columns], rows, legend
    rows = [
        [
            s.name,
            *(_group_text([report.cell(s, t, b) for t in report.targets]) for b in report.backends),
        ]
        for s in report.sources
    ]
    legend = [
        "Targets per source:  N✓ every mode gives the oracle's bits;",
        "  N✗ some elements differ (listed below);  N- the backend cannot hold the pair.",
        *short,
    ]
    return ["source", *columns], rows, legend


def _print_failures(report: ParityReport, console: Any) -> None:
    failed = report.failed
    if not failed:
        return
    console.print(f"[bold red]{len(failed)} failing (pair, backend) cell(s):[/]")
    for key in failed:
        cell = report.cells[key]
        source, target, backend = key
        if cell.status is CellStatus.ERROR:
            console.print(
                f"{source} -> {target} on {backend}: {cell.reason}", markup=False, soft_wrap=True
            )
        for m in cell.mismatches:
            console.print(m.text, markup=False, highlight=False, soft_wrap=True)


def _cache_dir(args: argparse.Namespace) -> Path:
    from ..testing import default_cache_dir

    return Path(args.cache_dir) if args.cache_dir is not None else default_cache_dir() / "oracle"


def _cached_answers(cache: Path) -> int:
    return sum(1 for _ in cache.glob("*.npy")) if cache.is_dir() else 0


def _print_coverage(report: ParityReport, console: Any, cache: Path, computed: int) -> None:
    """What was checked, and what the oracle's answers cost and where they live."""
    cells = {k: c for k, c in report.cells.items() if c.checks}
    pairs = len({(s, t) for (s, t, _b) in report.cells})
    modes = max((c.checks for c in cells.values()), default=0)
    per_source = {s: c.elements for (s, _t, _b), c in cells.items()}
    casts = sum(c.checks * len(c.layouts) * c.elements for c in cells.values())
    sixteen = "every pattern" if report.exhaustive else f"{report.n_random} random patterns"
    console.print(
        f"checked: {pairs} pairs ({len(report.sources)} sources x {len(report.targets)} "
        f"targets) x up to {modes} modes (saturate x round_mode x profile, and Cast-19..23's "
        f"Inf rule into FNUZ) on {', '.join(report.backends)}; the sub-byte targets one per "
        "byte and packed",
        highlight=False,
    )
    console.print(
        f"inputs: {sum(per_source.values()):,} values (every pattern of the 8-bit types, "
        f"{sixteen} of the 16-bit ones, curated and {report.n_random} random values of the "
        f"wider ones, seed {report.seed}); {casts:,} results compared bit for bit",
        highlight=False,
    )
    if computed:
        console.print(
            f"oracle: {computed} answer tables computed in {report.oracle_seconds:.1f} s "
            f"(once; later runs read them) and cached in {cache}",
            highlight=False,
        )
    else:
        console.print(f"oracle: answers read from the cache in {cache}", highlight=False)


def _print_summary(report: ParityReport, console: Any) -> None:
    counts = report.counts()
    parts = []
    for b, c in counts.items():
        bad = c["mismatch"] + c["error"]
        parts.append(f"{b}: {c['pass']} pass, {bad} fail, {c['not representable']} n/r")
    verdict = "[green]no mismatch[/]" if report.ok else "[bold red]MISMATCH[/]"
    console.print(
        f"{verdict} — {'; '.join(parts)} — {report.seconds:.1f} s "
        f"(oracle {report.oracle_seconds:.1f} s)",
        soft_wrap=True,
    )
