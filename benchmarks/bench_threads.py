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

With ``--pauses``, a second table: a few casts on one thread and on two, back to back and
after a pause of 2 ms before each call, the caller busy (copying memory, which also evicts the
caches) or idle (asleep, so that the whole machine may idle).  The pool's worker spins for a
while after helping and sleeps after that, and a sleeping worker is woken only for work
expected to be long or for a stream of casts: this table shows what that choice gives.

Run: ``python benchmarks/bench_threads.py [--sizes 2097152 1e7] [--pauses] [--rst FILE]
[--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
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


#: The casts and sizes of the pause table: one bound by compute in the cache, one with a 4-byte
#: output, one from DOUBLE; from below the two-thread bound to beyond the last-level cache.
PAUSE_CASES = [("FLOAT", "FLOAT8E4M3FN"), ("FLOAT", "INT32"), ("DOUBLE", "FLOAT16")]
PAUSE_SIZES = [2**20, 4 * 10**6, 10**7]
PAUSE_SECONDS = 0.002
PATTERNS = ["none", "busy", "idle"]


def pause_patterns() -> dict[str, Any]:
    """What runs before each timed call, untimed, per pattern."""
    a = np.ones(1 << 21)  # 16 MiB: copying it keeps the caller busy and evicts the caches
    b = np.empty_like(a)

    def busy() -> None:
        end = time.perf_counter() + PAUSE_SECONDS
        while time.perf_counter() < end:
            np.copyto(b, a)

    return {"none": lambda: None, "busy": busy, "idle": lambda: time.sleep(PAUSE_SECONDS)}


def bench_pauses(source: str, target: str, n: int, rng: np.random.Generator) -> dict[str, Any]:
    x = make_input(source, n, rng)
    out = np.empty(n, NUMPY_DTYPES[OnnxType[target]])
    cast = _kernel(source, target)
    ms: dict[str, dict[str, float]] = {}
    before = _native.get_num_threads()
    _native.set_num_threads(2)
    try:
        for pattern, pause in pause_patterns().items():
            fns = {"1t": lambda: cast(x, out, 1), "2t": lambda: cast(x, out, 2)}
            setups = dict.fromkeys(fns, pause)
            times = median_interleaved(fns, ROUNDS, setups)
            ms[pattern] = {k: v * 1e3 for k, v in times.items()}
    finally:
        _native.set_num_threads(before)
    return {"source": source, "target": target, "n": n, "ms": ms}


PAUSE_HEADER = ["source → target", "n"] + [
    f"{pattern} {column}" for pattern in PATTERNS for column in ("1t", "2t", "gain")
]


def pause_rows_text(rows: list[dict[str, Any]]) -> list[list[str]]:
    text = []
    for r in rows:
        cells = [f"{r['source']} → {r['target']}", f"{r['n']:,}"]
        for pattern in PATTERNS:
            one, two = r["ms"][pattern]["1t"], r["ms"][pattern]["2t"]
            cells += [f"{one:.3f}", f"{two:.3f}", f"{one / two:.2f}×"]
        text.append(cells)
    return text


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


def rst_tables(rows: list[dict[str, Any]], pause_rows: list[dict[str, Any]]) -> str:
    out = []
    for n in sorted({r["n"] for r in rows}):
        out.append(f"**n = {n:,}** (milliseconds, medians of {ROUNDS} rounds)\n")
        out.append(rst_simple_table(HEADER, rows_text([r for r in rows if r["n"] == n])))
    if pause_rows:
        out.append(
            f"**After a pause** (milliseconds, medians of {ROUNDS} rounds; before each call "
            f"{PAUSE_SECONDS * 1e3:g} ms busy or idle)\n"
        )
        out.append(rst_simple_table(PAUSE_HEADER, pause_rows_text(pause_rows)))
    return "\n".join(out)


def print_row(cells: list[str], first: int = 26) -> None:
    """One row of a table on the terminal, the first column left-aligned."""
    print("".join(f"{c:>12}" if i else f"{c:{first}}" for i, c in enumerate(cells)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[2**21, 1e7])
    parser.add_argument("--only", nargs="*", default=None, help="e.g. FLOAT-FLOAT16")
    parser.add_argument("--pauses", action="store_true", help="add the table after pauses")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--rst", type=Path, default=None, help="write the tables as rst")
    args = parser.parse_args()
    cases = [c for c in CASES if args.only is None or "-".join(c) in args.only]
    rng = np.random.default_rng(0)
    print(f"castlike native path: {_native.info()['level']}")
    rows = []
    for n in (int(s) for s in args.sizes):
        print(f"\nn = {n:,}: milliseconds, medians of {ROUNDS} rounds, preallocated outputs")
        print_row(HEADER)
        for s, t in cases:
            r = bench(s, t, n, rng)
            print_row(rows_text([r])[0])
            rows.append(r)
    pause_rows = []
    if args.pauses:
        print(f"\nafter pauses of {PAUSE_SECONDS * 1e3:g} ms: milliseconds, medians of {ROUNDS}")
        print_row(PAUSE_HEADER)
        for n in PAUSE_SIZES:
            for s, t in PAUSE_CASES:
                r = bench_pauses(s, t, n, rng)
                print_row(pause_rows_text([r])[0])
                pause_rows.append(r)
    if args.json:
        meta = {"machine": platform.machine(), "cpus": os.cpu_count()}
        data = {"meta": meta, "rows": rows, "pause_rows": pause_rows}
        args.json.write_text(json.dumps(data, indent=1))
    if args.rst:
        args.rst.write_text(rst_tables(rows, pause_rows))


if __name__ == "__main__":
    main()
