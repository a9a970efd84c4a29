"""What every benchmark script shares: timing, the onnxruntime contender, the bit comparison.

The scripts run as ``python benchmarks/bench_<name>.py``, so this folder is on ``sys.path``
and they import this module as ``_common``.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from castlike.backends import adapter_named
from castlike.spec.types import OnnxType, Special, spec_of


@dataclass(frozen=True)
class Case:
    """One conversion: its source, target, castlike options and the plain library sequence."""

    source: str
    target: str
    plain: Callable[[Any], Any]
    plain_text: str
    note: str = ""
    options: tuple[tuple[str, Any], ...] = ()


def interleaved(fns: list[Callable[[], Any] | None], repeat: int) -> list[float]:
    """Seconds of the fastest of ``repeat`` calls of each of ``fns`` (NaN for None).

    Each function runs once first (warm-up: tables, caches, compilation, first-call costs).
    The functions then take turns, so that a change in the machine's load during the run
    affects every contender alike.
    """
    live = [fn for fn in fns if fn is not None]
    for fn in live:
        fn()
    best = [float("inf")] * len(live)
    for _ in range(repeat):
        for i, fn in enumerate(live):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    found = iter(best)
    return [next(found) if fn is not None else float("nan") for fn in fns]


def median_interleaved(
    fns: dict[str, Callable[[], Any]],
    rounds: int,
    setups: dict[str, Callable[[], Any]] | None = None,
) -> dict[str, float]:
    """Median seconds per contender over ``rounds`` rounds of one call each, after a warm-up.

    Each round calls the contenders in a new order (seeded): a call meets the memory its
    predecessor freed and the caches it evicted, and in a fixed order one contender always
    followed the copy of 5 MB (at 10**6 elements that made it up to 1.8x slower than the same
    call after another contender).  ``setups[name]()``, where given, runs untimed before each
    of that contender's calls (the thread counts of contenders that share a library).
    """
    setups = setups or {}
    for name, fn in fns.items():
        setups.get(name, _nothing)()
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns.items())
    shuffle = random.Random(len(order) * 1000 + rounds).shuffle
    for _ in range(rounds):
        shuffle(order)
        for name, fn in order:
            setups.get(name, _nothing)()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def _nothing() -> None:
    pass


def rst_simple_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """``header`` and the rows of ``body`` (cells as text) as a reStructuredText simple table."""
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)), rule]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in body]
    return "\n".join(line.rstrip() for line in [*lines, rule]) + "\n"


def onnxruntime_cast(op: str, source: str, target: str) -> Callable[..., Any] | None:
    """An onnxruntime session running one ``Cast`` or ``CastLike`` node on one thread.

    The returned function takes ``x`` (and ``like`` for CastLike).  None where onnx or
    onnxruntime is missing, or onnxruntime has no kernel for the pair.
    """
    try:
        import onnxruntime as ort
        from onnx import helper
    except ImportError:
        return None
    source_code, target_code = int(OnnxType[source]), int(OnnxType[target])
    inputs = [helper.make_tensor_value_info("x", source_code, [None])]
    if op == "CastLike":
        inputs.append(helper.make_tensor_value_info("like", target_code, [1]))
        node = helper.make_node("CastLike", ["x", "like"], ["y"])
    else:
        node = helper.make_node("Cast", ["x"], ["y"], to=target_code)
    output = helper.make_tensor_value_info("y", target_code, [None])
    graph = helper.make_graph([node], op.lower(), inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # castlike and numpy run on one thread too
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception:  # no kernel for this pair in this onnxruntime
        return None
    names = [i.name for i in inputs]

    def run(*arrays: Any) -> Any:
        return session.run(None, dict(zip(names, arrays, strict=True)))[0]

    return run


def same_bits(a: Any, b: Any, target: str) -> bool:
    """Whether two NumPy arrays of ``target`` hold the same bits (R3: for IEEE targets of 16
    bits or more every NaN counts as the same NaN)."""
    t = spec_of(target)
    numpy_adapter = adapter_named("numpy")
    ha, hb = np.asarray(a), np.asarray(b)
    if ha.dtype != hb.dtype or ha.shape != hb.shape:
        return False
    if t.is_float and t.fmt.special is Special.IEEE and t.bits >= 16:
        with np.errstate(invalid="ignore"):  # NaN payloads of narrow types warn on widening
            na, nb = np.isnan(ha.astype(np.float64)), np.isnan(hb.astype(np.float64))
        if not np.array_equal(na, nb):
            return False
        ha, hb = ha[~na], hb[~nb]
    return bool(np.array_equal(numpy_adapter.bits(ha, t), numpy_adapter.bits(hb, t)))
