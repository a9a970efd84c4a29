"""Packed layouts of the sub-byte types: how ONNX stores them several to a byte.

ONNX's ``raw_data`` (onnx.proto) stores INT4, UINT4 and FLOAT4E2M1 two to a byte, INT2 and
UINT2 four to a byte, and FLOAT6E2M3/FLOAT6E3M2 as a 6-bit stream (four elements in three
bytes): the elements form a little-endian bit stream, the first element in the lowest bits,
and the last byte's unused high bits are zero.  ``castlike.cast(..., packed=True)`` packs each
row (the last axis) so: a row of ``n`` elements takes :meth:`Layout.packed_length` bytes.

This module holds the layouts (the one source the engines, the native kernels' callers, the
ONNX wire code and the docs read) and the packing written once against any Array-API
namespace, for the libraries without a native kernel (JAX, other devices, the generic path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .types import OnnxType, TypeSpec

__all__ = ["LAYOUTS", "Layout", "layout_of", "pack_rows", "unpack_rows"]

_T = OnnxType


@dataclass(frozen=True)
class Layout:
    """How one sub-byte type packs: ``group`` elements of ``bits`` bits fill ``group_bytes``
    whole bytes (the smallest such group)."""

    bits: int
    group: int
    group_bytes: int

    def packed_length(self, n: int) -> int:
        """Bytes of a row of ``n`` elements: ``ceil(n * bits / 8)``."""
        return -(-n * self.bits // 8)


#: Every packable type's layout (ONNX raw_data, onnx.proto).
LAYOUTS: dict[OnnxType, Layout] = {
    _T.INT4: Layout(4, 2, 1),
    _T.UINT4: Layout(4, 2, 1),
    _T.FLOAT4E2M1: Layout(4, 2, 1),
    _T.INT2: Layout(2, 4, 1),
    _T.UINT2: Layout(2, 4, 1),
    _T.FLOAT6E2M3: Layout(6, 4, 3),
    _T.FLOAT6E3M2: Layout(6, 4, 3),
}


def layout_of(t: TypeSpec) -> Layout | None:
    """The packed layout of ``t``, or None for a type that is not packed (8 bits or more)."""
    return LAYOUTS.get(t.code)  # type: ignore[call-overload]  # an IntEnum key: a code finds it


def pack_rows(xp: Any, codes: Any, layout: Layout) -> Any:
    """Pack ``codes`` (unsigned 8-bit integers holding each element's bits, zero-extended, in
    their low bits; shape ``(..., n)``) row by row: shape ``(..., packed_length(n))``, uint8.

    Array-API operations only (reshape, shifts, ``|``, concat), for the libraries without a
    native kernel; the native kernels pack the same bytes in their one pass.
    """
    *lead, n = codes.shape
    groups = -(-n // layout.group)
    pad = groups * layout.group - n
    if pad:
        zeros = xp.zeros((*lead, pad), dtype=codes.dtype, device=_device(codes))
        codes = xp.concat([codes, zeros], axis=-1)
    g = xp.reshape(codes, (*lead, groups, layout.group))
    if layout.group_bytes == 1:
        out = g[..., 0]
        for i in range(1, layout.group):
            out = out | (g[..., i] << (i * layout.bits))
        packed = out
    else:  # 6 bits: four elements in three bytes (e0 | e1 << 6 | e2 << 12 | e3 << 18)
        e0, e1, e2, e3 = (g[..., i] for i in range(4))
        b0 = e0 | (e1 << 6)
        b1 = (e1 >> 2) | (e2 << 4)
        b2 = (e2 >> 4) | (e3 << 2)
        packed = xp.reshape(xp.stack([b0, b1, b2], axis=-1), (*lead, groups * 3))
    length = layout.packed_length(n)
    if packed.shape[-1] != length:
        packed = packed[..., :length]
    return packed


def unpack_rows(xp: Any, data: Any, layout: Layout, n: int) -> Any:
    """The inverse of :func:`pack_rows`: uint8 bytes of shape ``(..., packed_length(n))`` as
    ``(..., n)`` zero-extended codes (uint8)."""
    *lead, length = data.shape
    groups = -(-n // layout.group)
    full = groups * layout.group_bytes
    if full != length:
        zeros = xp.zeros((*lead, full - length), dtype=data.dtype, device=_device(data))
        data = xp.concat([data, zeros], axis=-1)
    mask = (1 << layout.bits) - 1
    if layout.group_bytes == 1:
        parts = [(data >> (i * layout.bits)) & mask for i in range(layout.group)]
    else:
        g = xp.reshape(data, (*lead, groups, 3))
        b0, b1, b2 = g[..., 0], g[..., 1], g[..., 2]
        parts = [b0 & 63, (b0 >> 6) | ((b1 & 15) << 2), (b1 >> 4) | ((b2 & 3) << 4), b2 >> 2]
    codes = xp.reshape(xp.stack(parts, axis=-1), (*lead, groups * layout.group))
    return codes[..., :n] if groups * layout.group != n else codes


def _device(x: Any) -> Any:
    return getattr(x, "device", None)
