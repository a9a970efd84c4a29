"""``Kernel.packed`` and ``Kernel.unpacked``: a cast and ONNX's sub-byte packing in one pass.

The reference is the kernel's own unpacked result (``kernel(x, out, 1)``, one code a byte)
packed by the short NumPy bit stream below (ONNX raw_data: little-endian, the first element in
the lowest bits, each row from a byte boundary), and for ``unpacked`` the NumPy unpacking of
the packed bytes cast by ``kernel(codes, out, 1)``.  So these tests check the packing, the
blocks, the rows and the threads; that the kernels cast right is test_native.py's business.
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
from castlike.testing import curated_inputs, exhaustive_inputs, random_inputs

LEVELS = _native.available_levels()
pytestmark = [
    pytest.mark.skipif(
        not LEVELS, reason="castlike's native extension is not built (pip install -e . builds it)"
    ),
    pytest.mark.numpy_session,
]

#: The sources each packed case casts: (source, target); the width is the target's.
_PACKED = [
    ("FLOAT", "INT4"),
    ("FLOAT", "UINT4"),
    ("FLOAT", "FLOAT4E2M1"),
    ("DOUBLE", "INT2"),
    ("FLOAT", "FLOAT6E2M3"),
    ("FLOAT16", "FLOAT6E3M2"),
    ("INT32", "UINT2"),
]
_UNPACKED = [
    ("INT4", "FLOAT"),
    ("FLOAT4E2M1", "FLOAT"),
    ("INT2", "INT8"),
    ("FLOAT6E2M3", "FLOAT"),
    ("UINT4", "UINT4"),
]
_ROWS = [*range(1, 10), 17, 31, 1000]
_ROW_COUNTS = [0, 1, 2, 3, 5, 13]
#: (row, rows) around and beyond a block of 8192 elements (kPackBlock): rows longer than a
#: block, whole in bytes or not, and many short rows that do not fill whole bytes, whose blocks
#: straddle rows; all past the size below which a call keeps the GIL.
_BLOCK_CASES = [
    (2048, 3),
    (2049, 3),
    (8192, 2),
    (8193, 3),
    (16389, 2),
    (5, 4000),
    (4103, 2),
    (5000, 2),
    (12345, 1),
    (1, 5000),
    (3, 2000),
    (7, 1500),
    (31, 400),
    (999, 7),
    (1023, 5),
    (2047, 3),
]


def _spec(name: str) -> TypeSpec:
    return TYPES[OnnxType[name]]


def _kernel(module: ModuleType | None, source: str, target: str) -> Any:
    assert module is not None
    kernel = routes.kernel_for(module, _spec(source), _spec(target), Mode())
    assert kernel is not None, f"no kernel for {source} -> {target}"
    return kernel


def _bits(target: str) -> int:
    return int(_spec(target).bits)


def _storage(t: TypeSpec) -> np.dtype:
    """The dtype a kernel reads or writes for ``t``: its storage (FLOAT16 as uint16 bits)."""
    if t.name == "FLOAT":
        return np.dtype(np.float32)
    if t.name == "DOUBLE":
        return np.dtype(np.float64)
    if t.is_integer and t.bits >= 8:
        return np.dtype(f"{'u' if t.name.startswith('U') else ''}int{t.bits}")
    return np.dtype(f"uint{t.storage_bits}")


def _source(name: str, n: int, seed: int) -> np.ndarray:
    """n inputs of a type as the kernel reads them: curated points first, then random ones."""
    spec = _spec(name)
    dtype = _storage(spec)
    if spec.bits <= 16:
        pool = exhaustive_inputs(spec).view(dtype) if spec.bits > 8 else None
        rng = np.random.default_rng(seed)
        if pool is None:
            return rng.integers(0, 1 << 8, n, dtype=np.uint8).view(dtype)
        return pool[rng.integers(0, pool.size, n)]
    head = np.asarray(curated_inputs(spec)).view(dtype)[:n]
    tail = np.asarray(random_inputs(spec, n - head.size, seed=seed)).view(dtype)
    x = np.concatenate([head, tail])
    np.random.default_rng(seed).shuffle(x)
    return x


def np_pack(codes: np.ndarray, row: int, bits: int) -> np.ndarray:
    """ONNX's packing of each row of ``codes`` (their low ``bits`` bits), from a byte boundary."""
    codes = (np.asarray(codes, dtype=np.uint8) & ((1 << bits) - 1)).reshape(-1, row)
    stream = (codes[:, :, None] >> np.arange(bits, dtype=np.uint8)) & 1
    stream = stream.reshape(codes.shape[0], row * bits)
    packed = np.packbits(stream, axis=1, bitorder="little")
    assert packed.shape[1] == (row * bits + 7) // 8
    return packed.reshape(-1)


