"""Lookup tables shared by every backend, built on the host with NumPy and cached.

Two kinds:

* :func:`float32_class_table`: FLOAT -> an 8-bit-or-smaller float target (float8, float4,
  float6, FLOAT8E8M0).  A FLOAT's result depends only on its sign, exponent, top four mantissa
  bits and whether any lower bit is set (the sticky bit): the round bit of every such target
  lies at or above mantissa bit 19.  So 2**14 classes cover all 2**32 inputs, and each class's
  entry is computed by the exact oracle from one representative.
* :func:`pattern_table`: every bit pattern of a source of 16 bits or fewer, cast by the NumPy
  engine after an exact widening to FLOAT or INT32.  Any cast from such a source is then one
  gather, on any backend.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .spec.reference import cast_bits
from .spec.rules import Mode
from .spec.types import Kind, OnnxType, TypeSpec, spec_of

__all__ = [
    "DOUBLE_CLASS_BITS",
    "FLOAT32_CLASS_BITS",
    "double_class_table",
    "float32_class_index",
    "float32_class_table",
    "pattern_table",
]

_FLOAT = spec_of(OnnxType.FLOAT)
_INT32 = spec_of(OnnxType.INT32)
_DOUBLE = spec_of(OnnxType.DOUBLE)

#: Mantissa bits below the class's kept bits; their OR is the sticky bit.
FLOAT32_CLASS_BITS = 19
_STICKY_MASK = (1 << FLOAT32_CLASS_BITS) - 1


def float32_class_index(bits32: np.ndarray) -> np.ndarray:
    """Class index (see module doc) of FLOAT bit patterns, on the host."""
    bits32 = np.asarray(bits32, dtype=np.uint32)
    return ((bits32 >> FLOAT32_CLASS_BITS) << 1) | ((bits32 & _STICKY_MASK) != 0)


@lru_cache(maxsize=128)
def float32_class_table(target: TypeSpec, mode: Mode) -> np.ndarray:
    """Result bits (uint8) for each of the 2**14 FLOAT classes cast to ``target``."""
    if not (target.kind is Kind.FLOAT and target.storage_bits == 8):
        raise ValueError(f"no FLOAT class table for {target.name}")
    mode = mode.effective_for(target)
    n = 1 << (32 - FLOAT32_CLASS_BITS + 1)
    table = np.empty(n, dtype=np.uint8)
    for index in range(n):
        representative = ((index >> 1) << FLOAT32_CLASS_BITS) | (index & 1)
        table[index] = cast_bits(representative, _FLOAT, target, mode)
    table.flags.writeable = False
    return table


#: DOUBLE mantissa bits below the kept ones (sign, exponent and four mantissa bits are kept).
DOUBLE_CLASS_BITS = 48


@lru_cache(maxsize=128)
def double_class_table(target: TypeSpec, mode: Mode) -> np.ndarray:
    """Result bits (uint8) for each of the 2**17 DOUBLE classes cast to a small float target.

    A DOUBLE's class is its sign, exponent, top four mantissa bits and sticky bit, exactly as
    for FLOAT.  Every member of a class rounds to odd into the same FLOAT class, so each entry
    is the engine's own DOUBLE -> FLOAT (round to odd) -> class-table result for one
    representative: a DOUBLE cast then costs one index computation and one gather.
    """
    from ._engine import Engine
    from .backends.numpy import ADAPTER as numpy_adapter

    mode = mode.effective_for(target)
    index = np.arange(1 << (64 - DOUBLE_CLASS_BITS + 1), dtype=np.uint64)
    representatives = ((index >> np.uint64(1)) << np.uint64(DOUBLE_CLASS_BITS)) | (
        index & np.uint64(1)
    )
    with np.errstate(all="ignore"):
        # The generic step (not NumPy's override, which reads this table).
        out = Engine.to_small_float(
            numpy_adapter.engine(), representatives.view(np.float64), _DOUBLE, target, mode, True
        )
    table = np.ascontiguousarray(numpy_adapter.bits(out, target))
    table.flags.writeable = False
    return table


@lru_cache(maxsize=512)
def pattern_table(source: TypeSpec, target: TypeSpec, mode: Mode) -> np.ndarray:
    """Result bits for every bit pattern of ``source`` (at most 16 bits) cast to ``target``.

    Entries are unsigned integers of the target's storage width (BOOL: uint8 0/1).
    """
    from .backends.numpy import ADAPTER as numpy_adapter

    if source.storage_bits > 16 or not source.is_numeric:
        raise ValueError(f"no pattern table for {source.name}")
    mode = mode.effective_for(target)
    storage = np.dtype(f"uint{source.storage_bits}")
    patterns = np.arange(1 << source.bits, dtype=storage)
    values = numpy_adapter.from_bits(patterns, source)
    if source.is_float:
        wide, wide_type = values.astype(np.float32), _FLOAT  # exact widening
    else:
        wide, wide_type = values.astype(np.int32), _INT32
    out = numpy_adapter.engine().from_wide(wide, wide_type, target, mode)
    table = np.ascontiguousarray(numpy_adapter.bits(out, target))
    table.flags.writeable = False
    return table
