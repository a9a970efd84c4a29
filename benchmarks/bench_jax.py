"""castlike on JAX against the fastest plain ``jax.numpy`` sequence, under ``jax.jit``.

For each conversion both functions are jitted and run once (compilation excluded), then timed
(best of ``--repeat`` runs, taking turns, ``block_until_ready``) at 10**6 and 10**7 elements.
The plain sequence is the fastest jnp code giving the same bits as the spec on the benchmark
data; the "same bits" column checks that on the data (NaN as NaN for IEEE targets), and the
note says where the plain sequence is still wrong on inputs the data does not hold (XLA
flushes subnormals, rounds twice, or clamps).

Run: ``JAX_ENABLE_X64=1 python benchmarks/bench_jax.py [--sizes 1e6 1e7] [--repeat 15]``.
"""

from __future__ import annotations

import argparse
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _common import Case, interleaved, same_bits

import castlike
from castlike.backends import adapter_named
from castlike.spec.types import spec_of

jax.config.update("jax_enable_x64", True)


def _int4_plain(x: Any) -> Any:
    whole = jnp.round(x)
    return jnp.where(jnp.abs(whole) < 2.0**31, whole, 0).astype(jnp.int32).astype(jnp.int4)


CASES = [
    Case("FLOAT", "FLOAT16", lambda x: x.astype(jnp.float16), "astype"),
    Case("FLOAT", "BFLOAT16", lambda x: x.astype(jnp.bfloat16), "astype"),
    Case(
        "FLOAT",
        "FLOAT8E4M3FN",
        lambda x: jnp.clip(x, -448.0, 448.0).astype(jnp.float8_e4m3fn),
        "clip(+-448).astype",
    ),
    Case(
        "FLOAT",
        "FLOAT8E5M2",
        lambda x: jnp.clip(x, -57344.0, 57344.0).astype(jnp.float8_e5m2),
        "clip(+-57344).astype",
    ),
    Case(
        "FLOAT",
        "FLOAT4E2M1",
        lambda x: jnp.where(jnp.isnan(x), 6.0, jnp.clip(x, -6.0, 6.0)).astype(jnp.float4_e2m1fn),
        "where(isnan,6,clip(+-6)).astype",
    ),
    Case(
        "FLOAT",
        "FLOAT8E8M0",
        lambda x: jnp.abs(x).astype(jnp.float8_e8m0fnu),
        "abs.astype",
        "jnp rounds to nearest, spec 'up' (no plain equivalent)",
    ),
    Case("FLOAT", "INT8", lambda x: x.astype(jnp.int8), "astype", "XLA saturates, NaN->0: = R7"),
    Case("FLOAT", "INT4", _int4_plain, "round, wrap via int32", "astype clamps"),
    Case("FLOAT", "BOOL", lambda x: x != 0, "x != 0", "XLA:CPU: subnormal -> False"),
    Case(
        "FLOAT", "DOUBLE", lambda x: x.astype(jnp.float64), "astype", "XLA:CPU flushes subnormals"
    ),
    Case(
        "DOUBLE",
        "FLOAT",
        lambda x: x.astype(jnp.float32),
        "astype",
        "XLA:CPU flushes subnormal results",
    ),
    Case(
        "DOUBLE",
        "FLOAT16",
        lambda x: x.astype(jnp.float16),
        "astype",
        "XLA rounds twice (via FLOAT)",
    ),
    Case(
        "DOUBLE",
        "BFLOAT16",
        lambda x: x.astype(jnp.bfloat16),
        "astype",
        "XLA rounds twice (via FLOAT)",
    ),
    Case("INT32", "FLOAT", lambda x: x.astype(jnp.float32), "astype"),
    Case("INT64", "INT32", lambda x: x.astype(jnp.int32), "astype"),
    Case("FLOAT16", "FLOAT", lambda x: x.astype(jnp.float32), "astype"),
    Case("BFLOAT16", "FLOAT", lambda x: x.astype(jnp.float32), "astype"),
    Case("FLOAT8E4M3FN", "FLOAT16", lambda x: x.astype(jnp.float16), "astype"),
    Case(
        "FLOAT16",
        "FLOAT8E4M3FN",
        lambda x: jnp.clip(x, -448.0, 448.0).astype(jnp.float8_e4m3fn),
        "clip(+-448).astype",
        "under jit XLA's clip drops a NaN's sign (R4 keeps it)",
    ),
    Case("UINT8", "FLOAT", lambda x: x.astype(jnp.float32), "astype"),
]


