"""Cold start: what a short script, a CLI call or a fresh worker process pays before its first
result.  Every figure is measured in a fresh interpreter (median of several runs):

* ``import numpy``, ``import castlike`` after it, and ``import ml_dtypes`` on its own (castlike
  imports ml_dtypes only when a cast involves one of its types: ml_dtypes 0.7 takes hundreds of
  milliseconds to import);
* the first cast of a 10-element array to each target (tables built on first use included),
  from FLOAT, DOUBLE and FLOAT16 sources: castlike's own cost, with ml_dtypes imported before
  the clock starts where the target is one of its types (and checked to stay out of
  ``sys.modules`` where it is not);
* the wall time of ``python -m castlike cast 0.1 --to FLOAT8E4M3FN``;
* a small cast after warm-up (10 elements, NumPy), for comparison.

Each figure is the CPU time of the interpreter's main thread (``time.thread_time``), which a
machine shared with other jobs inflates far less than wall time; the JSON output has the wall
times too.  Not the whole process's CPU time: NumPy's OpenBLAS starts worker threads at import
that keep a core busy for a while, which doubled ``time.process_time`` here although castlike
does no BLAS work (a 10-element cast runs on the main thread only).  The command's figure is
wall time, as the goal states, with ``getrusage``'s CPU time beside it.  castlike's bytecode is
compiled first, as an installed package has it.  Run as
``python benchmarks/bench_startup.py [--runs N] [--json F] [--rst F]`` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: Targets by family, as the results table groups them.
FAMILIES: dict[str, tuple[str, ...]] = {
    "IEEE": ("FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16"),
    "float8": ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ"),
    "E8M0": ("FLOAT8E8M0",),
    "float4/6": ("FLOAT4E2M1", "FLOAT6E2M3", "FLOAT6E3M2"),
    "integers": ("INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64"),
    "sub-byte": ("INT4", "UINT4", "INT2", "UINT2"),
    "BOOL": ("BOOL",),
    "STRING": ("STRING",),
}
SOURCES = ("FLOAT", "DOUBLE", "FLOAT16")
_NUMPY_NAME = {"FLOAT": "float32", "DOUBLE": "float64", "FLOAT16": "float16"}

_IMPORT = """
import time
t0 = time.thread_time()
import numpy
t1 = time.thread_time()
import castlike
t2 = time.thread_time()
import ml_dtypes
t3 = time.thread_time()
import array_api_compat.numpy
t4 = time.thread_time()
print((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t4 - t3) * 1e3)
"""

_FIRST_CAST = """
import sys, time, numpy as np, castlike
{preimport}
x = (np.arange(10) * 0.37 - 1.1).astype({dtype!r})
t0, w0 = time.thread_time(), time.perf_counter()
castlike.cast(x, {target!r})
t1, w1 = time.thread_time(), time.perf_counter()
castlike.cast(x, {target!r})
t2 = time.perf_counter()
print((t1 - t0) * 1e3, (t2 - w1) * 1e3, (w1 - w0) * 1e3, int("ml_dtypes" in sys.modules))
"""
#: The targets that are ml_dtypes types (their first cast imports it).
ML_DTYPES_TARGETS = frozenset(FAMILIES["float8"] + FAMILIES["E8M0"] + FAMILIES["float4/6"]) | {
    "BFLOAT16",
    *FAMILIES["sub-byte"],
}

_VERSIONS = """
from importlib.metadata import version
print(",".join(f"{p}=={version(p)}" for p in ("numpy", "ml_dtypes")))
"""

_WARM = """
import timeit, numpy as np, castlike
x = (np.arange(10) * 0.37 - 1.1).astype(np.float32)
for target in ("FLOAT8E4M3FN", "INT8", "FLOAT16"):
    castlike.cast(x, target)
    runs = timeit.repeat(lambda: castlike.cast(x, target), number=2000, repeat=7)
    print(target, min(runs) / 2000 * 1e6)
"""


def _child_env() -> dict[str, str]:
    """The children's environment: this checkout first on the path, and bytecode caching on.

    An installed castlike runs from cached bytecode; without it each fresh interpreter would
    also compile castlike's sources (about 15 ms of every first cast here), which is not what a
    user pays.  :func:`main` compiles the package once before measuring.
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _child(code: str) -> list[str]:
    env = _child_env()
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=ROOT
    )
    return out.stdout.split()


def _medians(code: str, runs: int) -> list[float]:
    rows = [[float(v) for v in _child(code)] for _ in range(runs)]
    return [statistics.median(column) for column in zip(*rows, strict=True)]


def import_ms(runs: int) -> list[float]:
    """Median CPU ms of ``import numpy``, of ``import castlike`` after it, of ``import
    ml_dtypes`` after that, and of ``import array_api_compat.numpy`` (which castlike avoids)."""
    return _medians(_IMPORT, runs)


def first_cast_ms(source: str, target: str, runs: int) -> list[float]:
    """Median ms of the first cast of 10 elements in a fresh interpreter (CPU), of the second
    (wall), of the first (wall), and whether ml_dtypes was loaded after it (1 or 0).  For a
    target of ml_dtypes, ml_dtypes is imported before the clock starts."""
    preimport = "import ml_dtypes" if target in ML_DTYPES_TARGETS else ""
    code = _FIRST_CAST.format(preimport=preimport, dtype=_NUMPY_NAME[source], target=target)
    return _medians(code, runs)


def _command_s(argv: list[str], runs: int) -> tuple[float, float]:
    """Median CPU and wall seconds of a command in a fresh interpreter."""
    import resource

    env = _child_env()
    cpu, wall = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, env=env, cwd=ROOT)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(cpu), statistics.median(wall)


