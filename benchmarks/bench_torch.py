"""castlike on PyTorch against the fastest plain torch op sequence, eager (and compiled).

For each conversion and size (10**6 and 10**7 elements), castlike, the plain sequence and
torch's ``.to`` (and, with ``--compile``, castlike and ``.to`` under ``torch.compile``) run once
(warm-up: tables built, caches filled, graphs compiled), then take turns, one call each per
round in a new order, and each one's median over the rounds is reported.  The plain sequence
is the fastest torch code giving the same bits as the spec on the benchmark data (random
values over many binades, with NaN, +-Inf and -0 mixed in); the "same bits" column checks that
on the data (NaN as NaN for IEEE targets, R3), and the note says where torch's plain ``.to()``
is wrong or where the plain sequence is still wrong on inputs the data does not hold.

Run: ``python benchmarks/bench_torch.py [--sizes 1e6 1e7] [--rounds R] [--threads N]
[--compile] [--only FLOAT-FLOAT8E4M3FN ...] [--rst docs/_data/bench_torch.rst]``.
``--compile`` also times both sides under ``torch.compile`` (compilation excluded).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch
from _common import Case, median_interleaved, rst_simple_table, same_bits

import castlike
from castlike.backends import adapter_named
from castlike.spec.types import spec_of

NAN = float("nan")


def _e4m3fn_nosat(x: torch.Tensor) -> torch.Tensor:
    # torch saturates; the rule wants NaN (sign kept) above the rounding boundary 464.
    y = x.to(torch.float8_e4m3fn).view(torch.uint8)
    over = (x.abs() > 464.0).view(torch.uint8)
    return (y | over * 0x7F).view(torch.float8_e4m3fn)


def _e5m2_sat(x: torch.Tensor) -> torch.Tensor:
    # clamp keeps NaN; torch's NaN is 0x7F/0xFF, the rule's 0x7E/0xFE.
    y = x.clamp(-57344.0, 57344.0).to(torch.float8_e5m2).view(torch.uint8)
    return (y - ((y & 0x7F) == 0x7F).view(torch.uint8)).view(torch.float8_e5m2)


def _to_int(x: torch.Tensor, dtype: torch.dtype, lo: float, below: float, top: int) -> Any:
    y = torch.nan_to_num(x, nan=0.0, posinf=below, neginf=lo).clamp(lo, below).to(dtype)
    if below < top:
        y = torch.where(x >= top + 1.0, torch.tensor(top, dtype=dtype), y)
    return y


def _int4(x: torch.Tensor) -> torch.Tensor:
    low = torch.remainder(torch.round(x), 16.0)
    low = torch.where(torch.isfinite(x), low, 0.0)
    return low.to(torch.uint8).view(torch.int4)


CASES = [
    Case("FLOAT", "FLOAT16", lambda x: x.to(torch.float16), ".to"),
    Case("FLOAT", "BFLOAT16", lambda x: x.to(torch.bfloat16), ".to"),
    Case("FLOAT", "DOUBLE", lambda x: x.to(torch.float64), ".to"),
    Case("DOUBLE", "FLOAT", lambda x: x.to(torch.float32), ".to"),
    Case(
        "DOUBLE",
        "FLOAT16",
        lambda x: x.to(torch.float16),
        ".to",
        "torch rounds twice (via FLOAT): wrong on ~1/2**13 of doubles near ties",
    ),
    Case(
        "DOUBLE",
        "BFLOAT16",
        lambda x: x.to(torch.bfloat16),
        ".to",
        "torch rounds twice (via FLOAT)",
    ),
    Case(
        "FLOAT",
        "FLOAT8E4M3FN",
        lambda x: x.to(torch.float8_e4m3fn),
        ".to",
        "torch saturates finite overflow and Inf: = R4 with saturate",
    ),
    Case(
        "FLOAT",
        "FLOAT8E4M3FN",
        _e4m3fn_nosat,
        ".to | 0x7F where |x|>464",
        "plain .to saturates",
        (("saturate", False),),
    ),
    Case(
        "FLOAT",
        "FLOAT8E5M2",
        _e5m2_sat,
        "clamp(+-57344).to, NaN 0x7F->0x7E",
        "plain .to: Inf on overflow, NaN 0x7F",
    ),
    Case(
        "FLOAT",
        "FLOAT8E4M3FNUZ",
        lambda x: x.clamp(-240.0, 240.0).to(torch.float8_e4m3fnuz),
        "clamp(+-240).to",
        "plain .to: NaN on overflow",
    ),
    Case(
        "FLOAT",
        "FLOAT8E8M0",
        lambda x: x.to(torch.float8_e8m0fnu),
        ".to",
        "torch rounds to nearest even, ignores the sign, 0 -> 2**-127 (no plain equivalent)",
    ),
    Case(
        "DOUBLE",
        "FLOAT8E4M3FN",
        lambda x: x.to(torch.float8_e4m3fn),
        ".to",
        "torch rounds twice (via FLOAT)",
    ),
    Case(
        "FLOAT",
        "INT8",
        lambda x: _to_int(x, torch.int8, -128.0, 127.99999, 127),
        "nan_to_num.clamp.to",
        "plain .to wraps and NaN is platform-defined",
    ),
    Case(
        "FLOAT",
        "INT32",
        lambda x: _to_int(x, torch.int32, -(2.0**31), 2.0**31 - 128, 2**31 - 1),
        "nan_to_num.clamp.to + where(x>=2**31)",
        "plain .to: INT_MIN on overflow and NaN",
    ),
    Case(
        "DOUBLE",
        "INT64",
        lambda x: _to_int(x, torch.int64, -(2.0**63), 2.0**63 - 1024, 2**63 - 1),
        "nan_to_num.clamp.to + where(x>=2**63)",
        "plain .to: INT_MIN on overflow and NaN",
    ),
    Case(
        "FLOAT",
        "INT4",
        _int4,
        "round.remainder(16).where(isfinite).to(uint8).view(int4)",
        "torch has no conversion to int4",
    ),
    Case("FLOAT", "BOOL", lambda x: x != 0, "x != 0"),
    Case("INT32", "FLOAT", lambda x: x.to(torch.float32), ".to"),
    Case("INT64", "FLOAT", lambda x: x.to(torch.float32), ".to"),
    Case("INT64", "INT32", lambda x: x.to(torch.int32), ".to"),
    Case("UINT64", "DOUBLE", lambda x: x.to(torch.float64), ".to"),
    Case("FLOAT16", "FLOAT", lambda x: x.to(torch.float32), ".to"),
    Case("BFLOAT16", "FLOAT", lambda x: x.to(torch.float32), ".to"),
    Case("FLOAT16", "FLOAT8E4M3FN", lambda x: x.to(torch.float8_e4m3fn), ".to"),
    Case("BFLOAT16", "FLOAT16", lambda x: x.to(torch.float16), ".to"),
    Case("FLOAT8E4M3FN", "FLOAT", lambda x: x.to(torch.float32), ".to"),
    Case(
        "FLOAT8E4M3FN",
        "FLOAT8E5M2",
        lambda x: x.to(torch.float8_e5m2),
        ".to",
        "NaN 0x7F, spec 0x7E",
    ),
    Case("UINT8", "FLOAT", lambda x: x.to(torch.float32), ".to"),
    Case("INT8", "INT4", lambda x: (x & 15).view(torch.int4), "& 15 .view(int4)"),
]


def make_input(source: str, n: int, rng: np.random.Generator) -> torch.Tensor:
    """Benchmark data: wide floats over many binades with specials; others: random patterns."""
    t = spec_of(source)
    numpy_adapter = adapter_named("numpy")
    if t.is_float and t.bits >= 32:
        values = rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))
        specials = np.array([NAN, -NAN, np.inf, -np.inf, -0.0, 0.0])
        values[rng.integers(0, n, n // 1000)] = rng.choice(specials, n // 1000)
        host = values.astype(numpy_adapter.library_dtype(t))
    elif t.is_integer and t.bits >= 32:
        storage = np.dtype(f"uint{t.bits}")
        bits = rng.integers(0, np.iinfo(storage).max, n, dtype=storage, endpoint=True)
        host = numpy_adapter.from_bits(bits, t)
    else:
        storage = np.dtype(f"uint{t.storage_bits}")
        host = numpy_adapter.from_bits(rng.integers(0, 1 << t.bits, n, dtype=storage), t)
    # In torch's own memory (64-byte aligned), as a torch user's tensors are: a tensor over
    # NumPy's (16 bytes past a cache line at these sizes) made castlike's AVX-512 DOUBLE ->
    # FLOAT16 steps 1.2-1.35x slower on Zen 4, and the comparison would be of allocators.
    return adapter_named("torch").from_numpy(host).clone()


def same_bits_torch(a: torch.Tensor, b: torch.Tensor, target: str) -> bool:
    """Bitwise equality of two tensors (NaN as NaN for IEEE targets, R3)."""
    to_numpy = adapter_named("torch").to_numpy
    return a.dtype == b.dtype and same_bits(to_numpy(a), to_numpy(b), target)


def verify_native(chunk_bits: int, compiled: bool) -> bool:
    """Check every FLOAT (all 2**32 patterns) cast to BFLOAT16 and to the four float8 formats
    in both saturate modes: castlike's torch path (torch's own rounding, repaired per R4)
    against the FLOAT class table, which is exact by construction (``castlike.spec.tables``).

    This is the measurement behind the claim, in ``castlike.backends.torch``, that torch's
    FLOAT -> float8/BFLOAT16 rounding is correct on every input; it takes minutes.
    """
    from castlike.spec.rules import Mode

    torch_adapter = adapter_named("torch")
    engine = torch_adapter.engine()
    flt = spec_of("FLOAT")
    checks: list[tuple[str, dict[str, Any]]] = [("BFLOAT16", {})]
    for name in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ"):
        checks += [(name, {"saturate": True}), (name, {"saturate": False})]

    def all_casts(x: Any) -> tuple[Any, ...]:
        return tuple(castlike.cast(x, name, **options) for name, options in checks)

    # One function for every check: compiled once (one graph), not once per check.
    run = torch.compile(all_casts, fullgraph=True) if compiled else all_casts

    def bfloat16_reference(bits: torch.Tensor) -> torch.Tensor:
        wide = bits.to(torch.int64) & 0xFFFFFFFF
        upper = (wide + (0x7FFF + ((wide >> 16) & 1))) >> 16
        return upper.to(torch.int16)

    ok = True
    step = 1 << chunk_bits
    for start in range(0, 1 << 32, step):
        bits = (torch.arange(start, start + step, dtype=torch.int64)).to(torch.int32)
        x = bits.view(torch.float32)
        is_nan = torch.isnan(x)
        for (name, options), got in zip(checks, run(x), strict=True):
            target = spec_of(name)
            if name == "BFLOAT16":
                got_bits = got.view(torch.int16)
                nan_ok = torch.equal(torch.isnan(got), is_nan)
                same = nan_ok and torch.equal(got_bits[~is_nan], bfloat16_reference(bits)[~is_nan])
            else:
                mode = Mode(saturate=options["saturate"])
                expected = engine.by_class_table(x, flt, target, mode, True)
                same = torch.equal(got.view(torch.uint8), expected.view(torch.uint8))
            if not same:
                ok = False
                print(f"MISMATCH FLOAT->{name} {options} in [{start:#x}, {start + step:#x})")
        if start % (1 << 28) == 0:
            print(f"  checked up to {start + step:#010x}", flush=True)
    print("native paths", "agree on every FLOAT" if ok else "DIFFER", "(compiled)" * compiled)
    return ok


#: Interleaved rounds per size (each contender called once per round, in a new order).
ROUNDS = {10**6: 61, 10**7: 11}


def rst_table(rows: list[dict[str, Any]], compiled: bool) -> str:
    """The docs table: castlike and ``.to`` per conversion and size, eager (and compiled)."""
    header = ["conversion", "n", "eager", "eager .to", "ratio"]
    if compiled:
        header += ["compiled", "compiled .to", "ratio"]

    def ms(v: float) -> str:
        return "–" if v != v else f"{v * 1e3:.3f}"

    def ratio(a: float, b: float) -> str:
        return "–" if a != a or b != b else f"{a / b:.2f}"

    body = []
    for r in rows:
        exponent = {10**6: "10⁶", 10**7: "10⁷"}.get(r["n"], f"{r['n']:.0e}")
        cells = [r["label"], exponent, ms(r["eager"]), ms(r["eager .to"])]
        cells.append(ratio(r["eager"], r["eager .to"]))
        if compiled:
            cells += [ms(r["compiled"]), ms(r["compiled .to"])]
            cells.append(ratio(r["compiled"], r["compiled .to"]))
        body.append(cells)
    return rst_simple_table(header, body)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7])
    parser.add_argument("--rounds", type=int, default=None, help="rounds per size")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--compile", action="store_true", help="also time both compiled")
    parser.add_argument("--only", nargs="*", default=None, help="SOURCE-TARGET pairs to run")
    parser.add_argument("--rst", type=Path, default=None, help="write the table as rst")
    parser.add_argument(
        "--verify-native",
        action="store_true",
        help="instead of timing, check torch's FLOAT->float8/BFLOAT16 on all 2**32 FLOATs",
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
        castlike.set_num_threads(args.threads)  # the native kernels (CPU tensors) too
    if args.verify_native:
        raise SystemExit(0 if verify_native(24, args.compile) else 1)
    rng = np.random.default_rng(0)
    print(
        f"torch {torch.__version__}, cpu, {torch.get_num_threads()} threads, eager"
        f"{' and torch.compile' if args.compile else ''}, medians of interleaved rounds"
    )
    header = (
        f"{'conversion':34s} {'n':>6s} {'castlike ms':>12s} {'plain ms':>10s} {'ratio':>6s}"
        f" {'.to ms':>8s} {'vs .to':>7s}  {'same bits':9s} plain sequence; note"
    )
    print(header)
    print("-" * len(header))
    rows: list[dict[str, Any]] = []
    for case in CASES:
        options = dict(case.options)
        label = f"{case.source} → {case.target}"
        if options:
            label += " " + ",".join(f"{k}={v}" for k, v in options.items())
        if args.only and f"{case.source}-{case.target}" not in args.only:
            continue

        def ours(x: Any, case: Case = case, options: dict[str, Any] = options) -> Any:
            return castlike.cast(x, case.target, **options)

        dtype = adapter_named("torch").library_dtype(spec_of(case.target))

        def dot_to(x: Any, dtype: Any = dtype) -> Any:
            return x.to(dtype)

        eager = {"castlike": ours, "plain": case.plain, ".to": dot_to}
        compiled: dict[str, Any] = {}
        if args.compile:
            torch.compiler.reset()
            compiled = {
                "compiled castlike": torch.compile(ours, fullgraph=True),
                "compiled .to": torch.compile(dot_to, fullgraph=True),
            }
        for size in args.sizes:
            n = int(size)
            x = make_input(case.source, n, rng)
            contenders: dict[str, Any] = {}
            for name, fn in {**eager, **compiled}.items():
                try:  # torch may lack the conversion; Inductor may fail to compile a view
                    fn(x)
                except Exception as exc:
                    print(f"  {label}: {name} n/a: {str(exc).strip().splitlines()[0][:80]}")
                    continue
                contenders[name] = lambda fn=fn, x=x: fn(x)
            rounds = args.rounds or ROUNDS.get(n, 9)
            # The plain sequence apart: its temporaries (up to 8 of x's size) change the heap
            # that the next contender's allocation meets (FLOAT -> INT32 at 10**6: castlike
            # 0.10 ms beside .to alone, 0.18 ms with the plain sequence in the rounds).
            plain = {k: contenders.pop(k) for k in ("castlike", "plain") if k in contenders}
            t = median_interleaved({"castlike": plain["castlike"], **contenders}, rounds)
            if "plain" in plain:
                t["plain"] = median_interleaved(plain, rounds)["plain"]
            nan = float("nan")
            same = "plain" in t and same_bits_torch(ours(x), case.plain(x), case.target)
            row = {
                "label": label,
                "n": n,
                "eager": t["castlike"],
                "eager .to": t.get(".to", nan),
                "compiled": t.get("compiled castlike", nan),
                "compiled .to": t.get("compiled .to", nan),
            }
            rows.append(row)
            t_plain = t.get("plain", nan)
            print(
                f"{label:34s} {size:6.0e} {row['eager'] * 1e3:12.3f} {t_plain * 1e3:10.3f} "
                f"{row['eager'] / t_plain:6.2f} {row['eager .to'] * 1e3:8.3f} "
                f"{row['eager'] / row['eager .to']:6.2f}x  {'yes' if same else 'NO':9s} "
                f"{case.plain_text}{'; ' + case.note if case.note else ''}",
                flush=True,
            )
            if args.compile:
                print(
                    f"{'':34s} {'':6s} compiled {row['compiled'] * 1e3:.3f}, compiled .to "
                    f"{row['compiled .to'] * 1e3:.3f}",
                    flush=True,
                )
    if args.rst:
        args.rst.write_text(rst_table(rows, args.compile))


if __name__ == "__main__":
    main()
