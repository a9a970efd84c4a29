"""The one-byte table kernels (``gather:u8:u8``, ``gather:u8:u16``, ``gather:u8:u32``) at every
CPU level.

The SIMD builds read the table from vector registers (byte_table.hpp): 8-bit results by byte
shuffles (AVX-512 and AVX2), as many as the mask's bits need; 16- and 32-bit results by
two-register permutations (AVX-512), as few as the mask's bits need, or, for 256 32-bit entries
whose upper half is the lower half with the top bit flipped (a float target's sign) but for at
most one code, half the table and a fix-up.  Each of those choices is checked here against
NumPy's ``table[x & mask]``: every mask width and odd masks, tables that fold with no, one or
two exceptions, every tail length and misaligned buffers, and an output large enough for the
streamed stores.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np
import pytest

from castlike import _native

LEVELS = _native.available_levels()
pytestmark = [
    pytest.mark.skipif(
        not LEVELS, reason="castlike's native extension is not built (pip install -e . builds it)"
    ),
    pytest.mark.numpy_session,
]

MASKS = [0x01, 0x0F, 0x1F, 0x20, 0x35, 0x3F, 0x40, 0x7F, 0x80, 0xAA, 0xFF]
WIDTHS = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32}


@pytest.fixture(scope="module", params=LEVELS)
def level_module(request: pytest.FixtureRequest) -> ModuleType:
    return importlib.import_module(f"castlike._native._{request.param}")


def _table(width: str, entries: int, seed: int) -> np.ndarray:
    dtype = WIDTHS[width]
    rng = np.random.default_rng(seed)
    return rng.integers(0, np.iinfo(dtype).max, entries, dtype=dtype, endpoint=True)


def _folded(exceptions: list[int]) -> np.ndarray:
    """256 FLOAT-wide entries whose upper half is the lower half with the top bit flipped, but
    for the codes in ``exceptions``."""
    table = _table("u32", 256, seed=11)
    table[128:] = table[:128] ^ np.uint32(0x80000000)
    for code in exceptions:
        table[code] ^= np.uint32(0x5A5A)
    return table


def _check(kernel: object, table: np.ndarray, mask: int, x: np.ndarray, out: np.ndarray) -> None:
    out.view(np.uint8)[...] = 0xA5  # no result of an earlier call can pass for this one's
    kernel(x, out, 1)  # type: ignore[operator]
    expected = table[x & mask]
    wrong = np.flatnonzero(out != expected)
    assert wrong.size == 0, (
        f"{wrong.size} wrong of {x.size}; first: byte {x[wrong[0]]:#x} gave "
        f"{out[wrong[0]]:#x}, table {expected[wrong[0]]:#x}"
    )


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("mask", MASKS, ids=hex)
def test_every_mask_reads_the_table(width: str, mask: int, level_module: ModuleType) -> None:
    table = _table(width, mask + 1, seed=mask)
    kernel = level_module.Kernel(f"gather:u8:{width}", table=table, mask=mask)
    x = np.tile(np.arange(256, dtype=np.uint8), 5)
    _check(kernel, table, mask, x, np.empty(x.size, WIDTHS[width]))


@pytest.mark.parametrize("exceptions", [[], [0x80], [0xC3], [0xFF], [0x80, 0x81]], ids=str)
def test_sign_folded_tables(exceptions: list[int], level_module: ModuleType) -> None:
    """No exception, one anywhere in the upper half (the fold's fix-up), two (the whole table)."""
    table = _folded(exceptions)
    kernel = level_module.Kernel("gather:u8:u32", table=table, mask=0xFF)
    x = np.tile(np.arange(256, dtype=np.uint8), 5)
    _check(kernel, table, 0xFF, x, np.empty(x.size, np.uint32))


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("mask", [0x0F, 0x7F, 0xFF], ids=hex)
def test_tails_alignments_and_streamed_stores(
    width: str, mask: int, level_module: ModuleType
) -> None:
    """Every length up to 150 at three misalignments of both buffers, then beyond 8 MiB of
    output, and beyond the size from which 1- and 2-byte results stream (this CPU's
    second-level cache: streamed stores after a head that aligns the output), at an odd offset."""
    dtype = WIDTHS[width]
    table = _folded([0x80]) if width == "u32" and mask == 0xFF else _table(width, mask + 1, 3)
    kernel = level_module.Kernel(f"gather:u8:{width}", table=table, mask=mask)
    big = max(8 << 20, level_module.stream_bytes() + 4096) // np.dtype(dtype).itemsize + 77
    pool = np.random.default_rng(5).integers(0, 256, big + 64, dtype=np.uint8)
    out_raw = np.empty(big + 64, dtype=dtype)
    for n, k in [(n, k) for n in range(150) for k in (0, 1, 3)] + [(big, 1)]:
        _check(kernel, table, mask, pool[k : k + n], out_raw[k : k + n])


def test_threads_give_the_same_bits(level_module: ModuleType) -> None:
    table = _folded([0x80])
    kernel = level_module.Kernel("gather:u8:u32", table=table, mask=0xFF)
    x = np.random.default_rng(9).integers(0, 256, (1 << 21) + 5, dtype=np.uint8)
    one, two = np.empty(x.size, np.uint32), np.empty(x.size, np.uint32)
    kernel(x, one, 1)
    kernel(x, two, 2)
    assert np.array_equal(one, table[x])
    assert np.array_equal(one, two)
