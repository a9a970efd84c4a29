"""String casts side by side: castlike vs ``numpy.astype`` vs onnxruntime's CastLike.

Run: ``python benchmarks/bench_strings.py [--n 1000000] [--repeat 5]``.  Needs numpy, castlike
and (for the last column) onnxruntime and onnx.

For FLOAT and DOUBLE, in both directions, on the same ``n`` random values (random signs,
mantissas and decimal exponents 1e-10 .. 1e10): the best of ``--repeat`` wall-clock runs.

* number -> STRING: castlike gives StringDType (exact shortest round-trip text, R9); numpy
  ``astype(StringDType())`` (shortest text, lower-case nan/inf); onnxruntime an object array
  ("%.8g"-style text that does not always round-trip; its own choice).
* STRING -> number: every contender reads the text castlike wrote for the same values, in
  the array type it takes natively: StringDType for castlike and numpy, an object array of
  ``str`` for onnxruntime (the only string input it accepts).

The contenders take turns (one call each, ``--repeat`` rounds, the best call of each counts), so
that a change in the machine's load during the run affects them alike.  The results are printed
as a Markdown table (ms per call and ns per element).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import castlike

SD = np.dtypes.StringDType()


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    """The fastest of ``repeat`` calls of ``fn`` (after one warm-up call), in seconds."""
    return interleaved([fn], repeat)[0]


def interleaved(fns: list[Callable[[], Any] | None], repeat: int) -> list[float]:
    """The fastest of ``repeat`` calls of each of ``fns``, taking turns, so that a change in
    the machine's load during the run affects every contender alike (NaN for None)."""
    live = [fn for fn in fns if fn is not None]
    for fn in live:
        fn()  # warm-up: tables, caches, first-call costs
    best = [float("inf")] * len(live)
    for _ in range(repeat):
        for i, fn in enumerate(live):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    found = iter(best)
    return [next(found) if fn is not None else float("nan") for fn in fns]


def ort_castlike(source: int, target: int) -> Callable[..., Any] | None:
    """An onnxruntime session running one CastLike node, or None without onnxruntime."""
    try:
        import onnxruntime as ort
        from onnx import helper
    except ImportError:
        return None
    x = helper.make_tensor_value_info("x", source, [None])
    like = helper.make_tensor_value_info("like", target, [1])
    y = helper.make_tensor_value_info("y", target, [None])
    node = helper.make_node("CastLike", ["x", "like"], ["y"])
    graph = helper.make_graph([node], "castlike", [x, like], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    options = ort.SessionOptions()
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )

    def run(xv: Any, likev: Any) -> Any:
        return session.run(None, {"x": xv, "like": likev})[0]

    return run


def values(n: int, dtype: Any, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mags = rng.random(n) * 10.0 ** rng.integers(-10, 11, n)
    return np.where(rng.random(n) < 0.5, -mags, mags).astype(dtype)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n, repeat = args.n, args.repeat
    codes = {"FLOAT": (np.float32, 1), "DOUBLE": (np.float64, 11)}
    rows = []
    for name, (dtype, code) in codes.items():
        x = values(n, dtype)
        text = castlike.cast(x, "STRING")
        # Sanity: castlike's text reads back to the same bits.
        back = castlike.cast(text, name)
        assert back.tobytes() == x.tobytes(), "round trip failed"
        to_string = ort_castlike(code, 8)
        from_string = ort_castlike(8, code)
        objects = text.astype(object)
        unit = np.array(["a"], dtype=object)
        zero = np.zeros(1, dtype)
        rows.append(
            (
                f"{name} -> STRING",
                *interleaved(
                    [
                        lambda: castlike.cast(x, "STRING"),  # noqa: B023
                        lambda: x.astype(SD),  # noqa: B023
                        (lambda: to_string(x, unit)) if to_string else None,  # noqa: B023
                    ],
                    repeat,
                ),
            )
        )
        rows.append(
            (
                f"STRING -> {name}",
                *interleaved(
                    [
                        lambda: castlike.cast(text, name),  # noqa: B023
                        lambda: text.astype(dtype),  # noqa: B023
                        (lambda: from_string(objects, zero)) if from_string else None,  # noqa: B023
                    ],
                    repeat,
                ),
            )
        )
    print(f"n = {n:,} elements, best of {repeat}\n")
    print("| cast | castlike | numpy.astype | onnxruntime CastLike |")
    print("|---|---:|---:|---:|")
    for label, *secs in rows:
        cells = [f"{s * 1e3:.0f} ms ({s / n * 1e9:.0f} ns/elem)" for s in secs]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
