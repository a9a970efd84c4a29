"""All 2**32 FLOAT inputs: the native kernels against the pure-NumPy engine, bit for bit.

For every target of 16 bits or fewer, the 32- and 64-bit integers, and every mode that changes
it, each FLOAT bit pattern is cast by the native kernel and by the pure engine, and the bits must
agree (NaN as "is NaN" for the IEEE targets, R3).  One mode stands for all the modes whose kernels
run the same code with the same constants and differ at most in the contents of a spec table
(the class-table modes: the index computation is what differs between the paths, and the
tables themselves are held to the oracle by the exhaustive and curated tests); every distinct
set of constants of the arithmetic kernels (float8, float6, float4, FLOAT8E8M0, integers) is
checked.  Then 10**7 random bit patterns of DOUBLE, INT64 and UINT64 to every numeric target,
against the pure engine (which the exhaustive and curated tests hold to the oracle).  Run by
``nox -s exhaustive32``; exits 1 on the first mismatch, naming the input.

Every CPU level this machine runs is checked in the same pass (the pure engine's result of a
block is computed once and compared with each level's kernel); ``--level`` picks one.  Where the
AVX-512 kernels use AVX512-BF16's conversion, the BFLOAT16 casts are checked once more with it
turned off (``avx512-no-bf16``: the steps other AVX-512 CPUs run).

Usage: ``python tests/exhaustive32.py [--level all|baseline|avx2|avx512|avx512-no-bf16] [--stride 1]
[--workers 2] [--target FLOAT8E4M3FN ...] [--skip-random] [--skip-float]``: ``--stride k``
checks every k-th block of 2**22 inputs, for a quick run; ``--target`` checks those targets
only; ``--skip-random`` leaves out the 64-bit sources and ``--skip-float`` the FLOAT ones.
Casts that no kernel takes (the pure engine casts them, see docs/performance.rst) are skipped.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from dataclasses import replace
from itertools import chain
from types import SimpleNamespace

import numpy as np

from castlike._native import routes
from castlike.backends.numpy import ADAPTER as NUMPY
from castlike.backends.numpy import NUMPY_DTYPES
from castlike.spec.rules import Mode, canonical_mode
from castlike.spec.types import OnnxType, TypeSpec, spec_of
from castlike.testing import (
    NO_BF16,
    all_modes,
    compare_bits,
    kernel_variant,
    kernel_variants,
    mode_id,
    numeric_types,
    random_inputs,
)

BLOCK = 1 << 22
#: Patterns per job (64 jobs cover the 2**32).
SPAN = 1 << 26
FLOAT = spec_of("FLOAT")
WIDE_RANDOM = ("DOUBLE", "INT64", "UINT64")
N_RANDOM = 10**7


#: Every target of 16 bits or fewer, and the 32- and 64-bit integers (whose kernels have SIMD
#: steps too).
_WIDE_INTEGERS = ("INT32", "UINT32", "INT64", "UINT64")
TARGETS = [t for t in numeric_types() if t.bits <= 16 or t.name in _WIDE_INTEGERS]


def _modes(source: TypeSpec, target: TypeSpec) -> list[Mode]:
    modes = all_modes() + [replace(m, inf_to_fnuz_is_nan=True) for m in all_modes()]
    return list(dict.fromkeys(canonical_mode(m, source, target) for m in modes))


def _distinct_float_cases(targets: tuple[str, ...] = ()) -> list[tuple[TypeSpec, Mode]]:
    """One (target, mode) per distinct kernel code and constants (tables aside), see above;
    of ``targets`` only, if given."""
    seen: dict[tuple[object, ...], tuple[TypeSpec, Mode]] = {}
    for target in TARGETS:
        if targets and target.name not in targets:
            continue
        for mode in _modes(FLOAT, target):
            found = routes.route(FLOAT, target, mode.effective_for(target))
            if found is None:
                continue  # the pure engine casts it (R12 reference's ml_dtypes zeroes)
            name, params = found
            consts = tuple(sorted((k, v) for k, v in params.items() if k != "table"))
            seen.setdefault((name, consts, "table" in params), (target, mode))
    return list(seen.values())


#: One output array per (shape, dtype), reused by every check of a process: a fresh one per
#: check would page-fault its memory in again, 41 times a block.
_OUTPUTS: dict[tuple[tuple[int, ...], np.dtype], np.ndarray] = {}


def _output(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    key = (shape, np.dtype(dtype))
    if key not in _OUTPUTS:
        if any(held != shape for held, _ in _OUTPUTS):
            _OUTPUTS.clear()  # one shape at a time: the random jobs' arrays are large
        _OUTPUTS[key] = np.empty(shape, dtype=dtype)
    return _OUTPUTS[key]


def _words(a: np.ndarray) -> np.ndarray:
    """``a``'s bytes as 8-byte words where they divide into them (a comparison then takes a
    half to an eighth of the steps), else as bytes."""
    raw = a.reshape(-1).view(np.uint8)
    return raw.view(np.uint64) if raw.size % 8 == 0 else raw


def _check(
    levels: tuple[str, ...], source: TypeSpec, target: TypeSpec, mode: Mode, x: np.ndarray
) -> str:
    """'' when the kernel of every level equals the pure engine on ``x``, else a description."""
    kernels = {}
    for level in levels:
        if level == NO_BF16 and target.name != "BFLOAT16":
            continue  # the same steps as at avx512 (only BFLOAT16 results have others)
        with kernel_variant(level) as module:
            kernel = routes.kernel_for(module, source, target, mode)
        if kernel is not None:  # else the pure engine casts this one itself
            kernels[level] = kernel
    if not kernels:
        return ""
    plan = SimpleNamespace(source=source, target=target, mode=mode)
    pure = np.asarray(NUMPY.engine().cast_pure(x, plan))
    out = _output(x.shape, NUMPY_DTYPES[OnnxType(target.code)])
    for level, kernel in kernels.items():
        with kernel_variant(level):
            kernel(x, out, 1)
        if np.array_equal(_words(out), _words(pure)):
            continue
        expected = NUMPY.bits(pure, target).astype(np.uint64)
        mismatch = compare_bits(out, expected, source, target, x)
        if mismatch is not None:
            return f"level {level}: {mismatch.describe(source, target)}"
    return ""


def _float_job(args: tuple[tuple[str, ...], int, int, tuple[str, ...]]) -> tuple[str, str, float]:
    """Every FLOAT cast on the patterns [first, first + SPAN), a block at a time."""
    levels, first, stride, targets = args
    start = time.perf_counter()
    cases = _distinct_float_cases(targets)
    name = f"FLOAT 0x{first:08X}..0x{first + SPAN - 1:08X}"
    for low in range(first, first + SPAN, BLOCK * stride):
        x = (np.arange(BLOCK, dtype=np.uint32) + np.uint32(low)).view(np.float32)
        for target, mode in cases:
            problem = _check(levels, FLOAT, target, mode, x)
            if problem:
                return f"{name} -> {target.name} {mode_id(mode)}", problem, 0.0
    return f"{name}, {len(cases)} casts", "", time.perf_counter() - start


def _random_job(args: tuple[tuple[str, ...], str, str, Mode]) -> tuple[str, str, float]:
    levels, source_name, target_name, mode = args
    source, target = spec_of(source_name), spec_of(target_name)
    start = time.perf_counter()
    x = random_inputs(source, N_RANDOM, seed=20261201)
    problem = _check(levels, source, target, mode, np.ascontiguousarray(x))
    return f"{source_name}->{target_name} {mode_id(mode)}", problem, time.perf_counter() - start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    available = kernel_variants()
    parser.add_argument("--level", default="all", choices=["all", *available])
    parser.add_argument("--stride", type=int, default=1)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--target", nargs="+", default=[], choices=[t.name for t in TARGETS])
    parser.add_argument("--skip-random", action="store_true")
    parser.add_argument("--skip-float", action="store_true")
    args = parser.parse_args(argv)
    if not available:
        print("castlike's native extension is not built: nothing to check", file=sys.stderr)
        return 1
    levels = tuple(available) if args.level == "all" else (args.level,)
    targets = tuple(args.target)
    float_jobs = [(levels, first, args.stride, targets) for first in range(0, 1 << 32, SPAN)]
    n_float = len(_distinct_float_cases(targets))
    random_jobs = [
        (levels, s, t.name, m)
        for s in WIDE_RANDOM
        for t in numeric_types()
        if not targets or t.name in targets
        for m in _modes(spec_of(s), t)
    ]
    if args.skip_random:
        random_jobs = []
    if args.skip_float:
        float_jobs, n_float = [], 0
    blocks = (1 << 32) // (BLOCK * args.stride)
    print(
        f"levels {', '.join(levels)}: {n_float} FLOAT casts x {blocks * BLOCK:,} inputs, "
        f"{len(random_jobs)} wide casts x {N_RANDOM:,} random inputs, {args.workers} workers",
        flush=True,
    )
    start = time.perf_counter()
    failed = 0
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        results = pool.imap_unordered(_float_job, float_jobs)
        results2 = pool.imap_unordered(_random_job, random_jobs)
        total = len(float_jobs) + len(random_jobs)
        for done, (name, problem, seconds) in enumerate(chain(results, results2), 1):
            if problem:
                failed += 1
                print(f"[{done}/{total}] {name}: MISMATCH\n{problem}", flush=True)
            else:
                print(f"[{done}/{total}] {name}: equal ({seconds:.1f} s)", flush=True)
    elapsed = time.perf_counter() - start
    print(f"{total - failed} passed, {failed} failed in {elapsed:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
