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
from typing import Any

import numpy as np
from _common import interleaved, onnxruntime_cast

import castlike

SD = np.dtypes.StringDType()


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
    dtypes = {"FLOAT": np.float32, "DOUBLE": np.float64}
    rows = []
    for name, dtype in dtypes.items():
        x = values(n, dtype)
        text = castlike.cast(x, "STRING")
        # Sanity: castlike's text reads back to the same bits.
        back = castlike.cast(text, name)
        assert back.tobytes() == x.tobytes(), "round trip failed"
        to_string = onnxruntime_cast("CastLike", name, "STRING")
        from_string = onnxruntime_cast("CastLike", "STRING", name)
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
