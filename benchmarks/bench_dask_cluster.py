"""10**8 FLOAT values in 100 chunks cast to FLOAT8E4M3FN on a two-process ``LocalCluster``.

Each chunk is made on a worker from its block index (so that the client never holds the data),
cast lazily by castlike, and compared, on the worker, with castlike's NumPy cast of the same
chunk; the client gathers one boolean per chunk.  Prints the wall time, whether every chunk
matched, and the client's peak resident memory.

Run: ``python benchmarks/bench_dask_cluster.py [--n 100000000] [--chunks 100]``.
"""

from __future__ import annotations

import argparse
import resource
import time

import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster

import castlike


def make_chunk(block: np.ndarray, size: int) -> np.ndarray:
    rng = np.random.default_rng(int(block.ravel()[0]))
    return (rng.standard_normal(size) * 100).astype(np.float32)


def check_chunk(cast: np.ndarray, source: np.ndarray) -> np.ndarray:
    expected = castlike.cast(source, "FLOAT8E4M3FN")
    return np.array([cast.tobytes() == expected.tobytes()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**8)
    parser.add_argument("--chunks", type=int, default=100)
    args = parser.parse_args()
    size = args.n // args.chunks
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        blocks = da.arange(args.chunks, chunks=1)
        source = blocks.map_blocks(make_chunk, size, chunks=(size,), dtype=np.float32)
        start = time.perf_counter()
        cast = castlike.cast(source, "FLOAT8E4M3FN")
        matches = da.map_blocks(check_chunk, cast, source, chunks=(1,), dtype=bool)
        result = client.compute(matches).result()
        seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.n:,} FLOAT -> FLOAT8E4M3FN in {args.chunks} chunks on 2 workers: {seconds:.1f} s; "
        f"chunks equal to NumPy's bits: {int(result.sum())}/{len(result)}; "
        f"client peak RSS {peak_mb:.0f} MB"
    )


if __name__ == "__main__":
    main()