def rst_table(results: dict[str, Any]) -> str:
    """The figures as reStructuredText, for docs/performance.rst."""
    imports = results["import_cpu_ms"]
    lines = [
        f"Measured with {results['versions']}.",
        "",
        f"* ``import castlike``: {imports['castlike_extra']:.0f} ms more than "
        f"``import numpy`` ({imports['numpy']:.0f} ms); goal: at most 60 ms.",
        f"* ``import ml_dtypes``, which castlike does on the first cast that involves one of its "
        f"types (marked * below): {imports['ml_dtypes']:.0f} ms.",
        f"* ``python -m castlike cast 0.1 --to FLOAT8E4M3FN``: {results['cli_s']['wall']:.2f} s "
        f"wall, {results['cli_s']['cpu']:.2f} s CPU (bare ``python``: "
        f"{results['python_bare_s']['wall']:.2f} s), of which ml_dtypes' import is a part; "
        f"``--to INT8``, which imports no ml_dtypes: {results['cli_int8_s']['wall']:.2f} s wall; "
        "goal: at most 0.5 s wall.",
        "* A small cast after warm-up (10 elements from FLOAT): "
        + ", ".join(f"{t} {us:.1f} µs" for t, us in results["warm_us"].items())
        + "; goal: at most 8 µs.",
        "",
    ]
    head = ("family", "target", *(f"from {s}" for s in SOURCES))
    rows = [
        (
            family,
            target + (" *" if target in ML_DTYPES_TARGETS else ""),
            *(f"{results['first_cast_ms'][target][s]['cpu']:.1f}" for s in SOURCES),
        )
        for family, targets in FAMILIES.items()
        for target in targets
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    rule = "  ".join("=" * w for w in widths)
    lines += [rule, "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)), rule]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines += [rule, ""]
    return "\n".join(line.rstrip() for line in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per figure")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--rst", type=Path, help="also write them as rst (docs/_data)")
    args = parser.parse_args(argv)
    runs = args.runs
    results: dict[str, Any] = {}
    # Bytecode for every module, as an installed package has (see _child_env).
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "castlike")],
        check=True,
        env=_child_env(),
    )

    versions = _child(_VERSIONS)
    results["versions"] = " ".join(versions).replace(",", ", ")
    print(f"versions: {results['versions']}")
    base, extra, ml, compat = import_ms(runs)
    results["import_cpu_ms"] = {
        "numpy": base,
        "castlike_extra": extra,
        "ml_dtypes": ml,
        "array_api_compat_numpy_after": compat,
    }
    print(f"import numpy: {base:.1f} ms; import castlike after it: +{extra:.1f} ms")
    print(f"import ml_dtypes after that: +{ml:.1f} ms")
    print(f"(import array_api_compat.numpy after that: +{compat:.1f} ms)")

    print(f"\nFirst cast of 10 elements, fresh interpreter, main-thread CPU ms (median of {runs}):")
    header = f"{'family':<10} {'target':<16}" + "".join(f" {s:>9}" for s in SOURCES)
    print(header + f" {'2nd (wall)':>11}")
    first: dict[str, dict[str, list[float]]] = {}
    worst = 0.0
    for family, targets in FAMILIES.items():
        for target in targets:
            row = {source: first_cast_ms(source, target, runs) for source in SOURCES}
            loaded = any(v[3] for v in row.values())
            if loaded != (target in ML_DTYPES_TARGETS):
                raise SystemExit(f"the first cast to {target} left ml_dtypes loaded: {loaded}")
            first[target] = row
            worst = max(worst, *(v[0] for v in row.values()))
            second = max(v[1] for v in row.values())
            cells = "".join(f" {row[s][0]:9.2f}" for s in SOURCES)
            print(f"{family:<10} {target:<16}{cells} {second:11.3f}")
    results["first_cast_ms"] = {
        t: {s: dict(zip(("cpu", "second_wall", "wall"), v[:3], strict=True)) for s, v in r.items()}
        for t, r in first.items()
    }
    print(f"slowest first cast: {worst:.2f} ms")

    bare = _command_s([sys.executable, "-c", "pass"], runs)
    cli = _command_s(
        [sys.executable, "-m", "castlike", "cast", "0.1", "--to", "FLOAT8E4M3FN"], runs
    )
    results["cli_s"] = {"cpu": cli[0], "wall": cli[1]}
    # A target of NumPy's own: the command without ml_dtypes' import.
    cli_int8 = _command_s([sys.executable, "-m", "castlike", "cast", "0.1", "--to", "INT8"], runs)
    results["cli_int8_s"] = {"cpu": cli_int8[0], "wall": cli_int8[1]}
    print(
        f"python -m castlike cast 0.1 --to INT8: {cli_int8[0]:.3f} s CPU, {cli_int8[1]:.3f} s wall"
    )
    results["python_bare_s"] = {"cpu": bare[0], "wall": bare[1]}
    command = "python -m castlike cast 0.1 --to FLOAT8E4M3FN"
    print(f"\n{command}: {cli[0]:.3f} s CPU, {cli[1]:.3f} s wall")
    print(f"(bare python: {bare[0]:.3f} s CPU, {bare[1]:.3f} s wall)")

    warm = {}
    rows = _child(_WARM)
    for name, value in zip(rows[::2], rows[1::2], strict=True):
        warm[name] = float(value)
        print(f"warm FLOAT -> {name}, 10 elements: {float(value):.2f} us")
    results["warm_us"] = warm
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if args.rst:
        args.rst.write_text(rst_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
