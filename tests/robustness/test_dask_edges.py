"""Dask string casts: an error names the first bad element of the whole array.

The first in row-major order, by its index in the whole array, whatever scheduler computes the
blocks (and in whatever order), and where the chunk sizes are unknown (after boolean indexing)
as well.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import castlike
from castlike import InvalidStringError, UnsupportedTypeError

da = pytest.importorskip("dask.array", reason="dask is not installed (castlike[dask])")
dask = pytest.importorskip("dask", reason="dask is not installed")

SCHEDULERS = ["synchronous", "threads", "processes"]


def _grid() -> np.ndarray:
    """4 x 6 strings with bad ones at (1, 1), (0, 4) and (3, 5): in chunks of (2, 3), block
    (0, 0) holds (1, 1) and comes first in block order, but (0, 4), in block (0, 1), is
    first in row-major order."""
    texts = np.full((4, 6), "1.5", dtype=object)
    texts[1, 1], texts[0, 4], texts[3, 5] = "bad11", "bad04", "bad35"
    return texts.astype(np.dtypes.StringDType())


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_the_first_bad_element_in_row_major_order(scheduler: str) -> None:
    lazy = castlike.cast(da.from_array(_grid(), chunks=(2, 3)), "FLOAT")
    with pytest.raises(InvalidStringError, match=r"'bad04' at index \(0, 4\)"):
        lazy.compute(scheduler=scheduler)


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_many_bad_blocks_name_the_first(scheduler: str) -> None:
    # Every block but the first few is bad; the synchronous scheduler once named the fifth.
    texts = np.array(["1"] * 40, dtype=object)
    texts[[5, 7, 11, 13, 17, 23, 29, 31, 37]] = "bad"
    texts[5] = "first"
    lazy = castlike.cast(da.from_array(texts.astype("U5"), chunks=2), "DOUBLE")
    with pytest.raises(InvalidStringError, match=r"'first' at index \(5,\)"):
        lazy.compute(scheduler=scheduler)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_unknown_chunk_sizes_give_the_global_index(scheduler: str) -> None:
    texts = np.array(["1", "x", "2", "y", "z", "3", "w", "4"] * 3)
    x = da.from_array(texts, chunks=3)
    kept = x[x != "2"]  # boolean indexing: the chunk sizes are unknown (nan)
    assert np.isnan(kept.shape[0])
    expected = texts[texts != "2"]
    first = int(np.flatnonzero(~np.isin(expected, ["1", "3", "4"]))[0])
    with pytest.raises(InvalidStringError, match=rf"'{expected[first]}' at index \({first},\)"):
        castlike.cast(kept, "FLOAT").compute(scheduler=scheduler)
    # Past the first block: its offset is the sizes of the filtered blocks before it.
    texts = np.array(["1", "2", "3", "drop", "4", "5", "6", "7", "bad", "8", "nope", "9"])
    x = da.from_array(texts, chunks=3)
    with pytest.raises(InvalidStringError, match=r"'bad' at index \(7,\)"):
        castlike.cast(x[x != "drop"], "FLOAT").compute(scheduler=scheduler)


def test_unknown_chunk_sizes_on_one_axis_of_two() -> None:
    grid = _grid()
    x = da.from_array(grid, chunks=(2, 3))
    rows = da.from_array(np.array([False, True, True, True]), chunks=2)
    kept = x[rows]  # rows 1, 2, 3: (1, 1) is now (0, 1), first in row-major order
    assert np.isnan(kept.shape[0])
    with pytest.raises(InvalidStringError, match=r"'bad11' at index \(0, 1\)"):
        castlike.cast(kept, "FLOAT").compute()


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
@pytest.mark.parametrize(
    ("strings", "error", "match"),
    [
        (
            np.array(["a", None, "b", None], dtype=np.dtypes.StringDType(na_object=None)),
            InvalidStringError,
            r"index \(1,\) is a missing value",
        ),
        (np.array(["a", "b", "c", 4], dtype=object), UnsupportedTypeError, r"index \(3,\)"),
        (np.array([b"a", b"b", b"\xff", b"\xfe"]), InvalidStringError, r"index \(2,\).*UTF-8"),
    ],
    ids=["missing", "not text", "not UTF-8"],
)
def test_string_to_string_errors_name_the_first(
    scheduler: str, strings: np.ndarray, error: type, match: str
) -> None:
    lazy = castlike.cast(da.from_array(strings, chunks=1), "STRING")
    with pytest.raises(error, match=match):
        lazy.compute(scheduler=scheduler)


def test_missing_values_under_coerce_stay_lazy_and_are_nan() -> None:
    strings = np.array(["1.5", None, "x", "2"] * 3, dtype=np.dtypes.StringDType(na_object=None))
    lazy = castlike.cast(da.from_array(strings, chunks=5), "FLOAT", errors="coerce")
    assert isinstance(lazy, da.Array)
    got = lazy.compute()
    assert got.tobytes() == castlike.cast(strings, "FLOAT", errors="coerce").tobytes()


def test_nothing_is_read_until_asked() -> None:
    calls: list[tuple[int, ...]] = []

    def source_block(block: np.ndarray) -> np.ndarray:
        calls.append(block.shape)
        return block

    texts = da.from_array(np.array(["1", "x"] * 6), chunks=4).map_blocks(source_block)
    lazy = castlike.cast(texts, "FLOAT")
    assert (4,) not in calls
    with pytest.raises(InvalidStringError, match=r"index \(1,\)"):
        lazy.compute()
    assert calls.count((4,)) == 3


def test_a_valid_array_gives_its_values_in_every_scheduler() -> None:
    texts = np.array(["1.5", "-2", "1e3", " 7 ", "nan", "0.1"] * 4).reshape(4, 6)
    lazy = castlike.cast(da.from_array(texts, chunks=(3, 4)), "FLOAT")
    expected = castlike.cast(texts, "FLOAT").tobytes()
    for scheduler in SCHEDULERS:
        assert lazy.compute(scheduler=scheduler).tobytes() == expected, scheduler
    assert (lazy[1:, 2:].compute()).tobytes() == castlike.cast(texts[1:, 2:], "FLOAT").tobytes()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_first_bad_element_on_a_distributed_client() -> None:
    distributed: Any = pytest.importorskip("dask.distributed", reason="needs dask[distributed]")
    with distributed.Client(
        processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None
    ) as client:
        lazy = castlike.cast(da.from_array(_grid(), chunks=(2, 3)), "FLOAT")
        with pytest.raises(InvalidStringError, match=r"'bad04' at index \(0, 4\)"):
            client.compute(lazy).result()
