"""Thread scaling of the native kernels: one thread against two, and what bounds each cast.

For each conversion of ``bench_numpy.py`` and each size (2**21 and 10**7 elements by default),
the kernel casts into a preallocated output (no page faults of a new array, which vary from
run to run) on one thread and on two, and the same bytes are copied on one thread and on two
by the kernel that moves 32-bit words as they are (UINT32 to UINT32, over the input's bytes and
over the output's: one read and one write of each, where the cast's own traffic is one read
of the input and one write of the output).  (The identity kernels of the float types are no
plain copy: FLOAT16's widens and narrows.)  The contenders take turns, medians of many rounds.

What bounds a cast: its arithmetic alone is timed on 2**16 elements in the core's own caches
(each call's median over many calls, scaled to the size measured: "in cache").  A cast whose
one-thread time at the size measured is within 1.25x of that is **bound by compute** there, and
a second core should nearly halve its time; one that takes longer waits for memory (or the
shared cache), and two threads gain what the memory system gives a second core, which the
copy's gain shows.

Run: ``python benchmarks/bench_threads.py [--sizes 2097152 1e7] [--rst FILE] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np
from _common import median_interleaved, rst_simple_table
from bench_numpy import CASES, make_input

from castlike import _native
from castlike._native import routes
from castlike.backends.numpy import NUMPY_DTYPES
from castlike.spec.rules import Mode
from castlike.spec.types import OnnxType, spec_of

ROUNDS = 101
#: A cast within this factor of its time in the core's caches counts as bound by compute.
COMPUTE_BOUND = 1.25
#: Elements of the in-cache measurement: a few microseconds a call, so that the call's own
#: overhead (about 0.3 us) stays small, in the second-level cache of every machine here.
IN_CACHE = 1 << 16


def in_cache_ms(cast: Any, x: np.ndarray, out: np.ndarray, n: int) -> float:
    """One thread's time for ``n`` elements at the speed of the kernel on data in the cache."""
    small_x, small_out = x[:IN_CACHE].copy(), out[:IN_CACHE].copy()
    per_call = median_interleaved({"small": lambda: cast(small_x, small_out, 1)}, 2001)["small"]
    return per_call * 1e3 * n / IN_CACHE


def _kernel(source: str, target: str) -> Any:
    module = _native.module()
    assert module is not None, "the native kernels are not built"
    kernel = routes.kernel_for(module, spec_of(source), spec_of(target), Mode())
    assert kernel is not None, f"no kernel for {source} -> {target}"
    return kernel


def _words(a: np.ndarray) -> np.ndarray:
    """The array's bytes as 32-bit words (the sizes measured are multiples of 4 bytes)."""
    assert a.nbytes % 4 == 0, "choose sizes whose byte counts are multiples of 4"
    return a.reshape(-1).view(np.uint8).view(np.uint32)


def bench(source: str, target: str, n: int, rng: np.random.Generator) -> dict[str, Any]:
    x = make_input(source, n, rng)
    out = np.empty(n, NUMPY_DTYPES[OnnxType[target]])
    cast = _kernel(source, target)
    words = _kernel("UINT32", "UINT32")
    x_words, out_words = _words(x), _words(out)
    x_copy, out_copy = np.empty_like(x_words), np.empty_like(out_words)

    def run(threads: int) -> Any:
        return lambda: cast(x, out, threads)

    def copy(threads: int) -> Any:
        def both() -> None:
            words(x_words, x_copy, threads)
            words(out_words, out_copy, threads)

        return both

    fns = {"cast 1t": run(1), "cast 2t": run(2), "copy 1t": copy(1), "copy 2t": copy(2)}
    before = _native.get_num_threads()
    _native.set_num_threads(2)  # the pool's limit; each call names its own thread count
    try:
        ms = {k: t * 1e3 for k, t in median_interleaved(fns, ROUNDS).items()}
    finally:
        _native.set_num_threads(before)
    ms["in cache"] = in_cache_ms(cast, x, out, n)
    bound = "compute" if ms["cast 1t"] <= COMPUTE_BOUND * ms["in cache"] else "memory"
    return {
        "source": source,
        "target": target,
        "n": n,
        "ms": ms,
        "cast_speedup": ms["cast 1t"] / ms["cast 2t"],
        "copy_speedup": ms["copy 1t"] / ms["copy 2t"],
        "vs_copy_1t": ms["cast 1t"] / ms["copy 1t"],
        "bound": bound,
    }


def rows_text(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            f"{r['source']} → {r['target']}",
            f"{r['ms']['in cache']:.3f}",
            f"{r['ms']['cast 1t']:.3f}",
            f"{r['ms']['cast 2t']:.3f}",
            f"{r['cast_speedup']:.2f}×",
            f"{r['ms']['copy 1t']:.3f}",
            f"{r['ms']['copy 2t']:.3f}",
            f"{r['copy_speedup']:.2f}×",
            f"{r['vs_copy_1t']:.2f}×",
            r["bound"],
        ]
        for r in rows
    ]


HEADER = [
    "source → target",
    "in cache",
    "cast 1t",
    "cast 2t",
    "2t gain",
    "copy 1t",
    "copy 2t",
    "copy gain",
    "1t vs copy",
    "bound by",
]


def rst_tables(rows: list[dict[str, Any]]) -> str:
    out = []
    for n in sorted({r["n"] for r in rows}):
        out.append(f"**n = {n:,}** (milliseconds, medians of {ROUNDS} rounds)\n")
        out.append(rst_simple_table(HEADER, rows_text([r for r in rows if r["n"] == n])))
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[2**21, 1e7])
    parser.add_argument("--only", nargs="*", default=None, help="e.g. FLOAT-FLOAT16")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--rst", type=Path, default=None, help="write the tables as rst")
    args = parser.parse_args()
    cases = [c for c in CASES if args.only is None or "-".join(c) in args.only]
    rng = np.random.default_rng(0)
    print(f"castlike native path: {_native.info()['level']}")
    rows = []
    for n in (int(s) for s in args.sizes):
        print(f"\nn = {n:,}: milliseconds, medians of {ROUNDS} rounds, preallocated outputs")
        print("".join(f"{h:>12}" if i else f"{h:26}" for i, h in enumerate(HEADER)))
        for s, t in cases:
            r = bench(s, t, n, rng)
            print(
                "".join(f"{c:>12}" if i else f"{c:26}" for i, c in enumerate(rows_text([r])[0])),
                flush=True,
            )
            rows.append(r)
    if args.json:
        meta = {"machine": platform.machine(), "cpus": os.cpu_count()}
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    if args.rst:
        args.rst.write_text(rst_tables(rows))


if __name__ == "__main__":
    main()
