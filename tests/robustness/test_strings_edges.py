"""STRING edges: missing values, reading in blocks, and the memory that reading takes."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

import castlike
import castlike.strings
from castlike import InvalidStringError, UnsupportedTypeError

pytestmark = pytest.mark.numpy_session  # STRING data are NumPy arrays on every backend (R9)

SD = np.dtypes.StringDType


def _bits(x: np.ndarray) -> list[int]:
    return np.ascontiguousarray(x).view(f"u{x.dtype.itemsize}").reshape(-1).tolist()


# == Missing values are invalid text ============================================================

#: Arrays holding "1.5", a missing value, "x" (invalid text), "-2", in every form of missing.
MISSING = {
    "StringDType na_object=None": np.array(["1.5", None, "x", "-2"], dtype=SD(na_object=None)),
    "StringDType na_object=nan": np.array(["1.5", np.nan, "x", "-2"], dtype=SD(na_object=np.nan)),
    "StringDType na_object=str": np.array(["1.5", "<NA>", "x", "-2"], dtype=SD(na_object="<NA>")),
    "object None": np.array(["1.5", None, "x", "-2"], dtype=object),
    "object NaN": np.array(["1.5", float("nan"), "x", "-2"], dtype=object),
    "object float32 NaN": np.array(["1.5", np.float32("nan"), "x", "-2"], dtype=object),
}


@pytest.mark.parametrize("target", ["FLOAT", "DOUBLE", "FLOAT16", "FLOAT8E4M3FN"])
@pytest.mark.parametrize("strings", list(MISSING.values()), ids=list(MISSING))
def test_missing_values_are_nan_under_coerce(strings: np.ndarray, target: str) -> None:
    got = castlike.cast(strings, target, errors="coerce")
    texts = np.array(["1.5", "nan", "nan", "-2"])
    assert _bits(got) == _bits(castlike.cast(texts, target))


@pytest.mark.parametrize("strings", list(MISSING.values()), ids=list(MISSING))
def test_missing_values_raise_an_indexed_error(strings: np.ndarray) -> None:
    with pytest.raises(InvalidStringError, match=r"at index \(1,\) is a missing value"):
        castlike.cast(strings, "FLOAT")
    # Into a type without NaN, coerce cannot help, as for invalid text (R9).
    with pytest.raises(InvalidStringError, match=r"\(1,\) is a missing value.*INT8 has no NaN"):
        castlike.cast(strings, "INT8", errors="coerce")
    # A STRING result holds text only.
    with pytest.raises(InvalidStringError, match=r"\(1,\) is a missing value"):
        castlike.cast(strings, "STRING")


def test_missing_value_message_names_the_na_object() -> None:
    strings = np.array([[None, "1"]], dtype=SD(na_object=None))
    with pytest.raises(
        InvalidStringError, match=r"\(0, 0\) is a missing value \(the na_object None"
    ):
        castlike.cast(strings, "FLOAT")


def test_missing_values_in_the_reference_profile() -> None:
    # The reference profile reads BOOL as the strings' truth; a missing value has none.
    strings = MISSING["StringDType na_object=None"]
    with pytest.raises(InvalidStringError, match="missing value"):
        castlike.cast(strings, "BOOL", profile="reference")
    got = castlike.cast(strings, "FLOAT", profile="reference", errors="coerce")
    assert np.isnan(got[1:3]).all() and got[[0, 3]].tolist() == [1.5, -2.0]


def test_strings_without_missing_values_in_a_missing_aware_dtype() -> None:
    strings = np.array(["1.5", "2", " 3 "], dtype=SD(na_object=None))
    assert castlike.cast(strings, "FLOAT").tolist() == [1.5, 2.0, 3.0]
    assert castlike.cast(strings, "STRING").tolist() == ["1.5", "2", " 3 "]


@pytest.mark.parametrize(
    "element",
    [1, 2.5, True, b"1".decode() and object(), np.int64(3), [1]],
    # Names without memory addresses: pytest-xdist's workers must collect the same ids.
    ids=lambda e: type(e).__name__ if type(e) is object else repr(e),
)
def test_objects_that_are_no_text_make_no_string_tensor(element: Any) -> None:
    strings = np.empty(3, dtype=object)
    strings[:] = ["1", "2", None]
    strings[2] = element
    for errors in ("raise", "coerce"):
        with pytest.raises(UnsupportedTypeError, match=r"object array.*at index \(2,\)"):
            castlike.cast(strings, "FLOAT", errors=errors)
    with pytest.raises(UnsupportedTypeError, match=r"at index \(2,\)"):
        castlike.cast(strings, "STRING")


def test_the_first_problem_is_reported_whatever_its_kind() -> None:
    strings = np.array(["x", None, 7], dtype=object)
    with pytest.raises(InvalidStringError, match=r"'x' at index \(0,\)"):
        castlike.cast(strings, "FLOAT")
    # Under coerce, invalid text and missing values are NaN; the number is still no text.
    with pytest.raises(UnsupportedTypeError, match=r"7 \(of type int\) at index \(2,\)"):
        castlike.cast(strings, "FLOAT", errors="coerce")


# == Reading in blocks ===========================================================================


def _strings(kind: str, n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    texts = castlike.cast(values, "STRING").astype(object)
    texts[::7] = [f" {t} " for t in texts[::7]]  # whitespace: the exact path
    texts[::11] = "1" * 25  # long rows: read again wider
    texts[5::13] = "inf"
    if kind == "T":
        return texts.astype(SD())
    if kind == "U>":
        return texts.astype(">U40")
    if kind == "S":
        return texts.astype("S40")
    return texts


@pytest.mark.parametrize("target", ["FLOAT", "DOUBLE", "INT64", "FLOAT8E4M3FN", "BOOL"])
@pytest.mark.parametrize("kind", ["T", "U>", "S", "O"])
def test_reading_in_blocks_is_reading_in_one_piece(
    kind: str, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    strings = _strings(kind, 3000)
    views = {"contiguous": strings, "strided": strings[::-3], "2-D": strings.reshape(60, 50).T}
    whole = {name: castlike.cast(view, target) for name, view in views.items()}
    monkeypatch.setattr(castlike.strings, "PARSE_BLOCK", 97)
    for name, view in views.items():
        blocked = castlike.cast(view, target)
        assert blocked.dtype == whole[name].dtype and blocked.shape == view.shape
        assert _bits(blocked) == _bits(whole[name]), name


@pytest.mark.parametrize("block", [1, 5, 97, 1 << 18])
def test_the_first_invalid_element_across_blocks(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(castlike.strings, "PARSE_BLOCK", block)
    strings = np.array(["1"] * 300, dtype=object)
    strings[[29, 150, 299]] = ["bad29", "bad150", "bad299"]
    grid = strings.reshape(20, 15)
    with pytest.raises(InvalidStringError, match=r"'bad29' at index \(1, 14\)"):
        castlike.cast(grid, "FLOAT")
    # Transposed: the first in the row-major order of the view, not of memory.
    with pytest.raises(InvalidStringError, match=r"'bad150' at index \(0, 10\)"):
        castlike.cast(grid.T, "FLOAT")
    coerced = castlike.cast(grid, "FLOAT", errors="coerce").reshape(-1)
    assert np.isnan(coerced[[29, 150, 299]]).all() and np.isnan(coerced).sum() == 3


# == Memory: temporaries bounded by a block, not by the array =====================================


def _temporaries(strings: np.ndarray, target: str) -> int:
    """Bytes allocated above the result at the peak of one cast (tracemalloc)."""
    castlike.cast(strings[:100], target)  # tables and caches are built outside the measure
    tracemalloc.start()
    try:
        result = castlike.cast(strings, target)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - result.nbytes


@pytest.mark.parametrize("target", ["FLOAT", "INT64"])
def test_reading_temporaries_do_not_grow_with_the_array(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2*10**6 StringDType elements: one piece took ~52 MB of temporaries (a byte matrix of 32
    # bytes an element, their lengths, the result bits as uint64), growing with the array.
    rng = np.random.default_rng(0)
    n = 2 * 10**6
    values = rng.standard_normal(n).astype(np.float32) * 1000
    strings = castlike.cast(values if target == "FLOAT" else values.astype(np.int64), "STRING")
    full = _temporaries(strings, target)
    assert full < 24 * 2**20, f"{full / 2**20:.1f} MiB of temporaries for 2*10**6 elements"
    # Ten times the elements, the same blocks: the temporaries stay the same (with small
    # blocks, so that both sizes span many of them).
    monkeypatch.setattr(castlike.strings, "PARSE_BLOCK", 1 << 14)
    small, large = _temporaries(strings[: n // 10], target), _temporaries(strings, target)
    assert large - small < 2**20, f"{small / 2**20:.1f} MiB -> {large / 2**20:.1f} MiB"