def np_unpack(packed: np.ndarray, rows: int, row: int, bits: int) -> np.ndarray:
    """The zero-extended codes of ``rows`` packed rows of ``row`` elements."""
    row_bytes = (row * bits + 7) // 8
    stream = np.unpackbits(
        np.asarray(packed, dtype=np.uint8).reshape(rows, row_bytes), axis=1, bitorder="little"
    )
    stream = stream[:, : row * bits].reshape(rows, row, bits).astype(np.uint8)
    weights = (1 << np.arange(bits)).astype(np.uint8)
    return (stream * weights).sum(axis=2, dtype=np.uint8).reshape(-1)


def _expected_packed(kernel: Any, x: np.ndarray, row: int, bits: int) -> np.ndarray:
    codes = np.empty(x.size, np.uint8)
    kernel(x, codes, 1)
    return np_pack(codes, row, bits)


def _packed(kernel: Any, x: np.ndarray, row: int, bits: int, threads: int = 1) -> np.ndarray:
    out = np.full(x.size // row * ((row * bits + 7) // 8), 0xA5, np.uint8)
    kernel.packed(x, out, row, bits, threads)
    return out


def _expected_unpacked(
    kernel: Any, packed: np.ndarray, rows: int, row: int, bits: int, dtype: np.dtype
) -> np.ndarray:
    codes = np_unpack(packed, rows, row, bits)
    out = np.empty(rows * row, dtype)
    kernel(codes, out, 1)
    return out


def _unpacked(
    kernel: Any,
    packed: np.ndarray,
    rows: int,
    row: int,
    bits: int,
    dtype: np.dtype,
    threads: int = 1,
) -> np.ndarray:
    out = np.zeros(rows * row, dtype)
    kernel.unpacked(packed, out, row, bits, threads)
    return out


def _random_packed(rows: int, row: int, bits: int, seed: int) -> np.ndarray:
    """Random packed rows, the unused high bits of each row's last byte included (ignored)."""
    size = rows * ((row * bits + 7) // 8)
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)


# -- the bit order, by hand ----------------------------------------------------------------------


def test_the_reference_packs_as_onnx() -> None:
    """The NumPy reference against bytes worked out by hand."""
    assert np_pack(np.array([1, 15, 2, 8, 7]), 5, 4).tolist() == [0xF1, 0x82, 0x07]
    assert np_pack(np.array([1, 2, 3, 0, 3]), 5, 2).tolist() == [0b00111001, 0b11]
    # e0 | e1 << 6 | e2 << 12 | e3 << 18, then e4 in a byte of its own.
    word = 0x01 | 0x2A << 6 | 0x3F << 12 | 0x15 << 18
    expected = [word & 0xFF, word >> 8 & 0xFF, word >> 16, 0x3F]
    assert np_pack(np.array([0x01, 0x2A, 0x3F, 0x15, 0x3F]), 5, 6).tolist() == expected
    for row, bits in [(5, 4), (5, 2), (5, 6), (3, 6), (7, 2)]:
        codes = np.arange(2 * row, dtype=np.uint8) * 7 % (1 << bits)
        assert np.array_equal(np_unpack(np_pack(codes, row, bits), 2, row, bits), codes)


def test_packed_by_hand() -> None:
    module = _native.module()
    kernel = _kernel(module, "FLOAT", "INT4")
    x = np.array([1, -1, 2, -8, 7, 3], np.float32)
    assert _packed(kernel, x, 6, 4).tolist() == [0xF1, 0x82, 0x37]
    assert _packed(kernel, x, 3, 4).tolist() == [0xF1, 0x02, 0x78, 0x03]
    assert _packed(kernel, x, 1, 4).tolist() == [0x01, 0x0F, 0x02, 0x08, 0x07, 0x03]


def test_packing_keeps_the_low_bits_of_each_code() -> None:
    """A kernel that writes whole bytes (the identity gather of every byte): only the low
    ``bits`` bits of each code are packed (a code may be sign-extended in its byte)."""
    module = _native.module()
    assert module is not None
    kernel = module.Kernel("gather:u8:u8", table=np.arange(256, dtype=np.uint8), mask=255)
    x = np.random.default_rng(5).integers(0, 256, 3 * 1001, dtype=np.uint8)
    for bits in (2, 4, 6):
        for row in (1, 3, 8, 1001):
            xs = x[: x.size - x.size % row]
            assert np.array_equal(_packed(kernel, xs, row, bits), np_pack(xs, row, bits))


# -- packed --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "target"), _PACKED)
def test_packed_equals_the_cast_then_packed(source: str, target: str) -> None:
    kernel = _kernel(_native.module(), source, target)
    bits = _bits(target)
    for row in _ROWS:
        for rows in _ROW_COUNTS:
            x = _source(source, rows * row, seed=row * 31 + rows)
            got = _packed(kernel, x, row, bits)
            expected = _expected_packed(kernel, x, row, bits)
            assert np.array_equal(got, expected), (row, rows)


@pytest.mark.parametrize(("source", "target"), _PACKED)
def test_packed_across_blocks(source: str, target: str) -> None:
    kernel = _kernel(_native.module(), source, target)
    bits = _bits(target)
    for row, rows in _BLOCK_CASES:
        x = _source(source, rows * row, seed=row)
        got = _packed(kernel, x, row, bits)
        assert np.array_equal(got, _expected_packed(kernel, x, row, bits)), (row, rows)


@pytest.mark.parametrize(("source", "target"), _PACKED)
def test_packed_threads_give_the_same_bytes(source: str, target: str) -> None:
    """Large inputs on two threads: rows that fill whole bytes (split by elements), rows that
    do not (split by rows), and one long row of each kind."""
    kernel = _kernel(_native.module(), source, target)
    bits = _bits(target)
    n = 3 * 10**6
    x = _source(source, n + 1, seed=17)
    for row, count in [(1000, n), (999, n - n % 999), (n, n), (n + 1, n + 1)]:
        xs = x[:count]
        one = _packed(kernel, xs, row, bits, threads=1)
        two = _packed(kernel, xs, row, bits, threads=2)
        assert np.array_equal(one, two), row
        assert np.array_equal(one, _expected_packed(kernel, xs, row, bits)), row


# -- unpacked ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "target"), _UNPACKED)
def test_unpacked_equals_unpacked_then_cast(source: str, target: str) -> None:
    kernel = _kernel(_native.module(), source, target)
    bits, dtype = _bits(source), _storage(_spec(target))
    cases = [(row, rows) for row in _ROWS for rows in _ROW_COUNTS] + _BLOCK_CASES
    for row, rows in cases:
        packed = _random_packed(rows, row, bits, seed=row * 31 + rows)
        got = _unpacked(kernel, packed, rows, row, bits, dtype)
        expected = _expected_unpacked(kernel, packed, rows, row, bits, dtype)
        assert np.array_equal(got.view(np.uint8), expected.view(np.uint8)), (row, rows)


@pytest.mark.parametrize(("source", "target"), _UNPACKED)
def test_unpacked_threads_give_the_same_bits(source: str, target: str) -> None:
    kernel = _kernel(_native.module(), source, target)
    bits, dtype = _bits(source), _storage(_spec(target))
    n = 3 * 10**6
    for row, rows in [(1000, n // 1000), (999, n // 999), (n + 1, 1)]:
        packed = _random_packed(rows, row, bits, seed=row)
        one = _unpacked(kernel, packed, rows, row, bits, dtype, threads=1)
        two = _unpacked(kernel, packed, rows, row, bits, dtype, threads=2)
        assert np.array_equal(one.view(np.uint8), two.view(np.uint8)), row
        expected = _expected_unpacked(kernel, packed, rows, row, bits, dtype)
        assert np.array_equal(one.view(np.uint8), expected.view(np.uint8)), row


@pytest.mark.parametrize("name", ["UINT2", "UINT4", "FLOAT6E2M3"])
def test_round_trip_through_the_identity(name: str) -> None:
    """unpacked then packed by the identity kernel gives the packed bytes back (their unused
    bits cleared), and packed then unpacked the codes."""
    kernel = _kernel(_native.module(), name, name)
    bits = _bits(name)
    for row, rows in [(1, 9), (3, 7), (8, 5), (1001, 3), (5003, 2), (10**6 + 3, 1)]:
        packed = _random_packed(rows, row, bits, seed=row)
        codes = _unpacked(kernel, packed, rows, row, bits, np.dtype(np.uint8), threads=2)
        assert np.array_equal(codes, np_unpack(packed, rows, row, bits)), row
        again = _packed(kernel, codes, row, bits, threads=2)
        assert np.array_equal(again, np_pack(codes, row, bits)), row
        assert np.array_equal(np_unpack(again, rows, row, bits), codes), row


# -- every CPU level; a hostile environment ------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_every_level_gives_the_same_bytes(level: str) -> None:
    module = importlib.import_module(f"castlike._native._{level}")
    default = _native.module()
    for source, target in _PACKED:
        bits = _bits(target)
        kernel, reference = _kernel(module, source, target), _kernel(default, source, target)
        for row, rows in [(7, 300), (1000, 20), (4103, 2)]:
            x = _source(source, rows * row, seed=rows)
            got = _packed(kernel, x, row, bits)
            assert np.array_equal(got, _packed(reference, x, row, bits)), (source, target, row)
            assert np.array_equal(got, _expected_packed(kernel, x, row, bits)), (target, row)
    for source, target in _UNPACKED:
        bits, dtype = _bits(source), _storage(_spec(target))
        kernel, reference = _kernel(module, source, target), _kernel(default, source, target)
        for row, rows in [(7, 300), (1000, 20), (4103, 2)]:
            packed = _random_packed(rows, row, bits, seed=rows)
            got = _unpacked(kernel, packed, rows, row, bits, dtype).view(np.uint8)
            want = _unpacked(reference, packed, rows, row, bits, dtype).view(np.uint8)
            assert np.array_equal(got, want), (source, target, row)


def test_hostile_floating_point_environment() -> None:
    """FTZ/DAZ and rounding toward zero set by the caller change no byte."""
    module = _native.module()
    assert module is not None
    kernel = _kernel(module, "FLOAT", "FLOAT4E2M1")
    x = _source("FLOAT", 30 * 999, seed=2)
    expected = _expected_packed(kernel, x, 999, 4)
    try:
        saved = module._set_fp_environment(True, 3)
    except NotImplementedError:
        pytest.skip("no floating-point control word on this architecture")
    try:
        got = _packed(kernel, x, 999, 4)
    finally:
        module._restore_fp_environment(saved)
    assert np.array_equal(got, expected)


# -- refused arguments ---------------------------------------------------------------------------


def test_bad_arguments_raise_value_error() -> None:
    module = _native.module()
    kernel = _kernel(module, "FLOAT", "INT4")
    x = np.zeros(12, np.float32)
    out = np.zeros(6, np.uint8)
    kernel.packed(x, out, 4, 4, 1)  # the arguments the cases below change one at a time
    for bits in (0, 1, 3, 5, 8, -4, 2**70):
        with pytest.raises(ValueError, match="bits must be 2, 4 or 6"):
            kernel.packed(x, out, 4, bits, 1)
    for row in (0, -1, 2**70):
        with pytest.raises(ValueError, match="row must be"):
            kernel.packed(x, out, row, 4, 1)
    with pytest.raises(
        ValueError, match=r"float_to_sub_byte:f32:u8: packed\(\).*take 6 packed bytes"
    ):
        kernel.packed(x, np.zeros(7, np.uint8), 4, 4, 1)
    with pytest.raises(ValueError, match="take 8 packed bytes"):
        kernel.packed(x, out, 3, 4, 1)  # rows of 3 elements of 4 bits take 2 bytes each
    with pytest.raises(ValueError, match="not whole rows of 5 elements"):
        kernel.packed(x, out, 5, 4, 1)
    with pytest.raises(ValueError, match="source's 10 bytes are not whole rows"):
        kernel.packed(np.zeros(10, np.uint8), out, 4, 4, 1)  # not whole FLOAT elements
    for threads in (0, -1, -(2**70)):
        with pytest.raises(ValueError, match="threads must be at least 1"):
            kernel.packed(x, out, 4, 4, threads)
    misaligned = np.zeros(12 * 4 + 1, np.uint8)[1:].view(np.float32)
    with pytest.raises(ValueError, match="aligned to 4 bytes"):
        kernel.packed(misaligned, out, 4, 4, 1)
    with pytest.raises(TypeError, match="5 positional arguments"):
        kernel.packed(x, out, 4, 4)
    with pytest.raises(TypeError):
        kernel.packed(x, out, 4, 4, threads=1)
    with pytest.raises(ValueError, match="not C-contiguous"):
        kernel.packed(x, np.zeros(12, np.uint8)[::2], 4, 4, 1)
    with pytest.raises(BufferError):
        kernel.packed(x, bytes(6), 4, 4, 1)  # not writable


def test_packed_needs_a_one_byte_target() -> None:
    kernel = _kernel(_native.module(), "FLOAT", "FLOAT16")
    with pytest.raises(ValueError, match=r"float16:f32:u16: packed\(\) needs a kernel that writes"):
        kernel.packed(np.zeros(4, np.float32), np.zeros(2, np.uint8), 4, 4, 1)


def test_unpacked_needs_a_one_byte_source() -> None:
    kernel = _kernel(_native.module(), "FLOAT", "INT4")
    with pytest.raises(ValueError, match=r"unpacked\(\) needs a kernel that reads one byte"):
        kernel.unpacked(np.zeros(2, np.uint8), np.zeros(4, np.uint8), 4, 4, 1)


def test_unpacked_bad_arguments() -> None:
    kernel = _kernel(_native.module(), "INT4", "FLOAT")
    packed = np.zeros(6, np.uint8)
    out = np.zeros(12, np.float32)
    kernel.unpacked(packed, out, 4, 4, 1)
    with pytest.raises(ValueError, match="bits must be 2, 4 or 6"):
        kernel.unpacked(packed, out, 4, 8, 1)
    with pytest.raises(ValueError, match="row must be"):
        kernel.unpacked(packed, out, 0, 4, 1)
    with pytest.raises(ValueError, match=r"unpacked\(\).*take 6 packed bytes, the source has 5"):
        kernel.unpacked(packed[:5], out, 4, 4, 1)
    with pytest.raises(ValueError, match="output's 44 bytes are not whole rows of 4 elements"):
        kernel.unpacked(packed, out[:11], 4, 4, 1)
    with pytest.raises(ValueError, match="threads must be at least 1"):
        kernel.unpacked(packed, out, 4, 4, 0)
    misaligned = np.zeros(12 * 4 + 1, np.uint8)[1:].view(np.float32)
    with pytest.raises(ValueError, match="output to 4 bytes"):
        kernel.unpacked(packed, misaligned, 4, 4, 1)


def test_overlapping_buffers_are_refused() -> None:
    kernel = _kernel(_native.module(), "UINT4", "UINT4")
    buffer = np.zeros(64, np.uint8)
    with pytest.raises(ValueError, match="share memory"):
        kernel.packed(buffer[:32], buffer[16:32], 2, 4, 1)
    with pytest.raises(ValueError, match="share memory"):
        kernel.unpacked(buffer[:16], buffer[8:40], 2, 4, 1)
    kernel.packed(buffer[:32], buffer[32:48], 2, 4, 1)  # side by side is fine
    kernel.unpacked(buffer[32:48], buffer[:32], 2, 4, 1)


def test_the_kernel_type_has_only_its_methods() -> None:
    """The packed methods, and repeat() and repeat_tensor() of the repeat path (tests/
    robustness/test_native_boundary.py, tests/test_torch_native.py), beside the name:
    nothing else reaches Python."""
    module = _native.module()
    assert module is not None
    public = {name for name in dir(module.Kernel) if not name.startswith("_")}
    assert public == {"name", "packed", "unpacked", "repeat", "repeat_tensor"}
