"""NumPy backend speed: castlike vs ml_dtypes ``astype`` vs onnxruntime ``Cast``, per conversion.

Run: ``python benchmarks/bench_numpy.py [--n 1000000] [--repeat 7]``.  Prints the best time of
``--repeat`` runs in milliseconds, and whether each peer gives the same bits as castlike (the
spec).  The "copy" column is ``numpy.copyto`` of the input and output bytes: the memory-bandwidth
floor of a cast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import best_of, onnxruntime_cast, same_bits

import castlike
from castlike.backends.numpy import NUMPY_DTYPES
from castlike.spec.types import OnnxType

CASES = [
    ("FLOAT", "FLOAT8E4M3FN"),
    ("FLOAT", "FLOAT8E5M2"),
    ("FLOAT", "FLOAT8E4M3FNUZ"),
    ("FLOAT", "FLOAT4E2M1"),
    ("FLOAT", "FLOAT8E8M0"),
    ("FLOAT", "BFLOAT16"),
    ("FLOAT", "FLOAT16"),
    ("FLOAT", "INT8"),
    ("FLOAT", "INT4"),
    ("DOUBLE", "FLOAT"),
    ("DOUBLE", "FLOAT16"),
    ("DOUBLE", "BFLOAT16"),
    ("DOUBLE", "FLOAT8E4M3FN"),
    ("FLOAT16", "FLOAT8E4M3FN"),
    ("FLOAT16", "FLOAT"),
    ("BFLOAT16", "FLOAT"),
    ("FLOAT8E4M3FN", "FLOAT"),
    ("FLOAT8E4M3FN", "FLOAT16"),
    ("INT64", "FLOAT"),
    ("INT64", "FLOAT8E4M3FN"),
    ("INT32", "INT8"),
]


def make_input(source: str, n: int, rng: np.random.Generator) -> np.ndarray:
    dtype = NUMPY_DTYPES[OnnxType[source]]
    if source in ("INT64", "INT32"):
        return rng.integers(-1000, 1000, n).astype(dtype)
    values = rng.standard_normal(n) * 100
    with np.errstate(all="ignore"):
        return values.astype(np.float32).astype(dtype)


def _onnxruntime_or_none(source: str, target: str, x: np.ndarray) -> Callable[..., Any] | None:
    """onnxruntime's Cast for the pair as a function returning castlike's dtype (onnxruntime
    hands float8 and 4-bit results back as bytes), or None where it cannot run the pair."""
    session = onnxruntime_cast("Cast", source, target)
    if session is None:
        return None
    dtype = NUMPY_DTYPES[OnnxType[target]]

    def run(values: np.ndarray) -> np.ndarray:
        return np.asarray(session(values)).view(dtype)

    try:
        run(x[:4])
    except Exception:  # onnxruntime builds the session but has no kernel for these dtypes
        return None
    return run


def _yes_no(same: bool) -> str:
    return "yes" if same else "no"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    header = (
        f"{'source -> target':30} {'castlike':>9} {'ml_dtypes':>10} {'same':>5} "
        f"{'onnxrt':>8} {'same':>5} {'copy':>7}"
    )
    print(f"n = {args.n:,}, best of {args.repeat}, milliseconds")
    print(header)
    print("-" * len(header))
    for source, target in CASES:
        print(bench_case(source, target, args.n, args.repeat, rng))


def bench_case(source: str, target: str, n: int, repeat: int, rng: np.random.Generator) -> str:
    """One row of the table."""
    x = make_input(source, n, rng)
    target_dtype = NUMPY_DTYPES[OnnxType[target]]
    ours = castlike.cast(x, target)
    t_ours = best_of(lambda: castlike.cast(x, target), repeat) * 1e3
    with np.errstate(all="ignore"):
        t_ml = best_of(lambda: x.astype(target_dtype), repeat) * 1e3
        ml_same = _yes_no(same_bits(x.astype(target_dtype), ours, target))
    run = _onnxruntime_or_none(source, target, x)
    if run is not None:
        t_ort = f"{best_of(lambda: run(x), repeat) * 1e3:8.2f}"
        ort_same = _yes_no(same_bits(run(x), ours, target))
    else:
        t_ort, ort_same = f"{'-':>8}", "-"
    out = np.empty_like(ours)
    t_copy = best_of(lambda: (x.copy(), np.copyto(out, ours)), repeat) * 1e3
    return (
        f"{source + ' -> ' + target:30} {t_ours:9.2f} {t_ml:10.2f} {ml_same:>5} "
        f"{t_ort} {ort_same:>5} {t_copy:7.2f}"
    )


if __name__ == "__main__":
    main()
