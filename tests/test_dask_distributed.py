"""Dask on a real cluster: a ``LocalCluster`` of two worker processes (loopback only) casts a
multi-chunk array with the same bits as NumPy, and errors raised on workers reach the client as
castlike's own exceptions."""

from __future__ import annotations

import numpy as np
import pytest

distributed = pytest.importorskip("dask.distributed", reason="needs dask[distributed]")
da = pytest.importorskip("dask.array", reason="needs dask")

import castlike  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    # Starting and stopping a cluster logs through warnings the suite would turn into errors.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

N = 10**7
CHUNK = N // 8


@pytest.fixture(scope="module")
def client() -> distributed.Client:
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        memory_limit="4GiB",
    )
    with cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def values() -> np.ndarray:
    rng = np.random.default_rng(20261201)
    x = (rng.standard_normal(N) * 100).astype(np.float32)
    x[::1001] = np.nan
    x[::1003] = np.inf
    return x


@pytest.mark.parametrize("target", ["FLOAT8E4M3FN", "INT4", "BFLOAT16"])
def test_numeric_casts_on_workers(
    client: distributed.Client, values: np.ndarray, target: str
) -> None:
    lazy = castlike.cast(da.from_array(values, chunks=CHUNK), target)
    assert isinstance(lazy, da.Array)
    got = client.compute(lazy).result()
    assert got.tobytes() == castlike.cast(values, target).tobytes()


def test_strings_there_and_back_on_workers(client: distributed.Client, values: np.ndarray) -> None:
    # A tenth of the values, in as many chunks (NaN and Inf among them): 2.8 s on 2 cores,
    # where all 10**7 took 34 s, strings being slow to make, move and read back.
    values = values[: N // 10]
    chunks = CHUNK // 10
    text = client.compute(castlike.cast(da.from_array(values, chunks=chunks), "STRING")).result()
    assert np.array_equal(text, castlike.cast(values, "STRING"))
    back = castlike.cast(da.from_array(text, chunks=chunks), "FLOAT")
    got = client.compute(back).result()
    assert got.tobytes() == values.tobytes()  # shortest decimals read back to the same bits


def test_worker_errors_reach_the_client_as_cast_errors(client: distributed.Client) -> None:
    bad = da.from_array(np.array(["1.5", "2", "nope", "4"] * 4), chunks=4)
    with pytest.raises(castlike.InvalidStringError, match="nope"):
        client.compute(castlike.cast(bad, "FLOAT")).result()