def make_input(source: str, n: int, rng: np.random.Generator) -> Any:
    """Benchmark data: wide floats spread over many binades; narrow types: random patterns."""
    t = spec_of(source)
    numpy_adapter = adapter_named("numpy")
    if t.is_float and t.bits >= 32:
        values = rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))
        host = values.astype(numpy_adapter.library_dtype(t))
    elif t.is_integer and t.bits >= 32:
        host = (rng.standard_normal(n) * 1e6).astype(numpy_adapter.library_dtype(t))
    else:
        storage = np.dtype(f"uint{t.storage_bits}")
        host = numpy_adapter.from_bits(rng.integers(0, 1 << t.bits, n, dtype=storage), t)
    return jax.device_put(host)


def verify_float16(chunk_bits: int = 26) -> int:
    """XLA's FLOAT -> FLOAT16 against NumPy's (correct) on all 2**32 inputs; mismatches.

    castlike uses XLA's conversion for this pair because of this check (about 10 minutes on
    2 cores); run it on a new platform with ``--verify-float16``.
    """
    chunk = 1 << chunk_bits

    @jax.jit
    def plain(start: Any) -> Any:
        u = start + jax.lax.iota(jnp.uint32, chunk)
        f = jax.lax.bitcast_convert_type(u, jnp.float32)
        return jax.lax.bitcast_convert_type(f.astype(jnp.float16), jnp.uint16)

    def is_nan(b: np.ndarray) -> np.ndarray:
        return ((b & 0x7C00) == 0x7C00) & ((b & 0x3FF) != 0)

    bad = 0
    for c in range(1 << (32 - chunk_bits)):
        start = np.uint32(c * chunk)
        got = np.asarray(plain(start))
        with np.errstate(all="ignore"):
            ref = (np.arange(chunk, dtype=np.uint32) + start).view(np.float32)
            ref = ref.astype(np.float16).view(np.uint16)
        nan_got, nan_ref = is_nan(got), is_nan(ref)
        bad += int(np.where(nan_got | nan_ref, nan_got != nan_ref, got != ref).sum())
    return bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e6, 1e7])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--only", nargs="*", default=None, help="SOURCE-TARGET pairs to run")
    parser.add_argument(
        "--verify-float16",
        action="store_true",
        help="only check XLA's FLOAT -> FLOAT16 on all 2**32 inputs (castlike relies on it)",
    )
    args = parser.parse_args()
    if args.verify_float16:
        print("FLOAT -> FLOAT16 mismatches on all 2**32 inputs:", verify_float16())
        return
    rng = np.random.default_rng(0)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, jit, best of {args.repeat}")
    header = (
        f"{'conversion':28s} {'n':>6s} {'castlike ms':>12s} {'plain ms':>10s} {'ratio':>6s}"
        f"  {'same bits':9s} plain sequence; note"
    )
    print(header)
    print("-" * len(header))
    for case in CASES:
        label = f"{case.source}->{case.target}"
        if args.only and f"{case.source}-{case.target}" not in args.only:
            continue
        options = dict(case.options)
        ours = jax.jit(lambda x, to=case.target, options=options: castlike.cast(x, to, **options))
        plain = jax.jit(case.plain)
        for size in args.sizes:
            n = int(size)
            x = make_input(case.source, n, rng)
            t_ours, t_plain = interleaved(
                [
                    lambda: ours(x).block_until_ready(),  # noqa: B023
                    lambda: plain(x).block_until_ready(),  # noqa: B023
                ],
                args.repeat,
            )
            same = same_bits(np.asarray(ours(x)), np.asarray(plain(x)), case.target)
            print(
                f"{label:28s} {size:6.0e} {t_ours * 1e3:12.2f} {t_plain * 1e3:10.2f} "
                f"{t_ours / t_plain:6.2f}  {'yes' if same else 'NO':9s} "
                f"{case.plain_text}{'; ' + case.note if case.note else ''}"
            )


if __name__ == "__main__":
    main()
