"""NumPy backend speed: castlike vs ml_dtypes ``astype`` vs onnxruntime ``Cast``, per conversion.

Run: ``python benchmarks/bench_numpy.py [--n 1000000] [--repeat 7]``.  Prints the best time of
``--repeat`` runs in milliseconds, and whether each peer gives the same bits as castlike (the
spec).  The "copy" column is ``numpy.copyto`` of the input and output bytes: the memory-bandwidth
floor of a cast.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

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


def best_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm-up: builds castlike's tables, onnxruntime's kernels
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def make_input(source: str, n: int, rng: np.random.Generator) -> np.ndarray:
    dtype = NUMPY_DTYPES[OnnxType[source]]
    if source in ("INT64", "INT32"):
        return rng.integers(-1000, 1000, n).astype(dtype)
    values = rng.standard_normal(n) * 100
    with np.errstate(all="ignore"):
        return values.astype(np.float32).astype(dtype)


def onnxruntime_cast(source: str, target: str) -> Callable[[np.ndarray], Any] | None:
    try:
        import onnx
        import onnxruntime as ort
    except ImportError:
        return None
    node = onnx.helper.make_node("Cast", ["x"], ["y"], to=getattr(onnx.TensorProto, target))
    graph = onnx.helper.make_graph(
        [node],
        "cast",
        [onnx.helper.make_tensor_value_info("x", getattr(onnx.TensorProto, source), None)],
        [onnx.helper.make_tensor_value_info("y", getattr(onnx.TensorProto, target), None)],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
    model.ir_version = 10
    try:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(model.SerializeToString(), options)
    except Exception:
        return None

    def run(x: np.ndarray) -> Any:
        return session.run(None, {"x": x})[0]

    try:
        run(np.zeros(4, NUMPY_DTYPES[OnnxType[source]]))
    except Exception:
        return None
    return run


def same_bits(a: Any, b: np.ndarray) -> str:
    a = np.asarray(a)
    if a.dtype.itemsize != b.dtype.itemsize:
        return "?"
    ua, ub = a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")
    if b.dtype.kind == "f" or b.dtype in (np.dtype(ml_dtypes.bfloat16),):
        both_nan = np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32))
        return "yes" if bool(np.all((ua == ub) | both_nan)) else "no"
    return "yes" if bool(np.all(ua == ub)) else "no"


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
    t_ours = best_ms(lambda: castlike.cast(x, target), repeat)
    with np.errstate(all="ignore"):
        t_ml = best_ms(lambda: x.astype(target_dtype), repeat)
        ml_same = same_bits(x.astype(target_dtype), ours)
    run = onnxruntime_cast(source, target)
    if run is not None:
        t_ort = f"{best_ms(lambda: run(x), repeat):8.2f}"
        ort_same = same_bits(run(x), ours)
    else:
        t_ort, ort_same = f"{'-':>8}", "-"
    out = np.empty_like(ours)
    t_copy = best_ms(lambda: (x.copy(), np.copyto(out, ours)), repeat)
    return (
        f"{source + ' -> ' + target:30} {t_ours:9.2f} {t_ml:10.2f} {ml_same:>5} "
        f"{t_ort} {ort_same:>5} {t_copy:7.2f}"
    )


if __name__ == "__main__":
    main()
