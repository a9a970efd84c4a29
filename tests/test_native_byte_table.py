"""The one-byte table kernels (``gather:u8:u8``, ``gather:u8:u16``, ``gather:u8:u32``,
``gather:u8:u64``) at every CPU level.

The SIMD builds read the table from vector registers (byte_table.hpp): 8-bit results by byte
shuffles (AVX-512 and AVX2), as many as the mask's bits need; 16- and 32-bit results by
two-register permutations (AVX-512), as few as the mask's bits need, or, for 256 32-bit entries
whose upper half is the lower half with the top bit flipped (a float target's sign) but for at
most one code, half the table and a fix-up.  Each of those choices is checked here against
NumPy's ``table[x & mask]``: every mask width and odd masks, tables that fold with no, one or
two exceptions, every tail length and misaligned buffers, and an output large enough for the
streamed stores.

The AVX2 build computes a float source's FLOAT, FLOAT16, BFLOAT16 and DOUBLE results instead,
where the format's arithmetic gives the spec's table but for at most two codes (byte_float.hpp);
every other table keeps the scalar gather.  The tests below give every float source and target
the spec's tables (every code, enough elements for the arithmetic to run), and tables the
arithmetic cannot give: changed in one, two (a sign pair or not) and three codes, and a run of
equal entries at the top of the magnitudes (as the NaNs are), with and without its sign pair.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from castlike import _native
from castlike._native import routes
from castlike.spec.rules import Mode
from castlike.spec.types import TYPES, OnnxType, TypeSpec

LEVELS = _native.available_levels()
pytestmark = [
    pytest.mark.skipif(
        not LEVELS, reason="castlike's native extension is not built (pip install -e . builds it)"
    ),
    pytest.mark.numpy_session,
]

MASKS = [0x01, 0x0F, 0x1F, 0x20, 0x35, 0x3F, 0x40, 0x7F, 0x80, 0xAA, 0xFF]
WIDTHS = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}


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


def _sign_extending(exceptions: list[int], mask: int) -> np.ndarray:
    """mask + 1 64-bit entries that sign-extend from 32 bits, among them the first stand-ins
    AVX-512 would pick for the exceptions (INT32_MIN and up), but for the codes in
    ``exceptions``, whose entries need all 64 bits."""
    rng = np.random.default_rng(len(exceptions) * 1000 + mask)
    table = rng.integers(-(2**31), 2**31, mask + 1, dtype=np.int64)
    table[: min(3, mask + 1)] = [-(2**31), -(2**31) + 1, -(2**31) + 3][: min(3, mask + 1)]
    for k, code in enumerate(exceptions):
        table[code] = [2**63 - 1, -(2**63), 2**40 + 5][k]
    return table.view(np.uint64)


@pytest.mark.parametrize(
    ("exceptions", "mask"),
    [
        ([], 0xFF),
        ([0x7C], 0xFF),
        ([0x7C, 0xFC], 0xFF),
        ([0x05, 0x06, 0x07], 0xFF),
        ([0x0E, 0x0F], 0x0F),
        ([0x00], 0x3F),
    ],
    ids=str,
)
def test_sign_extended_tables_with_exceptions(
    exceptions: list[int], mask: int, level_module: ModuleType
) -> None:
    """64-bit results read as 32-bit entries sign-extended (AVX-512): up to two entries that do
    not sign-extend (FLOAT8E5M2's +-Inf into INT64) are written over by their stand-ins'
    comparison, which must not catch an ordinary entry equal to a stand-in's first choices; three
    take the scalar gather."""
    table = _sign_extending(exceptions, mask)
    kernel = level_module.Kernel("gather:u8:u64", table=table, mask=mask)
    x = np.tile(np.arange(256, dtype=np.uint8), 5)
    for n in (x.size, 16 * 7 + 5, 3):
        _check(kernel, table, mask, x[:n], np.empty(n, np.uint64))


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


#: The one-byte float sources and their float targets of 16, 32 and 64 bits.
BYTE_FLOATS = [t.name for t in TYPES.values() if t.is_float and t.storage_bits == 8]
WIDE_FLOATS = {
    "FLOAT": np.uint32,
    "FLOAT16": np.uint16,
    "BFLOAT16": np.uint16,
    "DOUBLE": np.uint64,
}
#: The kernel width of each result dtype.
_WIDTH_OF = {np.dtype(dtype): width for width, dtype in WIDTHS.items()}


def _params(source: TypeSpec, target: TypeSpec) -> dict[str, Any]:
    """The kernel parameters routes gives a cast."""
    found = routes.route(source, target, Mode())
    assert found is not None
    return found[1]


def _format_kernel(
    level_module: ModuleType, source: TypeSpec, table: np.ndarray
) -> tuple[object, int]:
    """A ``gather`` kernel with a float source's format constants, as routes gives them, and
    ``table``; and its mask."""
    params = _params(source, TYPES[OnnxType.FLOAT])
    assert "sign_mask" in params, "routes gives the format of a one-byte float source"
    width = _WIDTH_OF[table.dtype]
    params = {**params, "table": table}
    return level_module.Kernel(f"gather:u8:{width}", **params), params["mask"]


def _many_codes(mask: int) -> np.ndarray:
    """Every code a few times, shuffled: more elements than the arithmetic needs to run."""
    x = np.tile(np.arange(256, dtype=np.uint8), 40)
    np.random.default_rng(mask).shuffle(x)
    return x


@pytest.mark.parametrize("target", list(WIDE_FLOATS))
@pytest.mark.parametrize("source", BYTE_FLOATS)
def test_float_sources_give_the_spec_table(
    source: str, target: str, level_module: ModuleType
) -> None:
    """The spec's kernel for the cast (whatever the level computes it by): the table's bits
    for every code, every tail, misaligned, and around the 64 elements below which the gather
    runs."""
    s, t = TYPES[OnnxType[source]], TYPES[OnnxType[target]]
    params = _params(s, t)
    table, mask = params["table"], params["mask"]
    kernel = routes.kernel_for(level_module, s, t, Mode())
    x = _many_codes(mask)
    for k, n in (
        (0, x.size),
        (1, x.size - 1),
        (3, 1500),
        (5, 1041),
        (2, 63),
        (3, 64),
        (1, 65),
        (0, 100),
    ):
        out = np.empty(n + 8, WIDE_FLOATS[target])[k : k + n]
        _check(kernel, table, mask, x[:n], out)


#: Codes whose entries the test changes: FLOAT4E2M1 has no exception of its own, so one change
#: is one exception, two (a sign pair or not) two, three the gather; FLOAT8E4M3FN's NaNs are the
#: top run (one comparison) and one change adds an exception, FLOAT8E8M0's 2**-127 is an
#: exception and one more change makes two.
CHANGES = [
    ("FLOAT4E2M1", [0x1]),
    ("FLOAT4E2M1", [0x2, 0xA]),
    ("FLOAT4E2M1", [0x5, 0x3]),
    ("FLOAT4E2M1", [0x3, 0x4, 0x6]),
    ("FLOAT8E4M3FN", [0x01]),
    ("FLOAT8E8M0", [0x80]),
]


@pytest.mark.parametrize("target", list(WIDE_FLOATS))
@pytest.mark.parametrize(("source", "changed"), CHANGES, ids=str)
def test_tables_the_arithmetic_does_not_give(
    source: str, target: str, changed: list[int], level_module: ModuleType
) -> None:
    """The spec's table with entries changed: every result is still the table's, whether the
    steps copy the changed entries (up to two) or leave the table to the gather."""
    s, t = TYPES[OnnxType[source]], TYPES[OnnxType[target]]
    table = np.array(_params(s, t)["table"], copy=True)
    for code in changed:
        table[code] ^= 0x5A
    kernel, mask = _format_kernel(level_module, s, table)
    _check(kernel, table, mask, _many_codes(mask), np.empty(256 * 40, table.dtype))


_INTEGER_OF_WIDTH = {"u16": OnnxType.INT16, "u32": OnnxType.INT32, "u64": OnnxType.INT64}


@pytest.mark.parametrize("width", list(_INTEGER_OF_WIDTH))
def test_other_tables_with_a_float_format(width: str, level_module: ModuleType) -> None:
    """An integer target's table and a random one, with a float source's format constants:
    the arithmetic gives neither, so the gather reads them."""
    s = TYPES[OnnxType.FLOAT8E4M3FN]
    integer = _params(s, TYPES[_INTEGER_OF_WIDTH[width]])["table"]
    for table in (np.asarray(integer), _table(width, 256, seed=21)):
        kernel, mask = _format_kernel(level_module, s, table.view(WIDTHS[width]))
        _check(
            kernel,
            table.view(WIDTHS[width]),
            mask,
            _many_codes(mask),
            np.empty(10240, WIDTHS[width]),
        )


def test_bad_format_constants_keep_the_gather(level_module: ModuleType) -> None:
    """Constants outside what the steps define (a sign bit that is not one bit, above the mask,
    mantissa bits beyond 7, an exponent whose rebias leaves FLOAT's range) never reach them:
    the table is read."""
    s = TYPES[OnnxType.FLOAT8E4M3FN]
    params = _params(s, TYPES[OnnxType.FLOAT])
    for bad in (
        {"sign_mask": 0xC0},
        {"sign_mask": 0x100},
        {"mantissa_bits": 9},
        {"min_exponent": 200},
        {"min_exponent": -300},
    ):
        kernel = level_module.Kernel("gather:u8:u32", **{**params, **bad})
        _check(
            kernel, np.asarray(params["table"]), 0xFF, _many_codes(0xFF), np.empty(10240, np.uint32)
        )


@pytest.mark.parametrize("target", list(WIDE_FLOATS))
@pytest.mark.parametrize("negative_differs", [False, True])
def test_a_run_of_equal_entries_at_the_top(
    target: str, negative_differs: bool, level_module: ModuleType
) -> None:
    """FLOAT4E2M1's two highest magnitudes given one entry (and its negative twin the same with
    the sign set): the steps compare the magnitude once.  With one negative entry different,
    that code is an exception besides."""
    s = TYPES[OnnxType.FLOAT4E2M1]
    table = np.array(_params(s, TYPES[OnnxType[target]])["table"], copy=True)
    sign = np.array(1 << (8 * table.dtype.itemsize - 1), table.dtype)
    table[0x6] = table[0x7] = table[0x7] ^ 0x5A
    table[0xE] = table[0xF] = table[0x7] | sign
    if negative_differs:
        table[0xE] ^= 0x3
    kernel, mask = _format_kernel(level_module, s, table)
    _check(kernel, table, mask, _many_codes(mask), np.empty(256 * 40, table.dtype))


@pytest.mark.parametrize("rounding", [0, 1, 2, 3])
def test_float_sources_in_a_hostile_environment(rounding: int, level_module: ModuleType) -> None:
    """The caller's FTZ/DAZ and rounding mode change nothing.  The arithmetic's products and
    their operands are normal FLOATs and its FLOAT16 conversion names its rounding, so neither
    should depend on the environment (and the kernels run in their own); this holds it so."""
    x = _many_codes(0xFF)
    cases = []
    for source in ("FLOAT8E4M3FN", "FLOAT8E5M2FNUZ", "FLOAT4E2M1"):
        for target, dtype in WIDE_FLOATS.items():
            s, t = TYPES[OnnxType[source]], TYPES[OnnxType[target]]
            params = _params(s, t)
            cases.append((routes.kernel_for(level_module, s, t, Mode()), params, dtype))
    try:
        saved = level_module._set_fp_environment(True, rounding)
    except NotImplementedError:
        pytest.skip("no floating-point control word on this architecture")
    try:
        outs = []
        for kernel, _, dtype in cases:
            out = np.empty(x.size, dtype)
            kernel(x, out, 1)
            outs.append(out)
    finally:
        level_module._restore_fp_environment(saved)
    for (_, params, _), out in zip(cases, outs, strict=True):
        assert np.array_equal(out, np.asarray(params["table"])[x & params["mask"]])
