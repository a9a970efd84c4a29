"""NumPy backend speed: castlike's native kernels against every other way to cast on the CPU.

For each conversion and size (10**5, 10**6, 10**7 by default), the contenders take turns in one
process (one call each per round, so that a change of load hits all alike) and the table shows
each one's median over the rounds, in milliseconds.  Every call allocates its output, as a
user's call does.  Contenders:

* ``castlike 1t`` / ``castlike``: the native kernels on one thread / on all threads;
* ``pure``: castlike's pure-NumPy engine (the fallback, ``CASTLIKE_NATIVE=0``);
* ``astype``: numpy/ml_dtypes ``astype``;
* ``ort 1t`` / ``ort``: onnxruntime ``Cast`` with I/O binding (so float8 and int4 outputs
  run), one thread / default threads;
* ``torch 1t`` / ``torch``: ``torch.from_numpy(x).to(dtype)``, one thread / default threads;
* ``jax``: ``jax.jit(lambda a: a.astype(dtype))`` on a device array (default threads);
* ``copy``: copying the same input and output bytes into newly allocated arrays, the
  memory-bandwidth floor of a cast.

"same" marks peers whose bits equal castlike's (the spec's) on the data (random normal values
x 100, NaN as NaN for IEEE targets); their speed counts whatever their bits.

Run: ``python benchmarks/bench_numpy.py [--sizes 1e5 1e6 1e7] [--only FLOAT-FLOAT16 ...]
[--json benchmarks/results/numpy.json] [--plot docs/_static/bench_numpy.png]``.
"""

from __future__ import annotations

import os

# Idle OpenMP threads of one contender (torch, onnxruntime) would otherwise spin on the cores
# the next contender needs, for every contender alike.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import importlib.util
import json
import platform
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from _common import median_interleaved, rst_simple_table, same_bits

import castlike
from castlike import _native
from castlike.backends.numpy import ADAPTER as NUMPY
from castlike.backends.numpy import NUMPY_DTYPES
from castlike.spec.rules import Mode
from castlike.spec.types import OnnxType, spec_of
from castlike.testing import to_host

CASES = [
    ("FLOAT", "FLOAT8E4M3FN"),
    ("FLOAT", "FLOAT8E4M3FNUZ"),
    ("FLOAT", "FLOAT8E5M2"),
    ("FLOAT", "FLOAT8E5M2FNUZ"),
    ("FLOAT", "FLOAT16"),
    ("FLOAT", "BFLOAT16"),
    ("FLOAT", "INT8"),
    ("FLOAT", "UINT8"),
    ("FLOAT", "INT16"),
    ("FLOAT", "INT32"),
    ("FLOAT", "UINT32"),
    ("FLOAT", "FLOAT8E8M0"),
    ("FLOAT", "FLOAT4E2M1"),
    ("FLOAT", "FLOAT6E2M3"),
    ("FLOAT", "FLOAT6E3M2"),
    ("FLOAT", "INT4"),
    ("FLOAT", "INT2"),
    ("DOUBLE", "FLOAT"),
    ("DOUBLE", "FLOAT16"),
    ("DOUBLE", "BFLOAT16"),
    ("DOUBLE", "FLOAT8E4M3FN"),
    ("DOUBLE", "FLOAT8E5M2"),
    ("DOUBLE", "FLOAT8E8M0"),
    ("DOUBLE", "FLOAT4E2M1"),
    ("DOUBLE", "INT8"),
    ("DOUBLE", "INT32"),
    ("DOUBLE", "INT4"),
    ("FLOAT16", "FLOAT"),
    ("FLOAT16", "FLOAT8E4M3FN"),
    ("FLOAT16", "INT8"),
    ("BFLOAT16", "FLOAT8E4M3FN"),
    ("BFLOAT16", "FLOAT16"),
    ("FLOAT8E4M3FN", "FLOAT"),
    ("FLOAT8E5M2", "BFLOAT16"),
    ("INT64", "FLOAT"),
    ("INT32", "INT8"),
    ("INT32", "FLOAT8E4M3FN"),
    ("INT16", "FLOAT8E8M0"),
]
ROUNDS = {10**5: 101, 10**6: 61, 10**7: 21}
THREADS = _native.get_num_threads()


def make_input(source: str, n: int, rng: np.random.Generator) -> np.ndarray:
    dtype = NUMPY_DTYPES[OnnxType[source]]
    if source in ("INT64", "INT32", "INT16"):
        return rng.integers(-1000, 1000, n).astype(dtype)
    with np.errstate(all="ignore"):
        return (rng.standard_normal(n) * 100).astype(np.float32).astype(dtype)


def castlike_fn(x: np.ndarray, target: str) -> Callable[[], Any]:
    """castlike's cast (the thread count is set before, untimed: see :data:`SETUPS`)."""
    return lambda: castlike.cast(x, target)


def pure_fn(x: np.ndarray, source: str, target: str) -> Callable[[], Any]:
    plan = SimpleNamespace(source=spec_of(source), target=spec_of(target), mode=Mode())
    engine = NUMPY.engine()
    return lambda: engine.cast_pure(x, plan)


def astype_fn(x: np.ndarray, target: str) -> Callable[[], Any]:
    dtype = NUMPY_DTYPES[OnnxType[target]]

    def run() -> Any:
        with np.errstate(all="ignore"):
            return x.astype(dtype)

    return run


def ort_fn(x: np.ndarray, source: str, target: str, threads: int) -> Callable[[], Any] | None:
    """onnxruntime Cast through I/O binding (the output is allocated by onnxruntime)."""
    try:
        import onnxruntime as ort
        from onnx import helper
    except ImportError:
        return None
    node = helper.make_node("Cast", ["x"], ["y"], to=int(OnnxType[target]))
    graph = helper.make_graph(
        [node],
        "cast",
        [helper.make_tensor_value_info("x", int(OnnxType[source]), [None])],
        [helper.make_tensor_value_info("y", int(OnnxType[target]), [None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
        value = ort.OrtValue.ortvalue_from_numpy(x)
    except Exception:  # no kernel, or no OrtValue for this source dtype
        return None
    dtype = NUMPY_DTYPES[OnnxType[target]]

    def run() -> Any:
        binding = session.io_binding()
        binding.bind_ortvalue_input("x", value)
        binding.bind_output("y", "cpu")
        session.run_with_iobinding(binding)
        return binding.get_outputs()[0]

    def result() -> np.ndarray:
        out = run()
        raw = np.frombuffer(bytes(out.numpy().tobytes()), dtype=np.uint8)
        return raw.view(np.dtype(f"uint{spec_of(target).storage_bits}")).view(dtype)

    try:
        result()
    except Exception:
        return None
    run.result = result  # type: ignore[attr-defined]
    return run


def torch_fn(x: np.ndarray, target: str) -> Callable[[], Any] | None:
    if importlib.util.find_spec("torch") is None:
        return None
    from castlike.backends import adapter_named

    dtype = adapter_named("torch").library_dtype(spec_of(target))
    try:  # the adapter views ml_dtypes' types (BFLOAT16, float8) as torch's
        tx = adapter_named("torch").from_numpy(x)
    except Exception:  # a dtype torch does not have
        return None
    if dtype is None:
        return None

    def run() -> Any:
        return tx.to(dtype)

    try:
        run()
    except Exception:  # torch has the dtype but no conversion (the int4/int2 shells)
        return None
    return run


def jax_fn(x: np.ndarray, target: str) -> Callable[[], Any] | None:
    try:
        import jax
    except ImportError:
        return None
    dtype = NUMPY_DTYPES[OnnxType[target]]
    try:
        device_x = jax.device_put(x)
        convert = jax.jit(lambda a: a.astype(dtype))
        convert(device_x).block_until_ready()
    except Exception:
        return None
    return lambda: convert(device_x).block_until_ready()


PEERS_1T = ("astype", "ort 1t", "torch 1t")


def _torch_threads(n: int) -> Callable[[], None]:
    def setup() -> None:
        import torch

        torch.set_num_threads(n)

    return setup


#: The thread counts of the contenders that share a library, set before each of their calls
#: and outside the time measured (castlike's set_num_threads, which wakes the callers waiting
#: for its pool; a lower limit leaves the pool's worker parked, so the two-thread calls do not
#: start one).
SETUPS: dict[str, Callable[[], Any]] = {
    "castlike 1t": lambda: _native.set_num_threads(1),
    "castlike": lambda: _native.set_num_threads(THREADS),
    "torch 1t": _torch_threads(1),
    "torch": _torch_threads(THREADS),
}


def bench(source: str, target: str, n: int, rng: np.random.Generator) -> dict[str, Any]:
    x = make_input(source, n, rng)
    ours = castlike.cast(x, target)
    fns: dict[str, Callable[[], Any]] = {
        "castlike 1t": castlike_fn(x, target),
        "castlike": castlike_fn(x, target),
        "pure": pure_fn(x, source, target),
        "astype": astype_fn(x, target),
    }
    same: dict[str, bool] = {"astype": same_bits(fns["astype"](), ours, target)}
    for name, fn in (
        ("ort 1t", ort_fn(x, source, target, 1)),
        ("ort", ort_fn(x, source, target, 0)),
        ("torch 1t", torch_fn(x, target)),
        ("torch", torch_fn(x, target)),
        ("jax", jax_fn(x, target)),
    ):
        if fn is None:
            continue
        fns[name] = fn
        result = fn.result() if name.startswith("ort") else fn()  # type: ignore[attr-defined]
        if name.startswith("torch"):
            result = to_host(result)
        same[name] = same_bits(np.asarray(result), ours, target)
    y = ours
    fns["copy"] = lambda: (x.copy(), y.copy())
    ms = {name: t * 1e3 for name, t in median_interleaved(fns, ROUNDS.get(n, 9), SETUPS).items()}
    _native.set_num_threads(THREADS)
    peers = {k: v for k, v in ms.items() if k in PEERS_1T}
    fastest = min(peers, key=peers.__getitem__)
    return {
        "source": source,
        "target": target,
        "n": n,
        "ms": ms,
        "same": same,
        "fastest_peer_1t": fastest,
        "speedup_vs_fastest_1t": peers[fastest] / ms["castlike 1t"],
        "speedup_vs_astype": ms["astype"] / ms["castlike 1t"],
        "vs_copy": ms["castlike"] / ms["copy"],
        "threads_speedup": ms["castlike 1t"] / ms["castlike"],
    }


COLUMNS = ("castlike 1t", "castlike", "pure", "astype", "ort 1t", "ort", "torch 1t", "torch", "jax")


def print_table(rows: list[dict[str, Any]], n: int) -> None:
    print(
        f"\nn = {n:,}: median ms ({ROUNDS.get(n, 9)} rounds, interleaved); * = not the spec's bits"
    )
    head = f"{'source -> target':24}" + "".join(f"{c:>12}" for c in (*COLUMNS, "copy"))
    print(head + f"{'vs best 1t':>11}{'vs copy':>9}")
    for r in rows:
        cells = []
        for c in (*COLUMNS, "copy"):
            v = r["ms"].get(c)
            mark = "*" if c in r["same"] and not r["same"][c] else " "
            cells.append(f"{v:11.3f}{mark}" if v is not None else f"{'-':>11} ")
        print(
            f"{r['source'] + ' -> ' + r['target']:24}"
            + "".join(cells)
            + f"{r['speedup_vs_fastest_1t']:10.2f}x{r['vs_copy']:8.2f}x"
        )


def rst_tables(rows: list[dict[str, Any]]) -> str:
    """The tables as reStructuredText, for docs/performance.rst."""
    out = []
    columns = (*COLUMNS, "copy")
    for n in sorted({r["n"] for r in rows}):
        block = [r for r in rows if r["n"] == n]
        out.append(
            f"**n = {n:,}**, median milliseconds of {ROUNDS.get(n, 9)} interleaved rounds.\n"
        )
        header = ["source → target", *columns, "vs best 1t", "vs copy"]
        body = []
        for r in block:
            cells = [f"{r['source']} → {r['target']}"]
            for c in columns:
                v = r["ms"].get(c)
                mark = "*" if c in r["same"] and not r["same"][c] else ""
                cells.append("–" if v is None else f"{v:.3f}{mark}")
            cells += [f"{r['speedup_vs_fastest_1t']:.2f}×", f"{r['vs_copy']:.2f}×"]
            body.append(cells)
        out.append(rst_simple_table(header, body))
    return "\n".join(out)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["n"] for r in rows})
    n = 10**6 if 10**6 in sizes else sizes[-1]
    chosen = [r for r in rows if r["n"] == n]
    names = [f"{r['source']}→{r['target']}" for r in chosen]
    contenders = ["castlike 1t", "astype", "ort 1t", "torch 1t", "copy"]
    fig, ax = plt.subplots(figsize=(11, 0.42 * len(chosen) + 1.5))
    height = 0.8 / len(contenders)
    for i, c in enumerate(contenders):
        values = [r["n"] / r["ms"][c] / 1e3 if c in r["ms"] else 0 for r in chosen]
        ax.barh([k + i * height for k in range(len(chosen))], values, height=height, label=c)
    ax.set_yticks([k + 0.4 - height / 2 for k in range(len(chosen))], names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(f"million elements per second at n = {n:,}, one thread (log scale)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(contenders), fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6, 1e7])
    parser.add_argument("--only", nargs="*", default=None, help="e.g. FLOAT-FLOAT16")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--rst", type=Path, default=None, help="write the tables as rst")
    args = parser.parse_args()
    cases = [c for c in CASES if args.only is None or "-".join(c) in args.only]
    rng = np.random.default_rng(0)
    print(f"castlike native path: {_native.info()['level']}, {THREADS} threads")
    rows = []
    for n in (int(s) for s in args.sizes):
        block = [bench(s, t, n, rng) for s, t in cases]
        print_table(block, n)
        rows += block
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {"machine": platform.machine(), "cpus": os.cpu_count(), "threads": THREADS}
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    if args.plot:
        plot(rows, args.plot)
    if args.rst:
        args.rst.write_text(rst_tables(rows))


if __name__ == "__main__":
    main()
